"""Generators: counts, degrees, diameters, numbering, and the known properties of each family."""
from __future__ import annotations

import inspect
import itertools
from collections import Counter

import networkx as nx
import numpy as np
import pytest

from optcoll.errors import InputError
from optcoll.machines import generators as g
from optcoll.machines.describe import npu_diameter
from optcoll.machines.machine import Machine

BW, LAT = 50 * 2**30, 0.5e-6


def pairs(machine: Machine) -> Counter:
    """Directed node pairs with their link multiplicity."""
    return Counter(zip(machine.link_src.tolist(), machine.link_dst.tolist()))


def symmetric(machine: Machine) -> bool:
    p = pairs(machine)
    return all(p[(v, u)] == k for (u, v), k in p.items())


def degrees(machine: Machine) -> tuple[set[int], set[int]]:
    n = machine.num_npus
    out = np.bincount(machine.link_src, minlength=machine.num_nodes)[:n]
    into = np.bincount(machine.link_dst, minlength=machine.num_nodes)[:n]
    return set(into.tolist()), set(out.tolist())


def test_bidirectional_ring():
    m = g.ring(8, BW, LAT)
    assert (m.num_npus, m.num_links, len(m.switches)) == (8, 16, 0)
    assert symmetric(m) and max(pairs(m).values()) == 1
    assert degrees(m) == ({2}, {2})
    assert npu_diameter(m) == 4
    assert all(m.links_between(i, (i + 1) % 8) and m.links_between((i + 1) % 8, i) for i in range(8))
    assert set(m.link_bandwidth) == {BW} and set(m.link_latency) == {LAT}


def test_unidirectional_ring_goes_one_way():
    m = g.ring(5, BW, LAT, bidirectional=False)
    assert set(pairs(m)) == {(i, (i + 1) % 5) for i in range(5)}
    assert npu_diameter(m) == 4


@pytest.mark.parametrize("bidirectional", [True, False])
def test_ring_of_two_is_one_cable(bidirectional):
    m = g.ring(2, BW, LAT, bidirectional=bidirectional)
    assert pairs(m) == Counter({(0, 1): 1, (1, 0): 1})


def test_line():
    m = g.line(5, BW, LAT)
    assert m.num_links == 8 and symmetric(m)
    assert degrees(m) == ({1, 2}, {1, 2})
    assert npu_diameter(m) == 4


def test_fully_connected():
    m = g.fully_connected(6, BW, LAT)
    assert set(pairs(m)) == {(u, v) for u in range(6) for v in range(6) if u != v}
    assert npu_diameter(m) == 1


def test_switch_star_with_flags_and_parallel_cables():
    m = g.switch(6, BW, LAT, multicast=True, reduce=True, links_per_npu=2)
    assert (m.num_npus, len(m.switches), m.num_links) == (6, 1, 24)
    assert m.switches[0].multicast and m.switches[0].reduce
    hub = 6
    assert all(len(m.links_between(i, hub)) == 2 == len(m.links_between(hub, i)) for i in range(6))
    assert npu_diameter(m) == 2


def grid_expectations(dims, wrap):
    """Neighbours computed from coordinates, independently of the generator's stride arithmetic."""
    n = int(np.prod(dims))
    coords = list(itertools.product(*[range(s) for s in reversed(dims)]))  # last dim slowest
    index = {tuple(reversed(c)): i for i, c in enumerate(coords)}  # x fastest
    expected = set()
    for c, i in index.items():
        for d, size in enumerate(dims):
            for step in (-1, 1):
                x = c[d] + step
                if wrap:
                    x %= size
                if 0 <= x < size and x != c[d]:
                    other = list(c)
                    other[d] = x
                    expected.add((i, index[tuple(other)]))
    return n, expected


