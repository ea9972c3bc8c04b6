"""Bine (binomial negabinary) trees (De Sensi et al., SC'25; reference code HLC-Lab/bine-trees).

A Bine tree is a binomial tree whose distances follow negabinary numbers, so that most messages
stay near their sender. Over p = 2^k members in rank order rotated to the root, write a member's
position v in negabinary (base −2); in step t = 0..k−1 (mask 2^(k−1−t)) every member that holds
the data sends it to the member whose negabinary position is its own with the lowest k−t digits
flipped (``bine_bcast_small`` in the reference code). The root thus sends to distances
|ρ(k−1)|, |ρ(k−2)|, …, 1 with ρ(s) = Σ_{i≤s} (−2)^i, as Swing's peers. Broadcast sends every chunk
down that tree; Scatter sends each subtree's chunks down it; Gather sends them up in the mirrored
steps; Reduce is the reversed Broadcast (``compose``). The reference code needs p a power of two
for these trees, and so does this producer.

The Bine *butterfly* (AllGather; ReduceScatter and AllReduce by ``compose``) pairs rank r with
r ± ρ(s) (+ for even r), the largest distance first, sending block by block what the partner
lacks: the one-port Swing AllGather over the communicator in rank order (``swing``), for any even p.
"""
from __future__ import annotations

from optcoll.producers.base import NotApplicable
from optcoll.producers.baselines.algorithms import Messages, RootedTree, power_of_two, tree_messages
from optcoll.producers.baselines.swing import butterfly_allgather
from optcoll.producers.spread import SpreadProblem


def to_negabinary(value: int) -> int:
    """The digits of ``value`` in base −2, as the bits of the result."""
    bits, place = 0, 0
    while value:
        value, digit = -(value // 2), value % 2
        bits |= digit << place
        place += 1
    return bits


def from_negabinary(bits: int) -> int:
    value, place = 0, 0
    while bits:
        if bits & 1:
            value += (-2) ** place
        bits >>= 1
        place += 1
    return value


def bine_tree(p: int) -> RootedTree:
    """The Bine broadcast tree over positions 0..p−1 rooted at 0 (module docstring)."""
    k = power_of_two(p, "bine")
    parent, stage = [-1] * p, [-1] * p
    holders = [0]
    for t in range(k):
        flip = (1 << (k - t)) - 1
        for v in list(holders):
            w = from_negabinary(to_negabinary(v) ^ flip) % p
            assert parent[w] == -1 and w != 0, (p, v, w)
            parent[w], stage[w] = v, t
            holders.append(w)
    return RootedTree(parent, stage)


def bine(problem: SpreadProblem) -> Messages:
    shape = problem.shape.kind
    if shape == "allgather":
        ranks = list(problem.ranks)
        return butterfly_allgather(problem, "bine", ranks, (len(ranks),), 1)
    if shape not in ("broadcast", "gather", "scatter"):
        raise NotApplicable(f"bine applies to broadcast-, gather-, scatter- and allgather-shaped "
                            f"collectives, not to this {shape} one")
    tree = bine_tree(len(problem.ranks))
    return tree_messages(problem, "bine", {"broadcast": tree, "gather": tree, "scatter": tree})
