"""Cluster generators: nodes of any machine joined through their NICs by rail, leaf or fat-tree
networks; heterogeneous groups; the legacy ``multinode`` kind; bad shapes are field-named errors."""
from __future__ import annotations

import numpy as np
import pytest

from optcoll.errors import InputError
from optcoll.machines import generators as g
from optcoll.machines.catalog import load_machine
from optcoll.machines.clusters import Network, NodeGroup, cluster
from optcoll.machines.figures import npu_bandwidth
from optcoll.machines.modelfile import load_model_file

GB = 1e9
NVSWITCH = g.nvswitch(8, 450 * GB, 0.5e-6)


def links(machine, a: str, b: str) -> list[float]:
    ids = {label: v for v, label in enumerate(machine.labels)}
    return [float(machine.link_bandwidth[e]) for e in machine.links_between(ids[a], ids[b])]


def group(nodes: int, **kw) -> NodeGroup:
    return NodeGroup(NVSWITCH, nodes, **{"nic_bandwidth": 50 * GB, "nic_latency": 2e-6, **kw})


def test_rail_optimized_cluster_puts_nic_r_of_every_node_on_rail_r():
    machine = cluster([group(4)], Network("rail", 1e-6))
    labels = [s.label for s in machine.switches]
    assert labels[:9] == [f"rail{r}" for r in range(8)] + ["spine"]
    assert machine.num_npus == 32 and links(machine, "n2g5", "rail5") == [50 * GB]
    assert links(machine, "rail5", "spine") == [4 * 50 * GB]  # non-blocking: the rail's 4 NICs
    hops = machine.hop_counts()
    assert hops[2 * 8 + 5, 3 * 8 + 5] == 2  # same rail: NIC, leaf, NIC
    assert hops[0, 8 + 3] == 4  # other rail: NVLink then the rail, or through the spine
    egress, ingress = npu_bandwidth(machine)
    assert np.allclose(egress, 500 * GB) and np.allclose(ingress, 500 * GB)


def test_fat_tree_uplinks_carry_their_leaf_divided_by_the_oversubscription():
    machine = cluster([group(4, nic_gpus=((0, 1, 2, 3), (4, 5, 6, 7)))],
                      Network("fat_tree", 1e-6, oversubscription=2, nodes_per_leaf=2))
    assert [s.label for s in machine.switches][:3] == ["leaf0", "leaf1", "spine"]
    assert links(machine, "leaf0", "spine") == [2 * 2 * 50 * GB / 2]
    assert links(machine, "n0g1", "n0.nic0") == [50 * GB]  # a shared NIC is a node of its own
    assert links(machine, "n0.nic0", "leaf0") == [50 * GB] and links(machine, "n3.nic1", "leaf1") == [50 * GB]


def test_a_nic_behind_slower_pcie_is_a_node_of_its_own():
    machine = cluster([group(2, pcie_bandwidth=32 * GB, pcie_latency=1e-6)], Network("leaf"))
    assert links(machine, "n1g4", "n1.nic4") == [32 * GB] and links(machine, "n1.nic4", "leaf") == [50 * GB]
    fast = cluster([group(2, pcie_bandwidth=64 * GB)], Network("leaf"))
    assert links(fast, "n1g4", "leaf") == [50 * GB]  # PCIe faster than the NIC: the NIC binds


def test_heterogeneous_groups_share_the_rails():
    a100 = g.nvswitch(8, 300 * GB, 0.5e-6)
    machine = cluster([NodeGroup(a100, 1, None, 25 * GB, 2e-6), group(1)], Network("rail", 1e-6))
    assert links(machine, "n0g2", "rail2") == [25 * GB] and links(machine, "n1g2", "rail2") == [50 * GB]
    assert links(machine, "rail2", "spine") == [75 * GB]
    assert links(machine, "n0g2", "n0.nvswitch") == [300 * GB]


def test_a_torus_node_keeps_its_own_links():
    trn = g.torus([4, 4], 128 * GB, 0.5e-6)
    machine = cluster([NodeGroup(trn, 2, ((0,), (5,)), 50 * GB, 2e-6)], Network("rail", 1e-6))
    assert machine.num_npus == 32 and links(machine, "n1g0", "n1g1") == [128 * GB]
    assert links(machine, "n1g5", "rail1") == [50 * GB] and not links(machine, "n1g1", "rail1")


