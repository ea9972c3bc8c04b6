"""The event engine compiled (numba), one chunk at a time: the same events in the same order under
the same rules as ``events.py``, for schedules too large for its Python loop.

Why: ``events.py`` spends about 5 µs of Python per transfer and keeps Python objects per value, so
a 4096-NPU AllReduce (33.5 M transfers, values of 4096 contributors) took 25 minutes. Here a value
is a row of ``uint64`` words (bit v = the contribution of node v; bit 0 = "the chunk" when the
collective does not combine) and a transfer costs a few word operations.

What is shared, so that the two paths cannot drift apart in what they decide or say:

* the rules: node roles (``events.role``), starts in (start, transfer id) order, each after every
  delivery up to its start + eps, deliveries in (arrival, transfer id) order, the checks of one
  start in ``problem.PRIORITY`` order, and chunk-by-chunk simulation as in the batched event
  engine (values of different chunks never meet; port limits come from ``timing.py`` over the
  whole problem, link occupancy from ``timing.link_overlap``'s rule run compiled here);
* the verdict across chunks: ``events.met_before`` orders the chunks' first violations and
  timing's, exactly as the batched event engine does;
* every word: the kernel only says which transfer of which chunk goes wrong first and how (a
  code). The event engine then replays that one chunk and writes the finding, which must name
  the same transfer and kind, or the run stops with an internal error rather than guess. A
  failed postcondition is described the same way, from a replay of the first failing chunk.

Memory: the problem's columns, one index array over the transfers (grouped by chunk, later by
link for the overlap check) and, per
chunk, a row per node holding it, per transfer in flight or queued at a switch, and per last
delivery (for the ambiguous-arrival check): a few MiB for a 4096-NPU chunk.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit

from optcoll.schedules.schedule import COPY, REDUCE
from optcoll.verify import events, findings
from optcoll.verify.events import BUFFER, CREDIT, FIFO
from optcoll.verify.problem import BATCH_TRANSFERS, PRIORITY, Finding, Outcome, Problem, within
from optcoll.verify.timing import overlap_finding, port_overflow

#: Violation codes of the kernel and the kind each stands for; launch kinds are ordered at the
#: transfer's start, delivery kinds at its arrival.
(NONE, OP_NOT_ALLOWED, SWITCH_REDUCE, CAUSALITY, FORWARD, AMBIGUOUS_FORWARD, DOUBLE_COUNT, AMBIGUOUS,
 OVERWRITE) = range(9)
KINDS = {OP_NOT_ALLOWED: "op-not-allowed", SWITCH_REDUCE: "switch-reduce", CAUSALITY: "causality",
         FORWARD: "switch-forward", AMBIGUOUS_FORWARD: "ambiguous-forward", DOUBLE_COUNT: "double-count",
         AMBIGUOUS: "ambiguous-arrival", OVERWRITE: "overwrite"}


@njit(cache=True)
def _group(chunk: np.ndarray, num_chunks: int) -> tuple[np.ndarray, np.ndarray]:
    """Positions grouped by chunk, in position (= transfer id) order within a chunk, and the
    group bounds: a counting sort, linear in the transfers."""
    ptr = np.zeros(num_chunks + 1, dtype=np.int64)
    for c in chunk:
        ptr[c + 1] += 1
    for c in range(num_chunks):
        ptr[c + 1] += ptr[c]
    fill = ptr[:-1].copy()
    order = np.empty(chunk.size, dtype=np.int64)
    for j in range(chunk.size):
        c = chunk[j]
        order[fill[c]] = j
        fill[c] += 1
    return order, ptr


class _Pool(NamedTuple):
    """Value rows shared by reference: a node's value, a transfer's (in flight or queued at a
    switch) and a node's last delivery may be one row; it is copied only before it changes."""

    rows: np.ndarray  # uint64[capacity, words]
    refs: np.ndarray  # int64[capacity]: references to each row; 0 = free
    count: np.ndarray  # int64[capacity]: bits set (values only grow within their chunk's holders)
    free: np.ndarray  # int64[capacity]: a stack of free rows
    top: np.ndarray  # int64[2]: rows ever used, free rows on the stack


@njit(cache=True)
def _new_pool(words: int) -> _Pool:
    cap = 64
    return _Pool(np.zeros((cap, words), dtype=np.uint64), np.zeros(cap, dtype=np.int64),
                 np.zeros(cap, dtype=np.int64), np.empty(cap, dtype=np.int64), np.zeros(2, dtype=np.int64))


