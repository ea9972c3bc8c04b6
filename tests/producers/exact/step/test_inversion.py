"""Combining collectives through inversion (SCCL): dual on the reversed machine, run backwards."""
from __future__ import annotations

import pytest

from solver_checks import proof_budget
from step_helpers import BW, LAT, close, instance, named, verified

from optcoll.collectives.builtins import make_collective
from optcoll.machines import generators as G
from optcoll.machines.machine import MachineBuilder
from optcoll.producers.base import NotApplicable
from optcoll.producers.exact.step import solve_step
from optcoll.schedules.schedule import COPY, REDUCE

PROOF = proof_budget()


def _chorded_uniring(n: int = 5):
    """A directed ring with one chord: reversing it changes the problem."""
    b = MachineBuilder(f"chorded{n}", n)
    for i in range(n):
        b.add_link(i, (i + 1) % n, bandwidth=BW, latency=LAT)
    b.add_link(0, 2, bandwidth=2 * BW, latency=LAT)
    return b.build()


@pytest.mark.parametrize("kind, other", [("reducescatter", "allgather"), ("reduce", "broadcast")])
def test_combining_optimum_equals_its_dual_on_the_reversed_machine(kind, other):
    machine = _chorded_uniring()
    root = 1 if kind == "reduce" else None
    combining = instance(machine, kind, chunks=2, root=root)
    spreading = instance(machine.reversed(), other, chunks=2, root=root)
    a, b = solve_step(combining, budget=PROOF), solve_step(spreading, budget=PROOF)
    assert a.status == b.status == "optimal"
    assert close(verified(combining, a), verified(spreading, b))
    assert set(a.schedule.op.tolist()) == {REDUCE}


def test_reducescatter_through_a_plain_switch_queues_partials():
    inst = instance(G.switch(4, BW, LAT), "reducescatter")
    out = solve_step(inst, budget=PROOF)
    verified(inst, out)
    into_switch = inst.machine.link_dst[out.schedule.link] >= inst.machine.num_npus
    assert (out.schedule.op[into_switch] == COPY).all()
    assert (out.schedule.op[~into_switch] == REDUCE).all()


def test_a_reducing_switch_combines_and_saves_rounds():
    plain = instance(G.switch(4, BW, LAT), "reducescatter")
    sharp = instance(G.switch(4, BW, LAT, multicast=True, reduce=True), "reducescatter")
    a, b = solve_step(plain, budget=PROOF), solve_step(sharp, budget=PROOF)
    assert verified(sharp, b) < verified(plain, a)
    assert b.status == "optimal"


def test_inversion_refuses_a_switch_that_multicasts_without_reducing():
    inst = instance(G.switch(4, BW, LAT, multicast=True), "reducescatter")
    with pytest.raises(NotApplicable, match="multicasts without reducing"):
        solve_step(inst, budget=PROOF)


@pytest.mark.parametrize("machine", [G.ring(4, BW, LAT), G.line(4, BW, LAT), G.switch(3, BW, LAT),
                                     G.dgx1()], ids=lambda m: m.name)
def test_allreduce_is_reducescatter_then_allgather(machine):
    inst = instance(machine, "allreduce")
    out = solve_step(inst, budget=PROOF)
    cost = verified(inst, out)
    rs = solve_step(instance(machine, "reducescatter"), budget=PROOF)
    ag = solve_step(instance(machine, "allgather"), budget=PROOF)
    assert close(cost, rs.lower_bound + ag.lower_bound)
    assert out.status == "feasible" and out.params["family_optimal"]
    assert close(out.lower_bound, max(rs.lower_bound, ag.lower_bound))
    assert out.schedule.num_steps == rs.schedule.num_steps + ag.schedule.num_steps


def test_subcommunicator_reduce_relays_through_non_members():
    machine = G.line(5, BW, LAT)
    coll = make_collective("reducescatter", [0, 2, 4], 3e3, 1)
    inst = named(machine, coll, "ranks3")
    out = solve_step(inst, budget=PROOF)
    verified(inst, out)
    assert out.status == "optimal"
