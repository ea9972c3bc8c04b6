"""The step-model AllReduce front: ReduceScatter then AllGather, summed front to front, checked
against the phases solved one (S, C) at a time and against the shared verifier."""
from __future__ import annotations

from fractions import Fraction

import pytest

from solver_checks import proof_budget
from step_helpers import BW, LAT, STEP, instance
from optcoll.machines import generators as G
from optcoll.producers.exact.step import pareto_front, rounds_lower_bound, solve_step
from optcoll.producers.exact.step.chunking import rechunk, refine
from optcoll.verify import require_valid

PROOF = proof_budget()

MAX_CHUNKS = 2


def _least_rounds_per_chunk(machine, kind: str, steps: int) -> Fraction:
    """One phase's least R/C with at most ``steps`` steps over C = 1..MAX_CHUNKS, by solve_step."""
    best = None
    for chunks in range(1, MAX_CHUNKS + 1):
        for s in range(1, steps + 1):
            out = solve_step(instance(machine, kind, chunks), steps=s, budget=PROOF)
            if out.status == "optimal" and out.schedule is not None:
                q = Fraction(sum(out.schedule.rounds), chunks)
                best = q if best is None or q < best else best
    return best


@pytest.mark.parametrize("machine", [G.ring(4, BW, LAT), G.line(3, BW, LAT), G.hypercube(3, BW, LAT)],
                         ids=lambda m: m.name)
def test_allreduce_front_is_the_best_split_of_steps_between_the_phases(machine):
    """Every point of the AllReduce front verifies as an AllReduce at its C with the cost it
    claims, and its R/C is the least over splits S = S1 + S2 of the phases' least R/C, each
    found by solving fixed-step problems directly (not through the front code)."""
    inst = instance(machine, "allreduce")
    front = pareto_front(inst, MAX_CHUNKS, budget=PROOF)
    assert front.complete and front.points
    assert [p.steps for p in front.points] == sorted({p.steps for p in front.points})
    assert all(a.rounds_per_chunk > b.rounds_per_chunk for a, b in zip(front.points, front.points[1:]))
    for point in front.points:
        verified = require_valid(machine, rechunk(inst.collective, point.chunks), point.schedule, STEP)
        assert verified.time == pytest.approx(point.cost) and point.proven
        splits = [(_least_rounds_per_chunk(machine, "reducescatter", s1),
                   _least_rounds_per_chunk(machine, "allgather", point.steps - s1))
                  for s1 in range(1, point.steps)]
        assert point.rounds_per_chunk == min(a + b for a, b in splits if a is not None and b is not None)
    bound = sum(rounds_lower_bound(machine, instance(machine, kind).collective).value
                for kind in ("reducescatter", "allgather"))
    assert all(p.bandwidth_optimal == (p.rounds_per_chunk <= bound) for p in front.points)


def test_refined_schedule_is_the_same_schedule_for_finer_chunks():
    """Refining by f: f times the transfers and rounds, the same cost, still valid at C·f."""
    machine = G.dgx1()
    inst = instance(machine, "allgather", 2)
    schedule = solve_step(inst, budget=PROOF).schedule
    cost = require_valid(machine, inst.collective, schedule, STEP).time
    fine = refine(schedule, 3)
    assert len(fine) == 3 * len(schedule) and fine.rounds == tuple(3 * r for r in schedule.rounds)
    assert require_valid(machine, rechunk(inst.collective, 6), fine, STEP).time == pytest.approx(cost)
