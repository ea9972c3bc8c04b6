"""One integer linear model, emitted to CP-SAT, to a MIP solver (SCIP or HiGHS via MathOpt), or to
an .mps/.lp file.

Encodings build the model once as sparse arrays; every backend reads the same arrays, so CP-SAT and
the MIP solvers provably solve the same problem and their agreement is a real cross-check.
Solves run in a worker thread: Ctrl-C in the main thread stops the solver cleanly and the best
solution found so far is returned (CP-SAT's and MathOpt's own stop hooks).
"""
from __future__ import annotations

import datetime
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from optcoll.errors import InputError
from optcoll.fileio import write_text_atomic

SOLVERS = ("cpsat", "scip", "highs")
#: Harmless lines OR-Tools' SCIP wrapper prints when an interrupter is attached (upstream noise).
SCIP_NOISE = ("SCIPcatchEvent does not support variable or row change events", "gscip_event_handler.cc")
INF = float("inf")


@dataclass
class LinearModel:
    """min c·x s.t. row_lb ≤ A x ≤ row_ub, lb ≤ x ≤ ub, x integer (all variables are integral)."""

    lb: list[np.ndarray] = field(default_factory=list)
    ub: list[np.ndarray] = field(default_factory=list)
    #: Per variable block: (name prefix, field names, label array n × len(fields)) for exports.
    blocks: list[tuple[str, tuple[str, ...], np.ndarray]] = field(default_factory=list)
    rows: list[np.ndarray] = field(default_factory=list)
    cols: list[np.ndarray] = field(default_factory=list)
    vals: list[np.ndarray] = field(default_factory=list)
    row_lb: list[np.ndarray] = field(default_factory=list)
    row_ub: list[np.ndarray] = field(default_factory=list)
    objective: dict[int, float] = field(default_factory=dict)
    hint: dict[int, int] = field(default_factory=dict)
    num_vars: int = 0
    num_rows: int = 0
    #: Bound changes on single variables after their block was made: (indices, lb or None, ub or None).
    tightened: list[tuple[np.ndarray, float | None, float | None]] = field(default_factory=list)

    def add_vars(self, lb: np.ndarray, ub: np.ndarray, name: str, fields: tuple[str, ...],
                 labels: np.ndarray) -> np.ndarray:
        """A block of variables with bounds; returns their indices."""
        lb = np.asarray(lb, dtype=float)
        n = lb.shape[0]
        self.lb.append(lb)
        self.ub.append(np.broadcast_to(np.asarray(ub, dtype=float), (n,)).copy())
        self.blocks.append((name, fields, np.asarray(labels, dtype=np.int64).reshape(n, len(fields))))
        index = np.arange(self.num_vars, self.num_vars + n, dtype=np.int64)
        self.num_vars += n
        return index

    def tighten(self, index: np.ndarray, lo: float | None = None, hi: float | None = None) -> None:
        """Raise lower and/or lower upper bounds of some variables (fixing demand, ends of windows)."""
        self.tightened.append((np.asarray(index, dtype=np.int64), lo, hi))

    def add_rows(self, row: np.ndarray, col: np.ndarray, val: np.ndarray | float,
                 lo: np.ndarray | float, hi: np.ndarray | float, count: int) -> None:
        """``count`` rows; term t belongs to local row ``row[t]``."""
        if count == 0:
            return
        row = np.asarray(row, dtype=np.int64)
        self.rows.append(row + self.num_rows)
        self.cols.append(np.asarray(col, dtype=np.int64))
        self.vals.append(np.broadcast_to(np.asarray(val, dtype=float), row.shape).copy())
        self.row_lb.append(np.broadcast_to(np.asarray(lo, dtype=float), (count,)).copy())
        self.row_ub.append(np.broadcast_to(np.asarray(hi, dtype=float), (count,)).copy())
        self.num_rows += count

    # -- assembled arrays --------------------------------------------------------------------
    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        lb = np.concatenate(self.lb) if self.lb else np.zeros(0)
        ub = np.concatenate(self.ub) if self.ub else np.zeros(0)
        for index, lo, hi in self.tightened:
            if lo is not None:
                lb[index] = np.maximum(lb[index], lo)
            if hi is not None:
                ub[index] = np.minimum(ub[index], hi)
        return lb, ub

    def matrix(self) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
        if not self.rows:
            return sp.csr_matrix((0, self.num_vars)), np.zeros(0), np.zeros(0)
        a = sp.csr_matrix((np.concatenate(self.vals), (np.concatenate(self.rows), np.concatenate(self.cols))),
                          shape=(self.num_rows, self.num_vars))
        a.sum_duplicates()
        return a, np.concatenate(self.row_lb), np.concatenate(self.row_ub)

    def objective_vector(self) -> np.ndarray:
        c = np.zeros(self.num_vars)
        for i, v in self.objective.items():
            c[i] += v
        return c

    def names(self) -> list[str]:
        out: list[str] = []
        for name, fields, labels in self.blocks:
            out.extend(name + "".join(f"_{f}{v}" for f, v in zip(fields, row)) for row in labels.tolist())
        return out

    def quotient(self, classes: np.ndarray) -> "LinearModel":
        """The model with the variables of each class forced equal (merged into one variable).

        Rows that become identical are kept once; the hint keeps each class's first member.
        """
        k = int(classes.max(initial=-1)) + 1
        lb, ub = self.bounds()
        new_lb = np.full(k, -INF)
        new_ub = np.full(k, INF)
        np.maximum.at(new_lb, classes, lb)
        np.minimum.at(new_ub, classes, ub)
        first = np.full(k, -1, dtype=np.int64)
        first[classes[::-1]] = np.arange(classes.shape[0])[::-1]
        a, rlo, rhi = self.matrix()
        merged = sp.csr_matrix((a.data, classes[a.indices], a.indptr), shape=(a.shape[0], k))
        merged.sum_duplicates()
        merged.eliminate_zeros()
        merged.sort_indices()
        seen: set[bytes] = set()
        keep = []
        for r in range(merged.shape[0]):
            lo_, hi_ = merged.indptr[r], merged.indptr[r + 1]
            key = (merged.indices[lo_:hi_].tobytes() + merged.data[lo_:hi_].tobytes()
                   + np.array([rlo[r], rhi[r]]).tobytes())
            if key not in seen:
                seen.add(key)
                keep.append(r)
        merged = merged[keep]
        out = LinearModel()
        out.add_vars(new_lb, new_ub, "merged", ("first",), first[:, None])
        coo = merged.tocoo()
        out.add_rows(coo.row, coo.col, coo.data, rlo[keep], rhi[keep], merged.shape[0])
        objective = np.zeros(k)
        np.add.at(objective, classes, self.objective_vector())
        out.objective = {int(i): float(objective[i]) for i in np.flatnonzero(objective)}
        out.hint = {int(classes[i]): v for i, v in self.hint.items() if first[classes[i]] == i}
        return out

    def check(self, values: np.ndarray) -> bool:
        """Whether integral ``values`` satisfy every bound and row (solutions are checked with it)."""
        lb, ub = self.bounds()
        a, rlo, rhi = self.matrix()
        act = a @ values
        return bool(np.all(values >= lb) and np.all(values <= ub) and np.all(act >= rlo - 1e-9)
                    and np.all(act <= rhi + 1e-9))


