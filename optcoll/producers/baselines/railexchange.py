"""Rail exchange: a direct AllReduce for machines of several nodes joined by NIC rails (written as
``flows``, docs/model.md §5's copy and reduce semantics, and §2's switches that reduce and
multicast).

Each chunk k has a home rail r = k mod R (R NIC rails per node, the nodes and rails as NCCL sees
them, ``nccl.topology``; a machine without NICs of its own has one rail per GPU). Per chunk,
pipelined over chunks by the flow scheduler:

1. **Inside every node**, the node's contributions are summed on its rail-r GPU (the *head*).
   Where the node's switch reduces (NVLS), the GPUs reduce into the switch and the switch
   delivers the node partial to the head: one delivery per GPU instead of a chain. Either every
   GPU but the head reduces into the switch and the switch *reduces* the partial into the head
   (the head's later deliveries may then come in any order), or, as NVLS does, every GPU reduces
   into the switch and the switch *copies* the sum to the head (one reduction on the way instead
   of two, which counts where reductions cost time, γ > 0). Otherwise every GPU reduces into the
   head directly, in a Latin-square order (in each slot every head receives one partial and every
   GPU sends one), so the first partial of every rail is ready after G − 1 slots and the later
   phases fill the links around them.
2. **Across nodes**, among the n heads of rail r, chosen by node count:

   * n = 2: the heads *exchange* their node partials (``flows.Exchange``: both send the value
     from before the swap and add what they receive), so both hold the sum after one NIC crossing
     per chunk; this is what ``allreduce-cut-once`` counts.
   * n ≥ 3: a direct ReduceScatter then AllGather per rail. The chunks of a rail are taken n at a
     time (a *round*), the j-th owned by node j; in slot s = 1 … n − 1 node i reduces its partial
     of the chunk owned by node i + s into that node's head, then in slot s every owner copies its
     sum to the head of node owner + s. Every NIC carries 2(n − 1) of the round's n chunks each
     way, the volume the ``allreduce-regions`` bound counts; an exchange (all pairs, or recursive
     doubling) would send n − 1 or log2 n partials per chunk per node, never fewer than
     2(n − 1)/n for n ≥ 3, and needs one crossing less of latency only at n = 2, where the two
     send the same volume. Each node reduces its chunks in the order its head sends them (the
     chunks owned by node i + 1 first), and spreads them in the order the sums reach it.
   * n = 2^m ≥ 4, also the *halving* form: per chunk a binomial reduction of the heads onto two
     roots, an exchange between them, and the mirror broadcast, roles relabelled per chunk
     (node i plays role i XOR p for the chunk at position p of its rail's round) so each NIC again
     carries 2(n − 1) per round each way. A chunk's sum then waits for 2m − 1 crossings instead of
     the ReduceScatter's n − 1 arrivals into one owner, so a rail GPU's link never idles between
     the two halves: a crossing through a store-and-forward rail switch takes two NIC occupancies,
     and on dgxh100-rail-4x8 (C = 1) the ReduceScatter + AllGather leaves each NIC idle one
     occupancy (6.21 ms) where the halving form keeps it busy (5.54 ms; 16x8: 5.64 -> 5.47 ms).
     Each node reduces the chunks its head sends first (leaves, then roots) first.
3. **Inside every node again**, the head spreads the sum: one copy into a switch that multicasts,
   which delivers it to the node's other GPUs; otherwise, when a round has one chunk per GPU (as
   many rails as GPUs), its sums are ready together and every GPU must receive G − 1 of them
   anyway, so the homes copy them straight out in the Latin-square order (on cluster2x8 11.87 ->
   11.65 ms against a Fibonacci spread, whose relays' copies compete with the other homes' for the
   same links); else every holder copies on to the next GPU as soon as it can (``spread_order``:
   holders grow like Fibonacci numbers over a switch without multicast).

**The staggered form** (``_staggered_flows``; two nodes, each node's GPUs on one switch, one rail
per GPU, two rounds of G chunks: the C = 1 AllReduce of cluster2x8). Steps 1 and 3 above end
every first-round reduction in the same slot (a Latin square), so every second-round sum lands at
once and its spread is the last G NVLink hops. Instead, the first round's reductions end on a
*staircase* F (chunk j summed on its head after F_j NVLink hops, some early, some late), found
with the slot model of ``slotplan``: each head swaps its first partial at F_j and its second right
behind it on the same NIC, so the second-round sums land F_j apart and their spread is a broadcast
released at F_j (the second round's reductions, a Latin square, and the first round's spread fill
the NIC hops in between). On cluster2x8 the staircase 5, 5, 6, 8, 8, 8, 9, 10 ends the spread
after 15 NVLink hops instead of 16: 3h + 15x = 11.42 ms against 11.65 ms (h one NIC hop of a
chunk, x one NVLink hop); ``slotplan`` says why 14 is out of reach for this structure. Other
shapes (more rounds, more than 8 GPUs per node, no staircase under 2G: below 8 GPUs) keep the
plain form. Nodes need not be alike: where one node's switch reduces and multicasts (a DGX H100
next to a DGX A100), that node sums each first-round chunk in its switch in the order the
staircase ends them and multicasts the second-round sums as they land, while the other node runs
the staircase; the staircase then also spaces the partials that reach the fast node, whose
GPUs each take the seven late sums one after another on their one NVSwitch link (on
hetero-dgxa100-dgxh100-rail-2x8 9.71 -> 9.41 ms: the three chunks the staircase ends at slot 8
land together, and five sums queue on every H100's link).

Every form that applies is built (on machines whose switches reduce, both in-switch forms and the
direct reductions; on two nodes, also the staggered form) and the list that
``flows.schedule_flows`` finishes first is kept (ties: the plain form, in-switch first): the flow
scheduler is deterministic and cheap next to the verifier, and no one form wins everywhere (the
direct chain wins on 2 nodes of 2 GPUs with γ > 0, the plain form where NVLink and NIC hops take
as long, for two).

The flows are listed phase by phase (all reductions into the heads, then the crossings, then the
spreads), each phase in the order above, so the scheduler's earliest-start placement pipelines the
phases of later chunks into the gaps of earlier ones. The staggered form lists the first round's
reductions, its swaps, the second round's reductions and swaps, the second round's spread, then
the first round's spread.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import NamedTuple

from optcoll.instances.instance import Instance
from optcoll.producers.base import NotApplicable
from optcoll.producers.baselines.flows import Exchange, Flow, flows_makespan
from optcoll.producers.baselines.nccl.topology import nccl_topology
from optcoll.producers.baselines.slotplan import staircase
from optcoll.schedules.schedule import COPY, REDUCE

#: Rounds of reductions listed ahead of the spreads in the wave forms (``_listed``): on
#: dgxh100-rail-2x8 1 GiB, 1 wins at C = 2 on some sizes, 2 or 3 at C = 4 and 8.
LOOKAHEADS = (1, 2, 3)

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


@dataclass(frozen=True)
class _Node:
    """One node as the flows see it: its GPUs with rail r's GPU at position r, its switch, and how
    the node partial reaches the head (``in_switch``: the op of the switch's delivery, None when
    the GPUs reduce into the head directly)."""

    order: tuple[int, ...]
    rails: int
    switch: int | None
    in_switch: int | None
    multicasts: bool

    def head(self, chunk: int) -> int:
        return self.order[chunk % self.rails]

    def reduce(self, batch: list[int]) -> list[Flow]:
        """Every GPU's contribution to the batch's chunks summed on their heads (step 1)."""
        if self.in_switch is not None:
            return [flow for k in batch
                    for flow in [Flow(k, v, self.switch, REDUCE) for v in self.order
                                 if self.in_switch == COPY or v != self.head(k)]
                    + [Flow(k, self.switch, self.head(k), self.in_switch)]]
        width = len(self.order)
        return [Flow(k, self.order[(k % self.rails + slot) % width], self.head(k), REDUCE)
                for slot in range(1, width) for k in batch]

    def spread(self, batch: list[int]) -> list[Flow]:
        """The batch's sums from their heads to every GPU of the node (step 3)."""
        order, width = self.order, len(self.order)
        if self.multicasts:
            return [flow for k in batch
                    for flow in [Flow(k, self.head(k), self.switch)]
                    + [Flow(k, self.switch, v) for v in order if v != self.head(k)]]
        if len(batch) == self.rails == width:
            return [Flow(k, self.head(k), order[(k % self.rails + slot) % width], COPY)
                    for slot in range(1, width) for k in batch]
        flows = []
        for k in batch:
            home = k % self.rails
            local = order[home:] + order[:home]
            flows += [Flow(k, local[a], local[b], COPY) for a, b in spread_order(width)]
        return flows


