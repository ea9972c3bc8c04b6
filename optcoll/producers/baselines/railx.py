"""Rail-exchange AllReduce: per-chunk owners reduce their node, exchange node partials along
their rail, and broadcast inside the node (DESIGN.md §7, a flow producer for the timed model).

On a multi-node machine (nodes of GPUs, GPUs with NICs on rails, ``nccl.topology``), chunk c
belongs to rail r = c mod R. In every node the GPU on rail r is its *owner*; the pipeline per chunk:

1. every other GPU of the node reduces its contribution into the owner, listed slot by slot as a
   Latin square (in slot s the GPU s places after the owner in the node's ring order sends to it,
   so within a round of R chunks every GPU sends once and receives once per slot);
2. the owners of c (one per node) combine their node partials across the network: with two nodes
   one *exchange* (both reduce into each other at once, ``flows.Flow.both_ways``), with more
   nodes recursive doubling over a power-of-two count, or a reduce to the first node's owner and
   copies back otherwise;
3. each owner copies the sum to the other GPUs of its node in the same Latin-square slots (when a
   round's chunks are done at once, as across a rail, every GPU must still receive R − 1 of them,
   so copies straight from the owners are as fast as any broadcast tree there).

Phases are listed as reductions, then exchanges, then copies, each round by round, and the flow
scheduler places each transfer at its earliest start with plain switches queueing their arrivals.
"""
from __future__ import annotations

from optcoll.instances.instance import Instance
from optcoll.producers.base import NotApplicable
from optcoll.producers.baselines.flows import Flow
from optcoll.producers.baselines.nccl.topology import nccl_topology
from optcoll.schedules.schedule import COPY, REDUCE


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
        raise NotApplicable(f"rail-exchange does not implement {coll.kind}; it implements AllReduce only")
    topo = nccl_topology(instance.machine, coll.ranks)
    if topo.num_nodes < 2 or topo.num_rails < 1:
        raise NotApplicable("rail-exchange needs at least 2 nodes, each with a NIC (a multi-node machine)")
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
                        peer = members[(i + slot) % len(members)]
                        reduce_in.append(Flow(c, peer, owners[c][n], REDUCE))
                        spread.append(Flow(c, owners[c][n], peer, COPY))
        for c in rounds:
            combine += _combine(c, owners[c])
    return reduce_in + combine + spread
