"""The two list schedulers compiled (numba): ``listsched.ListScheduler`` (logical messages of the
spread baselines) and ``flows.FlowScheduler`` (copies and reductions), placement for placement.

Why: both spend about 6 µs of Python per transfer, and ``optcoll expect`` on a 128-GPU cluster
places some 65,000 transfers per (producer, protocol, size), a few hundred times (121 s of CPU).
Here a transfer costs a few array operations.

What stays in Python, so the two paths cannot differ in what they decide: the messages and flows
themselves, routing (each path comes from the same ``ShortestPaths`` predecessor rows, computed
per source by the same call), the per-chunk relay rule (``flows.holding``) and every error's
words (the kernel names the message and the pair, the interpreted code raises). What is
compiled is the placement loop, rule for rule in the interpreted order: the link calendar
(``calendar.Runs``: disjoint busy runs, gaps narrower than one transfer merged, the start moved to
the end of the run in the way, in the same float operations), the parallel link that delivers
first (the lower id on a tie), and each scheduler's holding rules. Port limits are not compiled
(``listsched.compiled_pays`` keeps those problems interpreted). Tests place the same lists both
ways and compare the schedules exactly.

State lives in plain arrays indexed by ``chunk · nodes + node`` and per link; the lists are placed
in batches (``BATCH``) so a solver's clock (``check_current``) is still looked at between them.
The named tuples that carry the arrays are part of the kernels' signatures in numba's on-disk
cache index: renaming one leaves an older index unreadable (delete this folder's
``__pycache__/compiled.*.nb*`` then).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from optcoll.instances.clock import check_current
from optcoll.producers.spread import COPY as MODE_COPY
from optcoll.producers.spread import EXCLUSIVE as MODE_EXCLUSIVE
from optcoll.schedules.schedule import COPY, REDUCE

#: Items (messages, flows, exchanges) placed per kernel call; the clock is checked between calls.
BATCH = 1 << 14
#: Outcome codes of a batch: placed, a sender holding nothing of the chunk (an exchange's member),
#: no path, an exchange whose member could not send before the others' values reached it.
OK, HOLDS_NOTHING, MEMBER_HOLDS_NOTHING, NO_PATH, LATE = range(5)


class _Calendar(NamedTuple):
    """``calendar.Runs`` of every link: link e's runs are ``starts/ends[off[e]:off[e] + cnt[e]]``,
    a block of ``cap[e]`` slots in one pool, moved to a block twice as large when full."""

    off: np.ndarray
    cap: np.ndarray
    cnt: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    top: np.ndarray  # int64[1]: pool slots handed out
    width: np.ndarray  # per link: every window asked about is this long (``Runs.width``)


class _Rows(NamedTuple):
    """The placed transfers, grown by doubling; ``count[0]`` of them are filled."""

    chunk: np.ndarray
    link: np.ndarray
    start: np.ndarray
    op: np.ndarray
    via: np.ndarray
    count: np.ndarray


class _Graph(NamedTuple):
    """Links by (src, dst) pair and the shortest-path predecessor rows of the sources that need them."""

    nodes: int
    pair_keys: np.ndarray  # sorted src·nodes + dst of every pair with a link
    pair_ptr: np.ndarray
    pair_links: np.ndarray  # link ids per pair, in id order (``Machine.links_between``)
    row_of: np.ndarray  # [class, source] -> row of ``pred``, -1 where not computed
    pred: np.ndarray  # [row, node] -> predecessor on the shortest path from the row's source


def new_calendar(width: np.ndarray) -> _Calendar:
    links = width.size
    return _Calendar(np.zeros(links, np.int64), np.zeros(links, np.int64), np.zeros(links, np.int64),
                    np.empty(1024), np.empty(1024), np.zeros(1, np.int64), np.asarray(width, dtype=np.float64))


def new_rows() -> _Rows:
    size = 1024
    return _Rows(np.empty(size, np.int64), np.empty(size, np.int64), np.empty(size), np.empty(size, np.int64),
                np.empty(size, np.int64), np.zeros(1, np.int64))


def graph(machine, routes: list, row_of_class: list[dict[int, list[int]]]) -> _Graph:
    """``machine``'s pair index and the predecessor rows ``row_of_class[k][source]`` (class k of
    ``routes``), as arrays."""
    n = machine.num_nodes
    keys = machine.link_src.astype(np.int64) * n + machine.link_dst.astype(np.int64)
    order = np.argsort(keys, kind="stable")  # per pair in id order, as links_between lists them
    unique, first = np.unique(keys[order], return_index=True)
    ptr = np.append(first, keys.size).astype(np.int64)
    row_of = np.full((max(len(routes), 1), n), -1, dtype=np.int64)
    rows = []
    for k, sources in enumerate(row_of_class):
        for source, pred in sources.items():
            row_of[k, source] = len(rows)
            rows.append(pred)
    pred = np.array(rows, dtype=np.int64) if rows else np.zeros((0, n), dtype=np.int64)
    return _Graph(n, unique.astype(np.int64), ptr, order.astype(np.int64), row_of, pred)


def needed_sources(machine, cls: np.ndarray, src: np.ndarray, dst: np.ndarray, classes: int) -> list[set[int]]:
    """Per class, the sources of pairs without a link between them (they need a shortest path)."""
    n = machine.num_nodes
    links = np.unique(machine.link_src.astype(np.int64) * n + machine.link_dst.astype(np.int64))
    far = ~np.isin(src.astype(np.int64) * n + dst.astype(np.int64), links)
    out: list[set[int]] = [set() for _ in range(classes)]
    for key in np.unique(cls[far].astype(np.int64) * n + src[far]).tolist():
        out[key // n].add(key % n)
    return out


@njit(cache=True, inline="always")
def _after(a, off, cnt, x):
    """``bisect_right`` of x in a[off:off + cnt], relative to off."""
    lo, hi = 0, cnt
    while lo < hi:
        mid = (lo + hi) // 2
        if x < a[off + mid]:
            hi = mid
        else:
            lo = mid + 1
    return lo


@njit(cache=True, inline="always")
def _blocked_until(cal, e, lo, hi):
    """``Runs.blocked_until`` of link e; NaN for None."""
    if hi <= lo:
        return np.nan
    off, cnt = cal.off[e], cal.cnt[e]
    i = _after(cal.starts, off, cnt, lo) - 1
    if i >= 0 and cal.ends[off + i] > lo:
        return cal.ends[off + i]
    if i + 1 < cnt and cal.starts[off + i + 1] < hi:
        return cal.ends[off + i + 1]
    return np.nan


@njit(cache=True, inline="always")
def _earliest(cal, e, ready):
    """``calendar.earliest_start`` with the link's window [t, t + width) as the only need."""
    t = ready
    moved = True
    while moved:
        moved = False
        until = _blocked_until(cal, e, t + 0.0, t + cal.width[e])
        if until == until:
            t, moved = until - 0.0, True
            while t + 0.0 < until:
                t = np.nextafter(t, np.inf)
    return t