def _nodes(instance: Instance) -> list[_Node]:
    coll = instance.collective
    machine = instance.machine
    topo = nccl_topology(machine, coll.ranks)
    if topo.num_nodes < 2:
        raise NotApplicable("rail-exchange needs at least 2 nodes")
    if len({len(node) for node in topo.nodes}) > 1:
        raise NotApplicable("rail-exchange needs nodes of equal size")
    rails = max(topo.num_rails, 1)
    nodes = []
    for n, fabric in enumerate(topo.fabrics):
        # rail GPUs in NIC order, then the others: position r is rail r on every node
        order = tuple(topo.rails[n]) + tuple(v for v in topo.intra_orders[n] if v not in topo.rails[n])
        switch = machine.switch(fabric) if fabric is not None else None
        nodes.append(_Node(order, rails, fabric, REDUCE if switch is not None and switch.reduce else None,
                           switch is not None and switch.multicast))
    return nodes


class _Round(NamedTuple):
    """One round's flows by phase: reductions into the heads, crossings between nodes, spreads."""

    reduces: list[Flow | Exchange]
    crossings: list[Flow | Exchange]
    spreads: list[Flow | Exchange]


def _listed(rounds: list[_Round], lookahead: int | None) -> list[Flow | Exchange]:
    """The rounds phase by phase (``lookahead`` None: every reduction, then every crossing, then
    every spread), or in waves: round b's crossings and spreads listed right after round
    b + ``lookahead``'s reductions. Phase by phase, the reductions book every GPU's link into a
    reducing switch back to back, so a head's copy of a sum into the switch (the spread) finds no
    gap before the last reduction: on dgxh100-rail-2x8 at C = 8 every GPU then takes 112 of its
    128 sums after the last NIC crossing (4.31 ms); in waves the links carry the reductions a few
    rounds ahead of the spreads (3.10 ms, allreduce-cut-once 3.06 ms). Which lookahead wins
    depends on C and the link rates, so ``_forms`` builds several."""
    if lookahead is None:
        return [flow for phase in range(3) for r in rounds for flow in r[phase]]
    flows = [flow for r in rounds[:lookahead] for flow in r.reduces]
    for b, r in enumerate(rounds):
        if b + lookahead < len(rounds):
            flows += rounds[b + lookahead].reduces
        flows += r.crossings + r.spreads
    return flows


