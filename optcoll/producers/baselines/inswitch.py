"""In-switch AllReduce: every member reduces each chunk into a switch that reduces and multicasts,
which multicasts the sum straight back (written as ``flows``, DESIGN.md section 3's reducing and
multicast switches and section 5's copy and reduce semantics).

Per chunk k, in chunk order: every member sends its contribution of k into the switch (REDUCE),
and once the last of them has arrived the switch sends the sum to every member (COPY, one held
arrival on several out-links: a multicast). Pipelined over the chunks by the flow scheduler, chunk
k's reductions travel while chunk k − 1's sum comes back, so every member link carries each chunk
once each way and on equal links the AllReduce takes (C·N + 1) chunk times plus two latencies:
what ``allreduce-cut`` counts. With links of different speeds or latencies the switch's sum of a
chunk waits for its slowest contribution (the scheduler starts a send only after every
earlier-listed delivery into the switch arrived), so the schedule stays valid and its time is what
the shared verifier says.

NCCL's NVLS (``nccl.innetwork``) moves more: the switch returns each sum to the chunk's head,
which stores it back into the switch for the multicast, so each member link carries 1/N of the
data more each way. The two halves of the same flow list give ReduceScatter (the others' sum of
chunk k reduced into its owner, which keeps its own contribution) and AllGather (owner -> switch
-> the others).
"""
from __future__ import annotations

from optcoll.instances.instance import Instance
from optcoll.producers.base import NotApplicable
from optcoll.producers.baselines.flows import Flow
from optcoll.schedules.schedule import REDUCE

#: The collectives this producer implements.
KINDS = frozenset({"allreduce", "reducescatter", "allgather"})


def reducing_multicast_switch(instance: Instance) -> int:
    """The first switch that reduces and multicasts and has a link to and from every member."""
    machine, ranks = instance.machine, instance.collective.ranks
    for s in range(machine.num_npus, machine.num_nodes):
        switch = machine.switch(s)
        if not (switch.reduce and switch.multicast):
            continue
        if all(machine.links_between(v, s) and machine.links_between(s, v) for v in ranks):
            return s
    raise NotApplicable("inswitch needs one switch that multicasts and reduces with a link to and "
                        "from every member; this machine has none")


def inswitch(instance: Instance) -> list[Flow]:
    coll = instance.collective
    if coll.kind not in KINDS:
        raise NotApplicable(f"inswitch does not implement {coll.kind}; it implements "
                            f"{', '.join(sorted(KINDS))}")
    switch = reducing_multicast_switch(instance)
    flows: list[Flow] = []
    for k in range(coll.num_chunks):
        owner = coll.ranks[k // coll.chunks_per_rank]
        others = [v for v in coll.ranks if v != owner]
        if coll.kind == "allreduce":
            flows += [Flow(k, v, switch, REDUCE) for v in coll.ranks] + [Flow(k, switch, v) for v in coll.ranks]
        elif coll.kind == "reducescatter":
            flows += [Flow(k, v, switch, REDUCE) for v in others] + [Flow(k, switch, owner, REDUCE)]
        else:
            flows += [Flow(k, owner, switch)] + [Flow(k, switch, v) for v in others]
    return flows
