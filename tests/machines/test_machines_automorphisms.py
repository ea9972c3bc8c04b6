"""Semiregular symmetry groups: every element keeps every link, only the identity fixes an NPU,
and the group found is as large as the network's translations."""
from __future__ import annotations

import numpy as np
import pytest

from optcoll.machines import generators as gen
from optcoll.machines.automorphisms import semiregular_group

CASES = [
    (gen.torus([4, 4], 1e9, 1e-6), 16, 4),
    (gen.torus([8, 8], 1e9, 1e-6), 64, 4),
    (gen.torus([4, 4, 4], 1e9, 1e-6), 64, 6),
    (gen.hypercube(6, 1e9, 1e-6), 64, 6),
    (gen.ring(6, 1e9, 1e-6), 6, 2),
    (gen.nvswitch(8), 8, 2),
    (gen.nvswitch(72), 72, 2),  # GB200 NVL72: index XORs stop at 8 here, shifts reach 72
    (gen.torus([3, 6], 1e9, 1e-6), 18, 4),
    (gen.multinode(4, 8, nvlink_bandwidth=300e9, nvlink_latency=5e-7, nic_bandwidth=25e9, nic_latency=2e-6),
     32, 4),
    (gen.dgx1(), 4, 12),  # DGX-1's four bandwidth-preserving relabellings (FIELD-NOTES §2)
    (gen.mesh([5, 5], 1e9, 1e-6), 1, 80),  # a mesh's symmetries all fix its centre
]


@pytest.mark.parametrize("machine,order,orbits", CASES, ids=lambda x: getattr(x, "name", str(x)))
def test_group_order_and_link_orbits(machine, order, orbits):
    group = semiregular_group(machine)
    assert group.order == order
    assert group.link_orbit.max() + 1 == orbits
    npus = machine.num_npus
    key = lambda src, dst, e: list(zip(src.tolist(), dst.tolist(),
                                       machine.link_bandwidth[e].tolist(), machine.link_latency[e].tolist()))
    for g in range(group.order):
        nodes, links = group.node[g], group.link[g]
        assert sorted(nodes.tolist()) == list(range(machine.num_nodes))
        assert sorted(links.tolist()) == list(range(machine.num_links))
        every = np.arange(machine.num_links)
        # link e goes to link links[e], whose ends are the images of e's ends, same figures
        assert key(machine.link_src[links], machine.link_dst[links], links) == \
            key(nodes[machine.link_src], nodes[machine.link_dst], every)
        if g:
            assert not np.any(nodes[:npus] == np.arange(npus))
    assert np.array_equal(group.node[group.carrier, group.representatives[group.npu_orbit]],
                          np.arange(npus))


def test_node_classes_are_kept():
    """A sub-communicator: members only map to members."""
    torus = gen.torus([4, 4], 1e9, 1e-6)
    members = np.zeros(torus.num_nodes, dtype=np.int64)
    members[[0, 2, 8, 10]] = 1
    group = semiregular_group(torus, members)
    assert group.order > 1
    for g in range(group.order):
        assert set(group.node[g, [0, 2, 8, 10]].tolist()) == {0, 2, 8, 10}