def _exchange_rounds(nodes: list[_Node], num_chunks: int) -> list[_Round]:
    """Two nodes: rounds of one chunk per rail, reduced, swapped and spread in chunk order."""
    rails = nodes[0].rails
    batches = [list(range(first, min(first + rails, num_chunks))) for first in range(0, num_chunks, rails)]
    return [_Round([flow for node in nodes for flow in node.reduce(batch)],
                   [Exchange(k, tuple(node.head(k) for node in nodes)) for k in batch],
                   [flow for node in nodes for flow in node.spread(batch)]) for batch in batches]


def _staggered_flows(nodes: list[_Node], num_chunks: int) -> list[Flow | Exchange]:
    """Two nodes of G GPUs on one switch each, one rail per GPU, two rounds: the first round's
    reductions end on a staircase (``slotplan.staircase``) on every node reduced GPU to GPU (a
    node whose switch reduces sums each chunk in it, in the staircase's order), each rail swaps
    its two partials in turn, and the second round's sums spread in the staircase's broadcast
    (a multicasting switch: in the order they land) (module docstring, the staggered form)."""
    rails = nodes[0].rails
    if (len(nodes) != 2 or num_chunks != 2 * rails
            or any(len(node.order) != rails or node.switch is None for node in nodes)
            or all(node.in_switch is not None for node in nodes)):
        raise NotApplicable("the staggered rail exchange needs 2 nodes of G GPUs on one switch each, "
                            "G rails and 2G chunks, one of them reduced GPU to GPU")
    plan = staircase(rails)
    if plan is None:
        raise NotApplicable(f"no staircase beats the plain exchange on {rails} GPUs per node")
    first = list(range(rails))  # chunk k's head is GPU k mod G
    landing = sorted(first, key=lambda j: (plan.finish[j], j))
    second = [rails + j for j in landing]

    def reduces(node: _Node) -> list[Flow | Exchange]:
        if node.in_switch is not None:
            return list(node.reduce(landing))
        return [Flow(j, node.order[a], node.order[b], REDUCE) for _, j, a, b in plan.reductions]

    def last_phase(node: _Node) -> list[Flow | Exchange]:
        if node.multicasts:
            return list(node.spread(second))
        return [Flow(rails + j, node.order[a], node.order[b], COPY) for _, j, a, b in plan.broadcasts]

    swaps = [Exchange(k, tuple(node.head(k) for node in nodes)) for k in range(num_chunks)]
    more_reduces = [flow for node in nodes for flow in node.reduce(second)]
    first_spreads = [flow for node in nodes for flow in node.spread(first)]
    return ([flow for node in nodes for flow in reduces(node)] + swaps[:rails] + more_reduces + swaps[rails:]
            + [flow for node in nodes for flow in last_phase(node)] + first_spreads)


