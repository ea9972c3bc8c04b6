"""The pieces the baselines stand on: grid dimensions, rings, trees, the list scheduler."""
from __future__ import annotations

import pytest

from optcoll.machines import generators as g
from optcoll.producers import spread
from optcoll.producers.baselines.algorithms import double_trees
from optcoll.producers.baselines.dims import grid_dims
from optcoll.producers.baselines.listsched import list_schedule
from optcoll.producers.calendar import Runs, Windows, earliest_start, reserve
from optcoll.producers.baselines.rings import disjoint_rings, find_ring, ring_order
from producer_cases import GIB, instance, link_time, verified


@pytest.mark.parametrize("machine, dims", [
    (g.torus([8, 8], GIB, 0), (8, 8)),
    (g.mesh([7, 12], GIB, 0), (7, 12)),
    (g.torus([3, 4, 5], GIB, 0), (3, 4, 5)),
    (g.hypercube(5, GIB, 0), (2,) * 5),
    (g.astra([g.AstraDim("Ring", 4, GIB, 0), g.AstraDim("Switch", 8, GIB, 0)]), (4, 8)),
    (g.dgx1(), (4, 2)),
    (g.ring(8, GIB, 0), (8,)),
    (g.switch(6, GIB, 0), (6,)),
])
def test_grid_dims_from_links(machine, dims):
    assert grid_dims(machine) == dims


def _adjacent(machine, a, b) -> bool:
    return bool(machine.links_between(a, b)) and bool(machine.links_between(b, a))


@pytest.mark.parametrize("machine", [g.torus([3, 4], GIB, 0), g.mesh([4, 6], GIB, 0),
                                     g.mesh([3, 3, 2], GIB, 0), g.hypercube(4, GIB, 0), g.dgx1()])
def test_ring_follows_cables(machine):
    order = ring_order(machine, list(range(machine.num_npus)))
    assert sorted(order) == list(range(machine.num_npus))
    assert all(_adjacent(machine, a, b) for a, b in zip(order, order[1:] + order[:1]))


def test_directed_ring_follows_links_one_way():
    reversed_ring = g.ring(6, GIB, 0, bidirectional=False).reversed()
    order = find_ring(reversed_ring, list(range(6)), directed=True)
    assert all(reversed_ring.links_between(a, b) for a, b in zip(order, order[1:] + order[:1]))


@pytest.mark.parametrize("machine", [g.mesh([5, 5], GIB, 0), g.mesh([3, 5, 3], GIB, 0)])
def test_odd_mesh_has_no_hamiltonian_cycle_so_the_ring_is_the_snake(machine):
    n = machine.num_npus
    assert find_ring(machine, list(range(n))) is None
    order = ring_order(machine, list(range(n)))
    assert sorted(order) == list(range(n))
    assert all(_adjacent(machine, a, b) for a, b in zip(order, order[1:]))


@pytest.mark.parametrize("machine, at_least", [
    (g.hypercube(4, GIB, 0), 2), (g.hypercube(6, GIB, 0), 3), (g.torus([4, 4], GIB, 0), 2),
    (g.torus([8, 8], GIB, 0), 2), (g.torus([5, 7], GIB, 0), 2), (g.torus([3, 3, 3], GIB, 0), 3),
    (g.dgx1(), 2)])
def test_disjoint_rings_share_no_cable(machine, at_least):
    rings = disjoint_rings(machine, list(range(machine.num_npus)))
    assert len(rings) >= at_least
    for ring in rings:
        assert sorted(ring) == list(range(machine.num_npus))
        assert all(_adjacent(machine, a, b) for a, b in zip(ring, ring[1:] + ring[:1]))
    cables = [frozenset((a, b)) for r in rings for a, b in zip(r, r[1:] + r[:1])]
    assert len(cables) == len(set(cables))