@dataclass(frozen=True)
class SolveResult:
    """status: optimal | feasible | infeasible | unknown (as the solver proved it)."""

    status: str
    values: np.ndarray | None
    objective: float | None
    bound: float | None
    wall: float
    interrupted: bool  # stopped by Ctrl-C (not by the time limit)
    solver: str
    version: str


Progress = Callable[[float | None, float | None], None]


def solver_version(solver: str) -> str:
    import ortools

    return f"OR-Tools {ortools.__version__} " + {"cpsat": "CP-SAT", "scip": "SCIP (MathOpt)",
                                                "highs": "HiGHS (MathOpt)"}[solver]


def solve(model: LinearModel, solver: str, *, time_limit: float, threads: int, seed: int,
          progress: Progress | None = None) -> SolveResult:
    if solver not in SOLVERS:
        raise InputError(f"unknown solver {solver!r}; use one of {', '.join(SOLVERS)}", field="solver")
    run = _solve_cpsat if solver == "cpsat" else _solve_mathopt
    return run(model, solver, max(time_limit, 0.01), threads, seed, progress)


def _in_worker(work: Callable[[], None], stop: Callable[[], None]) -> bool:
    """Runs ``work`` in a thread so Ctrl-C reaches Python: it then calls ``stop`` (again and
    again, in case the solver had not started yet) and waits. True if interrupted. An exception
    in ``work`` is raised here."""
    failure: list[BaseException] = []

    def guarded() -> None:
        try:
            work()
        except BaseException as error:  # noqa: BLE001 - handed to the calling thread
            failure.append(error)

    thread = threading.Thread(target=guarded, daemon=True)
    thread.start()
    interrupted = False
    while thread.is_alive():
        try:
            thread.join(0.1)
            if interrupted:
                stop()
        except KeyboardInterrupt:
            interrupted = True
            stop()
    if failure:
        raise failure[0]
    return interrupted


