"""solve_timed end to end: known optima, bounds and baselines around them, every collective and
machine feature, inversion, AllReduce, heterogeneous links, interrupts, exports and input errors."""
from __future__ import annotations

import os
import signal
import threading
from dataclasses import astuple

import numpy as np
import pytest

from optcoll.bounds import lower_bounds
from optcoll.collectives.builtins import make_custom
from optcoll.errors import InputError
from optcoll.instances.instance import Instance, TimeModel
from optcoll.machines import generators as G
from optcoll.machines.machine import MachineBuilder
from optcoll.producers.base import NotApplicable
from optcoll.producers.exact.step import solve_step
from optcoll.producers.exact.timed.solve import ExportInfo, export_timed_model, solve_timed
from optcoll.producers.registry import IMPLEMENTS, SYNTHESIZERS, best_of

from solver_checks import proof_budget
from timed_helpers import BW, LAT, MB, close, instance, link_time, small_instances, verified

ONE_PORT = TimeModel(send_ports=1, recv_ports=1)
PROOF = proof_budget()


@pytest.mark.parametrize("machine, hops", [
    (G.ring(8, BW, LAT, bidirectional=False), 7),
    (G.hypercube(3, BW, LAT), 3),
    (G.dgx1(), 2),
    (G.torus([4, 4], BW, LAT), 4),
    (G.hypercube(4, BW, LAT), 4),
], ids=["uniring8", "hypercube3", "dgx1", "torus4x4", "hypercube4"])
def test_uniform_links_one_chunk_take_least_steps_times_link_time(machine, hops):
    inst = instance(machine)
    out = solve_timed(inst, budget=PROOF)
    assert out.status == "optimal"
    assert close(verified(inst, out), hops * link_time(inst))
    assert close(out.lower_bound, hops * link_time(inst))


STEP = [instance(G.ring(8, BW, LAT, bidirectional=False)), instance(G.hypercube(3, BW, LAT)), instance(G.dgx1()),
        instance(G.dgx1(), chunks=2), instance(G.torus([3, 3], BW, LAT)), instance(G.switch(4, BW, LAT)),
        instance(G.line(5, BW, LAT)), instance(G.mesh([2, 3], BW, LAT), "reducescatter")]


@pytest.mark.parametrize("inst", STEP, ids=[i.name for i in STEP])
def test_uniform_links_agree_with_the_step_models_least_steps(inst):
    """On equal links a timed schedule on the exact grid is a one-round-per-step schedule and
    back, so the timed optimum is the step engineer's least steps times the link time."""
    steps = solve_step(inst, objective="steps", budget=PROOF)
    timed = solve_timed(inst, budget=PROOF)
    assert steps.status == timed.status == "optimal"
    assert close(verified(inst, timed), steps.schedule.num_steps * link_time(inst))


def test_dgx1_allgather_six_chunks_meets_the_ingress_bound():
    """42 chunks arrive over 6 NVLinks per GPU: 7 chunk times, the 7/6 of the step model."""
    inst = instance(G.dgx1(), chunks=6)
    out = solve_timed(inst, budget=PROOF)
    assert out.status == "optimal"
    assert close(verified(inst, out), 7 * link_time(inst))


INSTANCES = small_instances()


@pytest.mark.parametrize("inst", INSTANCES, ids=[i.name for i in INSTANCES])
def test_optimum_between_every_lower_bound_and_every_baseline(inst):
    out = solve_timed(inst, budget=PROOF)
    assert out.status == "optimal", out.notes
    time = verified(inst, out)
    assert close(time, out.lower_bound)
    for bound in lower_bounds(inst.machine, inst.collective, inst.model):
        assert time >= bound.value * (1 - 1e-9), bound
    kind = inst.collective.kind
    for name, synth in SYNTHESIZERS.items():
        if kind not in IMPLEMENTS[name]:
            continue
        try:
            _, times = best_of(inst, synth, runs=3)
        except NotApplicable:
            continue
        assert time <= min(times) * (1 + 1e-9), name


@pytest.mark.parametrize("kind, root", [
    ("allgather", None), ("reducescatter", None), ("allreduce", None), ("broadcast", 2),
    ("reduce", 5), ("gather", 1), ("scatter", 6), ("alltoall", None)])
