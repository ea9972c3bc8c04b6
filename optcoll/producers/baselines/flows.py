"""Directly emitted collectives: logical copies *and reductions* in, a timed schedule out.

A producer (docs/model.md §7) for the timed model of §5, whose copy and reduce semantics it follows.

Most baselines are spread algorithms (``algorithms``) that ``compose`` turns into reductions by
time reversal. Algorithms whose AllReduce is not a ReduceScatter followed by an AllGather (NCCL's
trees, NVLS through a reducing switch, CollNet) are written here as *flows*: ordered logical
transfers (chunk, from, to, op), where op is copy (the receiver's value becomes the sender's) or
reduce (the sender's partial is added to the receiver's), with docs/model.md §5's semantics.

The scheduler keeps every (chunk, node) *sequentially consistent with the list order*, which is
what makes a flow list correct by construction (the shared verifier still checks it):

* a send of chunk c from x starts after every earlier-listed delivery of c into x arrived;
* a delivery of c into x starts after every earlier-listed send of c from x started (that send
  read the old value), and, when it or the previous delivery is a copy, after the previous
  delivery arrived (a copy replaces, so the order of deliveries matters; reductions commute);
* a plain switch holds a first-in first-out queue per chunk instead of one value: there the
  deliveries of c arrive, and the sends of c leave, in list order, so chunks pass it
  concurrently; each hop out of a plain switch names the hop into it that it forwards (``via``,
  docs/model.md "Switches: forwarding simultaneous arrivals"), so partials that reach it at one
  instant leave it for the right places whatever order the schedule lists them in.

An ``Exchange`` lists sends between a set of NPUs that all read the values from before it (a
swap of partial sums): its deliveries must arrive after every member's sends started, which the
scheduler checks (``NotApplicable`` otherwise, never a wrong schedule). The members send in the
order their values are ready, earliest first (ties: as listed): through a plain switch, whose
queue keeps each chunk's arrivals in list order, a member of a fast node must not wait behind a
slower node's partial (on hetero-dgxa100-dgxh100-rail-2x8 an H100 head's partial queued behind
its A100 peer's held the A100 NIC's down link idle for 2.2 ms: 11.42 -> 9.71 ms).

Each transfer then takes the earliest start its data, its link (gaps left by earlier transfers are
filled, ``optcoll.producers.calendar``) and the port limits allow; among parallel links the one that
delivers first. A logical transfer between nodes without a direct link follows a shortest path
(by delay) among those whose relays are switches: they get a copy, the last hop carries the op.
An NPU cannot relay a partial in the timed model (every arrival at an NPU replaces or adds to its
own value), nor a switch that some flow reduces the same chunk into: the relayed copy would
replace the partial it sums there, or a later reduction would add to the relayed partial
(CollNet's member-to-head reductions through the reducing network switch were counted twice so).
Without such a path a flow is ``NotApplicable``.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import chain
from typing import NamedTuple

import numpy as np

from optcoll.instances.clock import check_current
from optcoll.instances.instance import Instance
from optcoll.producers.base import NotApplicable
from optcoll.producers.baselines.listsched import Calendar, ShortestPaths, compiled_pays, shortest_paths
from optcoll.producers.spread import forward
from optcoll.schedules.schedule import COPY, REDUCE, Schedule, from_arrays


class Flow(NamedTuple):
    """One logical transfer of ``chunk`` from node ``src`` to node ``dst``. A named tuple, not a
    dataclass: producers list hundreds of thousands per call on a 128-GPU cluster."""

    chunk: int
    src: int
    dst: int
    op: int = COPY


@dataclass(frozen=True)
class Exchange:
    """Every member sends its value of ``chunk`` to every other at once (``op`` into each)."""

    chunk: int
    members: tuple[int, ...]
    op: int = REDUCE


@dataclass(frozen=True)
class FlowArrays:
    """A flow list as columns: ``kind`` 0 for a ``Flow`` (``src`` → ``dst``), 1 for an ``Exchange``
    (its members ``members[member_ptr[i]:member_ptr[i + 1]]``)."""

    kind: np.ndarray
    chunk: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    op: np.ndarray
    member_ptr: np.ndarray
    members: np.ndarray


def flow_arrays(flows: Sequence[Flow | Exchange]) -> FlowArrays:
    groups = [f for f in flows if isinstance(f, Exchange)]
    rows = [(f.chunk, -1, -1, f.op) if isinstance(f, Exchange) else f for f in flows] if groups else flows
    table = np.fromiter(chain.from_iterable(rows), dtype=np.int64, count=4 * len(flows)).reshape(-1, 4)
    exchange = np.zeros(len(flows), dtype=bool)
    ptr = np.zeros(len(flows) + 1, dtype=np.int64)
    if groups:
        exchange = np.fromiter((isinstance(f, Exchange) for f in flows), dtype=bool, count=len(flows))
        ptr[1:][exchange] = [len(f.members) for f in groups]
    chunk, src, dst, op = np.ascontiguousarray(table.T)
    return FlowArrays(exchange.astype(np.int64), chunk, src, dst, op, np.cumsum(ptr),
                      np.array([v for f in groups for v in f.members], dtype=np.int64))


class FlowScheduler:
    """Places flows one by one (module docstring)."""

    def __init__(self, instance: Instance):
        coll = instance.collective
        problem = forward(instance, coll.pre, coll.post)
        timing = instance.model.link_timing(instance.machine, coll.chunk_bytes)
        self.machine = instance.machine
        self.problem = problem
        self.routes: dict[frozenset[int], ShortestPaths] = {}
        #: chunk -> switches that flows reduce it into (module docstring: relays)
        self.holding: dict[int, frozenset[int]] = {}
        self.calendar = Calendar(problem)
        self.delay = problem.delay.tolist()
        self.reduce_extra = float(timing.reduce_extra)
        self.width = self.machine.num_nodes
        self.sent: dict[int, float] = {}
        self.last_op: dict[int, int] = {}
        self.rows: list[tuple[int, int, float, int, int]] = []  # chunk, link, start, op, via
        machine = self.machine
        #: per node: a plain switch, which queues each chunk's arrivals first in, first out
        self.fifo = [machine.is_switch(v) and not (machine.switch(v).multicast or machine.switch(v).reduce)
                     for v in range(self.width)]

    @cached_property
    def arrived(self) -> dict[int, float]:
        """key (chunk·width + node) -> latest arrival of a delivery (0 where the chunk starts);
        ``sent``: the latest start of a send; ``last_op``: the op of the last delivery. Made on
        first use: the compiled placement keeps its own."""
        pre_c, pre_v = self.problem.pre.pairs()
        return {int(c) * self.width + int(v): 0.0 for c, v in zip(pre_c.tolist(), pre_v.tolist())}

    def _hop(self, c: int, a: int, b: int, op: int, ready: float, via: int = -1) -> float:
        """Chunk c over one link a→b starting no earlier than ``ready``; returns its arrival.
        ``via``: the row of the hop into ``a`` this one forwards (a plain switch; -1 otherwise)."""
        key_a, key_b = c * self.width + a, c * self.width + b
        if key_a not in self.arrived:
            raise AssertionError(f"flow sends chunk {c} from {self.machine.label(a)}, which holds "
                                 "nothing of it yet")
        ready = max(ready, self.arrived[key_a])
        if self.fifo[a]:  # departures in list order
            ready = max(ready, self.sent.get(key_a, 0.0))
        extra = self.reduce_extra if op == REDUCE else 0.0
        earliest_arrival = 0.0
        if self.fifo[b]:  # arrivals in list order
            earliest_arrival = self.arrived.get(key_b, 0.0)
        else:
            ready = max(ready, self.sent.get(key_b, 0.0))
            if op == COPY or self.last_op.get(key_b) == COPY:
                ready = max(ready, self.arrived.get(key_b, 0.0))
        best = None
        for e in self.machine.links_between(a, b):
            t, resources = self.calendar.earliest(e, max(ready, earliest_arrival - self.delay[e] - extra))
            arrival = t + self.delay[e] + extra
            while arrival < earliest_arrival:  # rounding: a tie must not put it ahead in the queue
                t, resources = self.calendar.earliest(e, float(np.nextafter(t, np.inf)))
                arrival = t + self.delay[e] + extra
            if best is None or arrival < best[0]:
                best = (arrival, t, e, resources)
        assert best is not None, f"no link {a}->{b}"
        arrival, t, e, resources = best
        self.calendar.book(e, t, resources)
        self.rows.append((c, e, t, op, via))
        self.sent[key_a] = max(self.sent.get(key_a, 0.0), t)
        self.arrived[key_b] = max(self.arrived.get(key_b, 0.0), arrival)
        self.last_op[key_b] = op
        return arrival

    def hold(self, flows: FlowArrays) -> None:
        """Records, per chunk, the switches that some flow reduces that chunk into: they sum
        partials of it, so no flow of it may relay through them (module docstring)."""
        reducing = flows.op == REDUCE
        single = reducing & (flows.kind == 0)
        counts = np.diff(flows.member_ptr)
        chunk = np.concatenate([flows.chunk[single], np.repeat(flows.chunk, counts)[np.repeat(reducing, counts)]])
        node = np.concatenate([flows.dst[single], flows.members[np.repeat(reducing, counts)]])
        switch = node >= self.machine.num_npus
        holding: dict[int, set[int]] = {}
        for c, v in zip(chunk[switch].tolist(), node[switch].tolist()):
            holding.setdefault(c, set()).add(v)
        self.holding = {c: frozenset(v) for c, v in holding.items()}

    def routes_avoiding(self, avoid: frozenset[int]) -> ShortestPaths:
        """Shortest paths whose relays are switches other than ``avoid``."""
        routes = self.routes.get(avoid)
        if routes is None:
            relays = np.arange(self.width) >= self.machine.num_npus
            relays[list(avoid)] = False
            routes = self.routes[avoid] = shortest_paths(self.problem, relays)
        return routes

    def _path(self, flow: Flow) -> list[int]:
        return self.routes_avoiding(self.holding.get(flow.chunk, frozenset())).path(flow.src, flow.dst)

    def send(self, flow: Flow, ready: float = 0.0) -> float:
        """One logical transfer (routed through switches if needed); returns its arrival."""
        path = self._path(flow)
        t = ready
        for i, (a, b) in enumerate(zip(path, path[1:])):
            via = len(self.rows) - 1 if i and self.fifo[a] else -1
            t = self._hop(flow.chunk, a, b, flow.op if i == len(path) - 2 else COPY, t, via)
        return t

    def exchange(self, exchange: Exchange) -> None:
        """Every member's sends (``Exchange``), each reading the member's value from before."""
        c, members = exchange.chunk, exchange.members
        keys = {v: c * self.width + v for v in members}
        missing = [v for v in members if keys[v] not in self.arrived]
        if missing:
            raise AssertionError(f"exchange sends chunk {c} from {self.machine.label(missing[0])}, which "
                                 "holds nothing of it yet")
        before = {v: self.arrived[keys[v]] for v in members}
        members = tuple(sorted(members, key=lambda v: before[v]))  # earliest ready sends first
        latest = dict(before)
        starts: dict[int, float] = {}
        arrivals: dict[int, float] = {}
        for shift in range(1, len(members)):  # round robin: every member's i-th send side by side
            for i, v in enumerate(members):
                w = members[(i + shift) % len(members)]
                self.arrived[keys[v]] = before[v]  # the send reads the value from before the exchange
                first = len(self.rows)
                arrival = self.send(Flow(c, v, w, exchange.op))
                starts[v] = max(starts.get(v, 0.0), self.rows[first][2])
                arrivals[w] = min(arrivals.get(w, np.inf), arrival)
                latest[w] = max(latest[w], arrival)
                self.arrived[keys[v]] = latest[v]
        late = [v for v in members if arrivals[v] <= starts[v]]
        if late:
            raise NotApplicable(f"exchange of chunk {c}: {self.machine.label(late[0])} could not send before "
                                "the others' values reached it (links too busy); its send would count them twice")

    def columns(self) -> tuple[np.ndarray, ...]:
        """(chunk, link, start, op, via) of the placed transfers."""
        if not self.rows:
            return (np.zeros(0, np.int64),) * 2 + (np.zeros(0),) + (np.zeros(0, np.int64),) * 2
        return tuple(np.array(col) for col in zip(*self.rows))


def _placed(instance: Instance, flows: list[Flow | Exchange]) -> tuple[tuple[np.ndarray, ...], float]:
    """Places ``flows`` in list order; under a solver's clock (a start schedule), until it ends.
    The placed transfers' columns (``FlowScheduler.columns``) and the last arrival. Large lists
    run compiled (``compiled``, the same placement)."""
    scheduler = FlowScheduler(instance)
    arrays = flow_arrays(flows)
    scheduler.hold(arrays)
    if compiled_pays(scheduler.problem, len(flows)):
        from optcoll.producers.baselines import compiled  # numba: loaded only here

        return compiled.place_flows(scheduler, arrays)
    for flow in flows:
        check_current()
        if isinstance(flow, Exchange):
            scheduler.exchange(flow)
        else:
            scheduler.send(flow)
    return scheduler.columns(), max(scheduler.arrived.values(), default=0.0)


def schedule_flows(instance: Instance, flows: list[Flow | Exchange]) -> Schedule:
    """The timed schedule of ``flows`` in list order (module docstring)."""
    (c, e, t, op, via), _ = _placed(instance, flows)
    return from_arrays(c, e, t, op, via=via)


def flows_makespan(instance: Instance, flows: list[Flow | Exchange]) -> float:
    """When the last of ``flows`` arrives in ``schedule_flows``'s placement (for a producer that
    compares flow lists; the verifier still checks the one it keeps)."""
    return _placed(instance, flows)[1]
