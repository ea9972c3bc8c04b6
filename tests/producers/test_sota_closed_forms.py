"""NCCL's algorithms, Swing, Trivance and Bine against the closed forms of their sources.

Each test derives the expected step count and per-link volume from the paper's (or NCCL's)
formula, independently of the producer's code, and compares them with what the shared verifier
accepted. On a fully connected machine a logical message is one link, so per-link volumes are
the algorithm's message sizes; times are in link times τ = α + b/B of one chunk.
"""
from __future__ import annotations

import math
from collections import Counter

import pytest

from optcoll.machines import generators as g
from optcoll.producers import spread
from optcoll.producers.baselines.bine import bine, bine_tree
from optcoll.producers.baselines.nccl.pat import pat
from optcoll.producers.baselines.nccl.tree import double_tree
from optcoll.producers.baselines.swing import rho, swing
from optcoll.producers.baselines.trivance import trivance
from optcoll.producers.registry import SYNTHESIZERS
from producer_cases import GIB, instance, link_time, sharp_cluster, verified


def run(name: str, machine, kind: str, chunks: int = 1, root: int | None = None):
    """(instance, schedule, verification) of a synthesizer on a fresh instance."""
    inst = instance(machine, kind, 1e6, chunks, root)
    schedule = SYNTHESIZERS[name](inst, 0)
    return inst, schedule, verified(inst, schedule)


def per_link(inst, schedule) -> Counter:
    """Transfers per directed (src, dst) pair."""
    m = inst.machine
    return Counter(zip(m.link_src[schedule.link].tolist(), m.link_dst[schedule.link].tolist()))


def stages(algorithm, inst) -> int:
    messages = algorithm(spread.of_collective(inst))
    return len(set(messages.stage))


# -- NCCL ring: nsteps = N-1 (AllGather, ReduceScatter), 2(N-1) (AllReduce), tuning.cc ----------------

@pytest.mark.parametrize("n", [5, 6, 8])
def test_nccl_ring_on_a_ring_runs_both_directions_as_two_channels(n):
    """Each channel is a directed ring carrying half the chunks; every chunk crosses N-1 links, so
    every directed link carries N-1 chunks of its channel: (N-1)/N·M/2 bytes."""
    machine = g.ring(n, GIB, 1e-6)
    inst, schedule, result = run("nccl-ring", machine, "allgather", 2)
    assert schedule.meta["channels"] == 2
    assert set(per_link(inst, schedule).values()) == {n - 1}
    assert result.time / link_time(inst) == pytest.approx(n - 1)
    inst, schedule, result = run("nccl-ring", machine, "allreduce", 2)
    assert set(per_link(inst, schedule).values()) == {2 * (n - 1)}
    assert result.time / link_time(inst) == pytest.approx(2 * (n - 1))


@pytest.mark.parametrize("nodes, gpus", [(2, 4), (3, 2), (2, 8)])
def test_nccl_ring_threads_one_channel_per_nic_rail(nodes, gpus):
    """One channel per NIC; each channel's ring crosses the network once per node, so with C
    equal to the NICs per node every NIC link carries N-1 chunks each way (AllGather)."""
    machine = g.multinode(nodes, gpus, nvlink_bandwidth=300e9, nvlink_latency=0.5e-6,
                          nic_bandwidth=25e9, nic_latency=2e-6)
    n = nodes * gpus
    inst, schedule, _ = run("nccl-ring", machine, "allgather", gpus)
    assert schedule.meta["channels"] == gpus and schedule.meta["nodes"] == nodes
    spine = next(v for v in range(machine.num_npus, machine.num_nodes) if machine.label(v) == "spine")
    counts = per_link(inst, schedule)
    assert [counts[(v, spine)] for v in range(n)] == [n - 1] * n
    assert [counts[(spine, v)] for v in range(n)] == [n - 1] * n


def test_nccl_ring_packs_six_link_disjoint_rings_into_dgx1():
    """DGX-1: 8 GPUs x 6 NVLinks = 48 directed links, exactly six directed rings of 8 hops."""
    inst, schedule, result = run("nccl-ring", g.dgx1(), "allgather", 6)
    assert schedule.meta["channels"] == 6
    per_link_id = Counter(schedule.link.tolist())
    assert inst.machine.num_links == 48
    assert len(per_link_id) == 48 and set(per_link_id.values()) == {7}  # 8 chunks per ring, 7 hops
    assert result.time / link_time(inst) == pytest.approx(7)


# -- PAT: block of rank o reaches o - s in popcount(s) hops; rank r sends N/2^(d+1) blocks to r - 2^d -------