def test_every_collective_on_dgx1(kind, root):
    inst = instance(G.dgx1(), kind, 2 if kind != "alltoall" else 1, root=root)
    # AllReduce: the family ReduceScatter then AllGather; a memory limit refuses the direct model
    # (about 113 MiB), which seconds of search leave open on DGX-1.
    out = solve_timed(inst, budget=PROOF, max_memory=2**25 if kind == "allreduce" else None)
    if kind == "allreduce":
        assert out.params["family_optimal"]
        assert close(out.params["family_time"], out.params["family_lower_bound"])
        assert verified(inst, out) <= out.params["family_time"] * (1 + 1e-9)
    else:
        assert out.status == "optimal"
        assert close(verified(inst, out), out.lower_bound)


def test_custom_all_to_next():
    m = G.ring(5, BW, LAT)
    coll = make_custom(range(5), [[i] for i in range(4)], [[i + 1] for i in range(4)], MB)
    inst = Instance("alltonext", m, coll)
    out = solve_timed(inst, budget=PROOF)
    assert out.status == "optimal"
    assert close(verified(inst, out), link_time(inst))


def test_reduction_is_the_time_reversed_dual_on_the_reversed_machine():
    """An asymmetric machine: ReduceScatter on it costs what AllGather costs on its reverse."""
    b = MachineBuilder("chorded", 4)
    for i in range(4):
        b.add_link(i, (i + 1) % 4, bandwidth=BW, latency=LAT)
    b.add_link(0, 2, bandwidth=BW, latency=LAT)
    b.add_link(3, 1, bandwidth=2 * BW, latency=LAT)
    m = b.build()
    rs = instance(m, "reducescatter", 2)
    ag = instance(m.reversed(), "allgather", 2)
    out_rs, out_ag = solve_timed(rs, budget=PROOF), solve_timed(ag, budget=PROOF)
    assert out_rs.status == out_ag.status == "optimal"
    assert out_rs.params["inverted"] and not out_ag.params["inverted"]
    assert close(verified(rs, out_rs), verified(ag, out_ag))
    assert np.all(out_rs.schedule.op == 1)  # every transfer into an NPU reduces


def test_allreduce_is_reducescatter_then_allgather():
    """Optimal within the family (the parts' optima add up); its bound holds for any AllReduce.
    On this ring the AllReduce bounds (2(N−1) deliveries per chunk into NPUs; a rank's contribution
    carried out to the farthest rank) meet the family's optimum, so ReduceScatter then AllGather is
    optimal among all AllReduce schedules."""
    m = G.ring(5, BW, LAT)
    ar = instance(m, "allreduce", 2)
    out = solve_timed(ar, budget=PROOF, structured=False)  # a producer's start would meet the bound first
    rs = solve_timed(instance(m, "reducescatter", 2), budget=PROOF)
    ag = solve_timed(instance(m, "allgather", 2), budget=PROOF)
    assert out.params["family"] == "reducescatter+allgather" and out.params["family_optimal"]
    assert close(verified(ar, out), rs.lower_bound + ag.lower_bound)
    assert close(out.params["family_lower_bound"], rs.lower_bound + ag.lower_bound)
    assert out.status == "optimal" and out.lower_bound_source.startswith(("allreduce-transfers", "allreduce-cut"))
    assert out.lower_bound >= max(rs.lower_bound, ag.lower_bound) * (1 - 1e-9)
    for bound in lower_bounds(ar.machine, ar.collective, ar.model):
        assert out.lower_bound >= bound.value * (1 - 1e-9)
    assert any("family" in note for note in out.notes)


def test_machine_features():
    """Plain and multicast switches, failed links, sub-communicators, ports, serialization."""
    ring = G.ring(6, BW, LAT)
    cases = [
        instance(G.switch(5, BW, LAT)),
        instance(G.switch(5, BW, LAT, multicast=True)),
        instance(ring.without(links=[0, 1])),
        instance(G.torus([3, 3], BW, LAT), ranks=[0, 4, 8]),
        instance(ring, chunks=2, model=ONE_PORT),
        instance(ring, "reducescatter", 2, model=TimeModel(occupancy="serialization")),
        instance(G.switch(4, BW, LAT, reduce=True), "reduce", root=0),
    ]
    times = []
    for inst in cases:
        out = solve_timed(inst, budget=PROOF)
        assert out.status == "optimal", (inst.name, out.notes)
        times.append(verified(inst, out))
    plain, multicast = times[:2]
    assert multicast <= plain
    # A plain switch forwards each arrival once: each chunk crosses its owner's uplink 4 times.
    assert close(plain, (4 + 1) * link_time(cases[0]))


def test_one_port_fully_connected_needs_n_minus_one_link_times():
    inst = instance(G.fully_connected(5, BW, LAT), model=ONE_PORT)
    out = solve_timed(inst, budget=PROOF)
    assert out.status == "optimal"
    assert close(verified(inst, out), 4 * link_time(inst))


