"""Closed-form values of the bounds on topologies whose answers are textbook material."""
from __future__ import annotations

import math

import pytest

from optcoll.bounds import best_lower_bound, lower_bounds
from optcoll.collectives.builtins import make_collective
from optcoll.instances.instance import TimeModel
from optcoll.machines import generators as gen

GIB = 2.0**30
B, ALPHA, M = 25e9, 1e-6, 64 * 2.0**20
ROOTED = ("broadcast", "reduce", "gather", "scatter")


def bounds_of(machine, kind, c=1, model=TimeModel(), ranks=None, size=M):
    ranks = list(machine.npus) if ranks is None else ranks
    coll = make_collective(kind, ranks, size, c, root=ranks[0] if kind in ROOTED else None)
    return {b.name: b for b in lower_bounds(machine, coll, model)}, coll


@pytest.mark.parametrize("n", [2, 3, 5, 8])
@pytest.mark.parametrize("c", [1, 3])
def test_bidirectional_ring(n, c):
    ring = gen.ring(n, B, ALPHA)
    found, coll = bounds_of(ring, "allgather", c)
    tau = ALPHA + coll.chunk_bytes / B
    links_in = 1 if n == 2 else 2  # a 2-ring is one cable
    assert found["latency"].value == pytest.approx((n // 2) * tau)
    assert found["ingress"].value == pytest.approx(math.ceil((n - 1) * c / links_in) * tau)
    # ForestColl: (N-1)/N · M / B_in(v), the best S being all nodes but one.
    assert found["cut"].value == pytest.approx((n - 1) / n * M / (links_in * B))
    assert found["cut"].exact
    rs, _ = bounds_of(ring, "reducescatter", c)
    assert rs["cut"].value == pytest.approx(found["cut"].value)
    ar, _ = bounds_of(ring, "allreduce", c)
    assert ar["cut"].value == pytest.approx(M / (links_in * B))  # every chunk leaves one NPU
    assert ar["allreduce"].value == pytest.approx(max(found["ingress"].value, rs["egress"].value))


@pytest.mark.parametrize("n", [3, 6])
def test_unidirectional_ring(n):
    ring = gen.ring(n, B, ALPHA, bidirectional=False)
    found, coll = bounds_of(ring, "allgather", 2)
    tau = ALPHA + coll.chunk_bytes / B
    assert found["latency"].value == pytest.approx((n - 1) * tau)
    assert found["ingress"].value == pytest.approx((n - 1) * 2 * tau)
    assert found["cut"].value == pytest.approx((n - 1) / n * M / B)
    bc, coll = bounds_of(ring, "broadcast", 1)
    assert bc["latency"].value == pytest.approx((n - 1) * (ALPHA + M / B))
    assert bc["cut"].value == pytest.approx(M / B) == bc["broadcast-maxflow"].value


@pytest.mark.parametrize("n", [3, 4, 7])
def test_fully_connected(n):
    fc = gen.fully_connected(n, B, ALPHA)
    found, coll = bounds_of(fc, "allgather", 2)
    tau = ALPHA + coll.chunk_bytes / B
    assert found["latency"].value == pytest.approx(tau)
    assert found["ingress"].value == pytest.approx(2 * tau)  # (N-1)·C chunks over N-1 links
    assert found["cut"].value == pytest.approx(M / (n * B))
    assert "one-port" not in found  # multi-port model by default


@pytest.mark.parametrize("kind, factor", [("allgather", "ag"), ("reducescatter", "ag"), ("gather", "ag"),
                                          ("scatter", "ag"), ("broadcast", "bc"), ("reduce", "bc"),
                                          ("allreduce", "ar")])
@pytest.mark.parametrize("n", [2, 5, 8])
def test_one_port_textbook(kind, factor, n):
    """Chan et al. 2007: ⌈log2 N⌉α + (N−1)/N·M/B (AG, RS, Gather, Scatter), + M/B (Broadcast,
    Reduce), + 2(N−1)/N·M/B (AllReduce), on a fully connected uniform one-port network."""
    fc = gen.fully_connected(n, B, ALPHA)
    one_port = TimeModel(send_ports=1, recv_ports=1)
    found, _ = bounds_of(fc, kind, 1, one_port)
    bandwidth = {"ag": (n - 1) / n, "bc": 1.0, "ar": 2 * (n - 1) / n}[factor] * M / B
    assert found["one-port"].value == pytest.approx(math.ceil(math.log2(n)) * ALPHA + bandwidth)
    serial, _ = bounds_of(fc, kind, 1, TimeModel(occupancy="serialization", send_ports=1, recv_ports=1))
    assert "one-port" not in serial  # its proof needs ports held for α + b/B


def test_one_port_needs_full_uniform_mesh():
    one_port = TimeModel(send_ports=1, recv_ports=1)
    assert "one-port" not in bounds_of(gen.ring(4, B, ALPHA), "allgather", 1, one_port)[0]
    assert "one-port" not in bounds_of(gen.fully_connected(4, B, ALPHA), "allgather", 1, one_port,
                                       ranks=[0, 1, 2])[0]
    assert "one-port" not in bounds_of(gen.fully_connected(4, B, ALPHA), "alltoall", 1, one_port)[0]


@pytest.mark.parametrize("dim", [1, 2, 3, 4])
def test_hypercube(dim):
    cube = gen.hypercube(dim, B, ALPHA)
    n = 2**dim
    found, coll = bounds_of(cube, "allgather", 1)
    tau = ALPHA + coll.chunk_bytes / B
    assert found["latency"].value == pytest.approx(dim * tau)
    assert found["cut"].value == pytest.approx((n - 1) / n * M / (dim * B))


def test_switch_star():
    n = 6
    star = gen.switch(n, B, ALPHA)
    found, coll = bounds_of(star, "allgather", 1)
    tau = ALPHA + coll.chunk_bytes / B
    assert found["latency"].value == pytest.approx(2 * tau)  # switch hops count
    assert found["cut"].value == pytest.approx((n - 1) / n * M / B)
    assert star.num_npus + 1 == star.num_nodes
    ar, _ = bounds_of(star, "allreduce", 1)
    assert ar["cut"].value == pytest.approx(M / B)


def test_dgx1_allgather_seven_sixths():
    """SCCL's rounds bound for DGX-1 AllGather is R/C >= 7/6: every GPU receives 7 GPUs' data
    over 6 NVLinks. As a time: (M/8)·7/(6B)."""
    dgx = gen.dgx1()
    bw = float(dgx.link_bandwidth[0])
    for c in (1, 2, 6):
        found, _ = bounds_of(dgx, "allgather", c, size=GIB)
        assert found["cut"].value == pytest.approx(GIB / 8 * 7 / (6 * bw))
        assert found["cut"].exact
        assert found["latency"].value == pytest.approx(2 * (dgx.link_latency[0] + GIB / (8 * c) / bw))
    # The Scatter root must push 7/8 of the buffer through its 6 NVLinks: 7/6, not SCCL's 7/24.
    scatter, _ = bounds_of(dgx, "scatter", 1, size=GIB)
    assert scatter["cut"].value == pytest.approx(GIB / 8 * 7 / (6 * bw))


@pytest.mark.parametrize("k", [4, 6])
def test_torus(k):
    torus = gen.torus([k, k], B, ALPHA)
    n = k * k
    found, coll = bounds_of(torus, "allgather", 1)
    tau = ALPHA + coll.chunk_bytes / B
    assert found["latency"].value == pytest.approx(2 * (k // 2) * tau)
    assert found["cut"].value == pytest.approx((n - 1) / n * M / (4 * B))
    a2a, coll = bounds_of(torus, "alltoall", 1)
    # Half the torus sends (N/2)² pair messages over the 2k links leaving it.
    half = (n / 2) ** 2 * coll.chunk_bytes / (2 * k * B)
    assert a2a["alltoall-cut"].value >= half * (1 - 1e-12)
    assert not a2a["alltoall-cut"].exact
    hops = sum(min(dx, k - dx) + min(dy, k - dy) for dx in range(k) for dy in range(k))
    assert a2a["alltoall-capacity"].value == pytest.approx(
        max(n * hops * coll.chunk_bytes / (4 * n * B), n * hops * tau / (4 * n)))


def test_best_is_the_largest():
    found = lower_bounds(gen.dgx1(), make_collective("allreduce", range(8), GIB, 2))
    best = best_lower_bound(gen.dgx1(), make_collective("allreduce", range(8), GIB, 2))
    assert best.value == max(b.value for b in found)
    assert [b.name for b in found][:3] == ["latency", "ingress", "egress"]
