"""The numeric building blocks: integer scaling, max-flow, k-th arrival, and the benchmark."""
from __future__ import annotations

import heapq
from fractions import Fraction

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bounds_reference import random_machine
from optcoll.bench.bounds import bench_cut
from optcoll.bounds.flow import INT32_MAX, FlowNetwork, bandwidth_flows, scale_bandwidths
from optcoll.bounds.nodes import kth_arrival


def test_scaling_is_exact_for_common_units():
    bw = np.array([50 * 2.0**30, 100 * 2.0**30, 25 * 2.0**30, 50 * 2.0**30])
    scaled = scale_bandwidths(bw)
    assert scaled.exact and scaled.ints.tolist() == [2, 4, 1, 2] and scaled.tolerance == 0
    assert [scaled.to_bandwidth(int(i)) for i in scaled.ints] == bw.tolist()
    mixed = scale_bandwidths(np.array([25e9, 50 * 2.0**30]))  # decimal and binary units
    assert mixed.exact and all(Fraction(float(b)) == int(i) * mixed.unit
                               for b, i in zip([25e9, 50 * 2.0**30], mixed.ints))


def test_scaling_rounds_up_when_tight():
    bw = np.array([1e9 / 3, np.pi * 1e9, 7e9, 7e9])
    scaled = scale_bandwidths(bw, budget=1000)
    assert not scaled.exact and int(scaled.ints.sum()) <= 1000
    real = np.array([float(int(i) * scaled.unit) for i in scaled.ints])
    assert np.all(real >= bw) and np.all(real <= bw * (1 + scaled.tolerance) * (1 + 1e-15))
    with pytest.raises(OverflowError):
        scale_bandwidths(bw, budget=4)


def test_flow_network_guards_int32():
    with pytest.raises(OverflowError):
        FlowNetwork(2, np.array([0]), np.array([1]), np.array([INT32_MAX + 1]))
    net = FlowNetwork(3, np.array([0, 0, 1]), np.array([1, 1, 2]), np.array([INT32_MAX // 2] * 3))
    assert net.max_flow(0, 2) == INT32_MAX // 2  # parallel edges summed, then the bottleneck


@settings(max_examples=40, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**32 - 1), npus=st.integers(2, 7), switches=st.integers(0, 2))
def test_bandwidth_flows_match_networkx(seed, npus, switches):
    rng = np.random.default_rng(seed)
    machine = random_machine(rng, npus, switches, extra=int(rng.integers(0, 8)),
                             bidirectional=bool(rng.integers(2)))
    graph = nx.DiGraph()
    for u, v, bw in zip(machine.link_src.tolist(), machine.link_dst.tolist(), machine.link_bandwidth.tolist()):
        graph.add_edge(u, v, capacity=graph.get_edge_data(u, v, {"capacity": 0})["capacity"] + Fraction(bw))
    for reverse in (False, True):
        flows = bandwidth_flows(machine, 0, np.arange(1, machine.num_nodes), reverse=reverse)
        assert flows.exact
        for t, value, side in zip(range(1, machine.num_nodes), flows.values, flows.sides):
            s, d = (t, 0) if reverse else (0, t)
            assert value == float(nx.maximum_flow_value(graph, s, d))
            assert side[0] and not side[t]  # a cut separating them, on the graph solved


@settings(max_examples=60, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**32 - 1), nodes=st.integers(2, 12), edges=st.integers(1, 40))
def test_interpreted_and_compiled_dinic_agree_on_value_and_cut(seed, nodes, edges):
    """The interpreted Dinic (small networks) and scipy's (``PYTHON_SCANS`` on) give the same
    value and the same source side (the minimal minimum cut is unique), parallel edges, zero
    capacities and two-way edges included."""
    import optcoll.bounds.flow as flow

    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, nodes, edges), rng.integers(0, nodes, edges)
    keep = src != dst
    src, dst, cap = src[keep], dst[keep], rng.integers(0, 20, int(keep.sum()))
    found = {}
    for scans in (flow.PYTHON_SCANS, 0):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(flow, "PYTHON_SCANS", scans)
            net = FlowNetwork(nodes, src, dst, cap)
            found[scans] = [(r.flow_value, r.side.tolist()) for r in (net.solve(0, t) for t in range(1, nodes))]
    assert found[0] == found[flow.PYTHON_SCANS]


def merged_kth(k, first, period, count):
    """k-th smallest of the merged progressions, by popping a heap: the obvious method."""
    heap = [(f, f, p) for f, p, c in zip(first, period, count) for _ in range(c)]
    heapq.heapify(heap)
    for _ in range(k - 1):
        t, f, p = heapq.heappop(heap)
        heapq.heappush(heap, (t + p, f, p))
    return heap[0][0]


@settings(max_examples=200, deadline=None, derandomize=True)
@given(k=st.integers(1, 60),
       links=st.lists(st.tuples(st.integers(1, 9), st.integers(1, 9), st.integers(1, 3)), min_size=1, max_size=4,
                      unique_by=lambda x: (x[0], x[1])))
def test_kth_arrival_matches_heap_merge(k, links):
    first = np.array([f * 0.37 for f, _, _ in links])
    period = np.array([p * 0.21 for _, p, _ in links])
    count = np.array([c for _, _, c in links])
    assert kth_arrival(k, first, period, count) == pytest.approx(merged_kth(k, first, period, count), rel=1e-12)


def test_bench_cut_small():
    figures = bench_cut(4)
    assert figures["npus"] == 16 and figures["exact"] and figures["iterations"] >= 1
    assert figures["max_flows"] >= 16  # one clean pass over every sink proves optimality
    assert figures["allgather_1GiB_bound_s"] == pytest.approx(15 / 16 * 2.0**30 / (4 * 50 * 2.0**30))


@pytest.mark.slow
def test_bench_cut_torus_1024():
    """The acceptance figure (run with -m slow): the exact cut of a 32×32 torus, all but one NPU."""
    figures = bench_cut(32)
    assert figures["exact"] and figures["nodes_inside"] == 1023
    assert figures["allgather_1GiB_bound_s"] == pytest.approx(1023 / 1024 * 2.0**30 / (4 * 50 * 2.0**30))
