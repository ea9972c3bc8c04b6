"""NCCL's view of a machine (nodes, NIC rails, NVSwitch fabrics, ring channels) read from links."""
from __future__ import annotations

from optcoll.machines import generators as g
from optcoll.producers.baselines.nccl.topology import directed_rings, nccl_topology
from producer_cases import GIB, sharp_cluster


def cluster(nodes: int, gpus: int, gpus_per_nic: int = 1):
    return g.multinode(nodes, gpus, nvlink_bandwidth=300e9, nvlink_latency=0.5e-6,
                       nic_bandwidth=25e9, nic_latency=2e-6, gpus_per_nic=gpus_per_nic)


def test_spine_splits_the_cluster_into_nodes_with_one_rail_per_nic():
    machine = cluster(3, 4)
    topo = nccl_topology(machine, range(12))
    assert topo.nodes == ((0, 1, 2, 3), (4, 5, 6, 7), (8, 9, 10, 11))
    assert machine.label(topo.network) == "spine"
    assert topo.rails == ((0, 1, 2, 3), (4, 5, 6, 7), (8, 9, 10, 11)) and topo.num_rails == 4
    assert [machine.label(f) for f in topo.fabrics] == ["n0.nvswitch", "n1.nvswitch", "n2.nvswitch"]


def test_shared_nics_make_one_rail_per_nic_at_its_first_gpu():
    topo = nccl_topology(cluster(2, 8, gpus_per_nic=4), range(16))
    assert topo.rails == ((0, 4), (8, 12))


def test_channels_enter_every_node_at_the_channel_rail():
    """Channel r enters each node at rail r's GPU and leaves from the GPU before it."""
    topo = nccl_topology(cluster(2, 4), range(8))
    assert topo.channels == ((0, 1, 2, 3, 4, 5, 6, 7), (1, 2, 3, 0, 5, 6, 7, 4),
                             (2, 3, 0, 1, 6, 7, 4, 5), (3, 0, 1, 2, 7, 4, 5, 6))


def test_one_switch_star_is_one_node_and_its_switch_the_fabric():
    machine = g.switch(8, GIB, 1e-6, multicast=True, reduce=True)
    topo = nccl_topology(machine, range(8))
    assert topo.num_nodes == 1 and topo.network is None and topo.fabrics == (8,)
    assert topo.channels == ((0, 1, 2, 3, 4, 5, 6, 7),)


def test_sub_communicator_keeps_only_members():
    topo = nccl_topology(sharp_cluster(2, 4), [0, 1, 4, 5])
    assert topo.nodes == ((0, 1), (4, 5)) and topo.rails == ((0, 1), (4, 5))


def test_directed_rings_use_every_link_at_most_once():
    for machine in (g.dgx1(), g.torus([4, 4], GIB, 1e-6), g.hypercube(4, GIB, 1e-6)):
        members = list(range(machine.num_npus))
        rings = directed_rings(machine, members)
        used: dict[tuple[int, int], int] = {}
        for ring in rings:
            assert sorted(ring) == members
            for a, b in zip(ring, ring[1:] + ring[:1]):
                used[(a, b)] = used.get((a, b), 0) + 1
        for (a, b), count in used.items():
            assert count <= len(machine.links_between(a, b))
    assert len(directed_rings(g.dgx1(), list(range(8)))) == 6  # every NVLink, both ways
    assert len(directed_rings(g.torus([4, 4], GIB, 1e-6), list(range(16)))) == 4


def test_rail_fabric_splits_into_nodes_at_the_nics():
    """A rail-optimized cluster has no one switch that joins the nodes (every rail's leaf and the
    spine do it together): the nodes are what is left without the NIC links, every GPU a rail,
    and NCCL's ring AllReduce then runs one channel per rail, so every NIC carries traffic (it used
    to read the cluster as one node and cross nodes through 4 of 16 NICs, 8.7 times slower)."""
    import numpy as np

    from optcoll.collectives.builtins import make_collective
    from optcoll.instances.instance import Instance
    from optcoll.machines.catalog import load_machine
    from optcoll.producers.registry import SYNTHESIZERS
    from optcoll.verify import require_valid

    machine = load_machine("dgxh100-rail-2x8")
    topo = nccl_topology(machine, range(16))
    assert topo.nodes == (tuple(range(8)), tuple(range(8, 16))) and topo.network is None
    assert topo.rails == topo.nodes and topo.num_rails == 8
    assert [machine.label(f) for f in topo.fabrics] == ["n0.nvswitch", "n1.nvswitch"]
    instance = Instance("rail", machine, make_collective("allreduce", range(16), GIB, 8))
    schedule = SYNTHESIZERS["nccl-ring"](instance)
    require_valid(machine, instance.collective, schedule, instance.model)
    nic = np.array([machine.label(int(v)).startswith("rail") for v in machine.link_dst])
    used = np.unique(np.asarray(schedule.link)[nic[np.asarray(schedule.link)]])
    assert used.size == 16
