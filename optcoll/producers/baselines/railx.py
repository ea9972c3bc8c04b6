"""Rail-exchange AllReduce: per-chunk owners reduce their node, exchange node partials along
their rail, and broadcast inside the node (DESIGN.md §7, a flow producer for the timed model).

On a multi-node machine (nodes of GPUs, GPUs with NICs on rails, ``nccl.topology``), chunk c
belongs to rail r = c mod R. In every node the GPU on rail r is its *owner*; the pipeline per chunk:

1. every other GPU of the node reduces its contribution into the owner (a reduce-scatter listed
   slot by slot as a Latin square: in slot s the GPU s places after an owner sends to it, so every
   GPU sends once and receives once per slot);
2. the owners of c (one per node) combine their node partials across the network: with two nodes
   one *exchange* (both reduce into each other at once, ``flows.Flow.both_ways``), with more
   nodes recursive doubling over a power-of-two count, or a reduce to the first node's owner and
   copies back otherwise;
3. each owner broadcasts the sum inside its node along a greedy tree in which every holder sends
   to a new GPU as soon as its last send left: over a plain switch (two hops per copy, one link
   occupancy apart) the holders grow like Fibonacci numbers, the fastest a plain switch allows.

Phases are listed round by round (all chunks' reductions, then exchanges, then broadcasts), and
the flow scheduler places each transfer at its earliest start with plain switches queueing their
arrivals. This is the schedule the AllReduce cut bound with a preparation prefix and a
broadcast tail (``optcoll.bounds.allreduce``) is tight against on cluster2x8.
"""
from __future__ import annotations

import heapq

from optcoll.instances.instance import Instance
from optcoll.producers.base import NotApplicable
from optcoll.producers.baselines.flows import Flow
from optcoll.producers.baselines.nccl.topology import nccl_topology
from optcoll.schedules.schedule import COPY, REDUCE


def broadcast_order(root: int, others: list[int]) -> list[tuple[int, int]]:
    """(sender, receiver) pairs of a greedy broadcast from ``root``: each copy keeps its sender
    busy one unit and reaches the receiver two units after it starts (a store-and-forward switch
    hop), the next receiver going to the holder free first (ties to the earlier holder)."""
    free = [(0, 0, root)]
    pairs = []
    for i, v in enumerate(others):
        t, _, u = heapq.heappop(free)
        pairs.append((u, v))
        heapq.heappush(free, (t + 1, 2 * i + 1, u))
        heapq.heappush(free, (t + 2, 2 * i + 2, v))
    return pairs


def _combine(chunk: int, owners: list[int]) -> list[Flow]:
    """Every owner ends with the sum of the owners' partials of ``chunk``."""
    k = len(owners)
    if k == 2:
        return [Flow(chunk, owners[0], owners[1], REDUCE, both_ways=True)]
    if k & (k - 1) == 0:
        flows = []
        step = 1
        while step < k:
            flows += [Flow(chunk, owners[i], owners[i ^ step], REDUCE, both_ways=True)
                      for i in range(k) if i < i ^ step]
            step *= 2
        return flows
    return ([Flow(chunk, v, owners[0], REDUCE) for v in owners[1:]]
            + [Flow(chunk, owners[0], v, COPY) for v in owners[1:]])


def rail_exchange(instance: Instance) -> list[Flow]:
    coll = instance.collective
    if coll.kind != "allreduce":
        raise NotApplicable(f"rail-exchange implements AllReduce only, not {coll.kind}")
    topo = nccl_topology(instance.machine, coll.ranks)
    if topo.num_nodes < 2 or topo.num_rails < 1:
        raise NotApplicable("rail-exchange needs at least two nodes with NICs (a multi-node machine)")
    rails = topo.num_rails
    nodes = [topo.chain(n, 0) for n in range(topo.num_nodes)]
    owners = {c: [topo.rails[n][c % rails] for n in range(topo.num_nodes)]
              for c in range(coll.num_chunks)}
    order = sorted(range(coll.num_chunks), key=lambda c: (c // rails, c % rails))
    reduce_in, combine, spread = [], [], []
    for first in range(0, len(order), rails):
        rounds = order[first:first + rails]
        for slot in range(1, max(len(m) for m in nodes)):
            for c in rounds:
                for n, members in enumerate(nodes):
                    if slot < len(members):
                        i = members.index(owners[c][n])
                        reduce_in.append(Flow(c, members[(i + slot) % len(members)], owners[c][n], REDUCE))
        for c in rounds:
            for n, members in enumerate(nodes):
                i = members.index(owners[c][n])
                spread += [Flow(c, u, v, COPY)
                           for u, v in broadcast_order(owners[c][n], members[i + 1:] + members[:i])]
            combine += _combine(c, owners[c])
    return reduce_in + combine + spread
