"""The order a GPU issues its sends into a switch, so that MSCCL's runtime serves them in time.

A verified schedule may hold a chunk in a switch while chunks that arrive later pass it. MSCCL
cannot: a send through a switch takes each hop's earliest free slot when it is issued (ties to
the lower GPU), so a chunk issued early takes a switch port another chunk needs sooner, and a
routed export re-imports slower than its schedule (``export.py`` measures it). The exporter may
instead issue a GPU's sends into a switch in another order, within the same start times on that
port: an equally valid schedule of the same transfers, which this module builds in two moves.

* ``by_departure``: on every GPU's port into a switch, the same start times go to the chunks in
  the order they leave the switch (earliest deadline first among the chunks the GPU holds by
  then, each before the GPU's value of it changes): a chunk then waits in a switch only where
  the port slots force it to.
* ``blame`` and ``swap``: a re-import that is still slower names the first transfer a GPU issued
  late; following its data back through the hops that were late leads to a hop out of a switch
  whose slot a chunk meant to go later took, and that chunk's first hop trades places with the
  next one on its port.

* A schedule in which a switch multicasts starts instead from ``branches.spread``: one copy per
  branch, each GPU's copies in rotation over their receivers, for the machine whose switches
  only route; ``blame`` and ``swap`` then work on it as on any other.

Every candidate is verified (valid, no slower) before it is used; ``fastest`` keeps the one
whose re-import is fastest, for either exporter (MSCCL XML, MSCCL++ plans: each passes its own
round trip).
"""
from __future__ import annotations

import bisect
import dataclasses
from collections import Counter
from collections.abc import Callable
from typing import TypeVar

import numpy as np

from optcoll.collectives.collective import Collective
from optcoll.instances.instance import TimeModel
from optcoll.interop.gpuview import follow
from optcoll.interop.msccl.branches import spread
from optcoll.interop.msccl.routes import routing_view
from optcoll.machines.machine import Machine
from optcoll.schedules.schedule import Schedule
from optcoll.verify import verify
from optcoll.verify.problem import ABSOLUTE_TOLERANCE, RELATIVE_TOLERANCE, plain_switches

#: Trades of first hops (``blame``) tried after the by-departure order before keeping the best.
MAX_TRADES = 32

Artifact = TypeVar("Artifact")


def by_departure(machine: Machine, collective: Collective, schedule: Schedule, arrivals: np.ndarray,
                 delay: np.ndarray, eps: float) -> Schedule | None:
    """The schedule with every GPU port into a switch reissued in the order its chunks leave the
    switch (module docstring), each hop out of a plain switch naming the arrival it forwards
    (``via``) so that reordered arrivals change no pairing; None when nothing moves."""
    n = len(schedule)
    src = machine.link_src[schedule.link].tolist()
    dst = machine.link_dst[schedule.link].tolist()
    start, chunk, link = schedule.start.tolist(), schedule.chunk.tolist(), schedule.link.tolist()
    sources = follow(machine, collective, schedule, arrivals, eps, "MSCCL-IR XML").sources
    leaves: dict[int, float] = {}  # a transfer into a switch -> when the switch first sends it on
    for k, j in enumerate(sources):
        if j >= 0 and machine.is_switch(src[k]):
            leaves[j] = min(leaves.get(j, np.inf), start[k])
    landed: dict[tuple[int, int], list[float]] = {}  # (chunk, node) -> arrival times, sorted
    for j in range(n):
        landed.setdefault((chunk[j], dst[j]), []).append(float(arrivals[j]))
    for times in landed.values():
        times.sort()
    ports: dict[int, list[int]] = {}
    for j in range(n):
        if j in leaves and not machine.is_switch(src[j]):
            ports.setdefault(link[j], []).append(j)
    new = list(start)
    for e, js in ports.items():
        ready, expires, due = {}, {}, {}
        for j in js:
            ready[j] = float(arrivals[sources[j]]) if sources[j] >= 0 else 0.0
            times = landed.get((chunk[j], src[j]), [])
            later = bisect.bisect_right(times, start[j] + eps)
            expires[j] = times[later] if later < len(times) else np.inf  # the GPU's value changes
            due[j] = leaves[j] - float(delay[e])
        waiting = list(js)
        for t in sorted(start[j] for j in js):
            pick = min((j for j in waiting if ready[j] <= t + eps and t < expires[j] - eps),
                       key=lambda j: (due[j], start[j], j))
            if t > due[pick] + eps:
                return None
            new[pick] = t
            waiting.remove(pick)
    if new == start:
        return None
    via = np.where(plain_switches(machine)[np.asarray(src, dtype=np.int64)], np.asarray(sources), -1)
    return dataclasses.replace(schedule, start=np.asarray(new, dtype=float),
                               via=via if (via >= 0).any() else None)


def _occurrences(schedule: Schedule) -> dict[tuple[int, int, int], int]:
    """Row of each (chunk, link, k): the k-th crossing of that link by that chunk, in time order."""
    count: dict[tuple[int, int], int] = {}
    out = {}
    for j in np.lexsort((np.arange(len(schedule)), schedule.start)).tolist():
        key = (int(schedule.chunk[j]), int(schedule.link[j]))
        out[(*key, count.get(key, 0))] = j
        count[key] = count.get(key, 0) + 1
    return out


