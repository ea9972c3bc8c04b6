"""Combining collectives from spreads: time reversal, pruning, homes, concatenation."""
from __future__ import annotations

import numpy as np
import pytest

from optcoll.collectives.collective import ChunkSets
from optcoll.machines import generators as g
from optcoll.producers import compose, spread
from optcoll.producers.registry import SYNTHESIZERS
from optcoll.schedules.schedule import COPY, REDUCE, from_arrays
from producer_cases import GIB, instance, link_time, verified


def test_time_reverse_maps_each_interval_as_documented():
    """A transfer on reversed link (v,u) over [t, t+d) becomes a REDUCE on (u,v) over
    [T-t-d, T-t), same link id."""
    line = g.line(3, GIB, 1e-6)
    inst = instance(line, "reduce", 1e6, root=0)
    dual = spread.dual(inst, ChunkSets.from_lists([[0]]), inst.collective.pre)
    rev = dual.machine
    d = float(dual.delay[0])
    e01, e12 = rev.links_between(0, 1)[0], rev.links_between(1, 2)[0]
    fwd = from_arrays([0, 0], [e01, e12], [0.0, d])
    back = compose.time_reverse(fwd, dual, inst)
    T = 2 * d
    rows = {int(e): (float(t), int(o)) for e, t, o in zip(back.link, back.start, back.op)}
    assert rows[e12] == (pytest.approx(0.0), REDUCE) and rows[e01] == (pytest.approx(T - d), REDUCE)
    assert line.link_src[e12] == 2 and line.link_dst[e12] == 1  # original direction
    assert verified(inst, back).time == pytest.approx(T)


def test_reversal_into_a_plain_switch_copies():
    star = g.switch(3, GIB, 1e-6)
    inst = instance(star, "reducescatter")
    s = SYNTHESIZERS["direct"](inst, 0)
    into_switch = star.link_dst[s.link] == 3
    assert np.all(s.op[into_switch] == COPY) and np.all(s.op[~into_switch] == REDUCE)
    verified(inst, s)


def test_prune_drops_relay_deliveries_nobody_uses():
    line = g.line(3, GIB, 1e-6)
    inst = instance(line, "broadcast", 1e6, root=0, ranks=[0, 1])
    problem = spread.forward(inst, inst.collective.pre, inst.collective.post)
    d = float(problem.delay[0])
    useful = [(0, line.links_between(0, 1)[0], 0.0)]
    wasted = [(0, line.links_between(1, 2)[0], d)]  # relay 2 gets it and never forwards
    s = from_arrays(*zip(*(useful + wasted)))
    kept = compose.prune_unused(s, problem)
    assert len(kept) == 1 and int(kept.link[0]) == useful[0][1]


@pytest.mark.parametrize("algo", ["tacos", "ring", "direct"])
def test_allreduce_is_reducescatter_then_allgather(algo):
    ring = g.ring(5, GIB, 1e-6, bidirectional=False)
    ar = verified(inst := instance(ring, "allreduce", 1e6, 2), SYNTHESIZERS[algo](inst, 0)).time
    rs = verified(inst := instance(ring, "reducescatter", 1e6, 2), SYNTHESIZERS[algo](inst, 0)).time
    ag = verified(inst := instance(ring, "allgather", 1e6, 2), SYNTHESIZERS[algo](inst, 0)).time
    assert ar == pytest.approx(rs + ag)


def test_reduction_cost_is_charged_and_respected():
    ring = g.ring(4, GIB, 1e-6, bidirectional=False)
    from optcoll.instances.instance import TimeModel
    gamma = 1e-12
    inst = instance(ring, "reducescatter", 1e6, model=TimeModel(reduce_cost=gamma))
    result = verified(inst, SYNTHESIZERS["ring"](inst, 0))
    assert result.time == pytest.approx(3 * (link_time(inst) + gamma * 1e6 / 4))


def test_default_homes():
    ring = g.ring(4, GIB, 1e-6)
    assert compose.default_homes(instance(ring, "allreduce", 1e6, 2).collective).tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    assert compose.default_homes(instance(ring, "reduce", 1e6, 3, root=2).collective).tolist() == [2, 2, 2]