@pytest.mark.parametrize("dims", [[5, 5], [7, 3], [4], [3, 3, 3], [3, 4, 5], [2, 3], [1, 6], [2, 2, 2]])
@pytest.mark.parametrize("wrap", [False, True])
def test_grids_match_coordinates(dims, wrap):
    m = (g.torus if wrap else g.mesh)(dims, BW, LAT)
    n, expected = grid_expectations(dims, wrap)
    assert m.num_npus == n
    assert max(pairs(m).values()) == 1, "no duplicate links, not even for dimensions of size 2"
    assert set(pairs(m)) == expected
    hops = sum(s // 2 if wrap else s - 1 for s in dims)
    assert npu_diameter(m) == hops


def test_tacos_numbering_2d_and_3d():
    mesh = g.mesh([4, 3], BW, LAT)  # width 4, height 3: id = row * 4 + col
    assert {v for (u, v) in pairs(mesh) if u == 5} == {1, 4, 6, 9}
    t3 = g.torus([3, 4, 5], BW, LAT)  # id = z*X*Y + y*X + x with X, Y = 3, 4
    v = 2 * 12 + 1 * 3 + 0  # (x, y, z) = (0, 1, 2)
    assert {w for (u, w) in pairs(t3) if u == v} == {v + 1, v + 2, v - 3, v + 3, v + 12, v - 12}


def test_torus_wraparound():
    m = g.torus([4, 4], BW, LAT)
    assert m.links_between(3, 0) and m.links_between(0, 3)  # row wrap
    assert m.links_between(12, 0) and m.links_between(0, 12)  # column wrap
    assert degrees(m) == ({4}, {4}) and m.num_links == 64


def test_heterogeneous_mesh_per_dimension_links():
    m = g.mesh([5, 5], [50 * 2**30, 75 * 2**30], [0.5e-6, 0.7e-6])
    for e in range(m.num_links):
        u, v = int(m.link_src[e]), int(m.link_dst[e])
        along_x = abs(u - v) == 1
        assert m.link_bandwidth[e] == (50 if along_x else 75) * 2**30
        assert m.link_latency[e] == (0.5e-6 if along_x else 0.7e-6)
    assert m.name == "hetmesh5x5"


@pytest.mark.parametrize("dim", range(1, 7))
def test_hypercube(dim):
    m = g.hypercube(dim, BW, LAT)
    n = 2**dim
    assert m.num_npus == n and m.num_links == dim * n
    assert all(bin(u ^ v).count("1") == 1 for u, v in pairs(m))
    assert degrees(m) == ({dim}, {dim})
    assert npu_diameter(m) == dim


def dgx1_matrix(m: Machine) -> np.ndarray:
    mult = np.zeros((8, 8), dtype=int)
    for (u, v), k in pairs(m).items():
        mult[u, v] = k
    return mult


def test_dgx1_links_and_automorphisms():
    m = g.dgx1()
    mult = dgx1_matrix(m)
    assert (mult == np.array(g.DGX1_NVLINKS)).all() and (mult == mult.T).all()
    assert degrees(m) == ({6}, {6})
    assert set(m.link_bandwidth) == {25e9}
    assert npu_diameter(m) == 2
    perms = np.array(list(itertools.permutations(range(8))))
    same = (mult[perms[:, :, None], perms[:, None, :]] == mult).all(axis=(1, 2))
    found = {tuple(p) for p in perms[same].tolist()}
    assert found == {(0, 1, 2, 3, 4, 5, 6, 7), (2, 3, 0, 1, 6, 7, 4, 5),
                     (4, 5, 6, 7, 0, 1, 2, 3), (6, 7, 4, 5, 2, 3, 0, 1)}


def test_dgx2_and_nvswitch():
    m = g.dgx2()
    assert (m.name, m.num_npus, len(m.switches), m.num_links) == ("dgx2", 16, 1, 32)
    assert set(m.link_bandwidth) == {150e9}
    assert not m.switches[0].multicast
    n8 = g.nvswitch(8, 300e9, 0.5e-6, multicast=True, reduce=True)
    assert n8.switches[0].multicast and n8.switches[0].reduce
    assert n8.npu_labels[3] == "gpu3" and npu_diameter(n8) == 2


def test_multinode_one_nic_per_gpu():
    m = g.multinode(3, 4, nvlink_bandwidth=300e9, nvlink_latency=0.5e-6,
                    nic_bandwidth=25e9, nic_latency=2e-6)
    assert (m.num_npus, len(m.switches)) == (12, 4)  # 3 NVSwitches + spine
    assert m.num_links == 2 * 12 + 2 * 12
    assert m.npu_labels[5] == "n1g1"
    spine = m.num_npus + [s.label for s in m.switches].index("spine")
    assert all(m.links_between(v, spine) for v in range(12))
    hops = m.hop_counts()
    assert hops[0, 3] == 2 and hops[0, 4] == 2


def test_multinode_shared_nics_are_switches():
    m = g.multinode(2, 8, nvlink_bandwidth=300e9, nvlink_latency=0.5e-6, nic_bandwidth=25e9,
                    nic_latency=2e-6, gpus_per_nic=4, pcie_bandwidth=32e9)
    labels = [s.label for s in m.switches]
    assert sorted(labels) == sorted(["spine", "n0.nvswitch", "n1.nvswitch",
                                     "n0.nic0", "n0.nic1", "n1.nic0", "n1.nic1"])
    nic = m.num_npus + labels.index("n0.nic1")
    assert {u for u, v in pairs(m) if v == nic} == {4, 5, 6, 7, m.num_npus + labels.index("spine")}
    assert m.link_bandwidth[m.links_between(4, nic)[0]] == 32e9
    hops = m.hop_counts()
    assert hops[0, 8] == 4  # GPU -> NIC -> spine -> NIC -> GPU (NVSwitch does not leave the node)


def test_multinode_degenerate_shapes():
    one_server = g.multinode(1, 4, nvlink_bandwidth=1e9, nvlink_latency=0, nic_bandwidth=1e9, nic_latency=0)
    assert [s.label for s in one_server.switches] == ["n0.nvswitch"]
    single_gpus = g.multinode(3, 1, nvlink_bandwidth=1e9, nvlink_latency=0, nic_bandwidth=1e9, nic_latency=0)
    assert [s.label for s in single_gpus.switches] == ["spine"]
    with pytest.raises(InputError, match="gpus_per_nic"):
        g.multinode(2, 6, nvlink_bandwidth=1e9, nvlink_latency=0, nic_bandwidth=1e9, nic_latency=0,
                    gpus_per_nic=4)


def test_astra_ring_switch_numbering_dimension0_fastest():
    m = g.astra([g.AstraDim("Ring", 4, 200 * 2**30, 500e-9), g.AstraDim("Switch", 8, 50 * 2**30, 500e-9)])
    assert (m.num_npus, len(m.switches), m.num_links) == (32, 4, 2 * 32 + 2 * 32)
    p = pairs(m)
    for v in range(32):
        ring_base = v - v % 4
        assert {w for (u, w) in p if u == v and w < 32} == {ring_base + (v + 1) % 4, ring_base + (v - 1) % 4}
    for k, s in enumerate(m.switches):
        node = 32 + k
        assert s.label == f"d1.sw{k}"
        assert {u for (u, w) in p if w == node} == {k + 4 * i for i in range(8)}
        assert set(m.link_bandwidth[m.in_links[node]]) == {50 * 2**30}
    assert npu_diameter(m) == 4  # 2 around the ring + 2 through a switch


def test_astra_matches_independent_generators():
    ring_ring = g.astra([g.AstraDim("Ring", 4, BW, LAT), g.AstraDim("ring", 5, BW, LAT)])
    assert pairs(ring_ring) == pairs(g.torus([4, 5], BW, LAT))
    fc = g.astra([g.AstraDim("FullyConnected", 5, BW, LAT)])
    assert pairs(fc) == pairs(g.fully_connected(5, BW, LAT))
    two = g.astra([g.AstraDim("Ring", 2, BW, LAT), g.AstraDim("Ring", 3, BW, LAT)])
    assert pairs(two) == pairs(g.torus([2, 3], BW, LAT))
    switch_first = g.astra([g.AstraDim("Switch", 4, BW, LAT, multicast=True), g.AstraDim("Ring", 3, BW, LAT)])
    assert len(switch_first.switches) == 3 and all(s.multicast for s in switch_first.switches)
    assert {u for (u, w) in pairs(switch_first) if w == 12} == {0, 1, 2, 3}


def test_astra_rejects_bad_dimensions():
    with pytest.raises(InputError) as err:
        g.astra([g.AstraDim("Torus", 4, BW, LAT)])
    assert err.value.field == "dims[0].topology"
    with pytest.raises(InputError) as err:
        g.astra([g.AstraDim("Ring", 4, BW, LAT, reduce=True)])
    assert err.value.field == "dims[0]"


def test_from_networkx():
    cycle = g.from_networkx(nx.cycle_graph(5), bandwidth=BW, latency=LAT, name="c5")
    assert pairs(cycle) == pairs(g.ring(5, BW, LAT)) and cycle.name == "c5"
    directed = g.from_networkx(nx.DiGraph([(0, 1), (1, 2), (2, 0)]), bandwidth=BW, latency=LAT)
    assert set(pairs(directed)) == {(0, 1), (1, 2), (2, 0)}
    multi = nx.MultiGraph()
    multi.add_edge("a", "b", bandwidth=1e9, latency=0.0)
    multi.add_edge("a", "b", bandwidth=2e9, latency=1e-6)
    multi.add_node("hub", switch=True, multicast=True)
    multi.add_edge("a", "hub")
    multi.add_edge("b", "hub")
    m = g.from_networkx(multi, bandwidth=3e9, latency=0.0)
    assert m.npu_labels == ("a", "b") and m.switches[0].label == "hub" and m.switches[0].multicast
    assert sorted(m.link_bandwidth[list(m.links_between(0, 1))]) == [1e9, 2e9]
    assert m.link_bandwidth[m.links_between(0, 2)[0]] == 3e9


def test_from_networkx_sorts_nodes_and_keeps_positions():
    graph = nx.Graph()
    graph.add_edges_from([(3, 1), (0, 2), (1, 0), (2, 3)], bandwidth=BW, latency=LAT)
    for v in graph:
        graph.nodes[v]["pos"] = (v, -v)
    m = g.from_networkx(graph)
    assert m.npu_labels == ("0", "1", "2", "3") and m.links_between(3, 1)
    assert m.positions == ((0.0, 0.0), (1.0, -1.0), (2.0, -2.0), (3.0, -3.0))


def test_from_networkx_needs_link_figures():
    with pytest.raises(InputError, match="no bandwidth"):
        g.from_networkx(nx.path_graph(3), latency=LAT)


def test_failures_via_without():
    m = g.torus([4, 4], BW, LAT)
    failed = m.without(links=list(m.links_between(0, 1)) + list(m.links_between(1, 0)), npus=[5])
    assert failed.num_npus == 15 and failed.npu_labels[5] == "npu6"
    assert failed.num_links == 64 - 2 - 8


@pytest.mark.parametrize("call, field", [
    (lambda: g.ring(1, BW, LAT), "n"),
    (lambda: g.ring(4, -1.0, LAT), "bandwidth"),
    (lambda: g.line(4, BW, float("nan")), "latency"),
    (lambda: g.torus([0, 4], BW, LAT), "dims[0]"),
    (lambda: g.mesh([1, 1], BW, LAT), "dims"),
    (lambda: g.mesh([4, 4], [BW], LAT), "bandwidth"),
    (lambda: g.mesh([4, 4], BW, [LAT, -LAT]), "latency[1]"),
    (lambda: g.hypercube(0, BW, LAT), "dim"),
    (lambda: g.switch(4, BW, LAT, links_per_npu=0), "links_per_npu"),
    (lambda: g.GENERATORS["torus2d"].build(dims=[4, 4, 4], bandwidth=BW, latency=LAT), "dims"),
])
def test_bad_arguments_name_the_parameter(call, field):
    with pytest.raises(InputError) as err:
        call()
    assert err.value.field == field


def test_registry_matches_signatures():
    for kind, spec in g.GENERATORS.items():
        assert spec.kind == kind
        params = inspect.signature(spec.build).parameters
        for p in spec.params:
            assert p.type in g.PARAM_TYPES
            assert p.name in params, (kind, p.name)
            if not p.required and params[p.name].default is not inspect.Parameter.empty:
                assert params[p.name].default == p.default, (kind, p.name)
        required = {n for n, q in params.items() if q.default is inspect.Parameter.empty
                    and q.kind is not inspect.Parameter.VAR_KEYWORD}
        assert required == {p.name for p in spec.params if p.required}, kind


def test_generate_by_kind():
    by_kind = g.generate("torus2d", dims=[3, 3], bandwidth=BW, latency=LAT)
    assert pairs(by_kind) == pairs(g.torus([3, 3], BW, LAT))
    with pytest.raises(InputError, match="unknown generator kind"):
        g.generate("tours", dims=[3, 3])


def test_every_generator_has_a_full_layout():
    machines = [g.ring(5, BW, LAT), g.line(3, BW, LAT), g.fully_connected(4, BW, LAT), g.switch(3, BW, LAT),
                g.torus([3, 3, 3], BW, LAT), g.hypercube(3, BW, LAT), g.dgx1(), g.dgx2(),
                g.multinode(2, 4, nvlink_bandwidth=BW, nvlink_latency=LAT, nic_bandwidth=BW,
                            nic_latency=LAT, gpus_per_nic=2),
                g.astra([g.AstraDim("Ring", 4, BW, LAT), g.AstraDim("Switch", 8, BW, LAT)])]
    for m in machines:
        assert m.positions is not None and len(m.positions) == m.num_nodes, m.name
        assert len(set(m.positions)) == m.num_nodes, f"{m.name}: two nodes share a position"


def test_link_order_follows_tacos():
    """Row by row along x (wraparound last), then column by column along y; each cable u->v, v->u."""
    m = g.torus([3, 3], BW, LAT)
    cables = list(zip(m.link_src.tolist()[::2], m.link_dst.tolist()[::2]))
    assert cables == [(0, 1), (1, 2), (2, 0), (3, 4), (4, 5), (5, 3), (6, 7), (7, 8), (8, 6),
                      (0, 3), (3, 6), (6, 0), (1, 4), (4, 7), (7, 1), (2, 5), (5, 8), (8, 2)]
    assert m.link_src.tolist()[1::2] == m.link_dst.tolist()[::2]


def test_networkx_view_round_trips_through_from_networkx():
    machine = g.dgx1()
    graph = machine.to_networkx()
    assert graph.number_of_nodes() == 8 and graph.number_of_edges() == machine.num_links == 48
    assert sorted(data["id"] for *_, data in graph.edges(data=True)) == list(range(48))
    back = g.from_networkx(graph, name="dgx1-again", bandwidth=1.0, latency=0.0)
    assert back.num_links == machine.num_links
    assert sorted(back.link_bandwidth.tolist()) == sorted(machine.link_bandwidth.tolist())