def blame(machine: Machine, target: Schedule, back: Schedule, delay: np.ndarray, busy: np.ndarray,
          eps: float) -> tuple[int, int] | None:
    """Rows of ``target`` (the exported schedule) whose first-hop start times to trade, judged by
    ``back`` (its re-import, every hop out of a switch naming its ``via``): the first hop of the
    chunk that took a switch port's slot from a chunk the target sends sooner, and the next first
    hop on its GPU's port. None when the lateness has another cause or nothing comes after it."""
    mine, theirs = _occurrences(target), _occurrences(back)
    goal = np.full(len(back), -np.inf)
    rows = np.full(len(back), -1, dtype=np.int64)
    for key, j in theirs.items():
        if key in mine:
            rows[j], goal[j] = mine[key], target.start[mine[key]]
    late = back.start > goal + eps
    src, dst = machine.link_src[back.link], machine.link_dst[back.link]
    switch = np.array([machine.is_switch(v) for v in range(machine.num_nodes)])
    issued = np.flatnonzero(late & ~switch[src])
    if not len(issued):
        return None
    j = int(issued[np.argmin(back.start[issued])])
    into: dict[tuple[int, int], list[tuple[float, int]]] = {}
    on: dict[int, list[tuple[float, int]]] = {}
    for i in range(len(back)):
        into.setdefault((int(back.chunk[i]), int(dst[i])), []).append((float(back.start[i] + delay[back.link[i]]), i))
        on.setdefault(int(back.link[i]), []).append((float(back.start[i]), i))
    for xs in (*into.values(), *on.values()):
        xs.sort()
    while not switch[src[j]]:  # a GPU issued j late: its data came late, or its port was busy
        came = into.get((int(back.chunk[j]), int(src[j])), [])
        k = bisect.bisect_right(came, (float(back.start[j]) + eps, len(back))) - 1
        if k >= 0 and came[k][0] > goal[j] + eps and late[came[k][1]]:
            j = came[k][1]
            continue
        before = on[int(back.link[j])]
        k = bisect.bisect_left(before, (float(back.start[j]), -1)) - 1
        if k < 0 or not late[before[k][1]]:
            return None
        j = before[k][1]
    while back.via is not None and back.via[j] >= 0 and switch[src[back.via[j]]] and late[back.via[j]]:
        j = int(back.via[j])  # late into the switch as well: the slot was lost further back
    slot, length = goal[j], float(busy[back.link[j]])
    thieves = [i for t, i in on[int(back.link[j])]
               if abs(t - slot) < length - eps and rows[i] >= 0 and target.start[rows[i]] > slot + eps]
    if not thieves or back.via is None:
        return None
    i = thieves[0]
    while switch[src[i]]:
        if back.via[i] < 0:
            return None
        i = int(back.via[i])
    first = int(rows[i])
    if first < 0:
        return None
    port = np.flatnonzero((target.link == target.link[first]) & (target.start > target.start[first] + eps))
    if not len(port):
        return None
    return first, int(port[np.argmin(target.start[port])])


def swap(schedule: Schedule, a: int, b: int) -> Schedule:
    """The schedule with rows ``a`` and ``b`` trading start times."""
    start = schedule.start.copy()
    start[a], start[b] = start[b], start[a]
    return dataclasses.replace(schedule, start=start)


def fastest(machine: Machine, collective: Collective, schedule: Schedule, model: TimeModel, due: float,
            round_trip: Callable[[Machine, Schedule], tuple[Artifact, float, Schedule]],
            best: tuple[Artifact, float, int]) -> tuple[Artifact, float, int]:
    """The exported artifact (and its re-imported time, and how many sends into switches it issues
    at times the schedule does not) of the fastest of ``best`` and the reissued schedules: sends
    into switches by departure (a schedule in which a switch multicasts: one copy per branch,
    ``branches.spread``, on the machine whose switches only route), then up to ``MAX_TRADES``
    trades of the first hop ``blame`` names, while each stays valid and no slower than the
    schedule and its re-import is later than ``due``. ``round_trip``: a schedule's artifact, its
    re-imported time and schedule, on the machine given."""
    timing = model.link_timing(machine, collective.chunk_bytes)
    result = verify(machine, collective, schedule, model)
    eps = RELATIVE_TOLERANCE * max(float(result.arrivals.max(initial=0.0)), 1e-30) + ABSOLUTE_TOLERANCE
    on, target = machine, spread(machine, collective, schedule, result.arrivals, timing.delay, timing.busy, eps)
    if target is None:
        target = by_departure(machine, collective, schedule, result.arrivals, timing.delay, eps)
    else:
        on = routing_view(machine)
    for _ in range(MAX_TRADES + 1):
        if target is None:
            break
        checked = verify(on, collective, target, model)
        if not checked.valid or late(checked.time, result.time):
            break
        artifact, again, back = round_trip(on, target)
        if again < best[1]:
            best = (artifact, again, moved(on, schedule, target))
        if not late(again, due):
            break
        move = blame(on, target, back, timing.delay, timing.busy, eps)
        target = None if move is None else swap(target, *move)
    return best


def moved(machine: Machine, schedule: Schedule, target: Schedule) -> int:
    """Sends from a GPU into a switch in ``target`` that ``schedule`` does not make at that time."""
    def sends(s: Schedule) -> Counter[tuple[int, int, float]]:
        into = (machine.link_src[s.link] < machine.num_npus) & (machine.link_dst[s.link] >= machine.num_npus)
        return Counter(zip(s.chunk[into].tolist(), s.link[into].tolist(), s.start[into].tolist()))

    return sum((sends(target) - sends(schedule)).values())


def late(again: float, due: float) -> bool:
    """A re-import later than ``due`` beyond the verifier's tolerance."""
    return again > due * (1 + 1e-9) + ABSOLUTE_TOLERANCE
