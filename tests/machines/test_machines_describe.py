"""describe_machine: figures checked by hand and, for the worst cut, by brute force over subsets."""
from __future__ import annotations

import json

import networkx as nx
import numpy as np
import pytest

from optcoll.bounds.cuts import worst_cut
from optcoll.machines import generators as g
from optcoll.machines.catalog import load_machine
from optcoll.machines.describe import describe_machine, npu_diameter, render_description, strongly_connected_among
from optcoll.machines.machine import Machine, MachineBuilder
from optcoll.units import bandwidth_text

GiB = 2**30


def brute_force_worst_cut(machine: Machine) -> float:
    """max over node sets S holding some but not all NPUs of |S ∩ NPUs| / B⁺(S), by enumeration."""
    n, nodes = machine.num_npus, machine.num_nodes
    inside = (np.arange(2**nodes)[:, None] >> np.arange(nodes) & 1).astype(bool)
    k = inside[:, :n].sum(axis=1)
    inside = inside[(k > 0) & (k < n)]
    leaving = inside[:, machine.link_src] & ~inside[:, machine.link_dst]
    return float((inside[:, :n].sum(axis=1) / (leaving @ machine.link_bandwidth)).max())


def test_dgx1_figures():
    info = describe_machine(load_machine("dgx1"), cut_finder=worst_cut)
    assert (info["npus"], info["switches"], info["links"]) == (8, [], 48)
    assert (info["bidirectional_pairs"], info["parallel_pairs"], info["max_parallel_links"]) == (16, 16, 2)
    assert info["npu_in_degree"] == [6, 6] == info["npu_out_degree"]
    assert info["link_bandwidth"] == [25e9, 25e9] and info["link_latency"] == [0.5e-6, 0.5e-6]
    assert info["npu_diameter_hops"] == 2 and info["strongly_connected"]
    assert info["min_npu_ingress_bandwidth"] == 150e9 == info["min_npu_egress_bandwidth"]
    cut = info["worst_cut"]
    assert cut["ratio"] == pytest.approx(7 / 150e9, rel=1e-12)  # every NPU but one: 7 NPUs / 6 NVLinks
    assert cut["npus_inside"] == 7 and cut["bandwidth_out"] == 150e9
    assert cut["allgather_bandwidth_bound"] == pytest.approx(8 * 150e9 / 7, rel=1e-12)
    json.dumps(info, allow_nan=False)


def test_switches_and_ranges():
    info = describe_machine(load_machine("cluster2x8"), cut_finder=worst_cut)
    assert [s["name"] for s in info["switches"]] == ["spine", "n0.nvswitch", "n1.nvswitch"]
    assert info["link_bandwidth"] == [25e9, 300e9] and info["link_latency"] == [0.5e-6, 2e-6]
    assert info["min_npu_ingress_bandwidth"] == 325e9
    # Leaving one GPU out (15 / 325 GB/s) is worse than leaving a server out (8 / 200 GB/s).
    assert info["worst_cut"]["ratio"] == pytest.approx(15 / 325e9, rel=1e-12)
    assert info["worst_cut"]["ratio"] == pytest.approx(brute_force_worst_cut(load_machine("cluster2x8")),
                                                       rel=1e-9)
    json.dumps(info, allow_nan=False)


@pytest.mark.parametrize("machine", [
    g.ring(4, 50 * GiB, 1e-6), g.ring(5, 50 * GiB, 1e-6, bidirectional=False), g.line(5, 10e9, 0.0),
    g.switch(5, 20e9, 1e-6), g.fully_connected(4, 1e9, 0.0), g.dgx1(),
    g.mesh([3, 3], [50 * GiB, 75 * GiB], 1e-6), g.torus([3, 3], 50 * GiB, 0.0),
    g.multinode(2, 2, nvlink_bandwidth=300e9, nvlink_latency=0, nic_bandwidth=25e9, nic_latency=0),
    g.multinode(2, 4, nvlink_bandwidth=300e9, nvlink_latency=0, nic_bandwidth=25e9, nic_latency=0,
                gpus_per_nic=2),
    g.astra([g.AstraDim("Ring", 3, 200 * GiB, 0), g.AstraDim("Switch", 3, 50 * GiB, 0)]),
], ids=lambda m: m.name)
def test_worst_cut_matches_brute_force(machine):
    cut = describe_machine(machine, cut_finder=worst_cut)["worst_cut"]
    assert cut["ratio"] == pytest.approx(brute_force_worst_cut(machine), rel=1e-9)
    assert cut["npus_inside"] / cut["bandwidth_out"] == pytest.approx(cut["ratio"], rel=1e-9)


