"""From solver transfers to schedules on the user's machine, and SCCL's inversion for reductions.

A ReduceScatter (Reduce) schedule is an AllGather (Broadcast) schedule on the reversed machine
run backwards: a copy on reversed link e at [t, t + d) becomes a reduce on the original link e
at [T − t − d, T − t); a plain switch's departures name the arrivals they forward
(``optcoll.producers.forwarding``). That needs the dual schedule to be a forest — each node receives each
chunk once and every delivery is used — or a partial would be counted twice or lost, so
``essential`` first strips redundant and dead-end transfers (which only ever helps a schedule).
"""
from __future__ import annotations

import numpy as np

from optcoll.producers.exact.timed.listsched import Transfers
from optcoll.producers.forwarding import forwarded_by
from optcoll.verify.problem import plain_switches
from optcoll.producers.exact.timed.problem import TimedProblem
from optcoll.schedules.schedule import COPY, REDUCE, Schedule, from_arrays


def essential(problem: TimedProblem, transfers: Transfers, delay: np.ndarray) -> Transfers:
    """Drops later deliveries to copy nodes and deliveries nothing uses, until none is left.

    ``transfers`` is a valid schedule with link delays ``delay`` (seconds or epochs). A plain
    switch keeps as many arrivals as it forwards, the earliest ones (its forwards can always use
    the earliest arrivals).
    """
    held = problem.holds_at_start()
    needed = problem.needed()
    arrive = transfers.start + delay[transfers.link]
    order = np.lexsort((transfers.chunk, transfers.link, arrive))
    t = transfers.take(order)
    src, dst = problem.src[t.link], problem.dst[t.link]
    keep = ~held[t.chunk, dst]
    first: set[tuple[int, int]] = set()
    for i in np.flatnonzero(keep):
        key = (int(t.chunk[i]), int(dst[i]))
        if problem.copy[dst[i]]:
            if key in first:
                keep[i] = False
            first.add(key)
    while True:
        sends: dict[tuple[int, int], int] = {}
        for i in np.flatnonzero(keep):
            key = (int(t.chunk[i]), int(src[i]))
            sends[key] = sends.get(key, 0) + 1
        changed = False
        arrivals: dict[tuple[int, int], list[int]] = {}
        for i in np.flatnonzero(keep):
            arrivals.setdefault((int(t.chunk[i]), int(dst[i])), []).append(int(i))
        for (c, v), rows in arrivals.items():
            used = needed[c, v] or sends.get((c, v), 0) > 0
            if problem.copy[v]:
                if not used:
                    keep[rows] = False
                    changed = True
            else:
                surplus = len(rows) - sends.get((c, v), 0)
                if surplus > 0:
                    keep[rows[-surplus:]] = False  # the latest arrivals
                    changed = True
        if not changed:
            return t.take(np.flatnonzero(keep))


def to_schedule(problem: TimedProblem, transfers: Transfers, **meta) -> Schedule:
    """A schedule on the original machine from transfers in seconds (turned around if inverted)."""
    if not problem.inverted:
        t = transfers.take(np.lexsort((transfers.chunk, transfers.link, transfers.start)))
        return from_arrays(t.chunk, t.link, t.start, np.full(len(t), COPY, dtype=np.uint8), **meta)
    t = essential(problem, transfers, problem.delay)
    arrive = t.start + problem.delay[t.link]
    end = float(arrive.max(initial=0.0))
    start = np.maximum(end - arrive, 0.0)
    # The original receiver is the dual sender; it combines unless it is a switch that cannot.
    op = np.where(problem.copy[problem.src[t.link]], REDUCE, COPY).astype(np.uint8)
    via = forwarded_by(t.chunk, problem.src[t.link], problem.dst[t.link], t.start, arrive,
                       plain_switches(problem.machine))
    order = np.lexsort((t.chunk, t.link, start))
    return from_arrays(t.chunk, t.link, start, op, via=via, **meta).take(order)


def from_schedule(problem: TimedProblem, schedule: Schedule) -> Transfers:
    """A user's (original-machine, seconds) schedule as transfers of ``problem``."""
    chunk, link, start = schedule.chunk, schedule.link, schedule.start.astype(float)
    if not problem.inverted:
        return Transfers(chunk.copy(), link.copy(), start.copy())
    arrive = start + problem.delay[link]
    end = float(arrive.max(initial=0.0))
    return Transfers(chunk.copy(), link.copy(), np.maximum(end - arrive, 0.0))