@pytest.mark.parametrize("n", [2, 5, 6, 7, 8, 13])
def test_double_binary_trees(n):
    first, second = double_trees(n)
    for tree in (first, second):
        assert tree.count(-1) == 1
        for v in range(n):  # every node reaches the root
            seen, u = set(), v
            while tree[u] >= 0:
                assert u not in seen
                seen.add(u)
                u = tree[u]
        assert all(sum(1 for p in tree if p == v) <= 2 for v in range(n))  # binary
    if n > 2 and n % 2 == 0:  # leaves of one tree are inner nodes of the other
        leaves = [{v for v in range(n) if v not in t} for t in (first, second)]
        assert not leaves[0] & leaves[1]


def test_the_calendar_fills_gaps():
    link = Runs()
    reserve([(link, 0.0, 1.0)], 0.0)
    reserve([(link, 0.0, 1.0)], 3.0)
    assert earliest_start([(link, 0.0, 1.0)], 0.5) == 1.0
    assert earliest_start([(link, 0.0, 2.5)], 0.5) == 4.0
    two = Windows(capacity=2)
    reserve([(two, 0.0, 2.0)], 0.0)
    reserve([(two, 0.0, 1.0)], 0.0)
    assert earliest_start([(two, 0.0, 1.0)], 0.0) == 1.0
    assert earliest_start([(link, 0.0, 1.0), (two, 0.0, 1.0)], 0.0) == 1.0  # both must be free


def test_stages_wait_for_everything_a_rank_did_before():
    """Rank 0 sends twice in stage 0 (serialised on one link), so its stage-1 message to rank 2
    waits for both, although its data was there from the start."""
    machine = g.fully_connected(3, GIB, 1e-6)
    inst = instance(machine, "allgather", 1e6, 2)
    problem = spread.forward(inst, inst.collective.pre, inst.collective.post)
    tau = link_time(inst)
    s = list_schedule(problem, [0, 1, 0], [0, 0, 0], [1, 1, 2], [0, 0, 1])
    assert sorted(s.start.tolist()) == pytest.approx([0.0, tau, 2 * tau])
    s = list_schedule(problem, [0, 1, 0], [0, 0, 0], [1, 1, 2])
    assert sorted(s.start.tolist()) == pytest.approx([0.0, 0.0, tau])


def test_messages_to_a_node_that_already_has_the_chunk_continue_from_its_copy():
    """Chunk 0 goes 0->1, then 'direct' 0->2 on a line routes via 1, which already holds it."""
    line = g.line(3, GIB, 1e-6)
    inst = instance(line, "broadcast", 1e6, root=0)
    problem = spread.forward(inst, inst.collective.pre, inst.collective.post)
    s = list_schedule(problem, [0, 0], [0, 0], [1, 2])
    assert len(s) == 2
    verified(inst, s)


def test_direct_serves_every_peer_at_once():
    """Two 8-GPU servers, one 200 Gbit/s NIC per GPU: an AlltoAll sends half of each rank's bytes
    through its NIC. With 8 chunks per pair, chunk k to every peer goes before chunk k + 1 (as
    NCCL's grouped sends run all peers at once), so the NIC is busy to the end: 1.13 x its load,
    where finishing one peer before the next took 2 x (15 rounds, each as slow as a remote peer)."""
    from optcoll.collectives.builtins import make_collective
    from optcoll.instances.instance import Instance, TimeModel
    from optcoll.machines.catalog import load_machine
    from optcoll.producers.baselines.algorithms import direct
    from optcoll.producers.registry import SYNTHESIZERS

    machine = load_machine("cluster2x8")
    nic_load = GIB / 2 / 25e9
    times = {}
    for chunks in (1, 8):
        inst = Instance("a2a", machine, make_collective("alltoall", list(range(16)), GIB, chunks),
                        TimeModel(occupancy="serialization"))
        times[chunks] = verified(inst, SYNTHESIZERS["direct"](inst, 0)).time / nic_load
        order = direct(spread.forward(inst, inst.collective.pre, inst.collective.post))
        offsets = [(b - a) % 16 for a, b in zip(order.src, order.dst)]
        if chunks == 1:  # one chunk per pair: the plain rotation, offset by offset
            assert offsets == sorted(offsets)
    assert times[8] < 1.15 < 1.9 < times[1]
