"""The direct AllReduce model: timed (ring8's exchange, in-network reduction on a SHARP-like star),
never worse than ReduceScatter then AllGather, and SCCL's least steps cross-checked with z3."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from allreduce_reference import nvls_schedule, star, z3_feasible
from optcoll.bounds import lower_bounds, not_applied
from optcoll.collectives.builtins import make_collective, make_custom
from optcoll.instances.instance import Budget, Instance, TimeModel
from optcoll.machines import generators as G
from optcoll.producers.base import NotApplicable
from optcoll.producers.exact.allreduce.problem import step_problem, timed_problem
from optcoll.producers.exact.allreduce.solve import solve
from optcoll.producers.exact.allreduce.symmetric import orbit
from optcoll.producers.exact.allreduce.transfers import from_schedule, partial_sums, to_schedule
from optcoll.producers.exact.step import solve_step
from optcoll.producers.exact.timed.solve import solve_timed
from optcoll.results.record import evaluate_outcome
from optcoll.schedules.schedule import REDUCE
from optcoll.verify import verify
from optcoll.instances.clock import Clock
from optcoll.producers.exact.timed.symmetry import rank_group_links
from solver_checks import proof_budget

GIB_S, US = 50 * 2.0**30, 1e-6
PROOF = proof_budget()


def allreduce(machine, size=2.0**26, chunks=1, model=TimeModel()):
    coll = make_collective("allreduce", range(machine.num_npus), size, chunks)
    return Instance(f"{machine.name}-allreduce", machine, coll, model, PROOF)


def whole_buffer(machine, model=TimeModel(kind="step")):
    """SCCL's whole-buffer AllReduce: every rank holds and needs every one of N chunks."""
    n = machine.num_npus
    coll = make_custom(range(n), [list(range(n))] * n, [list(range(n))] * n, 2.0**20, combining=True)
    return Instance(f"{machine.name}-wb", machine, coll, model, PROOF)


def test_ring8_neighbours_reduce_into_each_other_to_beat_reducescatter_then_allgather():
    """Issue 13's ring: the direct model meets the 2(N−1)-deliveries bound, 7 link times where
    ReduceScatter then AllGather takes 8."""
    inst = allreduce(G.ring(8, GIB_S, 0.5 * US))
    out = solve_timed(inst, budget=PROOF)
    tau = 0.5 * US + inst.collective.chunk_bytes / GIB_S
    result = evaluate_outcome(inst, "exact", out)
    assert result.status == "optimal" and np.isclose(result.time, 7 * tau)
    assert out.params["family_lower_bound"] == pytest.approx(8 * tau)
    assert out.lower_bound_source.startswith(("allreduce-transfers", "allreduce-cut"))  # both give 7
    # Some pair of neighbours sends each other the same chunk at once, both reducing.
    s = out.schedule
    src, dst = inst.machine.link_src[s.link], inst.machine.link_dst[s.link]
    pairs = {(int(c), int(u), int(v), float(t)) for c, u, v, t, o in zip(s.chunk, src, dst, s.start, s.op) if o == REDUCE}
    assert any((c, v, u, t) in pairs for c, u, v, t in pairs)