def _reduce_scatter_gather_rounds(nodes: list[_Node], num_chunks: int) -> list[_Round]:
    """n ≥ 3 nodes: rounds of n chunks per rail, a direct ReduceScatter and AllGather among the
    heads of each rail (module docstring, step 2)."""
    count, rails = len(nodes), nodes[0].rails
    rounds = []
    for first in range(0, num_chunks, count * rails):
        owned = [[k for k in range(first + o * rails, first + (o + 1) * rails) if k < num_chunks]
                 for o in range(count)]
        r = _Round([], [], [])
        for s in range(1, count + 1):  # node i needs the chunks owned by i + s in slot s, its own last
            r.reduces.extend(flow for i, node in enumerate(nodes) for flow in node.reduce(owned[(i + s) % count]))
        for s in range(1, count):
            r.crossings.extend(Flow(k, node.head(k), nodes[(i + s) % count].head(k), REDUCE)
                               for i, node in enumerate(nodes) for k in owned[(i + s) % count])
        for s in range(1, count):
            r.crossings.extend(Flow(k, nodes[o].head(k), nodes[(o + s) % count].head(k), COPY)
                               for o in range(count) for k in owned[o])
        for s in range(count):  # node i holds its own sums first, then those of owner i − s
            r.spreads.extend(flow for i, node in enumerate(nodes) for flow in node.spread(owned[(i - s) % count]))
        rounds.append(r)
    return rounds