@pytest.mark.parametrize("n", [4, 8, 16, 6])
def test_pat_sends_halving_volumes_to_power_of_two_peers(n):
    machine = g.fully_connected(n, GIB, 1e-6)
    inst, schedule, _ = run("nccl-pat", machine, "allgather", 2)
    counts = per_link(inst, schedule)
    expected = Counter()
    for r in range(n):
        for d in range(math.ceil(math.log2(n))):
            blocks = sum(1 for s in range(1, n) if s & -s == 1 << d)
            if blocks:
                expected[(r, (r - (1 << d)) % n)] += 2 * blocks
    assert counts == expected
    assert sum(counts.values()) == 2 * n * (n - 1)
    messages = pat(spread.of_collective(inst))
    assert messages.notes["hops"] == math.ceil(math.log2(n))


# -- NCCL trees (trees.cc) ------------------------------------------------------------------------------

def test_nccl_double_binary_tree_is_the_one_in_trees_cc():
    """The 14-rank example drawn in NCCL's trees.cc: tree 0 and its mirror."""
    tree0 = {r: p for r, (p, _) in enumerate(double_tree(14)[0])}
    assert tree0 == {0: -1, 8: 0, 4: 8, 12: 8, 2: 4, 6: 4, 10: 12, 13: 12, 1: 2, 3: 2, 5: 6,
                     7: 6, 9: 10, 11: 10}
    tree1 = {r: p for r, (p, _) in enumerate(double_tree(14)[1])}
    assert tree1 == {13 - r: (13 - p if p >= 0 else -1) for r, p in tree0.items()}
    shifted = {r: p for r, (p, _) in enumerate(double_tree(13)[1])}
    assert {r: shifted[r] for r in (1, 9, 5, 0, 11, 12)} == {1: -1, 9: 1, 5: 9, 0: 9, 11: 0, 12: 11}


@pytest.mark.parametrize("k", [2, 5, 8, 14, 33])
def test_nccl_tree_depth_is_logarithmic_and_inner_nodes_alternate(k):
    for parents in double_tree(k):
        depth = []
        for r in range(k):
            d, x = 0, r
            while parents[x][0] >= 0:
                x, d = parents[x][0], d + 1
            depth.append(d)
        assert max(depth) <= math.ceil(math.log2(k)) + 1
    inner = [{p for p, _ in tree if p >= 0} for tree in double_tree(k)]
    assert len(inner[0] & inner[1]) <= 1  # a node is inner in at most one tree (the roots aside)


@pytest.mark.parametrize("nodes, gpus", [(2, 4), (4, 2), (3, 4)])
def test_nccl_tree_allreduce_sends_each_chunk_once_up_and_once_down_every_edge(nodes, gpus):
    """N-1 reductions and N-1 copies per chunk, every one two hops (through the NVSwitch or the
    spine); 2(K-1) of them cross the network."""
    machine = g.multinode(nodes, gpus, nvlink_bandwidth=300e9, nvlink_latency=0.5e-6,
                          nic_bandwidth=25e9, nic_latency=2e-6)
    n = nodes * gpus
    inst, schedule, _ = run("nccl-tree", machine, "allreduce", 2)
    chunks = inst.collective.num_chunks
    assert len(schedule) == chunks * 2 * (n - 1) * 2
    spine = next(v for v in range(machine.num_npus, machine.num_nodes) if machine.label(v) == "spine")
    into_spine = sum(c for (u, v), c in per_link(inst, schedule).items() if v == spine)
    assert into_spine == chunks * 2 * (nodes - 1)


# -- NVLS: per GPU (N+1)/N·M up and M down, i.e. bus bandwidth B·N/(N+1) -----------------------------------

@pytest.mark.parametrize("n", [4, 8, 16])
@pytest.mark.parametrize("c", [1, 2])
def test_nvls_link_volumes(n, c):
    machine = g.switch(n, GIB, 1e-6, multicast=True, reduce=True)
    sw = n
    for kind, up, down, hops in (("allreduce", (n + 1) * c, n * c, 4),
                                 ("reducescatter", n * c, c, 2), ("allgather", c, (n - 1) * c, 2)):
        inst, schedule, result = run("nccl-nvls", machine, kind, c)
        counts = per_link(inst, schedule)
        assert [counts[(v, sw)] for v in range(n)] == [up] * n, kind
        assert [counts[(sw, v)] for v in range(n)] == [down] * n, kind
        assert result.time / link_time(inst) >= max(up, hops) - 1e-9