@njit(cache=True, inline="always")
def _book(cal, e, t):
    """``Runs.add`` of the window [t, t + width) on link e; the calendar, its pool grown if need be."""
    lo, hi = t + 0.0, t + cal.width[e]
    if hi <= lo:
        return cal
    w = cal.width[e]
    off, cnt = cal.off[e], cal.cnt[e]
    i = _after(cal.starts, off, cnt, lo)
    j = i
    if i > 0 and (cal.ends[off + i - 1] >= lo or cal.ends[off + i - 1] + w > lo):
        i -= 1
        lo, hi = cal.starts[off + i], max(hi, cal.ends[off + i])
        j = i + 1
    while j < cnt and (cal.starts[off + j] <= hi or cal.starts[off + j] < hi + w):
        hi = max(hi, cal.ends[off + j])
        j += 1
    removed = j - i
    if removed == 0:
        if cnt == cal.cap[e]:
            cal = _move(cal, e)
            off = cal.off[e]
        for k in range(cnt, i, -1):
            cal.starts[off + k] = cal.starts[off + k - 1]
            cal.ends[off + k] = cal.ends[off + k - 1]
    elif removed > 1:
        for k in range(j, cnt):
            cal.starts[off + k - removed + 1] = cal.starts[off + k]
            cal.ends[off + k - removed + 1] = cal.ends[off + k]
    cal.starts[off + i] = lo
    cal.ends[off + i] = hi
    cal.cnt[e] = cnt + 1 - removed
    return cal