def _halving_flows(nodes: list[_Node], num_chunks: int) -> list[Flow | Exchange]:
    """n = 2^m ≥ 4 nodes: per chunk a binomial reduction onto two roots, their exchange, and the
    mirror broadcast, among the heads of its rail, each chunk's roles relabelled by its position
    p in the round (node i plays role i XOR p) so every NIC carries the same load per round
    (module docstring, step 2, the halving form)."""
    count, rails = len(nodes), nodes[0].rails
    levels = count.bit_length() - 2  # reduce levels below the exchange between roles 0 and count/2
    half = count // 2

    def node(k: int, role: int) -> int:
        return nodes[role ^ (k // rails) % count].head(k)

    def need(i: int, last: bool = False) -> list[int]:
        """Node i's chunks, per round those its head sends earliest first: by the level its role
        first sends at (its lowest set bit; the two roots last, together), each level across the
        rails (``last``: the levels in reverse, the order the sums reach it)."""
        order = sorted(range(count), key=lambda p: (min((i ^ p) & -(i ^ p) or half, half), p), reverse=last)
        return [k for first in range(0, num_chunks, count * rails) for p in order
                for k in range(first + p * rails, min(first + (p + 1) * rails, num_chunks))]

    chunks = range(num_chunks)
    reduces: list[Flow | Exchange] = [flow for i, n in enumerate(nodes) for flow in n.reduce(need(i))]
    for level in range(levels):  # roles with bit `level` set (and none below) send to the role without it
        step = 1 << level
        reduces += [Flow(k, node(k, role), node(k, role - step), REDUCE)
                    for k in chunks for role in range(step, count, 2 * step)]
    swaps: list[Flow | Exchange] = [Exchange(k, (node(k, 0), node(k, half))) for k in chunks]
    copies: list[Flow | Exchange] = []
    for level in reversed(range(levels)):
        step = 1 << level
        copies += [Flow(k, node(k, role - step), node(k, role), COPY)
                   for k in chunks for role in range(step, count, 2 * step)]
    spreads = [flow for i, n in enumerate(nodes) for flow in n.spread(need(i, last=True))]
    return reduces + swaps + copies + spreads


def _flows(nodes: list[_Node], num_chunks: int) -> list[list[Flow | Exchange]]:
    """The across-node forms for this node count (module docstring, step 2), each round-wise form
    listed phase by phase and in waves (``_listed``)."""
    count = len(nodes)
    rounds = (_exchange_rounds if count == 2 else _reduce_scatter_gather_rounds)(nodes, num_chunks)
    forms = [_listed(rounds, lookahead) for lookahead in (None, *LOOKAHEADS) if lookahead is None
             or lookahead < len(rounds)]
    if count > 2 and count & (count - 1) == 0:
        forms.append(_halving_flows(nodes, num_chunks))
    return forms


@lru_cache(maxsize=4)
def _forms(nodes: tuple[_Node, ...], num_chunks: int) -> tuple[tuple[Flow | Exchange, ...], ...]:
    """Every form to compare, in the order ties are kept (module docstring): per way the node
    partial reaches the head (through a reducing switch, either op, or not), the plain flows, then
    the staggered ones where they apply. Kept for the next call: they depend on the nodes and the
    chunks only, not on the size or the link rates (``optcoll expect`` asks at many)."""
    variants = [list(nodes)]
    if any(node.in_switch is not None for node in nodes):
        variants = [[replace(node, in_switch=op) if node.in_switch is not None else node for node in nodes]
                    for op in (REDUCE, COPY, None)]
    forms = []
    for variant in variants:
        forms += _flows(variant, num_chunks)
        try:
            forms.append(_staggered_flows(variant, num_chunks))
        except NotApplicable:
            pass
    return tuple(tuple(form) for form in forms)


def rail_exchange(instance: Instance) -> list[Flow | Exchange]:
    coll = instance.collective
    if coll.kind != "allreduce":
        raise NotApplicable(f"rail-exchange does not implement {coll.kind}; it is an AllReduce")
    forms = _forms(tuple(_nodes(instance)), coll.num_chunks)
    if len(forms) == 1:
        return list(forms[0])
    best: tuple[float, tuple[Flow | Exchange, ...]] | None = None
    refusal: NotApplicable | None = None
    for flows in forms:
        try:
            time = flows_makespan(instance, flows)
        except NotApplicable as error:  # an exchange the links could not keep apart
            refusal = refusal or error
            continue
        if best is None or time < best[0]:
            best = (time, flows)
    if best is None:
        raise refusal
    return list(best[1])