@pytest.mark.parametrize("nodes, gpus", [(2, 2), (2, 4), (4, 2)])
def test_nvls_tree_and_collnet_network_volumes(nodes, gpus):
    """NVLS-tree: one reduction up and one copy down per tree edge between nodes, 2(K-1) network
    messages per chunk, each into and out of the spine. CollNet: every node's head sends its partial to the reducing spine and
    gets the sum back, 2K network messages per chunk; with one head per NIC each NIC link carries
    K·C chunks each way."""
    machine = sharp_cluster(nodes, gpus)
    n, c = nodes * gpus, 2
    spine = machine.num_npus
    for name, per_chunk in (("nccl-nvls-tree", 4 * (nodes - 1)), ("nccl-collnet", 2 * nodes)):
        inst, schedule, _ = run(name, machine, "allreduce", c)
        counts = per_link(inst, schedule)
        into = sum(counts[(v, spine)] for v in range(n))
        out = sum(counts[(spine, v)] for v in range(n))
        assert into + out == n * c * per_chunk, name
    inst, schedule, _ = run("nccl-collnet", machine, "allreduce", c)
    counts = per_link(inst, schedule)
    assert {counts[(v, spine)] for v in range(n)} == {nodes * c}
    assert {counts[(spine, v)] for v in range(n)} == {nodes * c}


# -- Swing: peers r ± ρ(s), ρ(s) = (1 - (-2)^(s+1)) / 3; log2 p steps; step s moves p/2^(s+1) blocks ---------

def test_rho_is_the_alternating_sum_of_powers_of_minus_two():
    assert [rho(s) for s in range(8)] == [1, -1, 3, -5, 11, -21, 43, -85]
    assert all(abs(rho(s)) < 2 ** s for s in range(2, 12))


@pytest.mark.parametrize("p", [4, 8, 16])
def test_swing_on_fully_connected_halves_its_messages(p):
    """Two ports (the mirror swings the other way), each with one chunk per rank: ReduceScatter
    step s sends p/2^(s+1) blocks to r ± ρ(s); the AllGather mirrors it."""
    machine = g.fully_connected(p, GIB, 1e-6)
    inst, schedule, result = run("swing", machine, "allgather", 2)
    expected = Counter()
    for port, mirror in ((0, 1), (1, -1)):
        for s in range(int(math.log2(p))):
            for r in range(p):
                peer = (r + mirror * (1 if r % 2 == 0 else -1) * rho(s)) % p
                expected[(r, peer)] += p >> (s + 1)
    assert per_link(inst, schedule) == expected
    assert stages(swing, inst) == math.log2(p)
    assert result.time / link_time(inst) == pytest.approx(p - 1)  # Σ_s p/2^(s+1), ports in parallel


@pytest.mark.parametrize("p", [6, 10, 12])
def test_swing_on_non_powers_of_two_takes_ceil_log2_steps(p):
    inst, schedule, _ = run("swing", g.fully_connected(p, GIB, 1e-6), "allgather", 2)
    assert stages(swing, inst) == math.ceil(math.log2(p))
    assert len(schedule) == 2 * p * (p - 1)  # every rank receives every block exactly once


@pytest.mark.parametrize("dims", [[4, 4], [8, 8], [4, 4, 4]])
def test_swing_on_a_torus_swings_along_every_dimension_on_2d_ports(dims):
    """Σ log2 d steps; each step's peer lies |ρ(s')| away along one dimension (s' the step within
    that dimension); each of the 2D ports carries 1/(2D) of the data."""
    machine = g.torus(dims, GIB, 1e-6)
    ports = 2 * len(dims)
    inst, schedule, _ = run("swing", machine, "allgather", ports)
    messages = swing(spread.of_collective(inst))
    assert messages.notes["ports"] == ports
    assert len(set(messages.stage)) == sum(int(math.log2(d)) for d in dims)
    distances = set()
    for a, b in zip(messages.src, messages.dst):
        xa, xb = [], []
        for d in dims:
            xa.append(a % d)
            xb.append(b % d)
            a, b = a // d, b // d
        diff = [min((u - v) % d, (v - u) % d) for u, v, d in zip(xa, xb, dims)]
        assert sum(1 for x in diff if x) == 1
        distances.add(max(diff))
    assert distances == {abs(rho(s)) for s in range(int(math.log2(max(dims))))}
    n = machine.num_npus
    assert Counter(messages.dst) == Counter({v: ports * (n - 1) for v in range(n)})


@pytest.mark.parametrize("machine, dims", [(g.torus([4, 4], GIB, 1e-6), [4, 4]),
                                           (g.torus([4, 4, 4], GIB, 1e-6), [4, 4, 4]),
                                           (g.hypercube(4, GIB, 1e-6), [2] * 4)],
                         ids=["4x4", "4x4x4", "2^4"])