@njit(cache=True)
def _move(cal, e):
    """Link e's runs moved to a block twice as large at the pool's end (the pool doubled if full)."""
    cap = max(4, 2 * cal.cap[e])
    top = cal.top[0]
    starts, ends = cal.starts, cal.ends
    if top + cap > starts.size:
        size = max(2 * starts.size, top + cap)
        starts, ends = np.empty(size), np.empty(size)
        starts[:top] = cal.starts[:top]
        ends[:top] = cal.ends[:top]
    off = cal.off[e]
    for k in range(cal.cnt[e]):
        starts[top + k] = starts[off + k]
        ends[top + k] = ends[off + k]
    cal.off[e] = top
    cal.cap[e] = cap
    cal.top[0] = top + cap
    return _Calendar(cal.off, cal.cap, cal.cnt, starts, ends, cal.top, cal.width)


@njit(cache=True, inline="always")
def _append(rows, c, e, t, op, via):
    k = rows.count[0]
    if k == rows.chunk.size:
        size = 2 * k
        chunk, link, start = np.empty(size, np.int64), np.empty(size, np.int64), np.empty(size)
        ops, vias = np.empty(size, np.int64), np.empty(size, np.int64)
        chunk[:k], link[:k], start[:k], ops[:k], vias[:k] = rows.chunk, rows.link, rows.start, rows.op, rows.via
        rows = _Rows(chunk, link, start, ops, vias, rows.count)
    rows.chunk[k], rows.link[k], rows.start[k], rows.op[k], rows.via[k] = c, e, t, op, via
    rows.count[0] = k + 1
    return rows


@njit(cache=True, inline="always")
def _pair(g, a, b):
    """Index of the pair a→b in ``g`` (-1: no link)."""
    key = a * g.nodes + b
    lo, hi = 0, g.pair_keys.size
    while lo < hi:
        mid = (lo + hi) // 2
        if g.pair_keys[mid] < key:
            lo = mid + 1
        else:
            hi = mid
    if lo < g.pair_keys.size and g.pair_keys[lo] == key:
        return lo
    return -1