def test_in_network_reduction_beats_the_no_inc_bound_which_is_not_applied():
    """star4_sharp: the hand-written NVLS schedule takes 25.0025 ms, under the 30 ms that the
    no-INC volume bound would claim; so that bound is not applied there, the cut bound meets the
    schedule, and the direct model finds it (through the reducing switch)."""
    machine = star(4, GIB_S, 0.5 * US, multicast=True, reduce=True)
    inst = allreduce(machine, 2.0**30)
    nvls = verify(machine, inst.collective, nvls_schedule(machine, inst.collective.chunk_bytes))
    assert nvls.valid and nvls.time == pytest.approx(25.0025e-3)
    plain = star(4, GIB_S, 0.5 * US)
    no_inc = {b.name: b for b in lower_bounds(plain, inst.collective)}
    assert no_inc["allreduce-volume"].value == pytest.approx(30e-3)
    assert no_inc["allreduce-volume"].value > nvls.time
    applied = {b.name: b for b in lower_bounds(machine, inst.collective)}
    assert not any(name.startswith(("allreduce-volume", "allreduce-transfers")) for name in applied)
    assert "reduces" in not_applied(machine, inst.collective)
    assert max(b.value for b in applied.values()) == pytest.approx(nvls.time)
    out = solve_timed(inst, budget=PROOF)
    result = evaluate_outcome(inst, "exact", out)
    assert result.status == "optimal" and result.time == pytest.approx(nvls.time)
    into_switch = out.schedule.op[inst.machine.link_dst[out.schedule.link] == 4]
    assert (into_switch == REDUCE).any()


@pytest.mark.parametrize("machine", [G.ring(5, 1e9, 1e-6), G.line(4, 1e9, 1e-6), G.dgx1(), star(4, 1e9, 1e-6)],
                         ids=["ring5", "line4", "dgx1", "star4"])
def test_direct_never_worse_than_reducescatter_then_allgather(machine):
    inst = allreduce(machine, chunks=1)
    out = solve_timed(inst, budget=proof_budget(work=2), structured=False)  # the family, then the direct model stops early
    result = evaluate_outcome(inst, "exact", out)
    assert result.time <= out.params["family_lower_bound"] * (1 + 1e-9) or not out.params["family_optimal"]
    for bound in lower_bounds(inst.machine, inst.collective):
        assert bound.value <= result.time * (1 + 1e-9)


def test_schedules_round_trip_through_route_transfers():
    """A verified ReduceScatter + AllGather schedule read back into route transfers replays
    without breaking a rule and writes out as a schedule of the same time."""
    inst = allreduce(G.ring(6, 1e9, 1e-6))
    rsag = solve_timed(inst, budget=PROOF)
    problem = timed_problem(inst)
    transfers = from_schedule(problem, rsag.schedule)
    assert len(transfers) == len(rsag.schedule)
    assert partial_sums(problem, transfers, transfers.makespan(problem)) is not None
    again = verify(inst.machine, inst.collective, to_schedule(problem, transfers))
    assert again.valid and again.time == pytest.approx(verify(inst.machine, inst.collective, rsag.schedule).time)


def test_symmetric_restriction_expands_to_a_valid_schedule():
    inst = allreduce(G.torus([3, 3], 1e9, 1e-6))
    problem = timed_problem(inst)
    group = orbit(problem, rank_group_links(inst, Clock(PROOF)))
    assert group is not None and group.order == 9
    out, found = solve(problem, 8, 1, Clock(PROOF), orbit=group)
    assert found is not None and len(found.chunk) and set(found.chunk.tolist()) == set(range(9))
    assert verify(inst.machine, inst.collective, to_schedule(problem, found)).valid


@pytest.mark.parametrize("machine, least", [(G.ring(3, 1e9, 1e-6), 2), (G.ring(4, 1e9, 1e-6), 3),
                                            (G.line(3, 1e9, 1e-6), 4), (G.line(4, 1e9, 1e-6), 6),
                                            (star(4, 1e9, 1e-6, hub_switch=False), 5)],
                         ids=["ring3", "ring4", "line3", "line4", "star4"])
def test_least_steps_agree_with_an_independent_z3_encoding(machine, least):
    inst = whole_buffer(machine)
    out = solve_step(inst, objective="steps", budget=PROOF)
    result = evaluate_outcome(inst, "exact", out)
    assert result.status == "optimal" and result.steps == least
    assert z3_feasible(machine, least) is True
    assert z3_feasible(machine, least - 1) is False


REDUCE_ONLY = TimeModel(kind="step", combining="reduce-only")