def test_a_single_node_builds_no_nics():
    machine = cluster([group(1)], Network("rail"))
    assert [s.label for s in machine.switches] == ["n0.nvswitch"]
    assert "no NICs or network" in machine.description
    legacy = g.multinode(1, 8, nvlink_bandwidth=300 * GB, nvlink_latency=0.5e-6, nic_bandwidth=25 * GB,
                         nic_latency=2e-6)
    assert "NIC" not in legacy.description.replace("no NICs", "") and len(legacy.switches) == 1


def test_multinode_full_mesh_splits_the_gpu_bandwidth_over_its_peers():
    machine = load_machine("perlmutter")
    assert links(machine, "n0g0", "n0g1") == [100 * GB]
    assert links(machine, "n0g0", "spine") == [25 * GB] and len(machine.switches) == 1
    with pytest.raises(InputError, match="intra: multicast/reduce are NVSwitch"):
        g.multinode(2, 4, nvlink_bandwidth=300 * GB, nvlink_latency=0.0, nic_bandwidth=25 * GB,
                    nic_latency=0.0, intra="full_mesh", multicast=True)


@pytest.mark.parametrize("kwargs, field, message", [
    (dict(groups=[group(6)], network=Network("fat_tree", 1e-6, nodes_per_leaf=4)), "nodes_per_leaf",
     "6 nodes do not fill leaves of 4 nodes"),
    (dict(groups=[group(2, nic_gpus=((0,), (9,)))], network=Network("rail", 1e-6)), "groups[0].nic_gpus[1]",
     "GPU 9 does not exist"),
    (dict(groups=[group(2)], network=Network("rail", 1e-6, oversubscription=0.5)), "oversubscription",
     "must be at least 1"),
    (dict(groups=[group(2)], network=Network("mesh")), "network", "unknown network 'mesh'"),
    (dict(groups=[group(2)], network=Network("rail")), "network_latency", "joined by a spine"),
    (dict(groups=[group(2, nic_bandwidth=None)], network=Network("leaf")), "groups[0].nic_bandwidth", "missing"),
    (dict(groups=[group(2)], network=Network("rail", 1e-6, nodes_per_leaf=2)), "nodes_per_leaf",
     "only a fat tree"),
])
def test_bad_cluster_arguments_name_the_field(kwargs, field, message):
    with pytest.raises(InputError, match=message) as info:
        cluster(**kwargs)
    assert info.value.field == field


CLUSTER_FILE = '''
[topology]
kind = "cluster"
network = "fat_tree"
network_latency = "1 us"
nodes_per_leaf = 2
oversubscription = 1.5

[[topology.groups]]
nodes = 2
node = "node.toml"
nic_gpus = [[0, 1], [2, 3]]
nic_bandwidth = "200 Gbit/s"
nic_latency = "2 us"

[[topology.groups]]
nodes = 2
node = "dgxa100"
nic_bandwidth = "200 Gbit/s"
nic_latency = "2 us"
'''
NODE_FILE = '''
[topology]
kind = "fully_connected"
n = 4
bandwidth = "100 GB/s"
latency = "0.5 us"

[figures]
scale_up = "300 GB/s"
'''


def test_cluster_files_name_node_models_by_path_or_name(tmp_path):
    (tmp_path / "node.toml").write_text(NODE_FILE)
    (tmp_path / "c.toml").write_text(CLUSTER_FILE)
    model = load_model_file(tmp_path / "c.toml")
    machine = model.machine
    assert machine.num_npus == 2 * 4 + 2 * 8
    assert model.figures.scale_up.tolist() == [300 * GB] * 8 + [300 * GB] * 16
    assert model.figures.scale_out.tolist() == [25 * GB] * 24  # each GPU's port into its NIC
    assert links(machine, "leaf0", "spine") == [2 * 2 * 25 * GB / 1.5]
    unsourced = model.provenance.unsourced  # the user's node file cites nothing, the built-in one all
    assert "topology.groups[0].node.topology.bandwidth" in unsourced
    assert not any(field.startswith("topology.groups[1].node.") for field in unsourced)
    (tmp_path / "loop.toml").write_text(CLUSTER_FILE.replace('"node.toml"', '"loop.toml"'))
    with pytest.raises(InputError, match="deep"):
        load_model_file(tmp_path / "loop.toml")