@contextmanager
def _filtered_stderr(noise: tuple[str, ...]) -> Iterator[None]:
    """Native stderr goes through a temporary file and comes back without the ``noise`` lines."""
    if not noise:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            lines = tmp.read().decode(errors="replace").splitlines(keepends=True)
            sys.stderr.write("".join(line for line in lines if not any(n in line for n in noise)))


def _solve_cpsat(model: LinearModel, solver_name: str, time_limit: float, threads: int, seed: int,
                 progress: Progress | None) -> SolveResult:
    """The linear model as CP-SAT linear constraints (its presolve finds the at-most-ones)."""
    from ortools.sat.python import cp_model

    cp = cp_model.CpModel()
    proto = cp.proto
    lb, ub = model.bounds()
    for lo, hi in zip(lb.astype(np.int64).tolist(), ub.astype(np.int64).tolist()):
        proto.variables.add().domain.extend([lo, hi])
    a, rlo, rhi = model.matrix()
    indptr, indices, data = a.indptr.tolist(), a.indices.tolist(), a.data.astype(np.int64).tolist()
    low = [cp_model.INT_MIN if v == -INF else int(v) for v in rlo.tolist()]
    high = [cp_model.INT_MAX if v == INF else int(v) for v in rhi.tolist()]
    for r in range(a.shape[0]):
        lin = proto.constraints.add().linear
        lin.vars.extend(indices[indptr[r]:indptr[r + 1]])
        lin.coeffs.extend(data[indptr[r]:indptr[r + 1]])
        lin.domain.extend([low[r], high[r]])
    if model.objective:
        keys = sorted(model.objective)
        proto.objective.vars.extend(keys)
        proto.objective.coeffs.extend(int(model.objective[k]) for k in keys)
    if model.hint:
        keys = sorted(model.hint)
        proto.solution_hint.vars.extend(keys)
        proto.solution_hint.values.extend(int(model.hint[k]) for k in keys)

    return run_cpsat(cp, time_limit=time_limit, threads=threads, seed=seed, progress=progress,
                     has_objective=bool(model.objective))


def run_cpsat(cp, *, time_limit: float, threads: int, seed: int, progress: Progress | None,
              has_objective: bool) -> SolveResult:
    """Solves a CP-SAT model (built here or by another encoding); values by proto variable index."""
    from ortools.sat.python import cp_model

    cps = cp_model.CpSolver()
    params = cps.parameters
    params.max_time_in_seconds = max(time_limit, 0.01)
    params.num_workers = max(1, threads)
    params.random_seed = seed
    params.catch_sigint_signal = False

    class Listener(cp_model.CpSolverSolutionCallback):
        def on_solution_callback(self) -> None:
            if progress is not None:
                progress(self.objective_value if has_objective else None,
                         self.best_objective_bound if has_objective else None)

    if progress is not None and has_objective:
        cps.best_bound_callback = lambda bound: progress(None, bound)
    outcome: dict[str, int] = {}
    start = time.perf_counter()
    listener = Listener()
    interrupted = _in_worker(lambda: outcome.__setitem__("status", cps.solve(cp, listener)),
                             cps.stop_search)
    wall = time.perf_counter() - start
    if "status" not in outcome:
        return SolveResult("unknown", None, None, None, wall, interrupted, "cpsat", solver_version("cpsat"))
    status = outcome["status"]
    if status == cp_model.MODEL_INVALID:
        raise RuntimeError(f"CP-SAT rejected the model: {cp.validate()}")
    found = status in (cp_model.OPTIMAL, cp_model.FEASIBLE)
    name = {cp_model.OPTIMAL: "optimal", cp_model.FEASIBLE: "feasible",
            cp_model.INFEASIBLE: "infeasible"}.get(status, "unknown")
    values = np.array(cps.response_proto.solution, dtype=np.int64) if found else None
    return SolveResult(name, values,
                       cps.objective_value if found and has_objective else None,
                       cps.best_objective_bound if has_objective and status != cp_model.INFEASIBLE else None,
                       wall, interrupted, "cpsat", solver_version("cpsat"))