@njit(cache=True, inline="always")
def _path(g, k, a, b, buf):
    """``ShortestPaths.path`` (class k): the nodes from a to b into ``buf``, their count; 0 when
    there is no path."""
    if _pair(g, a, b) >= 0:
        buf[0], buf[1] = a, b
        return 2
    row = g.row_of[k, a]
    n = 1
    buf[0] = b
    while buf[n - 1] != a:
        prev = g.pred[row, buf[n - 1]]
        if prev < 0:
            return 0
        buf[n] = prev
        n += 1
    for i in range(n // 2):
        buf[i], buf[n - 1 - i] = buf[n - 1 - i], buf[i]
    return n


# -- logical messages (``listsched.ListScheduler``) ----------------------------------------------

@njit(cache=True)
def _messages(lo_item, hi_item, m_chunk, m_src, m_dst, m_stage, staged, g, mode, delay, cal, rows,
              held, has_held, last_forward, before, current, touched, now, err):
    """Messages lo_item .. hi_item - 1 in order (``list_schedule``); ``err`` gets (code, item, a, b)."""
    W = g.nodes
    buf = np.empty(W + 1, np.int64)
    for item in range(lo_item, hi_item):
        c, src, dst = m_chunk[item], m_src[item], m_dst[item]
        barrier = 0.0
        if staged:
            k = m_stage[item]
            if k != now[0]:
                for i in range(touched.size):
                    if touched[i]:
                        before[i] = max(before[i], current[i])
                        current[i] = 0.0
                        touched[i] = False
                now[0] = k
            barrier = before[src]
        key = c * W + src
        if not has_held[key]:
            err[0], err[1], err[2], err[3] = HOLDS_NOTHING, item, c, src
            return cal, rows
        ready = max(held[key], barrier)
        n = _path(g, 0, src, dst, buf)
        if n == 0:
            err[0], err[1], err[2], err[3] = NO_PATH, item, src, dst
            return cal, rows
        for h in range(n - 1):
            a, b = buf[h], buf[h + 1]
            key_b = c * W + b
            copy_node = mode[b] == MODE_COPY
            if copy_node and has_held[key_b]:
                ready = max(held[key_b], barrier)
                continue
            if mode[b] == MODE_EXCLUSIVE:
                ready = max(ready, last_forward[key_b])
            p = _pair(g, a, b)
            best_arrival, best_t, best_e = np.inf, 0.0, -1
            for q in range(g.pair_ptr[p], g.pair_ptr[p + 1]):
                e = g.pair_links[q]
                t = _earliest(cal, e, ready)
                if best_e < 0 or t + delay[e] < best_arrival:
                    best_arrival, best_t, best_e = t + delay[e], t, e
            cal = _book(cal, best_e, best_t)
            rows = _append(rows, c, best_e, best_t, COPY, -1)
            if mode[a] == MODE_EXCLUSIVE:
                last_forward[c * W + a] = best_t
            ready = best_arrival
            if copy_node:
                held[key_b] = ready
                has_held[key_b] = True
        if staged:
            current[src] = max(current[src], ready)
            current[dst] = max(current[dst], ready)
            touched[src] = touched[dst] = True
    return cal, rows


def list_schedule(problem, routes, chunk, src, dst, stage):
    """``listsched.list_schedule`` compiled: the same schedule (module docstring)."""
    from optcoll.schedules.schedule import from_arrays

    m = problem.machine
    chunk, src, dst = (np.asarray(x, dtype=np.int64) for x in (chunk, src, dst))
    staged = stage is not None
    stage_arr = np.asarray(stage if staged else [], dtype=np.int64)
    sources = needed_sources(m, np.zeros(src.size, np.int64), src, dst, 1)[0]
    g = graph(m, [routes], [{v: routes.predecessors(v) for v in sorted(sources)}])
    width, keys = m.num_nodes, problem.num_chunks * m.num_nodes
    pre_c, pre_v = problem.pre.pairs()
    held, has_held = np.zeros(keys), np.zeros(keys, dtype=np.bool_)
    has_held[pre_c.astype(np.int64) * width + pre_v.astype(np.int64)] = True
    cal, rows = new_calendar(problem.busy), new_rows()
    before, current, touched = np.zeros(width), np.zeros(width), np.zeros(width, dtype=np.bool_)
    now = np.array([stage_arr[0] if stage_arr.size else 0], dtype=np.int64)
    err = np.zeros(4, np.int64)
    mode, delay = problem.mode.astype(np.int64), np.asarray(problem.delay, dtype=np.float64)
    last_forward = np.zeros(keys)
    for lo in range(0, chunk.size, BATCH):
        check_current()
        cal, rows = _messages(lo, min(lo + BATCH, chunk.size), chunk, src, dst, stage_arr, staged, g, mode, delay,
                              cal, rows, held, has_held, last_forward, before, current, touched, now, err)
        if err[0] == HOLDS_NOTHING:
            raise AssertionError(f"baseline sends chunk {err[2]} from {err[3]}, which does not hold it")
        if err[0] == NO_PATH:
            routes.path(int(err[2]), int(err[3]))  # raises NotApplicable in its own words
            raise AssertionError("the compiled list scheduler found no path where ShortestPaths does")
    k = int(rows.count[0])
    return from_arrays(rows.chunk[:k], rows.link[:k], rows.start[:k])


# -- flows (``flows.FlowScheduler``) --------------------------------------------------------------

class _FlowState(NamedTuple):
    arrived: np.ndarray
    has_arrived: np.ndarray
    sent: np.ndarray
    last_op: np.ndarray
    fifo: np.ndarray
    delay: np.ndarray
    reduce_extra: float
    cls: np.ndarray  # per chunk: its routing class (the switches its flows reduce it into)


@njit(cache=True, inline="always")
def _hop(s, g, cal, rows, c, a, b, op, ready, via, err):
    """``FlowScheduler._hop``; the arrival (NaN, with ``err`` set, when a holds nothing of c)."""
    W = g.nodes
    key_a, key_b = c * W + a, c * W + b
    if not s.has_arrived[key_a]:
        err[0], err[2], err[3] = HOLDS_NOTHING, c, a
        return cal, rows, np.nan
    ready = max(ready, s.arrived[key_a])
    if s.fifo[a]:
        ready = max(ready, s.sent[key_a])
    extra = s.reduce_extra if op == REDUCE else 0.0
    earliest_arrival = 0.0
    if s.fifo[b]:
        earliest_arrival = s.arrived[key_b]
    else:
        ready = max(ready, s.sent[key_b])
        if op == COPY or s.last_op[key_b] == COPY:
            ready = max(ready, s.arrived[key_b])
    p = _pair(g, a, b)
    best_arrival, best_t, best_e = np.inf, 0.0, -1
    for q in range(g.pair_ptr[p], g.pair_ptr[p + 1]):
        e = g.pair_links[q]
        t = _earliest(cal, e, max(ready, earliest_arrival - s.delay[e] - extra))
        arrival = t + s.delay[e] + extra
        while arrival < earliest_arrival:
            t = _earliest(cal, e, np.nextafter(t, np.inf))
            arrival = t + s.delay[e] + extra
        if best_e < 0 or arrival < best_arrival:
            best_arrival, best_t, best_e = arrival, t, e
    cal = _book(cal, best_e, best_t)
    rows = _append(rows, c, best_e, best_t, op, via)
    s.sent[key_a] = max(s.sent[key_a], best_t)
    s.arrived[key_b] = max(s.arrived[key_b], best_arrival)
    s.has_arrived[key_b] = True
    s.last_op[key_b] = op
    return cal, rows, best_arrival


@njit(cache=True, inline="always")
def _send(s, g, cal, rows, c, src, dst, op, ready, buf, err):
    """``FlowScheduler.send``; the arrival (NaN with ``err`` set on a failure)."""
    n = _path(g, s.cls[c], src, dst, buf)
    if n == 0:
        err[0], err[2], err[3] = NO_PATH, src, dst
        return cal, rows, np.nan
    t = ready
    for i in range(n - 1):
        a, b = buf[i], buf[i + 1]
        via = rows.count[0] - 1 if i > 0 and s.fifo[a] else -1
        cal, rows, t = _hop(s, g, cal, rows, c, a, b, op if i == n - 2 else COPY, t, via, err)
        if err[0] != OK:
            return cal, rows, t
    return cal, rows, t


@njit(cache=True)
def _flows(lo_item, hi_item, f_kind, f_chunk, f_src, f_dst, f_op, m_ptr, members, s, g, cal, rows, err):
    """Flows (kind 0) and exchanges (kind 1, members ``members[m_ptr[i]:m_ptr[i + 1]]``) lo_item ..
    hi_item - 1 in list order; ``err`` gets (code, item, chunk or a, node or b)."""
    W = g.nodes
    buf = np.empty(W + 1, np.int64)
    for item in range(lo_item, hi_item):
        c = f_chunk[item]
        if f_kind[item] == 0:
            cal, rows, _ = _send(s, g, cal, rows, c, f_src[item], f_dst[item], f_op[item], 0.0, buf, err)
            if err[0] != OK:
                err[1] = item
                return cal, rows
            continue
        group = members[m_ptr[item]:m_ptr[item + 1]]
        m = group.size
        for v in group:
            if not s.has_arrived[c * W + v]:
                err[0], err[1], err[2], err[3] = MEMBER_HOLDS_NOTHING, item, c, v
                return cal, rows
        before = np.empty(m)
        for i in range(m):
            before[i] = s.arrived[c * W + group[i]]
        order = np.argsort(before, kind="mergesort")  # earliest ready sends first (stable, as flows.py)
        group, before = group[order], before[order]
        latest = before.copy()
        starts = np.zeros(m)
        arrivals = np.full(m, np.inf)
        for shift in range(1, m):
            for i in range(m):
                v, j = group[i], (i + shift) % m
                s.arrived[c * W + v] = before[i]
                first = rows.count[0]
                cal, rows, arrival = _send(s, g, cal, rows, c, v, group[j], f_op[item], 0.0, buf, err)
                if err[0] != OK:
                    err[1] = item
                    return cal, rows
                starts[i] = max(starts[i], rows.start[first])
                arrivals[j] = min(arrivals[j], arrival)
                latest[j] = max(latest[j], arrival)
                s.arrived[c * W + v] = latest[i]
        for i in range(m):
            if arrivals[i] <= starts[i]:
                err[0], err[1], err[2], err[3] = LATE, item, c, group[i]
                return cal, rows
    return cal, rows


def place_flows(scheduler, arrays):
    """``flows._placed`` compiled for a ``FlowScheduler`` whose ``hold`` ran: (chunk, link, start,
    op, via) columns of the placed transfers and the last arrival (module docstring)."""
    from optcoll.producers.base import NotApplicable

    m, problem = scheduler.machine, scheduler.problem
    W = m.num_nodes
    classes: dict[frozenset[int], int] = {frozenset(): 0}
    cls = np.zeros(max(problem.num_chunks, 1), dtype=np.int64)
    for c, avoid in scheduler.holding.items():
        cls[c] = classes.setdefault(avoid, len(classes))
    by_class = sorted(classes, key=classes.get)
    routes = [scheduler.routes_avoiding(avoid) for avoid in by_class]
    kind, chunk, src, dst = arrays.kind, arrays.chunk, arrays.src, arrays.dst
    ex = np.flatnonzero(kind == 1)
    pair_c, pair_a, pair_b = [chunk[kind == 0]], [src[kind == 0]], [dst[kind == 0]]
    for i in ex.tolist():  # every ordered pair of an exchange's members sends
        group = arrays.members[arrays.member_ptr[i]:arrays.member_ptr[i + 1]]
        a, b = np.meshgrid(group, group, indexing="ij")
        off = a != b
        pair_c.append(np.full(int(off.sum()), chunk[i]))
        pair_a.append(a[off])
        pair_b.append(b[off])
    pc, pa, pb = (np.concatenate(x).astype(np.int64) for x in (pair_c, pair_a, pair_b))
    sources = needed_sources(m, cls[pc], pa, pb, len(routes))
    g = graph(m, routes, [{v: r.predecessors(v) for v in sorted(vs)} for r, vs in zip(routes, sources)])
    keys = problem.num_chunks * W
    pre_c, pre_v = problem.pre.pairs()
    has_arrived = np.zeros(keys, dtype=np.bool_)
    has_arrived[pre_c.astype(np.int64) * W + pre_v.astype(np.int64)] = True
    s = _FlowState(np.zeros(keys), has_arrived, np.zeros(keys), np.full(keys, -1, np.int64),
                  np.asarray(scheduler.fifo, dtype=np.bool_), np.asarray(problem.delay, dtype=np.float64),
                  float(scheduler.reduce_extra), cls)
    cal, rows = new_calendar(problem.busy), new_rows()
    err = np.zeros(4, np.int64)
    op = arrays.op.astype(np.int64)
    for lo in range(0, kind.size, BATCH):
        check_current()
        cal, rows = _flows(lo, min(lo + BATCH, kind.size), kind, chunk, src, dst, op, arrays.member_ptr,
                           arrays.members, s, g, cal, rows, err)
        code, c, v = int(err[0]), int(err[2]), int(err[3])
        if code in (HOLDS_NOTHING, MEMBER_HOLDS_NOTHING):
            who = "exchange" if code == MEMBER_HOLDS_NOTHING else "flow"
            raise AssertionError(f"{who} sends chunk {c} from {m.label(v)}, which holds nothing of it yet")
        if code == NO_PATH:
            routes[int(cls[chunk[err[1]]])].path(c, v)  # raises NotApplicable in its own words
            raise AssertionError("the compiled flow scheduler found no path where ShortestPaths does")
        if code == LATE:
            raise NotApplicable(f"exchange of chunk {c}: {m.label(v)} could not send before the others' values "
                                "reached it (links too busy); its send would count them twice")
    k = int(rows.count[0])
    makespan = float(s.arrived[s.has_arrived].max(initial=0.0))
    return (rows.chunk[:k], rows.link[:k], rows.start[:k], rows.op[:k], rows.via[:k]), makespan
