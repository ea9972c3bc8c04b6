"""The exact cut bound against brute force over every node set, and its cross-checks."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bounds_reference import random_machine
from optcoll.bounds import evaluate_cut, lower_bounds, max_ratio_cut, worst_cut
from optcoll.bounds.cutbounds import cut_bound
from optcoll.collectives.builtins import make_collective, make_custom
from optcoll.errors import InputError
from optcoll.machines import generators as gen
from optcoll.machines.machine import MachineBuilder

KINDS = ("allgather", "reducescatter", "allreduce", "broadcast", "reduce", "gather", "scatter", "alltoall")
ROOTED = ("broadcast", "reduce", "gather", "scatter")


def brute_force(machine, collective) -> float:
    """b · max over all 2^n node sets of (chunks that must leave S) / B⁺(S)."""
    n, best = machine.num_nodes, 0.0
    for bits in itertools.product((False, True), repeat=n):
        chunks, bandwidth = evaluate_cut(machine, collective, np.array(bits))
        if chunks:
            best = max(best, np.inf if bandwidth == 0 else chunks * collective.chunk_bytes / bandwidth)
    return best


@st.composite
def instances(draw, kinds=KINDS):
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    npus = draw(st.integers(2, 6))
    switches = draw(st.integers(0, 2))  # at most 8 nodes: 256 sets to brute-force
    machine = random_machine(rng, npus, switches, extra=draw(st.integers(0, 6)),
                             bidirectional=draw(st.booleans()))
    kind = draw(st.sampled_from(kinds))
    size = draw(st.integers(2, npus))
    ranks = sorted(rng.choice(npus, size=size, replace=False).tolist())
    root = ranks[draw(st.integers(0, size - 1))] if kind in ROOTED else None
    return machine, make_collective(kind, ranks, 3 * 2.0**20, draw(st.integers(1, 2)), root=root)


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(instances(tuple(k for k in KINDS if k != "alltoall")))
def test_exact_cut_equals_brute_force(instance):
    machine, collective = instance
    bound = cut_bound(machine, collective)
    assert bound.exact
    assert bound.value == pytest.approx(brute_force(machine, collective), rel=1e-12)


@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(instances(("alltoall",)))
def test_heuristic_cut_is_a_real_cut(instance):
    """AlltoAll has no exact algorithm here: its cut is some S, never above the true maximum,
    and at least as good as every single-node cut."""
    machine, collective = instance
    bound = cut_bound(machine, collective)
    assert not bound.exact and bound.name == "alltoall-cut"
    assert bound.value <= brute_force(machine, collective) * (1 + 1e-12)
    n = machine.num_nodes
    for v in range(n):
        for inside in (np.arange(n) == v, np.arange(n) != v):
            chunks, bandwidth = evaluate_cut(machine, collective, inside)
            if chunks:
                assert bound.value >= chunks * collective.chunk_bytes / bandwidth * (1 - 1e-12)


@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(instances(("broadcast", "reduce")))
def test_broadcast_cut_equals_maxflow(instance):
    """Two independent computations of one number: Dinkelbach over cuts, Edmonds' max-flows."""
    machine, collective = instance
    found = {b.name: b for b in lower_bounds(machine, collective)}
    assert found["cut"].value == pytest.approx(found["broadcast-maxflow"].value, rel=1e-12)


def test_dinkelbach_needs_several_steps():
    """Two dense islands joined by one thin cable: the start (all but one NPU) is not the best
    cut, the island is; the search must move there."""
    b = MachineBuilder("islands", 8)
    for island in ((0, 1, 2, 3), (4, 5, 6, 7)):
        for u, v in itertools.combinations(island, 2):
            b.add_link(u, v, bandwidth=100e9, latency=1e-6, bidirectional=True)
    b.add_link(3, 4, bandwidth=1e9, latency=1e-6, bidirectional=True)
    machine = b.build()
    cut = worst_cut(machine, range(8))
    assert sorted(cut.inside) in ([0, 1, 2, 3], [4, 5, 6, 7])
    assert cut.bandwidth_out == 1e9 and cut.ratio == pytest.approx(4 / 1e9)
    assert cut.iterations >= 2 and cut.exact


def test_worst_cut_reverse_and_subsets():
    """Reverse = the cut on the reversed graph; a sub-communicator may route through others."""
    b = MachineBuilder("skew", 3)
    b.add_link(0, 1, bandwidth=1e9, latency=0.0)
    b.add_link(1, 2, bandwidth=1e9, latency=0.0)
    b.add_link(2, 0, bandwidth=3e9, latency=0.0)
    b.add_link(1, 0, bandwidth=3e9, latency=0.0)
    machine = b.build()
    forward, backward = worst_cut(machine, [0, 1, 2]), worst_cut(machine, [0, 1, 2], reverse=True)
    again = worst_cut(machine.reversed(), [0, 1, 2])
    assert backward.ratio == again.ratio and backward.inside == again.inside
    assert forward.ratio == pytest.approx(2 / 1e9)  # S = {0, 1} or {0, 2}: 2 ranks over 1 GB/s
    sub = worst_cut(gen.ring(6, 1e9, 0.0), [0, 3])
    assert sub.ratio == pytest.approx(1 / 2e9)


def test_worst_cut_rejects_bad_ranks():
    ring = gen.ring(4, 1e9, 0.0)
    for ranks in ([0], [0, 0], [0, 7]):
        with pytest.raises(InputError):
            worst_cut(ring, ranks)


def test_rounded_bandwidths_stay_valid_and_close():
    """Bandwidths with no small common unit force the rounded-up max-flow: the reported S is a
    real cut (valid), within the stated factor of the true maximum."""
    b = MachineBuilder("odd", 6)
    rng = np.random.default_rng(7)
    for i in range(6):
        b.add_link(i, (i + 1) % 6, bandwidth=float(rng.uniform(1e9, 9e9)), latency=0.0, bidirectional=True)
    b.add_link(0, 3, bandwidth=np.pi * 1e9, latency=0.0)
    machine = b.build()
    weights = np.full(6, 10**5, dtype=np.int64)
    weights[0] = 10**5 + 1  # gcd 1: the weights alone leave little room in int32
    cut = max_ratio_cut(machine, weights, np.arange(6))
    assert not cut.exact and cut.tolerance > 0
    best = 0.0
    for bits in itertools.product((False, True), repeat=6):
        inside = np.array(bits)
        if inside.all():
            continue
        best = max(best, weights[inside].sum() / machine.link_bandwidth[inside[machine.link_src]
                                                                        & ~inside[machine.link_dst]].sum()
                   if inside.any() else 0.0)
    assert cut.ratio <= best * (1 + 1e-12)
    assert best <= cut.ratio * (1 + cut.tolerance) * (1 + 1e-12)


def test_custom_collective_cut():
    """AllToNext (chunk i from rank i to rank i+1) on a line: the heuristic family is a valid cut."""
    line = gen.line(5, 1e9, 0.0)
    coll = make_custom(range(5), [[i] for i in range(4)], [[i + 1] for i in range(4)], 2.0**20)
    bound = cut_bound(line, coll)
    assert bound.name == "cut" and not bound.exact
    assert bound.value == pytest.approx(2.0**20 / 1e9) == pytest.approx(brute_force(line, coll))