def test_heterogeneous_links_are_exact_through_the_fine_unit():
    """x links 800.5 µs and y links 533.83 µs per 0.5 MB chunk (FIELD-NOTES): exact in 1/6 µs,
    too fine for epochs, so the rounded grids bracket the optimum and the continuous model
    finds it; the entry bound (the y links join npu0 and npu3 into a group) proves it, two
    independent methods meeting."""
    inst = instance(G.mesh([3, 2], [0.625e9, 0.9375e9], [0.5e-6, 0.5e-6]), chunks=2)
    assert sorted({round(link_time(inst, e) * 1e6, 4) for e in range(inst.machine.num_links)}) == [533.8333, 800.5]
    out = solve_timed(inst, budget=PROOF)
    assert out.status == "optimal"
    assert "continuous" in out.params["formulation"] and out.lower_bound_source.startswith("entry bound")
    assert close(out.params["unit"], 1e-6 / 6)
    best = verified(inst, out)
    assert close(best, out.lower_bound)
    rounded = solve_timed(inst, budget=PROOF, formulation="expanded")
    assert rounded.params["rounding"] == "up"
    assert rounded.lower_bound <= best * (1 + 1e-9) <= verified(inst, rounded) * (1 + 1e-9)


@pytest.mark.parametrize("inst", [instance(G.torus([3, 3], BW, LAT), chunks=2), instance(G.ring(6, BW, LAT), "alltoall")],
                         ids=["torus3x3-C2", "ring6-alltoall"])
def test_continuous_and_expanded_agree_on_an_exact_grid(inst):
    a = solve_timed(inst, budget=PROOF, formulation="expanded")
    b = solve_timed(inst, budget=PROOF, formulation="continuous")
    assert a.status == b.status == "optimal"
    assert b.params["formulation"] == "continuous" and b.quantum is None
    assert close(verified(inst, a), verified(inst, b))


PROOFS = [instance(G.line(4, BW, LAT), model=ONE_PORT), instance(G.line(5, BW, LAT), "broadcast", 3, root=2, model=ONE_PORT)]


@pytest.mark.parametrize("solver", ["scip", "highs"])
@pytest.mark.parametrize("inst", PROOFS, ids=[i.name for i in PROOFS])
def test_mip_solvers_prove_the_same_optimum(solver, inst):
    """Instances whose optimum lies above every analytic bound: the solver itself proves it."""
    ref = solve_timed(inst, budget=PROOF)
    out = solve_timed(inst, solver=solver, budget=proof_budget(solver))
    assert out.status == ref.status == "optimal"
    assert out.solver == solver and solver.upper() in out.solver_version.upper()
    assert f"{solver}: " in out.lower_bound_source and "cpsat: " in ref.lower_bound_source
    assert close(verified(inst, out), verified(inst, ref))


# 10 chunk times found, 9 proven; the last epoch is not settled in 10 minutes.
HARD = instance(G.mesh([3, 3], BW, LAT), model=ONE_PORT)


def test_a_work_limit_returns_the_incumbent_and_a_bound_the_same_on_any_machine():
    """One thread and a CP-SAT work limit (its deterministic time): the solve stops at the same
    point whatever the machine's speed or load, with the best schedule and the bound so far."""
    budget = proof_budget(work=0.2)
    out, again = solve_timed(HARD, budget=budget), solve_timed(HARD, budget=budget)
    assert out.status == again.status == "feasible" and out.params["work_limit"] == 0.2
    assert 0 < out.params["work"] and not out.params["interrupted"]
    time = verified(HARD, out)
    assert (time, out.lower_bound) == (verified(HARD, again), again.lower_bound)
    assert out.lower_bound <= time
    rows = out.trace
    assert rows and all(a[0] <= b[0] for a, b in zip(rows, rows[1:]))
    incumbents = [r[1] for r in rows if r[1] is not None]
    bounds = [r[2] for r in rows if r[2] is not None]
    assert incumbents == sorted(incumbents, reverse=True) and bounds == sorted(bounds)
    assert max(bounds) <= min(incumbents) * (1 + 1e-9)


def ctrl_c_in_the_first_solver_call(rows: list) -> callable:
    """A progress callback that presses Ctrl-C (a real SIGINT to this process) the first time a
    solver reports from its own thread, i.e. in the middle of a solver call."""
    def progress(*row) -> None:
        rows.append(row)
        if threading.current_thread() is not threading.main_thread() and not getattr(progress, "sent", False):
            progress.sent = True
            os.kill(os.getpid(), signal.SIGINT)
    return progress