@pytest.mark.parametrize("machine, chunks, least", [
    (G.ring(3, 1e9, 1e-6), 1, 1), (G.ring(4, 1e9, 1e-6), 1, 2), (G.ring(3, 1e9, 1e-6), 3, 3),
    (G.line(3, 1e9, 1e-6), 1, None), (star(4, 1e9, 1e-6, hub_switch=False), 1, None)],
    ids=["ring3", "ring4", "ring3-C3", "line3", "star4"])
def test_reduce_only_least_steps_agree_with_z3_and_are_settled_at_every_s(machine, chunks, least):
    """SCCL's rules (no copy over a partial): SCCL's own answers on Ring(3) and Ring(4) with one
    chunk; Ring(3) with three chunks needs 3 steps where copies allow 2; on Line(3) and Star(4), where SCCL's search never ends, no schedule at any S: z3 finds
    none either at the ceiling (every delivery adds a contribution, so no schedule needs more)."""
    from optcoll.producers.exact.allreduce.steps import ceiling

    n = machine.num_npus
    coll = make_custom(range(n), [list(range(n))] * chunks, [list(range(n))] * chunks, 2.0**20, combining=True)
    inst = Instance(f"{machine.name}-wb{chunks}", machine, coll, REDUCE_ONLY, PROOF)
    out = solve_step(inst, objective="steps", budget=PROOF)
    result = evaluate_outcome(inst, "exact", out)
    if least is None:
        top = ceiling(step_problem(inst))
        assert result.status == "infeasible" and "no schedule at any S" in result.lower_bound_source
        assert z3_feasible(machine, top, chunks=chunks, reduce_only=True) is False
        assert solve_step(replace(inst, model=TimeModel(kind="step")), objective="steps").status == "optimal"
        return
    assert result.status == "optimal" and result.steps == least
    assert z3_feasible(machine, least, chunks=chunks, reduce_only=True) is True
    assert least == 1 or z3_feasible(machine, least - 1, chunks=chunks, reduce_only=True) is False
    assert verify(inst.machine, inst.collective, out.schedule, REDUCE_ONLY).valid


def test_whole_buffer_allreduce_with_cost_objective_is_refused_in_one_line():
    with pytest.raises(NotApplicable, match="objective 'steps'"):
        solve_step(whole_buffer(G.ring(4, 1e9, 1e-6)), objective="cost")


def test_combining_custom_with_several_destinations_is_not_applicable():
    """Chunk 0 reduced to two ranks and chunk 1 to one: no dual, no AllReduce shape."""
    coll = make_custom(range(3), [[0, 1, 2], [0, 1, 2]], [[0, 1], [2]], 1e6, combining=True)
    inst = Instance("mixed", G.ring(3, 1e9, 1e-6), coll, TimeModel(kind="step"))
    with pytest.raises(NotApplicable, match="several destinations"):
        solve_step(inst)


def test_plain_switch_routes_are_a_recorded_restriction():
    machine = star(4, 1e9, 1e-6)
    assert timed_problem(allreduce(machine)).restrictions
    assert step_problem(whole_buffer(machine)).restrictions
    assert not timed_problem(allreduce(G.ring(4, 1e9, 1e-6))).restrictions


def test_memory_guard_counts_match_the_built_model():
    """The guard's estimate comes from the same windows as the builder: variables within 10 %,
    terms within 25 % of the built CP-SAT model (ring, DGX-1, a SHARP-like star)."""
    from optcoll.producers.exact.allreduce import encoding

    for machine, horizon in ((G.ring(6, 1e9, 1e-6), 6), (G.dgx1(), 4), (star(4, 1e9, 1e-6, multicast=True, reduce=True), 4)):
        problem = timed_problem(allreduce(machine))
        size = encoding.size(problem, horizon)
        model = encoding.build(problem, horizon, horizon - 1)
        proto = model.cp.proto
        terms = sum(len(c.linear.vars) + len(c.enforcement_literal) for c in proto.constraints)
        assert abs(size.variables / len(proto.variables) - 1) < 0.1
        assert abs(size.terms / terms - 1) < 0.25, (machine.name, size.terms, terms)


