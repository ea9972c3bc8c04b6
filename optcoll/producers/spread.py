"""The problem every schedule producer in optcoll really solves: *spread* chunks, never combine.

A spread problem asks that every chunk travel from its holders to its destinations by copies.
Non-combining collectives are spread problems as they stand. Combining ones are reduced to spread
problems by ``optcoll.producers.compose`` (SCCL's inversion): reducing to a home is the time
reversal of spreading from the home on the reversed machine. So the greedy, the list scheduler
and every classical baseline implement one thing, and combining semantics live in one place.

Node modes say what a node may do with a chunk that arrived (the verifier's roles, seen from a
producer that only copies):

* ``COPY``: keeps it and may send it on any number of links (NPUs, multicast switches; in a dual
  problem, switches with in-network reduction, whose copies become reductions when reversed);
* ``FIFO``: each arrival may be forwarded once (plain switches);
* ``EXCLUSIVE``: like FIFO, and a new arrival of the chunk may start only after the previous one
  was forwarded. Only dual problems use it, for multicast switches without reduction: reversed,
  their arrivals are copies that *replace* the held value, so two must never be held at once.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from optcoll.collectives.collective import ChunkSets, Collective
from optcoll.instances.instance import Instance
from optcoll.machines.machine import Machine

COPY, FIFO, EXCLUSIVE = 0, 1, 2


@dataclass(frozen=True)
class Shape:
    """What a spread problem looks like, for producers that only know some patterns.

    ``kind``: "broadcast" (one common holder, every member a destination), "allgather" (one holder
    per chunk, every member a destination), "gather"/"scatter"/"alltoall" (one holder and one
    destination per chunk: all to one root, one root to all, every ordered pair) or "p2p" (one
    holder and one destination per chunk otherwise), else "custom".
    """

    kind: str
    root: int | None = None


@dataclass(frozen=True, eq=False)
class SpreadProblem:
    """Deliver every chunk from ``pre`` holders to ``post`` destinations on ``machine``.

    ``delay``: seconds from a transfer's start to its delivery, per link; ``busy``: seconds a
    transfer keeps its link, per link; ``mode``: per node (module docstring). ``reversed`` marks a
    dual problem (on the reversed machine, to be time-reversed into reductions).
    """

    machine: Machine
    ranks: tuple[int, ...]
    pre: ChunkSets
    post: ChunkSets
    chunk_bytes: float
    delay: np.ndarray
    busy: np.ndarray
    mode: np.ndarray
    send_ports: int | None = None
    recv_ports: int | None = None
    reversed: bool = False

    @property
    def num_chunks(self) -> int:
        return self.pre.num_chunks

    @cached_property
    def port_shift(self) -> np.ndarray:
        """Per link, seconds from a transfer's start to the start of its port window, which lasts
        ``busy``. A dual transfer over [t, t + delay) is, reversed, a transfer that starts at the
        mirror of t + delay, so its port window sits at the end: [t + delay − busy, t + delay).
        Under link occupancy that is [t, t + busy); under serialization occupancy the latency
        comes first (a producer that put the window at the start broke the port limit once
        reversed)."""
        return self.delay - self.busy if self.reversed else np.zeros_like(self.delay)

    @property
    def num_nodes(self) -> int:
        return self.machine.num_nodes

    @cached_property
    def needs(self) -> tuple[np.ndarray, np.ndarray]:
        """(chunk, node) pairs a transfer must deliver: destinations that do not hold the chunk."""
        post_c, post_v = self.post.pairs()
        pre_c, pre_v = self.pre.pairs()
        width = self.num_nodes
        held = np.isin(post_c * width + post_v, pre_c * width + pre_v)
        return post_c[~held], post_v[~held]

    @cached_property
    def has_relays(self) -> bool:
        """Whether some node is neither a holder nor a destination of some chunk.

        Only then must chunks be routed through nodes that do not want them (switches,
        sub-communicators, gathers, ...); otherwise every neighbour is a destination.
        """
        covered = self.pre.counts() + np.bincount(self.needs[0], minlength=self.num_chunks)
        return bool(np.any(covered < self.num_nodes))

    @cached_property
    def shape(self) -> Shape:
        return classify(self.ranks, self.pre, self.post)


def classify(ranks: tuple[int, ...], pre: ChunkSets, post: ChunkSets) -> Shape:
    """The ``Shape`` of a (pre, post) pair over ``ranks``."""
    members = np.array(sorted(ranks), dtype=np.int64)
    single_pre = bool(np.all(pre.counts() == 1))
    if not single_pre or pre.num_chunks == 0:
        return Shape("custom")
    holders = pre.nodes
    post_counts = post.counts()
    everyone = bool(np.all(post_counts == members.size)) and bool(
        np.all(post.nodes == np.tile(members, pre.num_chunks)))
    if everyone:
        if np.all(holders == holders[0]):
            return Shape("broadcast", int(holders[0]))
        return Shape("allgather")
    if not np.all(post_counts == 1):
        return Shape("custom")
    dests = post.nodes
    if np.all(dests == dests[0]):
        return Shape("gather", int(dests[0]))
    if np.all(holders == holders[0]):
        return Shape("scatter", int(holders[0]))
    moving = holders != dests
    width = int(members.max()) + 1
    pairs = np.unique(holders[moving] * width + dests[moving])
    if pairs.size == members.size * (members.size - 1):
        return Shape("alltoall")
    return Shape("p2p")


def forward(instance: Instance, pre: ChunkSets, post: ChunkSets) -> SpreadProblem:
    """The spread problem on the instance's own machine: copies as the verifier sees them."""
    machine, model, coll = instance.machine, instance.model, instance.collective
    timing = model.link_timing(machine, coll.chunk_bytes)
    delay, busy = timing.delay.copy(), timing.busy.copy()
    mode = np.array([COPY] * machine.num_npus
                    + [COPY if s.multicast else FIFO for s in machine.switches], dtype=np.int8)
    return SpreadProblem(machine, coll.ranks, pre, post, coll.chunk_bytes, delay, busy, mode,
                         model.send_ports, model.recv_ports, False)


