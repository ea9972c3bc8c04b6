"""Trivance (Jürß, Addanki, Schmid, 2026, arXiv 2602.17254): ⌈log3 n⌉ steps on a bidirectional ring.

Both ports of every node work in every step and the distance triples: ReduceScatter step k
(k = 0, 1, …, L−1, L = ⌈log3 n⌉) exchanges with the nodes 3^k away on either side. For
n = 3^L, write the offset b − r of block b from node r in balanced ternary (digits −1, 0, 1):
before step k node r holds partials of the blocks whose offset has zero digits below k; it sends
those with digit k = +1 to r + 3^k and those with −1 to r − 3^k (3^(L−k−1) blocks each), keeps the
rest and adds the two partials it receives for them in one joint reduction. The AllGather is the
mirror: steps with distances 3^(L−1), …, 3, 1, after which r holds every offset with L balanced
ternary digits, i.e. everything.

This module emits the AllGather with one stage per step (a node sends what it holds and its
neighbour lacks; when both neighbours could bring the same block, as happens for n not a power of
three where the windows wrap round and overlap, the one 3^k below brings it). ``compose`` turns it
into the ReduceScatter above (time reversal) and the AllReduce as ReduceScatter then AllGather
(2⌈log3 n⌉ steps), the bandwidth-optimal form; the latency-optimal AllReduce of the paper, whole
vectors in ⌈log3 n⌉ steps, would pass partials through NPUs unchanged, which the timed model
cannot express. Where the paper leaves non-powers of three to an extra step, this construction
needs none: ⌈log3 n⌉ steps of wrapped windows cover every offset. The ring is the communicator in
a physical ring order (``rings.ring_order``), non-neighbours routed store and forward.
"""
from __future__ import annotations

from optcoll.producers.base import NotApplicable
from optcoll.producers.baselines.algorithms import Messages, owner_chunks, require_shape
from optcoll.producers.baselines.rings import ring_order
from optcoll.producers.spread import SpreadProblem


def trivance_steps(n: int) -> int:
    steps, reach = 0, 1
    while reach < n:
        reach *= 3
        steps += 1
    return steps


def trivance_exchanges(n: int) -> list[list[tuple[int, int, int]]]:
    """Per AllGather step: (block, from, to) with ring positions, from the windows above."""
    held = [{r} for r in range(n)]
    out = []
    for k in range(trivance_steps(n) - 1, -1, -1):
        d = 3 ** k
        step = []
        for r in range(n):
            below, above = (r - d) % n, (r + d) % n
            from_below = held[below] - held[r]
            from_above = held[above] - held[r] - from_below
            step += [(b, below, r) for b in sorted(from_below)]
            step += [(b, above, r) for b in sorted(from_above)]
        for b, _, r in step:
            held[r].add(b)
        out.append(step)
    return out


def trivance(problem: SpreadProblem) -> Messages:
    require_shape(problem, "trivance", "allgather")
    if len(problem.ranks) < 2:
        raise NotApplicable("trivance needs at least 2 ranks")
    order = ring_order(problem.machine, list(problem.ranks))
    pos = {v: i for i, v in enumerate(problem.ranks)}
    owned = owner_chunks(problem)
    out = Messages()
    for t, step in enumerate(trivance_exchanges(len(order))):
        for b, a, r in step:
            for c in owned[pos[order[b]]]:
                out.add(c, order[a], order[r], t)
    out.notes["steps"] = trivance_steps(len(order))
    return out