def _mathopt_proto(model: LinearModel):
    from ortools.math_opt import model_pb2

    proto = model_pb2.ModelProto(name="optcoll_timed")
    lb, ub = model.bounds()
    n = model.num_vars
    proto.variables.ids.extend(range(n))
    proto.variables.lower_bounds.extend(lb.tolist())
    proto.variables.upper_bounds.extend(ub.tolist())
    proto.variables.integers.extend([True] * n)
    a, rlo, rhi = model.matrix()
    coo = a.tocoo()
    order = np.lexsort((coo.col, coo.row))
    proto.linear_constraints.ids.extend(range(a.shape[0]))
    proto.linear_constraints.lower_bounds.extend(rlo.tolist())
    proto.linear_constraints.upper_bounds.extend(rhi.tolist())
    proto.linear_constraint_matrix.row_ids.extend(coo.row[order].tolist())
    proto.linear_constraint_matrix.column_ids.extend(coo.col[order].tolist())
    proto.linear_constraint_matrix.coefficients.extend(coo.data[order].tolist())
    keys = sorted(model.objective)
    proto.objective.linear_coefficients.ids.extend(keys)
    proto.objective.linear_coefficients.values.extend(float(model.objective[k]) for k in keys)
    return proto


def _solve_mathopt(model: LinearModel, solver_name: str, time_limit: float, threads: int, seed: int,
                   progress: Progress | None) -> SolveResult:
    from ortools.math_opt.python import mathopt
    from ortools.util.python.solve_interrupter import SolveInterrupter

    mo = mathopt.Model.from_model_proto(_mathopt_proto(model))
    solver_type = {"scip": mathopt.SolverType.GSCIP, "highs": mathopt.SolverType.HIGHS}[solver_name]
    # HiGHS takes its thread count from globals and SCIP is sequential here: no threads argument.
    params = mathopt.SolveParameters(time_limit=datetime.timedelta(seconds=time_limit),
                                     random_seed=seed)
    model_params = None
    if model.hint:
        variables = {mo.get_variable(k): float(v) for k, v in model.hint.items()}
        model_params = mathopt.ModelSolveParameters(solution_hints=[mathopt.SolutionHint(variables)])
    interrupter = SolveInterrupter()
    outcome: dict[str, object] = {}

    def work() -> None:
        outcome["result"] = mathopt.solve(mo, solver_type, params=params, model_params=model_params,
                                          interrupter=interrupter)

    start = time.perf_counter()
    with _filtered_stderr(SCIP_NOISE if solver_name == "scip" else ()):
        interrupted = _in_worker(work, interrupter.interrupt)
    wall = time.perf_counter() - start
    result = outcome.get("result")
    if result is None:
        return SolveResult("unknown", None, None, None, wall, interrupted, solver_name,
                           solver_version(solver_name))
    reason = result.termination.reason
    found = result.has_primal_feasible_solution()
    if reason == mathopt.TerminationReason.OPTIMAL:
        status = "optimal"
    elif reason == mathopt.TerminationReason.INFEASIBLE:
        status = "infeasible"
    else:
        status = "feasible" if found else "unknown"
    values = None
    if found:
        solution = result.variable_values()
        values = np.rint([solution[mo.get_variable(i)] for i in range(model.num_vars)]).astype(np.int64)
    bound = result.termination.objective_bounds.dual_bound
    has_objective = bool(model.objective)
    objective = result.objective_value() if found and has_objective else None
    bound = float(bound) if has_objective and np.isfinite(bound) else None
    if progress is not None:
        progress(objective, bound)
    return SolveResult(status, values, objective, bound, wall, interrupted, solver_name,
                       solver_version(solver_name))


def export(model: LinearModel, path: str | Path) -> None:
    """The model as .mps or .lp (named variables), for Gurobi, CPLEX or any MIP solver."""
    import ortools.linear_solver.python.model_builder_helper as mbh

    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".mps", ".lp"):
        raise InputError(f"cannot export a MIP to {path.name!r}: use a .mps or .lp file", field="export-model")
    helper = mbh.ModelBuilderHelper()
    lb, ub = model.bounds()
    a, rlo, rhi = model.matrix()
    helper.fill_model_from_sparse_data(lb, ub, model.objective_vector(), rlo, rhi, a.astype(float))
    for i, name in enumerate(model.names()):
        helper.set_var_integrality(i, True)
        helper.set_var_name(i, name)
    helper.set_name("optcoll_timed")
    text = helper.export_to_mps_string() if suffix == ".mps" else helper.export_to_lp_string()
    write_text_atomic(path, text)
