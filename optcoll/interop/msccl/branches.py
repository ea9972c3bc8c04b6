"""A multicast schedule as one send per branch, ordered so that switches that only route serve it in time.

MSCCL and MSCCL++ have no multicast: where a switch sends one arrival on k links, the GPU it
came from sends k copies, each crossing the GPU's port into the switch again. Issued in the
schedule's order those copies queue for the same receive ports (on an NVSwitch AllGather every
GPU first targets one receiver) and the export runs up to 23 % slower than its schedule. Through
one switch that is a matter of order, not of bandwidth: an AllGather's n - 1 copies leave each
GPU in the time its receive port takes to bring in the n - 1 chunks of the others, so in a good
order (a rotation: GPU g's k-th copy goes to g + k + 1, and every receive port has one sender at
a time) the unicast sends end when the multicast ones did.

``spread`` rebuilds the traffic of every switch that multicasts in the schedule, a star whose
every link leads to a GPU (an NVSwitch domain), hop by hop: each branch is a copy sent from the
GPU that holds the value (from when it holds it, before its value of the chunk changes) and
forwarded by the switch once, named by ``via``, reaching its receiver before the receiver's next
send of that chunk (else by the schedule's time) and after its last send of the older value.
Ports are filled in time order; a free port takes, among the copies it may send, one whose
receive port is free when it reaches the switch, then the one due first, then the nearest
receiver after the sender in the switch's ring of GPUs (the rotation). Transfers on every other
link keep their times. The result is a schedule for the machine whose switches only route
(``routes.routing_view``), which the caller verifies before using it.
"""
from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass

import numpy as np

from optcoll.collectives.collective import Collective
from optcoll.interop.gpuview import follow
from optcoll.machines.machine import Machine
from optcoll.schedules.schedule import COPY, REDUCE, Schedule


@dataclass(frozen=True)
class _Branch:
    """One send through a multicasting switch: the hop into it (on link ``up_link``, from the
    GPU the schedule's hop into the switch left) and the hop out (``down``: the schedule's row,
    on ``down_link``)."""

    up_link: int
    down: int
    down_link: int
    chunk: int
    sender: int
    receiver: int
    ready: float  # the sender holds the value from then ...
    expires: float  # ... until then
    after: float  # the receiver must get it after this (its last send of the older value)
    due: float  # and by this (its next send of the chunk, else the schedule's time)


def _multicasting(machine: Machine, schedule: Schedule, sources: tuple[int, ...]) -> list[int]:
    """The switches that send one arrival on more than one link in the schedule."""
    src = machine.link_src[schedule.link].tolist()
    uses = Counter((src[k], j) for k, j in enumerate(sources) if machine.is_switch(src[k]))
    return sorted({s for (s, _), count in uses.items() if count > 1})


def spread(machine: Machine, collective: Collective, schedule: Schedule, arrivals: np.ndarray,
           delay: np.ndarray, busy: np.ndarray, eps: float) -> Schedule | None:
    """The schedule with every multicasting switch's traffic sent as one copy per branch (module
    docstring); None when no switch multicasts, one that does is not a star of GPUs, or a
    transfer reduces into a switch (the result is for switches that only route)."""
    into = machine.link_dst[schedule.link]
    if np.any((schedule.op == REDUCE) & (into >= machine.num_npus)):
        return None
    sources = follow(machine, collective, schedule, arrivals, eps, "MSCCL-IR XML").sources
    hubs = _multicasting(machine, schedule, sources)
    src = machine.link_src[schedule.link].tolist()
    dst = machine.link_dst[schedule.link].tolist()
    touching = set(np.flatnonzero(np.isin(machine.link_src, hubs) | np.isin(machine.link_dst, hubs)).tolist())
    if not hubs or any(machine.is_switch(int(machine.link_src[e])) and machine.is_switch(int(machine.link_dst[e]))
                       for e in touching):
        return None
    branches = _branches(machine, schedule, arrivals, sources, set(hubs), src, dst, eps)
    rows = [j for j in range(len(schedule)) if int(schedule.link[j]) not in touching]
    kept = schedule.take(np.asarray(rows, dtype=np.int64))
    chunk, link, start = kept.chunk.tolist(), kept.link.tolist(), kept.start.tolist()
    op, via = kept.op.tolist(), kept.named().tolist()
    for hub in hubs:
        placed = _fill([b for b in branches if src[b.down] == hub], delay, busy, eps)
        if placed is None:
            return None
        for b, s, t in placed:
            chunk += [b.chunk, b.chunk]
            link += [b.up_link, b.down_link]
            start += [s, t]
            op += [COPY, int(schedule.op[b.down])]
            via += [-1, len(via)]  # the hop out names the hop in just added
    return Schedule(np.asarray(chunk, dtype=np.int64), np.asarray(link, dtype=np.int64),
                    np.asarray(start, dtype=float), np.asarray(op, dtype=np.uint8),
                    np.zeros(len(chunk), dtype=np.int64), None, schedule.meta, np.asarray(via, dtype=np.int64))


