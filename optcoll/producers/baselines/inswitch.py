"""In-switch AllReduce: every member reduces each chunk into a switch that reduces and multicasts,
which multicasts the sum straight back (written as ``flows``, DESIGN.md section 3's reducing and
multicast switches and section 5's copy and reduce semantics).

Per chunk k, in chunk order: every member sends its contribution of k into the switch (REDUCE),
and once the last of them has arrived the switch sends the sum to every member (COPY, one held
arrival on several out-links: a multicast). Pipelined over the chunks by the flow scheduler, chunk
k's reductions travel while chunk k − 1's sum comes back, so every member link carries each chunk
once each way and on equal links the AllReduce takes C·N + 1 link times (latency plus one
chunk's transfer, under link occupancy): what ``allreduce-cut`` counts. With links of different speeds or latencies the switch's sum of a
chunk waits for its slowest contribution (the scheduler starts a send only after every
earlier-listed delivery into the switch arrived), so the schedule stays valid and its time is what
the shared verifier says.

NCCL's NVLS (``nccl.innetwork``) moves more: the switch returns each sum to the chunk's head,
which stores it back into the switch for the multicast, so each member link carries 1/N of the
data more each way. The two halves of the same flow list give ReduceScatter (the others' sum of
chunk k reduced into its owner, which keeps its own contribution) and AllGather (owner -> switch
-> the others).

**Across nodes** (AllReduce on nodes each on such a switch, joined by NIC rails, as NCCL sees them:
``nccl.topology``): chunk k's home in every node is its rail-(k mod R) GPU. Each node reduces its
other GPUs' contributions to k through its switch into the home (the ReduceScatter half above),
the homes exchange their node partials over their NICs (``railexchange``'s exchange: pairwise at
distance 1, 2, 4, … for a power-of-two node count, else all at once on up to ``MAX_NODES``),
and each home stores the sum into its switch, which multicasts it to the node (the AllGather
half). Every NVLink still carries each chunk once each way; the NICs carry log2(P) chunk copies
per rail chunk, so on many nodes NCCL's NVLS-tree (two per chunk) moves less over them.
"""
from __future__ import annotations

from collections.abc import Sequence

from optcoll.instances.instance import Instance
from optcoll.machines.machine import Machine
from optcoll.producers.base import NotApplicable
from optcoll.producers.baselines.flows import Exchange, Flow
from optcoll.producers.baselines.nccl.topology import nccl_topology
from optcoll.producers.baselines.railexchange import MAX_NODES, _exchanges
from optcoll.schedules.schedule import REDUCE

#: The collectives this producer implements.
KINDS = frozenset({"allreduce", "reducescatter", "allgather"})
NEEDS = ("inswitch needs one switch that multicasts and reduces with a link to and from every member, "
         "or (AllReduce) nodes each on such a switch joined by NIC rails")


def _reduces_and_multicasts(machine: Machine, node: int | None) -> bool:
    return node is not None and machine.switch(node).reduce and machine.switch(node).multicast


def _one_switch(machine: Machine, members: Sequence[int]) -> int | None:
    """The first switch that reduces and multicasts with a link to and from every member."""
    for s in range(machine.num_npus, machine.num_nodes):
        if _reduces_and_multicasts(machine, s) and all(
                machine.links_between(v, s) and machine.links_between(s, v) for v in members):
            return s
    return None


def _reduce_into(k: int, switch: int, owner: int, members: Sequence[int]) -> list[Flow]:
    """The others' contributions to chunk k summed in the switch and added into ``owner``'s."""
    return [Flow(k, v, switch, REDUCE) for v in members if v != owner] + [Flow(k, switch, owner, REDUCE)]


def _multicast_from(k: int, switch: int, owner: int, members: Sequence[int]) -> list[Flow]:
    """``owner``'s value of chunk k into the switch, multicast to the others."""
    return [Flow(k, owner, switch)] + [Flow(k, switch, v) for v in members if v != owner]


def inswitch(instance: Instance) -> list[Flow | Exchange]:
    coll = instance.collective
    if coll.kind not in KINDS:
        raise NotApplicable(f"inswitch does not implement {coll.kind}; it implements "
                            f"{', '.join(sorted(KINDS))}")
    switch = _one_switch(instance.machine, coll.ranks)
    if switch is None:
        if coll.kind != "allreduce":
            raise NotApplicable(f"{NEEDS}; this machine has no such switch")
        return _across_rails(instance)
    flows: list[Flow | Exchange] = []
    for k in range(coll.num_chunks):
        owner = coll.ranks[k // coll.chunks_per_rank]
        if coll.kind == "allreduce":
            flows += [Flow(k, v, switch, REDUCE) for v in coll.ranks] + [Flow(k, switch, v) for v in coll.ranks]
        elif coll.kind == "reducescatter":
            flows += _reduce_into(k, switch, owner, coll.ranks)
        else:
            flows += _multicast_from(k, switch, owner, coll.ranks)
    return flows


def _across_rails(instance: Instance) -> list[Flow | Exchange]:
    """AllReduce over nodes on switches that reduce and multicast, joined by NIC rails (module
    docstring)."""
    coll, machine = instance.collective, instance.machine
    topo = nccl_topology(machine, coll.ranks)
    if topo.num_nodes < 2:
        raise NotApplicable(f"{NEEDS}; this machine has neither")
    bare = [n for n, fabric in enumerate(topo.fabrics) if not _reduces_and_multicasts(machine, fabric)]
    if bare:
        raise NotApplicable(f"{NEEDS}; the node of {machine.label(topo.nodes[bare[0]][0])} has no such switch")
    if topo.num_rails < 1:
        raise NotApplicable(f"{NEEDS}; the nodes have no NIC rails")
    nodes = topo.num_nodes
    if nodes > MAX_NODES and nodes & (nodes - 1):
        raise NotApplicable(f"inswitch exchanges every node partial with each other node when their count is "
                            f"not a power of two; over {MAX_NODES} nodes ({nodes} here) it is not offered")
    flows: list[Flow | Exchange] = []
    for k in range(coll.num_chunks):
        homes = [topo.rails[n][k % topo.num_rails] for n in range(nodes)]
        for n in range(nodes):
            flows += _reduce_into(k, topo.fabrics[n], homes[n], topo.nodes[n])
        flows += _exchanges(k, homes)
        for n in range(nodes):
            flows += _multicast_from(k, topo.fabrics[n], homes[n], topo.nodes[n])
    return flows
