"""Directly emitted collectives: logical copies *and reductions* in, a timed schedule out.

A producer (DESIGN.md §7) for the timed model of §5, whose copy and reduce semantics it follows.

Most baselines are spread algorithms (``algorithms``) that ``compose`` turns into reductions by
time reversal. Algorithms whose AllReduce is not a ReduceScatter followed by an AllGather (NCCL's
trees, NVLS through a reducing switch, CollNet) are written here as *flows*: ordered logical
transfers (chunk, from, to, op), where op is copy (the receiver's value becomes the sender's) or
reduce (the sender's partial is added to the receiver's), with DESIGN.md section 5's semantics.

The scheduler keeps every (chunk, node) *sequentially consistent with the list order*, which is
what makes a flow list correct by construction (the shared verifier still checks it):

* a send of chunk c from x starts after every earlier-listed delivery of c into x arrived;
* a delivery of c into x starts after every earlier-listed send of c from x started (that send
  read the old value), and, when it or the previous delivery is a copy, after the previous
  delivery arrived (a copy replaces, so the order of deliveries matters; reductions commute).

Each transfer then takes the earliest start its data, its link (gaps left by earlier transfers are
filled, ``optcoll.producers.calendar``) and the port limits allow; among parallel links the one that
delivers first. A logical transfer between nodes without a direct link follows a shortest path
(by delay) whose relays must be switches: they get a copy, the last hop carries the op. An NPU
cannot relay a partial in the timed model (every arrival at an NPU replaces or adds to its own
value), so a path through an NPU is ``NotApplicable``.

By default a relay switch is ordered like an NPU (conservative). With ``queued_switches`` a plain
switch (no multicast, no reduction) queues its arrivals as DESIGN.md section 3 says, so arrivals of
one chunk through it need not wait for each other and each forward waits for its own arrival only;
the arrivals of a chunk at the switch and its forwards are kept in the order they are placed, so
its FIFO hands each forward the value placed for it (the shared verifier checks that too).
An *exchange* (``Flow.both_ways``) reduces two NPUs' partials into each other at once: the two
paths are placed hop by hop in step, so both first hops precede either delivery (each send reads
its value from before the other's arrives). That needs queueing plain switches on both ways (a
direct link would deliver before the other send starts, a buffering switch would keep only the
later value); otherwise the exchange is a reduce into dst and a copy of the sum back.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from optcoll.instances.instance import Instance
from optcoll.producers.base import NotApplicable
from optcoll.producers.baselines.listsched import Calendar, Routes
from optcoll.producers.spread import forward
from optcoll.schedules.schedule import COPY, REDUCE, Schedule, from_arrays


@dataclass(frozen=True)
class Flow:
    """One logical transfer of ``chunk`` from node ``src`` to node ``dst``."""

    chunk: int
    src: int
    dst: int
    op: int = COPY
    #: src and dst reduce their partials into each other at once (an exchange; op is REDUCE).
    both_ways: bool = False


class FlowScheduler:
    """Places flows one by one (module docstring)."""

    def __init__(self, instance: Instance, queued_switches: bool = False):
        coll = instance.collective
        problem = forward(instance, coll.pre, coll.post)
        timing = instance.model.link_timing(instance.machine, coll.chunk_bytes)
        self.machine = instance.machine
        self.routes = Routes(problem)
        self.calendar = Calendar(problem)
        self.delay = problem.delay.tolist()
        self.reduce_extra = float(timing.reduce_extra)
        width = self.machine.num_nodes
        self.width = width
        pre_c, pre_v = coll.pre.pairs()
        #: key (chunk·width + node) -> latest arrival of a delivery / start of a send; the op of
        #: the last delivery.
        self.arrived: dict[int, float] = {int(c) * width + int(v): 0.0
                                          for c, v in zip(pre_c.tolist(), pre_v.tolist())}
        self.sent: dict[int, float] = {}
        self.last_op: dict[int, int] = {}
        self.rows: list[tuple[int, int, float, int]] = []
        self.queued = [queued_switches and self.machine.is_switch(v)
                       and not (self.machine.switch(v).multicast or self.machine.switch(v).reduce)
                       for v in range(width)]

    def _hop(self, c: int, a: int, b: int, op: int, ready: float) -> float:
        """Chunk c over one link a→b starting no earlier than ``ready``; returns its arrival."""
        key_a, key_b = c * self.width + a, c * self.width + b
        if key_a not in self.arrived:
            raise AssertionError(f"flow sends chunk {c} from {self.machine.label(a)}, which holds "
                                 "nothing of it yet")
        if self.queued[a]:  # a plain switch's FIFO: forwards of a chunk in the order placed
            ready = max(ready, self.sent.get(key_a, 0.0))
        else:
            ready = max(ready, self.arrived[key_a])
        # into a plain switch: arrivals of a chunk in the order placed (its FIFO hands them on so)
        fifo = self.arrived.get(key_b, 0.0) if self.queued[b] else 0.0
        if not self.queued[b]:
            ready = max(ready, self.sent.get(key_b, 0.0))
            if op == COPY or self.last_op.get(key_b) == COPY:
                ready = max(ready, self.arrived.get(key_b, 0.0))
        extra = self.reduce_extra if op == REDUCE else 0.0
        best = None
        for e in self.machine.links_between(a, b):
            t, resources = self.calendar.earliest(e, max(ready, fifo - self.delay[e] - extra))
            arrival = t + self.delay[e] + extra
            if best is None or arrival < best[0]:
                best = (arrival, t, e, resources)
        assert best is not None, f"no link {a}->{b}"
        arrival, t, e, resources = best
        self.calendar.book(e, t, resources)
        self.rows.append((c, e, t, op))
        self.sent[key_a] = max(self.sent.get(key_a, 0.0), t)
        self.arrived[key_b] = max(self.arrived.get(key_b, 0.0), arrival)
        self.last_op[key_b] = op
        return arrival

    def _path(self, src: int, dst: int) -> list[int]:
        path = self.routes.path(src, dst)
        relays = [v for v in path[1:-1] if not self.machine.is_switch(v)]
        if relays:
            m = self.machine
            raise NotApplicable(
                f"{m.label(src)} -> {m.label(dst)} has no direct link and its shortest "
                f"path relays through NPU {m.label(relays[0])}; an NPU cannot pass a partial on "
                "unchanged in the timed model")
        return path

    def _hops(self, chunk: int, paths: list[list[int]], op: int, ready: float) -> float:
        """Each path from ``ready`` on, hop i of every path before hop i + 1 of any (so each
        relay switch sees the paths' arrivals and forwards in one order); the last hop of a
        path carries ``op``. Returns the last arrival."""
        times = [ready] * len(paths)
        for i in range(max(len(p) for p in paths) - 1):
            for j, path in enumerate(paths):
                if i < len(path) - 1:
                    last = i == len(path) - 2
                    times[j] = self._hop(chunk, path[i], path[i + 1], op if last else COPY, times[j])
        return max(times)

    def send(self, flow: Flow, ready: float = 0.0) -> float:
        """One logical transfer (routed through switches if needed, an exchange both ways at
        once); returns its (last) arrival."""
        paths = [self._path(flow.src, flow.dst)]
        if flow.both_ways:
            paths.append(self._path(flow.dst, flow.src))
            if not all(len(p) > 2 and all(self.queued[v] for v in p[1:-1]) for p in paths):
                there = self._hops(flow.chunk, paths[:1], flow.op, ready)
                return self._hops(flow.chunk, paths[1:], COPY, there)
        return self._hops(flow.chunk, paths, flow.op, ready)

    def schedule(self) -> Schedule:
        if not self.rows:
            return from_arrays([], [])
        c, e, t, op = (np.array(col) for col in zip(*self.rows))
        return from_arrays(c, e, t, op)


def schedule_flows(instance: Instance, flows: list[Flow], queued_switches: bool = False) -> Schedule:
    """The timed schedule of ``flows`` in list order (module docstring)."""
    scheduler = FlowScheduler(instance, queued_switches)
    for flow in flows:
        scheduler.send(flow)
    return scheduler.schedule()
