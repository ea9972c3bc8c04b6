"""In-switch AllReduce: every member reduces each chunk into a switch that reduces and multicasts,
which multicasts the sum straight back (written as ``flows``, docs/model.md §3's reducing and
multicast switches and section 5's copy and reduce semantics).

Per chunk k, in chunk order: every member sends its contribution of k into the switch (REDUCE),
and once the last of them has arrived the switch sends the sum to every member (COPY, one held
arrival on several out-links: a multicast). Pipelined over the chunks by the flow scheduler, chunk
k's reductions travel while chunk k − 1's sum comes back, so every member link carries each chunk
once each way and on equal links the AllReduce takes C·N + 1 link times (latency plus one
chunk's transfer, under link occupancy): what ``allreduce-cut`` counts. With links of different
speeds or latencies the switch's sum of a chunk waits for its slowest contribution (the scheduler starts a send only after every
earlier-listed delivery into the switch arrived), so the schedule stays valid and its time is what
the shared verifier says.

NCCL's NVLS (``nccl.innetwork``) moves more: the switch returns each sum to the chunk's head,
which stores it back into the switch for the multicast, so each member link carries 1/N of the
data more each way. The two halves of the same flow list give ReduceScatter (the others' sum of
chunk k reduced into its owner, which keeps its own contribution) and AllGather (owner -> switch
-> the others).

Across nodes joined by NIC rails, ``rail-exchange`` does the same inside each node (through the
node's switch) around its exchange or per-rail ReduceScatter + AllGather over the NICs.
"""
from __future__ import annotations

from collections.abc import Sequence

from optcoll.instances.instance import Instance
from optcoll.machines.machine import Machine
from optcoll.producers.base import NotApplicable
from optcoll.producers.baselines.flows import Flow
from optcoll.schedules.schedule import REDUCE

#: The collectives this producer implements.
KINDS = frozenset({"allreduce", "reducescatter", "allgather"})
NEEDS = "inswitch needs one switch that multicasts and reduces with a link to and from every member"


def _reduces_and_multicasts(machine: Machine, node: int) -> bool:
    return machine.switch(node).reduce and machine.switch(node).multicast


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


def inswitch(instance: Instance) -> list[Flow]:
    coll = instance.collective
    if coll.kind not in KINDS:
        raise NotApplicable(f"inswitch does not implement {coll.kind}; it implements "
                            f"{', '.join(sorted(KINDS))}")
    switch = _one_switch(instance.machine, coll.ranks)
    if switch is None:
        raise NotApplicable(f"{NEEDS}; this machine has no such switch")
    flows: list[Flow] = []
    for k in range(coll.num_chunks):
        owner = coll.ranks[k // coll.chunks_per_rank]
        if coll.kind == "allreduce":
            flows += [Flow(k, v, switch, REDUCE) for v in coll.ranks] + [Flow(k, switch, v) for v in coll.ranks]
        elif coll.kind == "reducescatter":
            flows += _reduce_into(k, switch, owner, coll.ranks)
        else:
            flows += _multicast_from(k, switch, owner, coll.ranks)
    return flows

