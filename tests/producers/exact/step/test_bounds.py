"""The rounds lower bound: the multicast flow LP and the counting bounds it implies."""
from __future__ import annotations

from fractions import Fraction

import pytest

from step_helpers import BW, LAT, agreement_instances, instance

from optcoll.collectives.builtins import split_allreduce
from optcoll.machines import generators as G
from optcoll.machines.machine import MachineBuilder
from optcoll.producers.exact.step import rounds_lower_bound
from optcoll.producers.exact.step.bounds import RoundsBound, flow_lp, problem_rounds_bound
from optcoll.producers.exact.step.inversion import plan


@pytest.mark.parametrize("inst", [i for i in agreement_instances() if i.collective.kind != "allreduce"],
                         ids=lambda i: i.name)
def test_flow_lp_implies_the_counting_bounds(inst):
    bound = problem_rounds_bound(plan(inst.machine, inst.collective).problem)
    lp = bound.detail["flow LP"]
    for name in ("ingress", "egress"):
        if name in bound.detail:
            assert lp >= bound.detail[name]
    assert bound.value == lp


def test_one_copy_on_a_link_serves_every_destination_behind_it():
    """Broadcast down a line: the root's one out-link carries the chunk once for all three."""
    inst = instance(G.line(4, BW, LAT), "broadcast", root=0)
    assert rounds_lower_bound(inst.machine, inst.collective).value == 1


@pytest.mark.parametrize("multicast, expected", [(False, 3), (True, 1)])
def test_a_plain_switch_forwards_each_arrival_once(multicast, expected):
    """The root reaches three receive-only NPUs through one switch: without multicast the root
    must send the chunk three times (the receivers cannot relay it back)."""
    b = MachineBuilder("fanout", 4)
    sw = b.add_switch("sw", multicast=multicast)
    b.add_link(0, sw, bandwidth=BW, latency=LAT, bidirectional=True)
    for v in (1, 2, 3):
        b.add_link(sw, v, bandwidth=BW, latency=LAT)
    machine = b.build()
    inst = instance(machine, "broadcast", root=0)
    assert rounds_lower_bound(machine, inst.collective).value == expected


def test_dgx1_allgather_and_reducescatter_bounds():
    for kind in ("allgather", "reducescatter"):
        inst = instance(G.dgx1(), kind)
        assert rounds_lower_bound(inst.machine, inst.collective).value == Fraction(7, 6)


def test_allreduce_bound_is_its_reducescatter_and_names_the_family_bound():
    inst = instance(G.ring(4, BW, LAT), "allreduce")
    bound = rounds_lower_bound(inst.machine, inst.collective)
    rs, ag = (rounds_lower_bound(inst.machine, part) for part in split_allreduce(inst.collective))
    assert bound.value == rs.value
    assert bound.detail["reducescatter+allgather family"] == rs.value + ag.value


def test_bound_is_per_chunk_of_one_rank():
    inst = instance(G.dgx1(), chunks=6)
    bound = rounds_lower_bound(inst.machine, inst.collective)
    assert bound.value == Fraction(7, 6)
    assert bound.rounds(6) == 7 and bound.rounds(2) == 3 and bound.rounds(1) == 2


def test_rounding_tolerates_lp_noise_but_not_more():
    assert RoundsBound(Fraction(7, 6) - Fraction(1, 10**9), "x").rounds(6) == 7
    assert RoundsBound(Fraction(7, 6) + Fraction(1, 10**4), "x").rounds(6) == 8


def test_an_lp_stopped_by_its_time_limit_proves_nothing(monkeypatch):
    """Torus 4×4 AllGather: the LP takes about 0.6 s; cut off at 1 µs it gives no value and the
    bound falls back on the counting bounds."""
    import optcoll.producers.exact.step.bounds as step_bounds

    inst = instance(G.torus((4, 4), BW, LAT))
    problem = plan(inst.machine, inst.collective).problem
    monkeypatch.setattr(step_bounds, "LP_TIME_LIMIT", 1e-6)
    assert flow_lp(problem) is None
    bound = problem_rounds_bound(problem)
    assert bound.value == Fraction(15, 4) and "ingress" in bound.source
    assert bound.detail["flow LP"].startswith("skipped")


def test_lp_is_skipped_when_too_large():
    inst = instance(G.hypercube(5, BW, LAT))
    problem = plan(inst.machine, inst.collective).problem
    assert flow_lp(problem) is None
    bound = problem_rounds_bound(problem)
    assert bound.value == Fraction(31, 5) and "ingress" in bound.source
