"""Combining collectives from spreads: time reversal, pruning, homes, concatenation."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from optcoll.collectives.collective import ChunkSets
from optcoll.machines import generators as g
from optcoll.instances.instance import TimeModel
from optcoll.producers import compose, spread
from optcoll.producers.greedy.engine import spread_greedy
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


def _allreduce_phases(inst):
    coll = inst.collective
    at_home = ChunkSets(np.arange(coll.num_chunks + 1), compose.default_homes(coll))
    return spread.dual(inst, at_home, coll.pre), spread.forward(inst, at_home, coll.post)


@pytest.mark.parametrize("machine", [g.torus([3, 4], GIB, 1e-6), g.hypercube(3, GIB, 1e-6),
                                     g.dgx1(), g.switch(4, GIB, 1e-6, multicast=True, reduce=True)],
                         ids=lambda m: m.name)
def test_mirror_links_map_every_link_to_a_twin_that_does_the_same(machine):
    dual, forward = _allreduce_phases(instance(machine, "allreduce", 1e6, 2))
    twins = spread.mirror_links(dual, forward)
    assert twins is not None and sorted(twins.tolist()) == list(range(machine.num_links))
    rev = dual.machine
    assert np.array_equal(machine.link_src[twins], rev.link_src)
    assert np.array_equal(machine.link_dst[twins], rev.link_dst)
    assert np.array_equal(forward.delay[twins], dual.delay)
    # Any solution of the dual, renamed, is a valid AllGather on the original machine.
    allgather = instance(machine, "allgather", 1e6, 2)
    assert allgather.collective.chunk_bytes == dual.chunk_bytes
    solution = spread_greedy(dual, np.random.default_rng(0))
    verified(allgather, replace(solution, link=twins[solution.link]))


def _with_bandwidth(machine, link, factor):
    bandwidth = machine.link_bandwidth.copy()
    bandwidth[link] *= factor
    return replace(machine, link_bandwidth=bandwidth)


@pytest.mark.parametrize("case", ["one-way ring", "one slower link", "failed link", "reduce cost",
                                  "unequal ports", "multicast switch without reduction"])
def test_no_mirror_unless_the_network_is_symmetric(case):
    torus = g.torus([3, 3], GIB, 1e-6)
    machine = {"one-way ring": g.ring(4, GIB, 1e-6, bidirectional=False),
               "one slower link": _with_bandwidth(torus, 5, 0.5),
               "failed link": torus.without(links=[5]),
               # Its dual must hold one partial at a time (EXCLUSIVE); its copies need not.
               "multicast switch without reduction": g.switch(4, GIB, 1e-6, multicast=True),
               }.get(case, torus)
    model = {"reduce cost": TimeModel(reduce_cost=1e-12),
             "unequal ports": TimeModel(send_ports=1, recv_ports=2)}.get(case, TimeModel())
    inst = instance(machine, "allreduce", 1e6, model=model)
    assert spread.mirror_links(*_allreduce_phases(inst)) is None
    # Without a mirror the AllGather phase is synthesized afresh, and the result still verifies.
    verified(inst, SYNTHESIZERS["tacos"](inst, 0))


@pytest.mark.parametrize("algo", ["tacos", "tacos+"])
def test_greedy_allreduce_on_a_symmetric_network_is_its_reducescatter_mirrored(algo):
    torus = g.torus([4, 4], GIB, 1e-6)
    ar_inst, rs_inst = instance(torus, "allreduce", 1e6, 2), instance(torus, "reducescatter", 1e6, 2)
    ar, rs = SYNTHESIZERS[algo](ar_inst, 3), SYNTHESIZERS[algo](rs_inst, 3)
    rs_time = verified(rs_inst, rs).time
    assert verified(ar_inst, ar).time == pytest.approx(2 * rs_time)
    # Phase 2 is phase 1 run backwards on the twin links: same transfers, mirrored in time.
    copies = ar.op == COPY
    assert copies.sum() == len(rs)
    twin = {(int(torus.link_src[e]), int(torus.link_dst[e])): int(e) for e in range(torus.num_links)}
    mirrored = sorted((int(c), twin[int(torus.link_dst[e]), int(torus.link_src[e])],
                       round(rs_time - t - link_time(ar_inst), 12))
                      for c, e, t in zip(rs.chunk, rs.link, rs.start))
    assert sorted((int(c), int(e), round(t - rs_time, 12))
                  for c, e, t in zip(ar.chunk[copies], ar.link[copies], ar.start[copies])) == mirrored
