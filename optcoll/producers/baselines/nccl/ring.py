"""NCCL's ring (``src/device/all_gather.h``, ``all_reduce.h`` ``runRing``) on its own channels.

Every channel is a directed ring over all ranks (``topology.NcclTopology.channels``: rail-rotated
rings threading the nodes, or the directed rings NCCL packs into an NVLink mesh) and carries
1/nchannels of the data. NCCL cuts every rank's buffer into nchannels slices; here chunk c
travels channel c mod nchannels, which is exactly that layout (slot j of each buffer on channel
j) when nchannels divides C, and the same load per channel otherwise: with C = 1 each channel
carries N/nchannels whole blocks, where NCCL would carry a 1/nchannels slice of all N (the
instance's C fixes the granularity every producer works at). A chunk goes round its channel one
way, hop by hop, pipelined (AllGather: N-1 hops; Broadcast: the chain from the root). ReduceScatter and Reduce come by time reversal and AllReduce
as ReduceScatter then AllGather on the same channels (``compose``), which is the data flow of
``runRing``: each chunk reduced over N-1 hops to its owner, then copied over N-1 more.
"""
from __future__ import annotations

from optcoll.producers.baselines.algorithms import Messages, ring_messages
from optcoll.producers.baselines.nccl.topology import nccl_topology
from optcoll.producers.spread import SpreadProblem


def nccl_ring(problem: SpreadProblem) -> Messages:
    topo = nccl_topology(problem.machine, problem.ranks)
    rings = [list(ring) for ring in topo.channels]
    out = ring_messages(problem, rings, (1,))
    out.notes.update(channels=len(rings), nodes=topo.num_nodes)
    return out
