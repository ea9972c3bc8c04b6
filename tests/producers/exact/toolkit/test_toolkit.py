"""The exact-solver toolkit on its own: one linear model (built one at a time or in blocks),
every backend on it, Ctrl-C, work limits, the exporter, lex-leader rows, the clock and the
symmetry finder. The timed and step suites test the models built on it end to end."""
from __future__ import annotations

import itertools
import os
import signal
import threading
import time

import numpy as np
import pytest
from google.protobuf import text_format
from ortools.linear_solver.python import model_builder
from ortools.sat import cp_model_pb2
from ortools.sat.python import cp_model

from optcoll.errors import InputError
from optcoll.instances.budget import Budget
from optcoll.instances.clock import Clock
from optcoll.producers.exact.toolkit import SOLVERS, LinearModel, export, solve, solver_version
from optcoll.producers.exact.toolkit.interrupt import run_interruptibly
from optcoll.producers.exact.toolkit.lex import Affine, lex_leq
from optcoll.producers.exact.toolkit.model import INF
from optcoll.producers.exact.toolkit.symmetry import ChunkRoles


def knapsack(n: int = 12) -> tuple[LinearModel, float | None]:
    """max Σ v·x s.t. Σ w·x ≤ cap, written as min −Σ v·x; its optimum by enumeration (n ≤ 16)."""
    rng = np.random.default_rng(7)
    w, v = rng.integers(3, 20, n), rng.integers(1, 30, n)
    cap = int(w.sum() // 2)
    m = LinearModel()
    xs = [m.var(0, 1, f"x{i}") for i in range(n)]
    m.row([(x, int(wi)) for x, wi in zip(xs, w)], None, cap)
    m.minimise([(x, -int(vi)) for x, vi in zip(xs, v)])
    if n > 16:
        return m, None
    best = min(-int(v @ np.array(bits)) for bits in itertools.product((0, 1), repeat=n) if w @ np.array(bits) <= cap)
    return m, float(best)


def hard_model() -> LinearModel:
    """A 120-item knapsack with five weight rows: seconds of CP-SAT search to prove."""
    rng = np.random.default_rng(11)
    w, v = rng.integers(20, 100, (5, 120)), rng.integers(20, 100, 120)
    m = LinearModel()
    xs = [m.var(0, 1, f"x{i}") for i in range(120)]
    for row in w:
        m.row([(x, int(wi)) for x, wi in zip(xs, row)], None, int(row.sum() // 2))
    m.minimise([(x, -int(vi)) for x, vi in zip(xs, v)])
    return m


def test_one_at_a_time_and_in_blocks_build_the_same_model():
    a, b = LinearModel(), LinearModel()
    x = [a.var(0, 3, f"x_i{i}") for i in range(3)]
    a.row([(x[0], 1), (x[1], 2)], 1, None)
    a.row([(x[2], -1), (x[0], 1), (x[2], 2)], None, 4)  # a repeated variable: coefficients add
    block = b.add_vars(np.zeros(3), 3.0, "x", ("i",), np.arange(3)[:, None])
    b.add_rows(np.array([0, 0, 1, 1]), block[[0, 1, 0, 2]], np.array([1.0, 2, 1, 1]),
               np.array([1.0, -INF]), np.array([INF, 4.0]), 2)
    assert a.names() == b.names() == ["x_i0", "x_i1", "x_i2"]
    (ma, la, ua), (mb, lb, ub) = a.matrix(), b.matrix()
    assert (ma != mb).nnz == 0 and np.array_equal(la, lb) and np.array_equal(ua, ub)
    assert all(np.array_equal(p, q) for p, q in zip(a.bounds(), b.bounds()))


def test_variables_and_rows_interleave_in_the_order_they_were_added():
    m = LinearModel()
    first = m.var(0, 1, "first")
    block = m.add_vars(np.zeros(2), 1.0, "b", ("k",), np.arange(2)[:, None])
    last = m.var(0, 5, "last")
    m.row([(last, 1)], 2, None)
    m.add_rows(np.zeros(2, dtype=int), block, 1.0, -INF, 1.0, 1)
    m.row([(first, 1), (last, 1)], None, 5)
    assert (first, list(block), last) == (0, [1, 2], 3)
    assert m.names() == ["first", "b_k0", "b_k1", "last"]
    a, lo, hi = m.matrix()
    assert a.toarray().tolist() == [[0, 0, 0, 1], [0, 1, 1, 0], [1, 0, 0, 1]]
    assert lo.tolist() == [2, -INF, -INF] and hi.tolist() == [INF, 1, 5]


def test_the_quotient_keeps_each_distinct_row_once_in_order():
    rng = np.random.default_rng(3)
    m = LinearModel()
    xs = m.add_vars(np.zeros(8), 2.0, "x", ("i",), np.arange(8)[:, None])
    for _ in range(60):
        cols = rng.choice(8, size=3, replace=False)
        m.row([(int(xs[c]), int(rng.integers(1, 3))) for c in cols], None, float(rng.integers(2, 4)))
    classes = np.array([0, 0, 1, 1, 2, 2, 3, 3])
    q = m.quotient(classes)
    a, lo, hi = m.matrix()
    merged = np.zeros((a.shape[0], 4))
    np.add.at(merged.T, classes, a.toarray().T)
    seen, expected = set(), []
    for r in range(a.shape[0]):  # brute force: first occurrence of every distinct merged row
        key = (tuple(merged[r]), lo[r], hi[r])
        if key not in seen:
            seen.add(key)
            expected.append(key)
    qa, qlo, qhi = q.matrix()
    assert [(tuple(row), l_, h) for row, l_, h in zip(qa.toarray(), qlo, qhi)] == expected


@pytest.mark.parametrize("solver", SOLVERS)
def test_every_backend_proves_the_same_optimum(solver):
    m, best = knapsack()
    res = solve(m, solver, Clock(Budget(60, 1, 0)))
    assert res.status == "optimal" and res.objective == pytest.approx(best) and m.check(res.values)
    assert res.bound == pytest.approx(best) and res.version == solver_version(solver)
    assert res.version.startswith("OR-Tools ") and not res.interrupted


def test_solver_versions_are_one_string_each():
    import ortools
    import z3

    assert solver_version("cpsat") == f"OR-Tools {ortools.__version__} CP-SAT"
    assert solver_version("highs") == f"OR-Tools {ortools.__version__} HiGHS (MathOpt)"
    assert solver_version("z3") == f"z3 {z3.get_version_string()}"


@pytest.mark.parametrize("solver", SOLVERS)
def test_a_complete_hint_is_taken_by_every_backend(solver):
    m, best = knapsack()
    res = solve(m, "cpsat", Clock(Budget(60, 1, 0)))
    m.hint = {i: int(v) for i, v in enumerate(res.values.tolist())}
    hinted = solve(m, solver, Clock(Budget(60, 1, 0)))
    assert hinted.status == "optimal" and hinted.objective == pytest.approx(best)


def test_a_work_limit_counts_cp_sat_deterministic_time_and_is_refused_elsewhere():
    m = hard_model()
    res = solve(m, "cpsat", Clock(Budget(600, 1, 0, work_limit=0.05)))
    assert res.status == "feasible" and 0 < res.work and m.check(res.values)
    again = solve(m, "cpsat", Clock(Budget(600, 1, 0, work_limit=0.05)))
    assert again.objective == res.objective and again.bound == res.bound  # the same on any machine
    for solver in ("highs", "scip"):
        with pytest.raises(InputError, match="work limit counts CP-SAT's deterministic time"):
            solve(m, solver, Clock(Budget(60, 1, 0, work_limit=1.0)))


def test_ctrl_c_during_a_solve_returns_the_best_solution_so_far():
    """A real SIGINT from CP-SAT's first solution callback: the call returns that solution."""
    m = hard_model()

    def progress(objective, bound):
        if objective is not None and not getattr(progress, "sent", False):
            progress.sent = True
            os.kill(os.getpid(), signal.SIGINT)

    clock = Clock(Budget(time_limit=600, threads=1, seed=0))
    res = solve(m, "cpsat", clock, progress=progress)
    assert res.interrupted and clock.interrupted and clock.left() == 0
    assert res.values is not None and m.check(res.values)


def test_an_interrupt_asks_the_work_to_stop_until_it_does_and_errors_come_through():
    started, stopped = threading.Event(), threading.Event()
    stops = []

    def work() -> None:
        started.set()
        stopped.wait(60)

    def stop() -> None:
        stops.append(1)
        stopped.set()

    threading.Thread(target=lambda: (started.wait(60), os.kill(os.getpid(), signal.SIGINT)), daemon=True).start()
    assert run_interruptibly(work, stop) and stops
    assert not run_interruptibly(lambda: None, stops.clear)

    def fails() -> None:
        raise RuntimeError("solver broke")

    with pytest.raises(RuntimeError, match="solver broke"):
        run_interruptibly(fails, lambda: None)


@pytest.mark.parametrize("suffix", [".mps", ".lp", ".pbtxt", ".pb"])
def test_every_export_format_holds_the_same_problem(tmp_path, suffix):
    m, best = knapsack()
    path = tmp_path / f"knapsack{suffix}"
    export(m, path)
    if suffix == ".mps":
        imported = model_builder.ModelBuilder()
        assert imported.import_from_mps_file(str(path))
        solver = model_builder.Solver("scip")
        solver.solve(imported)
        assert solver.objective_value == pytest.approx(best) and "x0" in path.read_text()
        return
    if suffix == ".lp":  # OR-Tools cannot read its own LP comments back: check the text itself
        _, _, hi = m.matrix()
        text = path.read_text()
        assert "Minimize" in text and "Subject to" in text and f"<= {int(hi[0])}" in text
        assert all(f" x{i} " in text for i in range(m.num_vars)) and "Binary         : 12" in text
        return
    proto = cp_model_pb2.CpModelProto()
    if suffix == ".pbtxt":
        text_format.Parse(path.read_text(), proto)
    else:
        proto.ParseFromString(path.read_bytes())
    model = cp_model.CpModel()
    model.proto.parse_text_format(text_format.MessageToString(proto))
    solver = cp_model.CpSolver()
    assert solver.solve(model) == cp_model.OPTIMAL and solver.objective_value == pytest.approx(best)
    assert proto.variables[0].name == "x0" and proto.name == "optcoll"


def test_exports_refuse_other_formats_by_name(tmp_path):
    with pytest.raises(InputError, match="cannot export a linear model to 'm.txt'"):
        export(knapsack()[0], tmp_path / "m.txt")
    assert not (tmp_path / "m.txt").exists()


@pytest.mark.parametrize("spread", [1, 3])
def test_lex_rows_admit_exactly_the_lexicographically_ordered_pairs(spread):
    """For every pair of small vectors: some setting of the rows' flags satisfies them iff
    left ≤_lex right (the leader of every orbit stays feasible, nothing else changes)."""
    n = 3
    values = range(spread + 1) if spread > 1 else (0, 1)
    for left in itertools.product(values, repeat=n):
        for right in itertools.product(values, repeat=n):
            m = LinearModel()
            a = m.add_vars(np.array(left, float), np.array(left, float), "a", ("i",), np.arange(n)[:, None])
            b = m.add_vars(np.array(right, float), np.array(right, float), "b", ("i",), np.arange(n)[:, None])
            lex_leq(m, Affine.of_vars(a), Affine.of_vars(b), spread)
            feasible = any(m.check(np.array([*left, *right, *flags]))
                           for flags in itertools.product((0, 1), repeat=n))
            assert feasible == (left <= right), (left, right)


def test_lex_rows_on_expressions_compare_their_values():
    m = LinearModel()
    x = m.add_vars(np.zeros(2), 2.0, "x", ("i",), np.arange(2)[:, None])
    # (x0 + x1, 2) ≤_lex (2 − x0, x1 + 1): try every x
    lex_leq(m, Affine.of_terms([([(int(x[0]), 1), (int(x[1]), 1)], 0), ([], 2)]),
            Affine.of_terms([([(int(x[0]), -1)], 2), ([(int(x[1]), 1)], 1)]), 5)
    for x0, x1 in itertools.product(range(3), repeat=2):
        ok = any(m.check(np.array([x0, x1, *flags])) for flags in itertools.product((0, 1), repeat=2))
        assert ok == ((x0 + x1, 2) <= (2 - x0, x1 + 1)), (x0, x1)


def test_chunk_roles_map_chunks_along_a_node_relabelling():
    held = np.eye(3, dtype=bool)  # chunk c held by node c, needed by the others
    roles = ChunkRoles(held, ~held)
    assert roles.chunk_map(np.array([1, 2, 0])).tolist() == [1, 2, 0]
    assert roles.node_colours() == [(1, 2)] * 3 and roles.interchangeable() == []
    lopsided = ChunkRoles(np.array([[True, False, False]] * 2), np.array([[False, True, True]] * 2))
    assert lopsided.interchangeable() == [[0, 1]] and lopsided.chunk_map(np.array([1, 0, 2])) is None
