"""PAT, NCCL's logarithmic AllGather and ReduceScatter (NCCL ≥ 2.23; ``PatAGAlgorithm`` in
``src/include/collectives.h`` of 2.30.7, peers in ``prims_simple.h``).

Each rank's block spreads along a binomial tree of distances that halve: the block of rank o
reaches rank o − s (mod N) for every offset s in 1..N−1, hopping over the set bits of s from the
highest to the lowest, so every block arrives in at most ⌈log2 N⌉ hops and each rank sends
N/2^(d+1) blocks (rounded for N not a power of two) to the rank 2^d below it, N−1 in all. A rank
works through the offsets s in the depth-first order of that tree, children by decreasing
distance (for N = 8: 4, 6, 7, 5, 2, 3, 1); at offset s it forwards the block of rank r + s − lowbit(s)
to rank r − lowbit(s). This is the order ``PatAGAlgorithm`` produces for large buffers (its
aggregation of several offsets per step, used for small buffers, is not modelled). PAT
ReduceScatter is the same trees reversed (``compose``). NCCL enables PAT only with one GPU per
node; the algorithm itself is defined for any N, and so is this producer.
"""
from __future__ import annotations

from optcoll.producers.baselines.algorithms import Messages, owner_chunks, require_shape
from optcoll.producers.spread import SpreadProblem


def pat_offsets(n: int) -> list[int]:
    """Offsets 1..n-1 in PAT's order (module docstring)."""
    top = max(n - 1, 1).bit_length()
    order: list[int] = []

    def visit(s: int, below: int) -> None:
        for d in range(below - 1, -1, -1):
            child = s + (1 << d)
            if child < n:
                order.append(child)
                visit(child, d)

    visit(0, top)
    return order


def pat(problem: SpreadProblem) -> Messages:
    """PAT AllGather over the communicator in rank order (module docstring)."""
    require_shape(problem, "pat", "allgather")
    ranks = problem.ranks
    n = len(ranks)
    owned = owner_chunks(problem)
    out = Messages()
    for s in pat_offsets(n):
        low = s & -s
        for i in range(n):
            for c in owned[(i + s - low) % n]:
                out.add(c, ranks[i], ranks[(i - low) % n])
    out.notes["hops"] = max(n - 1, 1).bit_length()
    return out
