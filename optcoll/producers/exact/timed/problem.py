"""The timed-model problem in solver terms: links with durations, nodes with copy rights, chunks.

Every exact timed formulation (time-expanded or continuous) and the greedy fallback read this one
description, so the semantics of docs/model.md §5 live in one place:

* a transfer of chunk c on link e starting at t needs the sender to hold c at t and delivers at
  t + ``delay[e]``; the link is busy for ``[t, t + busy[e])`` (α + b/B, or b/B under
  ``occupancy = "serialization"``);
* NPUs and multicast switches hold what they receive and may send it on several links (``copy``);
  plain switches forward every arrival exactly once;
* with port limits, an NPU's transfers hold a port for ``[t + port_shift[e], ... + busy[e])``.

Built from the spread problems every producer shares (``optcoll.producers.spread``). A combining
collective (ReduceScatter, Reduce) is solved as its *dual* spread problem on the reversed machine
and then turned around in time (SCCL's inversion, ``reverse.py``). Mirroring is made exact here:
the reduction cost γ·b lengthens only the dual links whose original receiver combines, and port
windows sit at the end of a dual transfer (the mirror of an original transfer's start).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from optcoll.collectives.collective import ChunkSets, Collective
from optcoll.errors import InputError
from optcoll.instances.instance import Instance
from optcoll.machines.machine import Machine
from optcoll.producers import spread
from optcoll.producers.base import NotApplicable
from optcoll.producers.spread import COPY, EXCLUSIVE, SpreadProblem


@dataclass(frozen=True, eq=False)
class TimedProblem:
    """A non-combining collective on a machine in the timed model, times in seconds."""

    machine: Machine  # the machine the transfers run on (the reversed one for a dual)
    src: np.ndarray  # int64 per link
    dst: np.ndarray
    delay: np.ndarray  # seconds from a transfer's start to its delivery
    busy: np.ndarray  # seconds the link is occupied by one transfer
    port_shift: np.ndarray  # seconds from a transfer's start to the start of its port window
    copy: np.ndarray  # bool per node: may send a held chunk on several links
    port_limited: np.ndarray  # bool per node: port limits apply (NPUs, never switches)
    holders: ChunkSets  # who holds each chunk at t = 0
    need_chunk: np.ndarray  # (chunk, node) pairs that must receive a delivery
    need_node: np.ndarray
    send_ports: int | None
    recv_ports: int | None
    #: True when this is the dual of a combining collective (solutions get turned around).
    inverted: bool = False

    @property
    def num_nodes(self) -> int:
        return self.machine.num_nodes

    @property
    def num_links(self) -> int:
        return int(self.src.shape[0])

    @property
    def num_chunks(self) -> int:
        return self.holders.num_chunks

    def holds_at_start(self) -> np.ndarray:
        """Boolean (chunk, node) matrix of the precondition."""
        held = np.zeros((self.num_chunks, self.num_nodes), dtype=bool)
        chunks, nodes = self.holders.pairs()
        held[chunks, nodes] = True
        return held

    def needed(self) -> np.ndarray:
        """Boolean (chunk, node) matrix of the deliveries the collective asks for."""
        need = np.zeros((self.num_chunks, self.num_nodes), dtype=bool)
        need[self.need_chunk, self.need_node] = True
        return need


def _check(instance: Instance) -> None:
    if instance.model.kind != "timed":
        raise InputError(f"the timed solvers need the timed model, the instance uses {instance.model.kind!r}",
                         field="model.kind")


def _from_spread(sp: SpreadProblem, instance: Instance) -> TimedProblem:
    machine, model, coll = instance.machine, instance.model, instance.collective
    delay = sp.delay
    if sp.reversed:
        # The spread dual charges γ·b on every link; only those whose original receiver (the dual
        # sender) combines pay it. Exact delays keep the solver's lower bounds valid.
        delay = delay - np.where(sp.mode[sp.machine.link_src] == COPY, 0.0, model.reduce_cost * coll.chunk_bytes)
    need_chunk, need_node = sp.needs
    return TimedProblem(sp.machine, sp.machine.link_src, sp.machine.link_dst, delay, sp.busy,
                        delay - sp.busy if sp.reversed else np.zeros_like(delay), sp.mode == COPY,
                        np.arange(machine.num_nodes) < machine.num_npus, sp.pre, need_chunk, need_node,
                        sp.send_ports, sp.recv_ports, sp.reversed)


def direct_problem(instance: Instance) -> TimedProblem:
    """The problem of a non-combining collective as stated."""
    _check(instance)
    return _from_spread(spread.of_collective(instance), instance)


def invertible(collective: Collective) -> bool:
    """Inversion turns a broadcast tree into a reduction tree: one destination per chunk."""
    return collective.combining and bool((collective.post.counts() == 1).all())


def dual_problem(instance: Instance) -> TimedProblem:
    """The non-combining dual of a combining collective with one destination per chunk
    (ReduceScatter, Reduce): spread each chunk from its destination to its contributors on the
    reversed machine (``optcoll.producers.spread.dual``)."""
    _check(instance)
    coll = instance.collective
    if not invertible(coll):
        raise NotApplicable(f"{coll.kind} has chunks with several destinations; only reductions to "
                            "one node per chunk invert (AllReduce is solved as ReduceScatter + AllGather)")
    sp = spread.dual(instance, coll.post, coll.pre)
    if (sp.mode == EXCLUSIVE).any():
        raise NotApplicable("the exact timed solver does not model reductions through multicast switches "
                            "without in-network reduction (their arrivals replace each other)")
    return _from_spread(sp, instance)
