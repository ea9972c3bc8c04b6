"""Known step-model results (SCCL, FIELD-NOTES section 2; issue 3 acceptance)."""
from __future__ import annotations

import time
from fractions import Fraction

import pytest

from solver_checks import proof_budget
from step_helpers import BW, LAT, STEP, instance, verified

from optcoll.machines import generators as G
from optcoll.producers.exact.step import pareto_front, rounds_lower_bound, solve_step
from optcoll.producers.exact.step.chunking import rechunk
from optcoll.verify import verify

PROOF = proof_budget()


def test_dgx1_allgather_needs_two_steps():
    """(Every backend proving R_min(2) = 2 by itself is in test_agreement.py.)"""
    inst = instance(G.dgx1())
    out = solve_step(inst, objective="steps", budget=PROOF)
    verified(inst, out)
    assert out.status == "optimal"
    assert out.schedule.num_steps == 2


def test_dgx1_allgather_pareto_front():
    inst = instance(G.dgx1())
    started = time.perf_counter()
    front = pareto_front(inst, 6, budget=PROOF)
    points = front.points
    assert front.complete
    wall = time.perf_counter() - started
    found = [(p.steps, p.rounds, p.chunks) for p in points]
    print(f"DGX-1 AllGather Pareto front C <= 6: {found} in {wall:.2f} s")
    assert (2, 3, 2) in found
    assert (3, 7, 6) in found
    bound = rounds_lower_bound(inst.machine, inst.collective)
    assert bound.value == Fraction(7, 6)
    last = points[-1]
    assert last.rounds_per_chunk == Fraction(7, 6) == bound.value and last.bandwidth_optimal
    assert all(p.proven for p in points)
    # A front: steps strictly up, R/C strictly down, and every schedule valid at its C.
    assert all(a.steps < b.steps and a.rounds_per_chunk > b.rounds_per_chunk
               for a, b in zip(points, points[1:]))
    for p in points:
        coll = rechunk(inst.collective, p.chunks)
        check = verify(inst.machine, coll, p.schedule, STEP)
        assert check.valid, check.violation
        assert check.time == pytest.approx(p.cost, rel=1e-12)
        assert (check.steps, check.rounds) == (p.steps, p.rounds)


def test_unidirectional_ring8_allgather_needs_seven_steps():
    inst = instance(G.ring(8, BW, LAT, bidirectional=False))
    out = solve_step(inst, objective="steps", budget=PROOF)
    verified(inst, out)
    assert out.status == "optimal" and out.schedule.num_steps == 7


@pytest.mark.parametrize("dim", [3, 4])
def test_hypercube_allgather_one_chunk_needs_dim_steps(dim):
    inst = instance(G.hypercube(dim, BW, LAT))
    out = solve_step(inst, objective="steps", budget=PROOF)
    verified(inst, out)
    assert out.status == "optimal" and out.schedule.num_steps == dim


def test_hypercube5_allgather_needs_at_least_seven_steps():
    """31 chunks over 5 in-links, one round per step: ⌈31/5⌉ = 7 > the diameter 5."""
    inst = instance(G.hypercube(5, BW, LAT))
    bound = rounds_lower_bound(inst.machine, inst.collective)
    assert bound.value == Fraction(31, 5)
    assert bound.rounds(1) == 7
    out = solve_step(inst, objective="steps", budget=proof_budget(work=0.05))  # too little to solve S = 7
    verified(inst, out)
    per_step = inst.machine.link_latency.max() + inst.collective.chunk_bytes / BW
    assert out.lower_bound >= 7 * per_step * (1 - 1e-12)


@pytest.mark.slow
def test_hypercube5_allgather_needs_exactly_seven_steps():
    inst = instance(G.hypercube(5, BW, LAT))
    out = solve_step(inst, objective="steps", budget=PROOF)
    verified(inst, out)
    assert out.status == "optimal" and out.schedule.num_steps == 7


def test_dgx1_scatter_rounds_bound_counts_root_egress():
    """SCCL's LP lets flow circulate and gets 7/24; the root must send 7 chunks over 6 links."""
    inst = instance(G.dgx1(), "scatter", root=0)
    bound = rounds_lower_bound(inst.machine, inst.collective)
    assert bound.value == Fraction(7, 6)
    assert bound.detail["flow LP"] == Fraction(7, 6)
    assert bound.detail["egress"] == Fraction(7, 6)
