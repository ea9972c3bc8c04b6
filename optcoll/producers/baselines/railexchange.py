"""Rail exchange: a direct AllReduce for machines of several nodes joined by NIC rails (written as
``flows``, DESIGN.md section 5's copy and reduce semantics).

The flows are listed phase by phase, the reductions in a Latin-square order (in each slot every
rail GPU receives one partial and every GPU sends one), so the first partial of every rail is
ready after G − 1 slots and the later phases fill the links around them.

Each chunk k has a home rail r = k mod R (R NIC rails per node, the nodes and rails as NCCL sees
them, ``nccl.topology``; a machine without NICs of its own has one rail per GPU). Per chunk, pipelined over chunks by the flow scheduler:

1. every GPU of a node reduces its contribution into the node's rail-r GPU (one reduce each);
2. the rail-r GPUs of all nodes *exchange* their node partials (``flows.Exchange``: both sides
   send the value from before the swap and add what they receive), pairwise at distance 1, 2, 4,
   … when the node count is a power of two, else all at once, so every node holds the full sum
   without its sum crossing back;
3. each rail-r GPU spreads the sum through its node, every holder copying on to the next GPU as
   soon as it can (holders grow like Fibonacci numbers over a switch without multicast). When a
   round has one chunk per GPU (as many rails as GPUs), its sums are ready together and every GPU
   must receive G − 1 of them anyway, so the homes copy them straight out in the Latin-square
   order instead (on cluster2x8 11.87 -> 11.65 ms: the relays' copies of a Fibonacci spread
   compete with the other homes' for the same links).

Unlike ReduceScatter then AllGather (one owner per chunk, whose sum must cross back), the sum is
formed on every node at once, so a chunk crosses the network once per pair of nodes instead of
twice: on two nodes this is what ``allreduce-cut-once`` counts. The all-at-once exchange sends
P − 1 copies of each partial per node, so it is offered up to ``MAX_NODES`` nodes.
"""
from __future__ import annotations

from optcoll.instances.instance import Instance
from optcoll.producers.base import NotApplicable
from optcoll.producers.baselines.flows import Exchange, Flow
from optcoll.producers.baselines.nccl.topology import nccl_topology
from optcoll.schedules.schedule import COPY, REDUCE

#: Most nodes the all-pairs exchange of node partials is offered for.
MAX_NODES = 8


def spread_order(count: int) -> list[tuple[int, int]]:
    """(sender, receiver) positions that spread a value from position 0 to ``count`` positions,
    earliest deliveries first, when a copy takes two time units to arrive and a holder can start
    one copy per unit (a GPU's one link into a switch)."""
    ready = [0]  # per holder, when its next copy can start
    pairs: list[tuple[int, int]] = []
    while len(ready) < count:
        sender = min(range(len(ready)), key=lambda h: (ready[h], h))
        start = ready[sender]
        ready[sender] = start + 1
        pairs.append((sender, len(ready)))
        ready.append(start + 2)
    return pairs


def _exchanges(chunk: int, heads: list[int]) -> list[Exchange]:
    """Node partials combined across the rail: pairwise swaps with the node at distance 1, 2, 4, …
    (recursive doubling) when the node count is a power of two, else one all-pairs exchange."""
    count = len(heads)
    if count & (count - 1):
        return [Exchange(chunk, tuple(heads))]
    return [Exchange(chunk, (heads[n], heads[n ^ bit]))
            for bit in (1 << i for i in range(count.bit_length() - 1)) for n in range(count) if n < n ^ bit]


def rail_exchange(instance: Instance) -> list[Flow | Exchange]:
    coll = instance.collective
    if coll.kind != "allreduce":
        raise NotApplicable(f"rail-exchange does not implement {coll.kind}; it is an AllReduce")
    topo = nccl_topology(instance.machine, coll.ranks)
    nodes = [list(node) for node in topo.nodes]
    if len(nodes) < 2:
        raise NotApplicable("rail-exchange needs at least 2 nodes")
    if len(nodes) > MAX_NODES and len(nodes) & (len(nodes) - 1):
        raise NotApplicable(f"rail-exchange sends every node partial to each of the other nodes when their "
                            f"count is not a power of two; over {MAX_NODES} nodes ({len(nodes)} here) a ring "
                            "or tree across nodes is the better fit")
    width = len(nodes[0])
    if any(len(node) != width for node in nodes):
        raise NotApplicable("rail-exchange needs nodes of equal size")
    # per node its rail GPUs in NIC order, then the others: position r is rail r on every node
    orders = [list(topo.rails[n]) + [v for v in topo.intra_orders[n] if v not in topo.rails[n]]
              for n in range(len(nodes))]
    rails = max(topo.num_rails, 1)
    spread = spread_order(width)
    reduces: list[Flow | Exchange] = []
    exchanges: list[Flow | Exchange] = []
    spreads: list[Flow | Exchange] = []
    for first in range(0, coll.num_chunks, rails):  # one chunk per rail: a round
        chunks = range(first, min(first + rails, coll.num_chunks))
        for slot in range(1, width):  # in each slot every rail GPU receives one reduce and every GPU sends one
            for order in orders:
                reduces += [Flow(k, order[(k % rails + slot) % width], order[k % rails], REDUCE) for k in chunks]
        for k in chunks:
            exchanges += _exchanges(k, [order[k % rails] for order in orders])
        if len(chunks) == rails == width:  # the round's sums are spread at once: straight from their homes
            for slot in range(1, width):
                for order in orders:
                    spreads += [Flow(k, order[k % rails], order[(k % rails + slot) % width], COPY) for k in chunks]
            continue
        for k in chunks:
            home = k % rails
            for order in orders:
                local = order[home:] + order[:home]
                spreads += [Flow(k, local[a], local[b], COPY) for a, b in spread]
    return reduces + exchanges + spreads