def test_a_model_too_slow_to_build_in_the_time_left_is_not_built(monkeypatch):
    """A time limit covers the whole solve: a model whose estimated build takes more than its
    share of the time left is not built, and the direct phase says so (the build rate is set
    low here so that the 1-minute deadline is too short for every model of ring8)."""
    from optcoll.producers.exact.allreduce import solve as direct_solve
    from optcoll.producers.exact.allreduce.timed import direct_phase
    from optcoll.producers.registry import get_synthesizer

    inst = Instance("ring8", G.ring(8, 1e9, 1e-6), make_collective("allreduce", range(8), 8e6, 1))
    problem = timed_problem(inst)
    with pytest.raises(direct_solve.TooSlowToBuild, match="not built"):
        solve(problem, 8, 7, Clock(Budget(1e-3, 1, 0)))
    monkeypatch.setattr(direct_solve, "BUILD_TERMS_PER_SECOND", 1.0)
    start = get_synthesizer("tacos")(inst, 0)
    made = verify(inst.machine, inst.collective, start).time
    phase = direct_phase(inst, start, made, 0.0, Clock(Budget(60.0, 1, 0)),
                         lambda phase: rank_group_links(inst, phase))
    assert phase.schedule is None and "not built" in phase.params["refused"]
    assert any("symmetric" in note and "not built" in note for note in phase.notes)


def test_a_work_limit_makes_the_allreduce_solve_repeatable():
    """Under a work limit (CP-SAT deterministic time) the direct phase stops at the same point on
    any load: two solves give the same schedule and the work spent stays within the limit."""
    inst = Instance("ring6", G.ring(6, 1e9, 1e-6), make_collective("allreduce", range(6), 6e6, 1),
                    budget=Budget(600.0, 1, 0, work_limit=5.0))
    first, second = solve_timed(inst), solve_timed(inst)
    assert first.params["work"] <= 5.0 + 0.5 and "direct" in first.params
    assert first.schedule is not None and second.schedule is not None
    assert verify(inst.machine, inst.collective, first.schedule).time == verify(
        inst.machine, inst.collective, second.schedule).time


@pytest.mark.parametrize("combining", ["copy-or-reduce", "reduce-only"])
@pytest.mark.parametrize("machine, least, asks", [
    (G.ring(4, 1e9, 1e-6), 2, False), (G.hypercube(3, 1e9, 1e-6), 3, False), (G.ring(8, 1e9, 1e-6), 4, True)],
    ids=["ring4", "hypercube3", "ring8"])
def test_recursive_doubling_at_the_hop_bound_is_the_answer_without_a_solver(machine, least, asks, combining,
                                                                            monkeypatch):
    """One chunk: recursive doubling (on the ring of 4 in Gray-code order) takes the hop bound's
    steps on Ring(4) and the hypercube, so it is the answer, under either rule, and CP-SAT is never
    asked; on Ring(8) partners are not neighbours and the search asks as before."""
    import optcoll.producers.exact.allreduce.steps as least_steps

    n = machine.num_npus
    coll = make_custom(range(n), [list(range(n))], [list(range(n))], 2.0**20, combining=True)
    model = TimeModel(kind="step", combining=combining)
    inst = Instance(f"{machine.name}-wb1", machine, coll, model, PROOF)
    asked: list[int] = []
    real = least_steps.solve
    monkeypatch.setattr(least_steps, "solve",
                        lambda problem, lo, hi, *rest: asked.append(lo) or real(problem, lo, hi, *rest))
    out = solve_step(inst, objective="steps", budget=PROOF)
    if combining == "reduce-only" and asks:
        assert out.status == "infeasible"  # Ring(8) under SCCL's rules: no schedule at any S
        return
    assert out.status == "optimal" and out.params["S"] == least and bool(asked) == asks
    assert verify(machine, coll, out.schedule, model).valid