def test_ctrl_c_in_a_solver_call_ends_the_search_with_the_incumbent_and_a_bound():
    """The interrupt stops the solver call it arrives in and every phase after it (none starts
    once it came), and the best schedule so far comes back verified with its proven bound."""
    out = solve_timed(HARD, time_limit=600, progress=ctrl_c_in_the_first_solver_call([]))
    assert out.status == "feasible" and out.params["interrupted"]
    assert any(note.startswith("interrupted: ") for note in out.notes)
    solver_calls = [note for note in out.notes if " epochs: " in note]
    assert len(solver_calls) == 1 and solver_calls[0].startswith("warm start at ")
    assert out.lower_bound <= verified(HARD, out)


def test_ctrl_c_in_the_first_part_of_an_allreduce_still_returns_a_whole_allreduce():
    """After the interrupt in the ReduceScatter part, the AllGather part only makes its start
    schedule: the answer is a verified AllReduce with the bounds proven so far."""
    inst = instance(G.mesh([3, 3], BW, LAT), "allreduce", model=ONE_PORT)
    out = solve_timed(inst, time_limit=600, progress=ctrl_c_in_the_first_solver_call([]))
    assert out.params["interrupted"] and out.params["allgather"]["formulation"] == "none (interrupted before any model)"
    assert any(note.startswith("allgather: interrupted: ") for note in out.notes)
    assert out.lower_bound <= verified(inst, out)


def test_progress_callback_sees_the_trace():
    seen = []
    out = solve_timed(instance(G.switch(5, BW, LAT)), budget=PROOF, progress=lambda *row: seen.append(row))
    assert seen == list(out.trace)


def test_unreachable_destination_is_infeasible():
    b = MachineBuilder("cut", 3)
    b.add_link(0, 1, bandwidth=BW, latency=LAT, bidirectional=True)
    b.add_link(2, 1, bandwidth=BW, latency=LAT)
    out = solve_timed(instance(b.build()), budget=PROOF)
    assert out.status == "infeasible" and out.schedule is None
    assert any("npu2" in note for note in out.notes)


def test_exported_mps_solves_to_the_makespan_and_lp_says_the_same(tmp_path):
    """The .mps file read back and solved by SCIP gives the optimal makespan in epochs; the .lp
    file (CPLEX LP format, which OR-Tools cannot read back) names the same variables."""
    import ortools.linear_solver.python.model_builder as mb

    inst = instance(G.switch(4, BW, LAT))
    mps, lp = tmp_path / "model.mps", tmp_path / "model.lp"
    info = export_timed_model(inst, mps)
    assert export_timed_model(inst, lp) == ExportInfo(str(lp), *astuple(info)[1:])
    model = mb.Model()
    assert model.import_from_mps_file(str(mps))
    assert (model.num_variables, model.num_constraints) == (info.variables, info.rows)
    solver = mb.Solver("scip")
    assert solver.solve(model) == mb.SolveStatus.OPTIMAL
    out = solve_timed(inst, budget=PROOF)
    assert close(solver.objective_value * info.quantum, out.lower_bound)
    text = lp.read_text()
    for section in ("Minimize", "Subject To", "Bounds", "End"):
        assert section.lower() in text.lower()
    assert "Obj: +1 makespan" in text
    names = {v.name for v in model.get_variables()}
    assert all(name in text for name in names)


def test_input_errors():
    inst = instance(G.ring(4, BW, LAT))
    with pytest.raises(InputError, match="solver"):
        solve_timed(inst, solver="gurobi")
    with pytest.raises(InputError, match="time_limit"):
        solve_timed(inst, time_limit=0)
    with pytest.raises(InputError, match="threads"):
        solve_timed(inst, threads=0)
    with pytest.raises(InputError, match="formulation"):
        solve_timed(inst, formulation="magic")
    with pytest.raises(InputError, match="quantum"):
        solve_timed(inst, quantum=-1.0)
    with pytest.raises(InputError, match="mps"):
        export_timed_model(inst, "model.txt")
    with pytest.raises(NotApplicable):
        solve_timed(inst, solver="scip", formulation="continuous")
    two_homes = make_custom(range(4), [[0, 1, 2, 3]], [[0, 2]], MB, combining=True)
    with pytest.raises(NotApplicable, match="several destinations"):
        solve_timed(Instance("twohomes", inst.machine, two_homes), budget=PROOF)