@njit(cache=True)
def _alloc(pool: _Pool) -> tuple[_Pool, int]:
    """A zeroed row with one reference, the pool doubled first when every row is in use."""
    if pool.top[1] > 0:
        pool.top[1] -= 1
        slot = pool.free[pool.top[1]]
    else:
        cap = pool.refs.size
        if pool.top[0] == cap:
            rows = np.zeros((2 * cap, pool.rows.shape[1]), dtype=np.uint64)
            rows[:cap] = pool.rows
            refs, count, free = (np.zeros(2 * cap, dtype=np.int64), np.zeros(2 * cap, dtype=np.int64),
                                 np.empty(2 * cap, dtype=np.int64))
            refs[:cap], count[:cap] = pool.refs, pool.count
            pool = _Pool(rows, refs, count, free, pool.top)
        slot = pool.top[0]
        pool.top[0] += 1
    pool.rows[slot, :] = 0
    pool.refs[slot] = 1
    pool.count[slot] = 0
    return pool, slot


@njit(cache=True)
def _drop(pool: _Pool, slot: int) -> None:
    """One reference to ``slot`` fewer (none: nothing)."""
    if slot >= 0:
        pool.refs[slot] -= 1
        if pool.refs[slot] == 0:
            pool.free[pool.top[1]] = slot
            pool.top[1] += 1


@njit(cache=True)
def _equal(rows: np.ndarray, a: int, b: int) -> bool:
    if a == b:
        return True
    for w in range(rows.shape[1]):
        if rows[a, w] != rows[b, w]:
            return False
    return True


@njit(cache=True)
def _overlaps(rows: np.ndarray, a: int, b: int) -> bool:
    for w in range(rows.shape[1]):
        if rows[a, w] & rows[b, w]:
            return True
    return False