def test_one_way_links_and_disconnection():
    b = MachineBuilder("oneway", 3)
    b.add_link(0, 1, bandwidth=1e9, latency=0.0)
    b.add_link(1, 2, bandwidth=1e9, latency=0.0)
    m = b.build()
    info = describe_machine(m, cut_finder=worst_cut)
    assert not info["strongly_connected"] and info["npu_diameter_hops"] is None
    assert info["worst_cut"] is None and info["bidirectional_pairs"] == 0
    assert info["min_npu_ingress_bandwidth"] == 0.0
    assert "NOT strongly connected" in render_description(info)
    json.dumps(info, allow_nan=False)
    uni = describe_machine(g.ring(6, 1e9, 0.0, bidirectional=False))
    assert uni["strongly_connected"] and uni["npu_diameter_hops"] == 5 and uni["bidirectional_pairs"] == 0


def test_strongly_connected_among_sub_communicators():
    line = g.line(5, 1e9, 0.0)
    cut = line.without(links=list(line.links_between(2, 3)))
    assert strongly_connected_among(cut, [0, 1, 2]) and strongly_connected_among(cut, [3, 4])
    assert not strongly_connected_among(cut, [0, 4]) and not strongly_connected_among(cut, range(5))
    assert strongly_connected_among(cut, [4])
    star = g.switch(4, 1e9, 0.0)  # NPUs relay through a switch, which is not a member
    assert strongly_connected_among(star, [0, 3])


def test_diameter_relays_through_non_members():
    assert npu_diameter(g.switch(6, 1e9, 0.0)) == 2
    assert npu_diameter(load_machine("astra_ring4_switch8")) == 4
    assert npu_diameter(g.torus([4, 4, 4], 1e9, 0.0), block=7) == 6  # blocks of sources agree


def test_text_rendering_mentions_the_figures():
    text = render_description(describe_machine(load_machine("star4_sharp"), cut_finder=worst_cut))
    assert text.splitlines()[0].startswith("star4_sharp: ")
    assert "4 NPUs, 1 switch (with in-network features: sw (multicast, reduce))" in text
    assert "link bandwidth 50 GiB/s, latency 500 ns" in text
    assert "diameter 2 hops" in text and "worst cut: 3 of 4 NPUs inside, 50 GiB/s leaving" in text


@pytest.mark.parametrize("bps, text", [(25e9, "25 GB/s"), (50 * GiB, "50 GiB/s"), (1.5 * GiB, "1.5 GiB/s"),
                                       (200e9 / 8 * 8, "200 GB/s"), (100e6, "100 MB/s"), (3e12, "3 TB/s"),
                                       (346666666666.67, "322.858 GiB/s")])
def test_bandwidth_text(bps, text):
    assert bandwidth_text(bps) == text


def _random_digraph(rng: np.random.Generator, n: int, links: int) -> Machine:
    builder = MachineBuilder(f"random{n}", n)
    for _ in range(links):
        u, v = rng.choice(n, size=2, replace=False).tolist()
        builder.add_link(u, v, bandwidth=1e9, latency=1e-6)
    return builder.build()


@pytest.mark.parametrize("bitset", [True, False])
def test_hop_counts_agree_with_networkx(monkeypatch, bitset):
    """Both of hop_counts' searches (the bit-parallel one for small networks, scipy's above)
    give networkx's shortest path lengths, with inf where no path exists, on random digraphs
    (one-way links, parallel links, unreachable pairs, more than 64 nodes for several words)."""
    import optcoll.machines.machine as machine_module

    monkeypatch.setattr(machine_module, "BITSET_BFS_NODES", 10**6 if bitset else 0)
    rng = np.random.default_rng(7)
    for n, links in [(2, 1), (5, 4), (9, 30), (70, 150), (130, 500)]:
        m = _random_digraph(rng, n, links)
        lengths = dict(nx.all_pairs_shortest_path_length(nx.DiGraph(list(zip(m.link_src.tolist(),
                                                                              m.link_dst.tolist())))))
        want = np.full((n, n), np.inf)
        np.fill_diagonal(want, 0)
        for s, row in lengths.items():
            for v, d in row.items():
                want[s, v] = d
        assert np.array_equal(m.hop_counts(), want)