def dual(instance: Instance, pre: ChunkSets, post: ChunkSets) -> SpreadProblem:
    """The spread problem whose time reversal reduces ``post`` holders' partials into ``pre``.

    On the reversed machine (same link ids, turned around). Every transfer becomes a reduction
    when reversed, so its delay carries the reduction cost γ·b; send and receive ports swap.
    """
    machine, model, coll = instance.machine, instance.model, instance.collective
    timing = model.link_timing(machine, coll.chunk_bytes, reduce=True)
    delay, busy = timing.delay.copy(), timing.busy.copy()
    mode = np.array([COPY] * machine.num_npus
                    + [COPY if s.reduce else EXCLUSIVE if s.multicast else FIFO
                       for s in machine.switches], dtype=np.int8)
    return SpreadProblem(machine.reversed(), coll.ranks, pre, post, coll.chunk_bytes, delay, busy,
                         mode, model.recv_ports, model.send_ports, True)


def of_collective(instance: Instance, collective: Collective | None = None) -> SpreadProblem:
    """A non-combining collective as a forward spread problem."""
    coll = collective or instance.collective
    if coll.combining:
        raise ValueError(f"{coll.kind} combines; use optcoll.producers.compose")
    return forward(instance, coll.pre, coll.post)


def mirror_links(source: SpreadProblem, target: SpreadProblem) -> np.ndarray | None:
    """``m`` with ``m[e]`` a target link doing exactly what source link ``e`` does, or None.

    When it exists (same nodes, holders, destinations, node modes and ports, and a bijection of
    links preserving endpoints, delay and occupancy), every solution of ``source`` solves
    ``target`` once its links are renamed through ``m``. A dual problem and the forward one of a
    mirror-symmetric network (every link has a twin the other way with equal latency and
    bandwidth, equal port limits, no reduction cost) are related so: TACOS's AllReduce, a
    ReduceScatter followed by its mirror image, rests on it. Parallel links with equal keys are
    interchangeable, so any matching of them serves.
    """
    a, b = source.machine, target.machine
    if (a.num_nodes != b.num_nodes or a.num_links != b.num_links
            or source.ranks != target.ranks or source.chunk_bytes != target.chunk_bytes
            or (source.send_ports, source.recv_ports) != (target.send_ports, target.recv_ports)
            or not np.array_equal(source.mode, target.mode)
            or not _same_sets(source.pre, target.pre) or not _same_sets(source.post, target.post)):
        return None
    keys_a = (source.busy, source.delay, a.link_dst, a.link_src)
    keys_b = (target.busy, target.delay, b.link_dst, b.link_src)
    order_a, order_b = np.lexsort(keys_a), np.lexsort(keys_b)
    if not all(np.array_equal(ka[order_a], kb[order_b]) for ka, kb in zip(keys_a, keys_b)):
        return None
    mapping = np.empty(a.num_links, dtype=np.int64)
    mapping[order_a] = order_b
    return mapping


def _same_sets(x: ChunkSets, y: ChunkSets) -> bool:
    return np.array_equal(x.indptr, y.indptr) and np.array_equal(x.nodes, y.nodes)