@njit(cache=True)
def _simulate(order, ptr, ids, start, arrive, src, dst, op, via, role, reduce_ok, combining, reduce_only,
              words, pre_ptr, pre_nodes, post_ptr, post_nodes, eps, num_nodes,
              found_kind, found_pos, post_ok, post_since):
    """Every chunk's events (``events.simulate`` per chunk, without timing). Per chunk: its first
    violation (code and position), else for each of its postcondition pairs whether it holds at
    the end and since when. ``via``: per position the schedule row it forwards (-1: none), or
    empty when no transfer names one.

    Radon F on purpose: the compiled twin of ``events._simulate``, one loop over a chunk's events
    whose branches are the rules of docs/model.md §5 in their order, kept in step with it
    branch for branch (split, each piece would take the loop's dozen state arrays)."""
    pool = _new_pool(words)
    plain = False  # any plain switch: only then the forwarding columns below are kept per chunk
    for v in range(num_nodes):
        plain = plain or role[v] == FIFO
    value = np.full(num_nodes, -1, dtype=np.int64)  # the row of the node's value
    head = np.full(num_nodes, -1, dtype=np.int64)  # a plain switch's queue of unnamed arrivals
    tail = np.full(num_nodes, -1, dtype=np.int64)
    queue_len = np.zeros(num_nodes, dtype=np.int64)
    instant = np.full(num_nodes, -1, dtype=np.int64)  # the switch's current instant of unnamed sends
    instant_start = np.zeros(num_nodes)  # and its latest start
    credit = np.zeros(num_nodes, dtype=np.int64)
    last_slot = np.full(num_nodes, -1, dtype=np.int64)  # the last delivery's value, arrival and op
    last_time = np.zeros(num_nodes)
    last_op = np.zeros(num_nodes, dtype=np.int64)
    since = np.full(num_nodes, np.nan)
    is_post = np.zeros(num_nodes, dtype=np.bool_)
    touched = np.empty(num_nodes, dtype=np.int64)
    seen = np.zeros(num_nodes, dtype=np.bool_)
    for c in range(ptr.size - 1):
        group = order[ptr[c]:ptr[c + 1]]
        g = group.size
        # The chunk's columns side by side first: gathered in one tight loop, the event loop
        # below then reads nearby memory instead of waiting on scattered loads.
        t_start, t_arrive, t_src, t_dst, t_op = start[group], arrive[group], src[group], dst[group], op[group]
        starts = np.argsort(t_start, kind="mergesort")  # local indices, by (start, id)
        arrivals = np.argsort(t_arrive, kind="mergesort")  # by (arrival, id)
        sent = np.full(g, -1, dtype=np.int64)  # the row each transfer carries
        queued = np.full(g, -1, dtype=np.int64)  # the next transfer in the same switch's queue
        ntouched = 0
        # Plain switches (docs/model.md §5.3). Named sends: the local index of the arrival each
        # names (-1: none in this chunk, so it never arrives), the arrivals some send names, and
        # theirs: 0 not arrived, 1 held, 2 forwarded. Unnamed sends: their instant (the sends of
        # the switch each within eps of the one before, in (start, id) order), their rank in it,
        # and per instant its size, how many arrivals it took (-1: not decided yet) and the next
        # of them to hand out.
        f = g if plain else 0
        named = np.zeros(f, dtype=np.bool_)
        target = np.full(f, -1, dtype=np.int64)
        reserved = np.zeros(f, dtype=np.bool_)
        state = np.zeros(f, dtype=np.int8)
        moment = np.full(f, -1, dtype=np.int64)
        rank = np.zeros(f, dtype=np.int64)
        size = np.zeros(f, dtype=np.int64)
        taken = np.full(f, -1, dtype=np.int64)
        hand = np.full(f, -1, dtype=np.int64)
        if plain:
            if via.size:
                t_ids = ids[group]  # ascending: positions and ids are in schedule order
                for li in range(g):
                    r = via[group[li]]
                    if r >= 0:
                        named[li] = True
                        k = np.searchsorted(t_ids, r)
                        if k < g and t_ids[k] == r:
                            target[li] = k
                            reserved[k] = True
            moments = 0
            for s in range(g):
                ls = starts[s]
                u = t_src[ls]
                if role[u] != FIFO or named[ls]:
                    continue
                if not seen[u]:
                    seen[u] = True
                    touched[ntouched] = u
                    ntouched += 1
                if instant[u] < 0 or t_start[ls] > instant_start[u] + eps:
                    instant[u] = moments
                    moments += 1
                m = instant[u]
                instant_start[u] = t_start[ls]
                moment[ls], rank[ls] = m, size[m]
                size[m] += 1
        holders = pre_ptr[c + 1] - pre_ptr[c]  # a value is complete when it has them all
        for k in range(pre_ptr[c], pre_ptr[c + 1]):
            v = pre_nodes[k]
            pool, slot = _alloc(pool)
            bit = v if combining else 0
            pool.rows[slot, bit // 64] |= np.uint64(1) << np.uint64(bit % 64)
            pool.count[slot] = 1
            _drop(pool, value[v])
            value[v] = slot
            if not seen[v]:
                seen[v] = True
                touched[ntouched] = v
                ntouched += 1
        if not combining:
            holders = min(holders, 1)
        for k in range(post_ptr[c], post_ptr[c + 1]):
            v = post_nodes[k]
            is_post[v] = True
            if not seen[v]:
                seen[v] = True
                touched[ntouched] = v
                ntouched += 1
            if value[v] >= 0 and pool.count[value[v]] == holders:
                since[v] = 0.0
        code, at = NONE, -1
        a_ptr = 0
        for s in range(g + 1):
            horizon = t_start[starts[s]] + eps if s < g else np.inf
            while a_ptr < g and t_arrive[arrivals[a_ptr]] <= horizon:
                li = arrivals[a_ptr]
                a_ptr += 1
                v, o, a = t_dst[li], t_op[li], t_arrive[li]
                slot = sent[li]
                if not seen[v]:
                    seen[v] = True
                    touched[ntouched] = v
                    ntouched += 1
                if role[v] == FIFO:  # the transfer's reference now waits at the switch
                    if reserved[li]:
                        state[li] = 1
                        continue
                    if tail[v] >= 0:
                        queued[tail[v]] = li
                    else:
                        head[v] = li
                    tail[v] = li
                    queue_len[v] += 1
                    continue
                if last_slot[v] >= 0 and a <= last_time[v] + eps and (
                        last_op[v] != o or (o == COPY and not _equal(pool.rows, last_slot[v], slot))):
                    code, at = AMBIGUOUS, group[li]
                    break
                _drop(pool, last_slot[v])  # the transfer's reference moves to "last delivery"
                last_slot[v], last_time[v], last_op[v] = slot, a, o
                cur = value[v]
                if o == COPY and reduce_only and cur >= 0:
                    code, at = OVERWRITE, group[li]
                    break
                if o == REDUCE and cur >= 0:
                    if _overlaps(pool.rows, cur, slot):
                        code, at = DOUBLE_COUNT, group[li]
                        break
                    if pool.refs[cur] > 1:  # shared: the node gets its own copy to change
                        pool, own = _alloc(pool)
                        pool.rows[own, :] = pool.rows[cur, :]
                        pool.count[own] = pool.count[cur]
                        _drop(pool, cur)
                        cur = own
                        value[v] = own
                    for w in range(words):
                        pool.rows[cur, w] |= pool.rows[slot, w]
                    pool.count[cur] += pool.count[slot]  # disjoint, just checked
                else:
                    _drop(pool, cur)
                    pool.refs[slot] += 1
                    cur = slot
                    value[v] = slot
                if role[v] == CREDIT:
                    credit[v] += 1
                if is_post[v]:
                    if pool.count[cur] != holders:
                        since[v] = np.nan
                    elif np.isnan(since[v]):
                        since[v] = a
            if code != NONE or s == g:
                break
            ls = starts[s]
            j = group[ls]
            u, v = t_src[ls], t_dst[ls]
            if t_op[ls] == REDUCE:
                if not combining:
                    code, at = OP_NOT_ALLOWED, j
                    break
                if not reduce_ok[v]:
                    code, at = SWITCH_REDUCE, j
                    break
            if not seen[u]:
                seen[u] = True
                touched[ntouched] = u
                ntouched += 1
            if role[u] == FIFO and named[ls]:  # the named arrival, held and not yet forwarded
                r = target[ls]
                if r < 0 or state[r] != 1:
                    code, at = FORWARD, j
                    break
                state[r] = 2
                sent[ls] = sent[r]
            elif role[u] == FIFO:
                m = moment[ls]
                if taken[m] < 0:  # the first send of its instant takes the oldest arrivals for all
                    n = min(queue_len[u], size[m])
                    if n == 0:
                        code, at = FORWARD, j
                        break
                    first = head[u]
                    k, cut, differ = first, 0.0, False
                    for _ in range(n):  # the n oldest ...
                        differ = differ or not _equal(pool.rows, sent[first], sent[k])
                        cut = t_arrive[k]
                        k = queued[k]
                    node = k
                    while k >= 0 and t_arrive[k] <= cut + eps:  # ... and those tied with the last
                        differ = differ or not _equal(pool.rows, sent[first], sent[k])
                        k = queued[k]
                    if differ:  # must carry one value, else the listing order would decide
                        code, at = AMBIGUOUS_FORWARD, j
                        break
                    taken[m], hand[m] = n, first
                    head[u] = node
                    if node < 0:
                        tail[u] = -1
                    queue_len[u] -= n
                if rank[ls] >= taken[m]:  # its instant had fewer arrivals than sends
                    code, at = FORWARD, j
                    break
                sent[ls] = sent[hand[m]]  # an equal value; its reference moves to this send
                hand[m] = queued[hand[m]]
            else:
                if value[u] < 0:
                    code, at = CAUSALITY, j
                    break
                if role[u] == CREDIT:
                    if credit[u] == 0:
                        code, at = FORWARD, j
                        break
                    credit[u] -= 1
                pool.refs[value[u]] += 1
                sent[ls] = value[u]
        found_kind[c], found_pos[c] = code, at
        if code == NONE:
            for k in range(post_ptr[c], post_ptr[c + 1]):
                v = post_nodes[k]
                ok = value[v] >= 0 and pool.count[value[v]] == holders
                post_ok[k] = ok
                post_since[k] = since[v] if ok else np.nan
        for t in range(ntouched):  # forget this chunk: only the nodes it touched
            v = touched[t]
            seen[v] = False
            value[v] = -1
            head[v] = -1
            tail[v] = -1
            queue_len[v] = 0
            instant[v] = -1
            credit[v] = 0
            last_slot[v] = -1
            since[v] = np.nan
            is_post[v] = False
        pool.top[:] = 0


@njit(cache=True)
def _first_overlap(link, start, occ_end, ids, num_links, eps) -> int:
    """``timing.link_overlap``'s rule: the first position, in (start, id) order, whose link is
    still busy with the transfer before it on that link in (start, id) order; -1 for none. One
    counting sort by link and a small sort per link, instead of sorts over batches of links."""
    order, ptr = _group(link, num_links)
    best = -1
    for e in range(num_links):
        group = order[ptr[e]:ptr[e + 1]]  # ascending positions: ids ascending too
        if group.size < 2:
            continue
        by_start = group[np.argsort(start[group], kind="mergesort")]  # (start, id) order
        for k in range(1, by_start.size):
            a, b = by_start[k - 1], by_start[k]
            if occ_end[a] > start[b] + eps and (
                    best < 0 or start[b] < start[best] or (start[b] == start[best] and ids[b] < ids[best])):
                best = b
    return best


def _link_overlap(p: Problem) -> Finding | None:
    j = _first_overlap(p.link, p.start, p.occ_end, p.ids, p.machine.num_links, float(p.eps))
    return None if j < 0 else overlap_finding(p, j)


def run(p: Problem, batch: int = BATCH_TRANSFERS) -> Outcome:
    """The event engine's outcome, computed chunk by chunk in compiled code (module docstring)."""
    pre, post = p.collective.pre, p.collective.post
    K, m = pre.num_chunks, p.machine
    order, ptr = _group(p.chunk, K)
    role = np.array([BUFFER] * m.num_npus + [events.role(s) for s in m.switches], dtype=np.int64)
    reduce_ok = np.array([True] * m.num_npus + [s.reduce for s in m.switches], dtype=np.bool_)
    combining = bool(p.collective.combining)
    reduce_only = combining and p.model.combining == "reduce-only"
    via = np.empty(0, dtype=np.int64) if p.via is None else p.via.astype(np.int64)
    words = (m.num_npus + 63) // 64 if combining else 1
    kind = np.zeros(K, dtype=np.int64)
    pos = np.full(K, -1, dtype=np.int64)
    post_ok = np.zeros(post.nodes.size, dtype=np.bool_)
    post_since = np.full(post.nodes.size, np.nan)
    ids = np.empty(0, dtype=np.int64) if p.via is None else p.ids.astype(np.int64)
    _simulate(order, ptr, ids, p.start, p.arrive, p.src, p.dst, p.op, via, role, reduce_ok,
              combining, reduce_only, words,
              pre.indptr.astype(np.int64), pre.nodes.astype(np.int64),
              post.indptr.astype(np.int64), post.nodes.astype(np.int64), float(p.eps), m.num_nodes,
              kind, pos, post_ok, post_since)
    del order
    # The first violation met, scanned as the batched event engine scans its parts: the chunks
    # in order, then link occupancy and port limits. Chunks are keyed by the kernel's codes.
    shared = [] if p.step_model else [_link_overlap(p), port_overflow(p, "send", batch),
                                      port_overflow(p, "recv", batch)]
    candidates: list[tuple[events.Key, int | Finding]] = []
    for c in np.flatnonzero(kind).tolist():
        j, code = int(pos[c]), int(kind[c])
        delivery = KINDS[code] in events.ON_DELIVERY
        candidates.append(((float(p.arrive[j] if delivery else p.start[j]), int(p.ids[j]),
                            PRIORITY[KINDS[code]], delivery), c))
    candidates += [(events.key(found), found) for found in shared if found is not None]
    first = None
    for candidate in candidates:
        if first is None or events.met_before(candidate[0], first[0], p.eps):
            first = candidate
    winner: Finding | None = None
    if first is not None and isinstance(first[1], Finding):
        winner = first[1]
    elif first is not None:
        c = first[1]
        winner = _replay(p, c).finding
        if winner is None or events.key(winner) != first[0]:
            raise RuntimeError(f"the compiled verifier and the event engine disagree on chunk {c}: "
                               f"{KINDS[int(kind[c])]} at transfer {first[0][1]} against "
                               f"{None if winner is None else (winner.violation.kind, winner.transfer)}")
    if winner is not None:
        return Outcome(winner, math.inf)
    failing = np.flatnonzero(~post_ok)
    if failing.size:
        chunks, _ = post.pairs()
        c = int(chunks[failing[0]])
        part = _replay(p, c)
        if part.finding is not None or not part.failing or part.failing[0] != (c, int(post.nodes[failing[0]])):
            raise RuntimeError(f"the compiled verifier and the event engine disagree on the "
                               f"postcondition of chunk {c}")
        return Outcome(findings.unmet(p, chunks[failing], post.nodes[failing], part.first_has), math.inf)
    return Outcome(None, float(np.max(post_since, initial=0.0)))


def _replay(p: Problem, c: int) -> events.Part:
    """The event engine on chunk c alone: the reference's finding and words for it."""
    return events.simulate(p.restrict(within(p.chunk, c, c + 1)), c, c + 1, check_timing=False)
