"""Route transfers of the direct AllReduce model and their schedules on the machine's links.

A ``RouteTransfers`` row is one chunk sent along one route from an epoch, as a reduction or a
copy into the route's receiver. ``to_schedule`` places each hop on a concrete link of its group
(first fit in time); a hop out of a plain switch names the hop into it that it forwards (``via``,
docs/model.md "Switches: forwarding simultaneous arrivals"), so the partials of one instant
leave for the right places whatever order the schedule is listed in. ``from_schedule`` reads a timed schedule back into route
transfers (for hints): a hop into a plain switch joins the hop leaving it at the same instant.
``partial_sums`` replays route transfers on the epochs, for hints and checks.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from optcoll.instances.clock import check_current
from optcoll.producers.exact.allreduce.problem import DirectProblem
from optcoll.verify.problem import plain_switches
from optcoll.schedules.schedule import COPY, Schedule, from_arrays

#: Relative slack when reading seconds as whole epochs.
EPOCH_TOLERANCE = 1e-7


@dataclass(frozen=True, eq=False)
class RouteTransfers:
    chunk: np.ndarray
    route: np.ndarray
    start: np.ndarray  # epochs
    op: np.ndarray  # COPY or REDUCE

    def __len__(self) -> int:
        return int(self.chunk.size)

    def makespan(self, problem: DirectProblem) -> int:
        return int((self.start + problem.route_delay[self.route]).max(initial=0))

    def take(self, index: np.ndarray) -> "RouteTransfers":
        return RouteTransfers(self.chunk[index], self.route[index], self.start[index], self.op[index])


def to_schedule(problem: DirectProblem, transfers: RouteTransfers, **meta) -> Schedule:
    """The schedule on the machine's links: timed (seconds) or, on a step grid, steps with one
    round per step."""
    order = np.lexsort((transfers.chunk, transfers.route, transfers.start))
    t = transfers.take(order)
    steps = problem.rounding == "steps"
    hops = problem.route_hops()
    used: dict[int, list[list[tuple[int, int]]]] = {}  # link -> occupied epoch windows
    per_epoch: dict[tuple[int, int], int] = {}  # (link, epoch) -> transfers (step model)
    weights = None
    if steps:
        from optcoll.verify.stepmodel import link_weights
        weights = link_weights(problem.machine)
    plain = plain_switches(problem.machine)
    chunk, link, start, op, step, via = [], [], [], [], [], []
    for c, r, k, o in zip(t.chunk.tolist(), t.route.tolist(), t.start.tolist(), t.op.tolist()):
        last = hops[r][-1]
        for i, h in enumerate(hops[r]):
            lo, hi = k + int(problem.hop_lo[h]), k + int(problem.hop_hi[h])
            e = _fit(problem.group_links[int(problem.hop_group[h])], lo, hi, used, per_epoch, weights)
            via.append(len(link) - 1 if i and plain[problem.machine.link_src[e]] else -1)
            chunk.append(c), link.append(e)
            op.append(o if h == last else COPY)
            if steps:
                step.append(k + int(round(problem.hop_offset[h])) + 1)
                start.append(np.nan)
            else:
                start.append(k * problem.quantum + float(problem.hop_offset[h]))
                step.append(0)
    rounds = (1,) * t.makespan(problem) if steps else None
    return from_arrays(np.array(chunk, dtype=np.int64), np.array(link, dtype=np.int64),
                       None if steps else np.array(start, dtype=float), np.array(op, dtype=np.uint8),
                       np.array(step, dtype=np.int64), rounds, via=np.array(via, dtype=np.int64), **meta)


def _fit(links: tuple[int, ...], lo: int, hi: int, used: dict, per_epoch: dict, weights) -> int:
    """The first link of the group free over epochs [lo, hi) (the model kept the group within its
    capacity, so one is; transfers come in start order, which makes first fit succeed)."""
    for e in links:
        if weights is not None:
            if all(per_epoch.get((e, s), 0) < weights[e] for s in range(lo, hi)):
                for s in range(lo, hi):
                    per_epoch[(e, s)] = per_epoch.get((e, s), 0) + 1
                return e
            continue
        windows = used.setdefault(e, [])
        if all(hi <= a or b <= lo for a, b in windows):
            windows.append((lo, hi))
            return e
    raise AssertionError("a link group carries more transfers than its capacity")


def from_schedule(problem: DirectProblem, schedule: Schedule) -> RouteTransfers:
    """The route transfers of a schedule (timed, or steps of one round) on this problem's epochs;
    hops through a plain switch that waited there, or starts off the epochs, are left out (a hint
    may be partial)."""
    machine = problem.machine
    index = problem.node_index()
    steps = schedule.rounds is not None
    if steps != (problem.rounding == "steps") or (steps and any(r != 1 for r in schedule.rounds)):
        return RouteTransfers(*(np.zeros(0, dtype=np.int64),) * 3, np.zeros(0, dtype=np.uint8))
    q = 1.0 if steps else problem.quantum
    times = schedule.step - 1.0 if steps else schedule.start
    hop_group = problem.hop_group.tolist()
    route_of = {tuple(hop_group[h] for h in hops): r for r, hops in enumerate(problem.route_hops())}
    group_of = np.empty(machine.num_links, dtype=np.int64)
    for g, links in enumerate(problem.group_links):
        group_of[list(links)] = g
    src, dst = machine.link_src[schedule.link], machine.link_dst[schedule.link]
    arrive = times + problem.link_delay[schedule.link]
    # Each departure from a plain switch continues the arrival it names (``via``), else the
    # oldest unnamed arrival of the same chunk, when that arrival is at the same instant.
    named = schedule.named()
    waiting: dict[tuple[int, int], list[tuple[float, int]]] = {}
    reserved = set(named[named >= 0].tolist())
    for i in np.lexsort((np.arange(len(schedule)), arrive)).tolist():
        if index[dst[i]] < 0 and i not in reserved:
            waiting.setdefault((int(schedule.chunk[i]), int(dst[i])), []).append((float(arrive[i]), i))
    previous = np.full(len(schedule), -1, dtype=np.int64)
    for n, i in enumerate(np.lexsort((np.arange(len(schedule)), times)).tolist()):
        if n % 4096 == 0:
            check_current()  # under a solver's clock: 650,000 transfers on a 512-GPU cluster
        if index[src[i]] < 0:
            r = int(named[i])
            queue = [(float(arrive[r]), r)] if r >= 0 else waiting.get((int(schedule.chunk[i]), int(src[i])), [])
            if queue and abs(queue[0][0] - times[i]) <= EPOCH_TOLERANCE * max(q, times[i]):
                previous[i] = queue.pop(0)[1]
    rows = []
    for n, i in enumerate(np.flatnonzero(index[dst] >= 0).tolist()):
        if n % 4096 == 0:
            check_current()
        path, j = [i], i
        while index[src[j]] < 0 and previous[j] >= 0:
            j = int(previous[j])
            path.append(j)
        if index[src[j]] < 0:
            continue
        route = route_of.get(tuple(int(group_of[schedule.link[h]]) for h in reversed(path)))
        k = times[j] / q
        if route is None or abs(k - round(k)) > EPOCH_TOLERANCE * max(k, 1.0):
            continue
        rows.append((int(schedule.chunk[i]), route, int(round(k)), int(schedule.op[i])))
    cols = list(zip(*rows)) if rows else [[], [], [], []]
    return RouteTransfers(*(np.array(col, dtype=np.int64) for col in cols[:3]), np.array(cols[3], dtype=np.uint8))


def partial_sums(problem: DirectProblem, transfers: RouteTransfers, horizon: int) -> np.ndarray | None:
    """holds[c, v, t, i] of these transfers replayed on the epochs (deliveries of an epoch before
    its sends), or None when they break a rule (a double count, a send without a partial sum, a
    copy meeting another delivery)."""
    K, V, N = problem.num_chunks, problem.num_nodes, problem.num_members
    holds = np.zeros((K, V, horizon + 1, N), dtype=bool)
    member = problem.member_index()
    for v in np.flatnonzero(member >= 0).tolist():
        holds[:, v, 0, member[v]] = True
    arrive = transfers.start + problem.route_delay[transfers.route]
    carried: dict[int, np.ndarray] = {}
    for t in range(horizon + 1):
        if t > 0:
            holds[:, :, t] = holds[:, :, t - 1]
            landing = np.flatnonzero(arrive == t)
            for c, v in {(int(transfers.chunk[j]), int(problem.route_dst[transfers.route[j]])) for j in landing}:
                mine = [j for j in landing if transfers.chunk[j] == c and problem.route_dst[transfers.route[j]] == v]
                sums = [carried[j] for j in mine]
                copies = [j for j in mine if transfers.op[j] == COPY]
                if copies:
                    if len(mine) > 1:
                        return None
                    holds[c, v, t] = sums[0]
                    continue
                total = holds[c, v, t].astype(np.int64) + np.sum(sums, axis=0)
                if total.max() > 1 or not problem.can_reduce[v]:
                    return None
                holds[c, v, t] = total > 0
        for j in np.flatnonzero(transfers.start == t).tolist():
            value = holds[transfers.chunk[j], problem.route_src[transfers.route[j]], t].copy()
            if not value.any():
                return None
            carried[j] = value
    return holds