def test_swing_per_link_volume_on_tori_whose_peers_are_neighbours(machine, dims):
    """In sides of 4 (and 2) every Swing peer is a neighbour, so the per-link volume is the
    paper's: port p visits the dimensions round robin from p mod D (mirrored for p ≥ D), step s
    of the whole collective moves N/2^(s+1) blocks to the peer x ± ρ(k) along its dimension."""
    n, ndim = machine.num_npus, len(dims)
    inst, schedule, _ = run("swing", machine, "allgather", 2 * ndim)
    expected = Counter()
    for port in range(2 * ndim):
        order = [(d, k) for k in range(max(int(math.log2(x)) for x in dims))
                 for d in [(port + i) % ndim for i in range(ndim)] if k < math.log2(dims[d])]
        for s, (d, k) in enumerate(order):
            for r in range(n):
                coord = [(r // math.prod(dims[:i])) % dims[i] for i in range(ndim)]
                sign = (1 if coord[d] % 2 == 0 else -1) * (-1 if port >= ndim else 1)
                peer = r + (((coord[d] + sign * rho(k)) % dims[d]) - coord[d]) * math.prod(dims[:d])
                expected[(r, peer)] += n >> (s + 1)
    assert per_link(inst, schedule) == expected


# -- Trivance: ⌈log3 n⌉ steps, step k exchanges 3^(L-1-k) blocks with the nodes 3^k away on both sides -------

@pytest.mark.parametrize("n", [3, 9, 27])
def test_trivance_on_fully_connected_triples_its_distance(n):
    steps = round(math.log(n, 3))
    machine = g.fully_connected(n, GIB, 1e-6)
    inst, schedule, result = run("trivance", machine, "allgather", 1)
    expected = Counter()
    for k in range(steps):
        for r in range(n):
            for side in (1, -1):
                expected[((r + side * 3 ** k) % n, r)] += 3 ** (steps - 1 - k)
    assert per_link(inst, schedule) == expected
    assert stages(trivance, inst) == steps
    assert result.time / link_time(inst) == pytest.approx((n - 1) / 2)
    inst, schedule, result = run("trivance", machine, "allreduce", 1)
    assert result.time / link_time(inst) == pytest.approx(n - 1)  # 2⌈log3 n⌉ steps


@pytest.mark.parametrize("n", [4, 10, 20])
def test_trivance_covers_other_sizes_in_ceil_log3_steps(n):
    inst, schedule, _ = run("trivance", g.ring(n, GIB, 1e-6), "allgather", 1)
    assert stages(trivance, inst) == math.ceil(math.log(n, 3) - 1e-12)
    messages = trivance(spread.of_collective(inst))
    assert Counter(messages.dst) == Counter({v: n - 1 for v in range(n)})


# -- Bine trees: negabinary binomial trees, log2 p steps, the root's distances |ρ(k-1)|, ..., 1 -------------

@pytest.mark.parametrize("p", [4, 8, 16])
def test_bine_broadcast_tree(p):
    k = int(math.log2(p))
    tree = bine_tree(p)
    assert tree.stages == k
    children_of_root = sorted((tree.stage[x], x) for x in range(p) if tree.parent[x] == 0)
    assert [min(x, p - x) for _, x in children_of_root] == [abs(rho(s)) for s in range(k - 1, -1, -1)]
    machine = g.fully_connected(p, GIB, 1e-6)
    inst, schedule, result = run("bine", machine, "broadcast", 2, root=0)
    assert set(per_link(inst, schedule).values()) == {2}  # every tree edge carries each chunk once
    assert len(schedule) == 2 * (p - 1)
    assert result.time / link_time(inst) == pytest.approx(2 * k)  # k staged steps of C chunks
    inst, schedule, _ = run("bine", machine, "gather", 1, root=0)
    up = per_link(inst, schedule)
    assert up == Counter({(x, tree.parent[x]): len(tree.subtree(x)) for x in range(1, p)})
    assert stages(bine, inst) == k


@pytest.mark.parametrize("p", [4, 8, 16])
def test_bine_butterfly_is_one_port_swing(p):
    """Bine's AllGather butterfly: the Swing peers on one port, p-1 link times on one port."""
    inst, schedule, result = run("bine", g.fully_connected(p, GIB, 1e-6), "allgather", 1)
    expected = Counter()
    for s in range(int(math.log2(p))):
        for r in range(p):
            expected[(r, (r + (1 if r % 2 == 0 else -1) * rho(s)) % p)] += p >> (s + 1)
    assert per_link(inst, schedule) == expected
    assert result.time / link_time(inst) == pytest.approx(p - 1)
