"""Classical baselines against their closed forms in optcoll's timed model.

Chunks are fixed-size here (τ = α + b/B per chunk per link), so an algorithm that sends a
message of m chunks pays m·τ on a link, α included each time: recursive doubling's stage k moves
2^k·C chunks, and because a stage starts only when the previous one was delivered (sendrecv
loop), AllGather takes Σ_k 2^k·C·τ = (N-1)·C·τ on a hypercube (log2 N stages), not log2 N·α + ...
as in the α-β model where a message pays α once.
"""
from __future__ import annotations

import math

import pytest

from optcoll.machines import generators as g
from optcoll.producers.base import NotApplicable
from optcoll.producers.registry import SYNTHESIZERS
from producer_cases import GIB, instance, link_time, verified


def steps(algo: str, machine, kind: str, chunks_per_rank: int = 1, root: int | None = None) -> float:
    """The verified time in link times τ."""
    inst = instance(machine, kind, 1e6, chunks_per_rank, root)
    return verified(inst, SYNTHESIZERS[algo](inst, 0)).time / link_time(inst)


@pytest.mark.parametrize("n", [3, 6, 9])
@pytest.mark.parametrize("c", [1, 2])
def test_unidirectional_ring_allgather_and_reducescatter(n, c):
    ring = g.ring(n, GIB, 1e-6, bidirectional=False)
    assert steps("ring", ring, "allgather", c) == pytest.approx((n - 1) * c)
    assert steps("ring", ring, "reducescatter", c) == pytest.approx((n - 1) * c)
    assert steps("ring", ring, "allreduce", c) == pytest.approx(2 * (n - 1) * c)


@pytest.mark.parametrize("n", [5, 6, 8])
def test_bidirectional_ring_allgather(n):
    assert steps("ring-bidir", g.ring(n, GIB, 1e-6), "allgather") == pytest.approx(math.ceil((n - 1) / 2))


@pytest.mark.parametrize("n", [4, 7])
def test_direct_allgather_on_fully_connected_is_one_link_time(n):
    machine = g.fully_connected(n, GIB, 1e-6)
    assert steps("direct", machine, "allgather") == pytest.approx(1)
    assert steps("direct", machine, "alltoall") == pytest.approx(1)


@pytest.mark.parametrize("dim", [2, 3, 4])
@pytest.mark.parametrize("c", [1, 3])
def test_recursive_doubling_on_hypercube(dim, c):
    n = 1 << dim
    cube = g.hypercube(dim, GIB, 1e-6)
    expected = sum((1 << k) * c for k in range(dim))
    assert expected == (n - 1) * c
    assert steps("recursive-doubling", cube, "allgather", c) == pytest.approx(expected)
    assert steps("recursive-doubling", cube, "reducescatter", c) == pytest.approx(expected)  # halving
    assert steps("recursive-doubling", cube, "allreduce", c) == pytest.approx(2 * expected)  # Rabenseifner


def test_recursive_doubling_needs_a_power_of_two():
    with pytest.raises(NotApplicable, match="power-of-two number of ranks, got 6"):
        SYNTHESIZERS["recursive-doubling"](instance(g.fully_connected(6, GIB, 1e-6), "allgather"), 0)


@pytest.mark.parametrize("n", [5, 6, 8])
def test_bruck_allgather_on_fully_connected(n):
    """Stage k sends min(2^k, N-2^k) ranks' chunks: Σ = N-1 link times in ceil(log2 N) stages."""
    assert steps("bruck", g.fully_connected(n, GIB, 1e-6), "allgather") == pytest.approx(n - 1)


@pytest.mark.parametrize("dim", [2, 3])
@pytest.mark.parametrize("c", [1, 2])
def test_binomial_broadcast_and_reduce_on_hypercube(dim, c):
    cube = g.hypercube(dim, GIB, 1e-6)
    assert steps("binomial-tree", cube, "broadcast", c, root=0) == pytest.approx(dim * c)
    assert steps("binomial-tree", cube, "reduce", c, root=0) == pytest.approx(dim * c)


def test_binomial_gather_and_scatter_on_fully_connected():
    """Stage k moves a 2^k-rank subtree: Σ_k 2^k = N-1 link times for N = 8."""
    fc = g.fully_connected(8, GIB, 1e-6)
    assert steps("binomial-tree", fc, "gather", root=0) == pytest.approx(7)
    assert steps("binomial-tree", fc, "scatter", root=0) == pytest.approx(7)


@pytest.mark.parametrize("n", [4, 5])
def test_pairwise_alltoall_on_fully_connected(n):
    assert steps("pairwise", g.fully_connected(n, GIB, 1e-6), "alltoall") == pytest.approx(n - 1)


@pytest.mark.parametrize("dims", [[4, 4], [3, 5], [2, 2, 2]])
def test_hierarchical_allgather_on_tori(dims):
    """A unidirectional ring per dimension, last dimension first: dimension d moves
    (size_d - 1) · (product of the later sizes) chunks per link, in all N-1 link times."""
    machine = g.torus(dims, GIB, 1e-6)
    n = machine.num_npus
    assert steps("hierarchical", machine, "allgather") == pytest.approx(n - 1)
    assert steps("hierarchical", machine, "allreduce") == pytest.approx(2 * (n - 1))


def test_double_binary_tree_uses_both_trees():
    """Broadcast of two chunks on 7 fully connected ranks: each chunk goes down its own tree
    (depth 2, plus the hop from the root to that tree's root), both at once."""
    fc = g.fully_connected(7, GIB, 1e-6)
    assert steps("double-binary-tree", fc, "broadcast", 2, root=0) == pytest.approx(3)


@pytest.mark.parametrize("machine", [g.hypercube(4, GIB, 1e-6), g.torus([4, 4], GIB, 1e-6)])
def test_multiring_splits_chunks_over_disjoint_rings(machine):
    """Two edge-disjoint Hamiltonian cycles; with C = 2 each carries one chunk per rank both
    ways: ceil(15/2) = 8 link times of the half-size chunk, half the bidirectional ring's time."""
    inst = instance(machine, "allgather", 1e6, 2)
    s = SYNTHESIZERS["multiring"](inst, 0)
    assert s.meta["rings"] == 2
    assert verified(inst, s).time / link_time(inst) == pytest.approx(8)
    assert steps("ring-bidir", machine, "allgather", 2) == pytest.approx(16)
