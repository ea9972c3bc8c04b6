"""Every "complete" and "proven" claim of a Pareto front names the chunk counts it searched, and
holds there; one chunk count beyond the range, counter-examples are searched for and, where one
exists, the wording must not cover it (issue 35). Solves end by work limits, never by seconds."""
from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import pytest

from optcoll.instances.budget import Budget
from optcoll.instances.instance import TimeModel
from optcoll.instances.instancefile import load_instance
from optcoll.machines import generators as G
from optcoll.producers.exact.step import pareto_front, solve_step
from optcoll.producers.exact.step.chunking import rechunk
from step_helpers import BW, LAT, hetero_ring, instance

BUDGET = Budget(time_limit=600, threads=1, seed=0, work_limit=20.0)
MYBOX = Path(__file__).resolve().parents[4] / "examples" / "mybox-allgather.toml"


def _least_rounds_per_chunk(inst, chunks: int, steps: int) -> Fraction | None:
    """The least R/C with exactly ``steps`` steps at C = ``chunks`` (None: no schedule), proven."""
    at_c = replace(inst, collective=rechunk(inst.collective, chunks))
    out = solve_step(at_c, objective="rounds", steps=steps, budget=BUDGET)
    assert out.status in ("optimal", "infeasible"), out.notes
    return None if out.schedule is None else Fraction(out.params["R"], chunks)


def _mybox():
    inst = load_instance(MYBOX)
    return replace(inst, collective=rechunk(inst.collective, 1), model=TimeModel(kind="step"))


@pytest.mark.parametrize("make,k", [(_mybox, 3), (lambda: instance(G.ring(4, BW, LAT)), 2),
                                    (lambda: instance(G.line(4, BW, LAT)), 2),
                                    (lambda: instance(hetero_ring(4)), 2),
                                    (lambda: instance(G.dgx1(BW, LAT)), 2)],
                         ids=["mybox", "ring4", "line4", "hetring4", "dgx1"])
def test_front_claims_hold_in_range_and_say_so_beyond(make, k):
    inst = make()
    front = pareto_front(inst, k, budget=BUDGET)
    assert front.complete and front.scope == f"C ≤ {k}, every S"
    assert f"C > {k}" in front.stopped and "no chunk count" not in front.stopped  # says what it left out
    best_by = {}  # S -> the front's least R/C with at most S steps
    last = front.points[-1].steps
    for S in range(front.points[0].steps, last + 2):
        best_by[S] = min(p.rounds_per_chunk for p in front.points if p.steps <= S)
    beyond = []
    for S, best in best_by.items():
        for C in range(1, k + 2):
            q = _least_rounds_per_chunk(inst, C, S)
            if q is None:
                continue
            assert q >= front.bound.value  # the rounds bound, claimed for every C, holds one C beyond
            if C <= k:
                assert q >= best, f"C = {C}, S = {S} beats the front's proven {best}"
            elif q < best:
                beyond.append((S, C, q))
    if inst.machine.name == "mybox":  # the known overclaim: C = 4, S = 2 gives 5/4 below 4/3
        assert (2, 4, Fraction(5, 4)) in beyond
    for point in front.points:
        assert point.proven and point.chunks <= k