def _branches(machine: Machine, schedule: Schedule, arrivals: np.ndarray, sources: tuple[int, ...],
              hubs: set[int], src: list[int], dst: list[int], eps: float) -> list[_Branch]:
    """Every hop out of a hub as a branch, with the window its copy must keep (``_Branch``)."""
    chunk, start, link = schedule.chunk.tolist(), schedule.start.tolist(), schedule.link.tolist()
    landed: dict[tuple[int, int], list[float]] = {}  # (chunk, GPU) -> arrival times, sorted
    sent: dict[tuple[int, int], list[float]] = {}  # (chunk, GPU) -> start times, sorted
    for j in range(len(schedule)):
        landed.setdefault((chunk[j], dst[j]), []).append(float(arrivals[j]))
        sent.setdefault((chunk[j], src[j]), []).append(start[j])
    for times in (*landed.values(), *sent.values()):
        times.sort()
    end = float(arrivals.max(initial=0.0))
    out = []
    for k in range(len(schedule)):
        if src[k] not in hubs:
            continue
        j = sources[k]
        u, v, c = src[j], dst[k], chunk[k]
        came = landed.get((c, u), [])
        later = bisect.bisect_right(came, start[j] + eps)
        sends = sent.get((c, v), [])
        first = bisect.bisect_left(sends, float(arrivals[k]) - eps)
        out.append(_Branch(link[j], k, link[k], c, u, v,
                           float(arrivals[sources[j]]) if sources[j] >= 0 else 0.0,
                           came[later] if later < len(came) else np.inf,
                           sends[first - 1] if first > 0 else -np.inf,
                           sends[first] if first < len(sends) else end))
    return out


def _fill(branches: list[_Branch], delay: np.ndarray, busy: np.ndarray, eps: float
          ) -> list[tuple[_Branch, float, float]] | None:
    """Start times (into the hub, out of it) for one hub's branches: each port into the hub sends
    in time order, taking the copy the module docstring names; a port out of it takes each copy
    in its earliest free slot from the copy's arrival at the hub. None when a port holds copies
    that expire before it is free."""
    ring = sorted({b.sender for b in branches} | {b.receiver for b in branches})
    place = {g: i for i, g in enumerate(ring)}
    waiting: dict[int, list[_Branch]] = {}
    for b in sorted(branches, key=lambda b: (b.ready, b.down)):
        waiting.setdefault(b.up_link, []).append(b)
    free = {e: 0.0 for e in waiting}
    booked: dict[int, list[tuple[float, float]]] = {}
    out = []
    while waiting:
        e, s = min(((e, max(free[e], min(b.ready for b in bs))) for e, bs in waiting.items()),
                   key=lambda es: (es[1], es[0]))
        arrive = s + float(delay[e])
        options = []
        for b in waiting[e]:
            if b.ready > s + eps or s >= b.expires - eps:
                continue
            t = _slot(booked.get(b.down_link, []), max(arrive, b.after + 2 * eps - float(delay[b.down_link])),
                      float(busy[b.down_link]), eps)
            turn = (place[b.receiver] - place[b.sender]) % len(ring)
            options.append(((t > arrive + eps, b.due, turn, b.down), b, t))
        if not options:  # every copy this port holds has expired or is not ready: wait for the next
            later = [b.ready for b in waiting[e] if b.ready > s + eps]
            if not later:
                return None
            free[e] = min(later)
            continue
        _, b, t = min(options, key=lambda o: o[0])
        waiting[e].remove(b)
        if not waiting[e]:
            del waiting[e]
        free[e] = s + float(busy[e])
        bisect.insort(booked.setdefault(b.down_link, []), (t, t + float(busy[b.down_link])))
        out.append((b, s, t))
    return out


def _slot(taken: list[tuple[float, float]], earliest: float, length: float, eps: float) -> float:
    """The earliest start at or after ``earliest`` of ``length`` on a link whose busy intervals
    (sorted) are ``taken``."""
    t = earliest
    for a, b in taken:
        if b <= t + eps:
            continue
        if a >= t + length - eps:
            break
        t = b
    return t
