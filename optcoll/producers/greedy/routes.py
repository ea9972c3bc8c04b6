"""tacos+ for collectives where every chunk has one destination (AlltoAll, Gather, Scatter,
point-to-point), compiled (numba): chunks pushed along shortest paths, farthest first, each hop
taken by whichever useful link frees first.

A chunk with one destination is never copied, so it is a packet: it waits at the node that holds
it until a free out-link on a shortest path to its destination (by delay) takes it. Every such
link keeps the chunks it could carry in buckets by their remaining hop count; a free link takes a
chunk of its highest bucket, so the farthest-travelling chunks go first, and a chunk that two
links could carry leaves on the first to free up: routes follow the current load instead of being
fixed at t = 0 (the request-based engine fixes them there, blind to load).

Per transfer the work is a few array operations, and memory is the machine's delay matrix plus
one bucket entry per (waiting chunk, useful link): a 1024-NPU AlltoAll (a million chunks) is a
matter of seconds to minutes instead of hours with the interpreted engine's million-bit sets.
Forward-once switches need nothing special (a packet is forwarded once anyway); port limits are
left to the interpreted engine.
"""
from __future__ import annotations

import numpy as np
from numba import njit
from scipy.sparse.csgraph import dijkstra

from optcoll.producers.base import NotApplicable
from optcoll.producers.greedy.distance import delay_graph
from optcoll.producers.greedy.kernel import ARRIVE, ARRIVE_FREE, FREE, HEAP, csr, heap_pop, heap_push
from optcoll.producers.spread import SpreadProblem
from optcoll.schedules.schedule import Schedule, from_arrays

#: Relative slack under which two delays count as equal when testing "on a shortest path".
_EPS = 1e-9


def applicable(problem: SpreadProblem) -> bool:
    """One destination and one holder per chunk, no port limits."""
    return (not problem.send_ports and not problem.recv_ports and problem.num_chunks > 0
            and bool(np.all(problem.post.counts() == 1)) and bool(np.all(problem.pre.counts() == 1)))


def _distances(problem: SpreadProblem, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(delay distance, hop count) from every node to each node of ``targets`` (rows by target)."""
    graph, _ = delay_graph(problem)
    to_targets = graph.T.tocsr()
    hops = to_targets.copy()
    hops.data[:] = 1.0
    return (dijkstra(to_targets, directed=True, indices=targets),
            dijkstra(hops, directed=True, unweighted=True, indices=targets))


def run(problem: SpreadProblem, rng: np.random.Generator) -> Schedule:
    """tacos+'s schedule on a problem ``applicable`` says this engine covers."""
    m, n = problem.machine, problem.num_nodes
    src = problem.pre.nodes.astype(np.int64)
    dest = problem.post.nodes.astype(np.int64)
    targets, row_of = np.unique(dest, return_inverse=True)
    dist, hops = _distances(problem, targets)
    moving = np.flatnonzero(src != dest)
    far = hops[row_of[moving], src[moving]]
    if np.any(~np.isfinite(far)):
        c = int(moving[np.flatnonzero(~np.isfinite(far))[0]])
        raise NotApplicable(f"chunk {c} cannot reach node {m.label(int(dest[c]))}: no path from a "
                            f"node that holds it (failed links or a disconnected network?)")
    delay = problem.delay.astype(np.float64)
    busy = problem.busy.astype(np.float64)
    # Hops of a delay-shortest path: at most distance / shortest delay (exact on equal links).
    longest = np.floor(dist[row_of[moving], src[moving]] / max(float(delay.min()), 1e-300) + 1e-6)
    capacity = int(np.maximum(longest, far).sum())
    levels = int(far.max(initial=0)) + 1 if np.all(delay == delay[0]) else int(
        np.where(np.isfinite(hops), hops, 0).max()) + 1
    out_ptr, out_ids = csr(m.link_src, n)
    in_flight = np.ceil(delay / np.maximum(busy, 1e-300)).clip(1, None)
    events = int(min(2 * float(in_flight.sum()), 2.0 * capacity)) + 16
    order = moving[rng.permutation(moving.size)]
    if m.num_nodes > m.num_npus:
        # Through switches, queued in rotation order (buckets are last in, first out): NPU i's
        # k-th send goes to NPU i + k, so a switch's first wave reaches every downlink once
        # (a random order collides there: +25 % on one NVSwitch). Direct networks keep the
        # random order, which measured better on tori (trn2 +25 % vs +37.5 % rotated).
        rotation = (dest[order] - src[order]) % m.num_npus
        order = order[np.argsort(-rotation, kind="stable")]
    chunk, link, start = _route(order, src, dest,
                                row_of.astype(np.int64), dist, np.nan_to_num(hops).astype(np.int64),
                                m.link_src.astype(np.int64), m.link_dst.astype(np.int64), delay,
                                busy, out_ptr, out_ids, levels, events, capacity)
    return from_arrays(chunk, link, start)


# counters: heap size, next event seq (the kernel's HEAP, SEQ), free-entry list head, entries used
_FREE_ENTRY, _USED = 2, 3


@njit(cache=True)
def _new_entry(entry_chunk, entry_next, counters):
    free = counters[_FREE_ENTRY]
    if free >= 0:
        counters[_FREE_ENTRY] = entry_next[free]
        return free
    used = counters[_USED]
    counters[_USED] = used + 1
    return used


@njit(cache=True)
def _route(order, src, dest, row_of, dist, hops, lsrc, ldst, delay, busy, out_ptr, out_ids,
           levels, events, capacity):
    n = out_ptr.shape[0] - 1
    num_links = lsrc.shape[0]
    same_release = True
    for e in range(num_links):
        if delay[e] != busy[e]:
            same_release = False
    head = np.full((num_links, levels), -1, np.int64)
    top = np.zeros(num_links, np.int64)
    size = max(16, 2 * order.shape[0])
    entry_chunk = np.empty(size, np.int64)
    entry_next = np.empty(size, np.int64)
    pos = np.full(src.shape[0], -1, np.int64)
    link_free = np.ones(num_links, np.bool_)
    dirty = np.zeros(n, np.bool_)
    heap_time = np.empty(events)
    heap_seq = np.empty(events, np.int64)
    heap_rec = np.empty((events, 3), np.int64)
    counters = np.zeros(4, np.int64)
    counters[_FREE_ENTRY] = -1
    out_chunk = np.empty(capacity, np.int64)
    out_link = np.empty(capacity, np.int64)
    out_start = np.empty(capacity)
    done = 0
    left = order.shape[0]
    for c in order:
        pos[c] = src[c]
        if counters[_USED] + (out_ptr[src[c] + 1] - out_ptr[src[c]]) > entry_chunk.shape[0]:
            entry_chunk, entry_next = _grown(entry_chunk, entry_next)
        _queue(c, src[c], row_of, dist, hops, ldst, delay, out_ptr, out_ids, head, top,
               entry_chunk, entry_next, counters)
        dirty[src[c]] = True
    t = 0.0
    while left > 0:
        for u in range(n):
            if not dirty[u]:
                continue
            dirty[u] = False
            for k in range(out_ptr[u], out_ptr[u + 1]):
                e = out_ids[k]
                if not link_free[e]:
                    continue
                c = _take(e, u, pos, head, top, entry_chunk, entry_next, counters)
                if c < 0:
                    continue
                pos[c] = -1
                link_free[e] = False
                out_chunk[done], out_link[done], out_start[done] = c, e, t
                done += 1
                if same_release:
                    heap_push(heap_time, heap_seq, heap_rec, counters, t + delay[e], ARRIVE_FREE, e, c)
                else:
                    heap_push(heap_time, heap_seq, heap_rec, counters, t + delay[e], ARRIVE, e, c)
                    heap_push(heap_time, heap_seq, heap_rec, counters, t + busy[e], FREE, e, c)
        if counters[HEAP] == 0:
            break
        t = heap_time[0]
        while counters[HEAP] > 0 and heap_time[0] == t:
            slot = heap_pop(heap_time, heap_seq, heap_rec, counters)
            kind, e, c = heap_rec[slot, 0], heap_rec[slot, 1], heap_rec[slot, 2]
            if kind != ARRIVE:
                link_free[e] = True
                dirty[lsrc[e]] = True
            if kind != FREE:
                v = ldst[e]
                if v == dest[c]:
                    left -= 1
                else:
                    pos[c] = v
                    if counters[_USED] + (out_ptr[v + 1] - out_ptr[v]) > entry_chunk.shape[0]:
                        entry_chunk, entry_next = _grown(entry_chunk, entry_next)
                    _queue(c, v, row_of, dist, hops, ldst, delay, out_ptr, out_ids, head, top,
                           entry_chunk, entry_next, counters)
                    dirty[v] = True
    return out_chunk[:done], out_link[:done], out_start[:done]


@njit(cache=True)
def _grown(entry_chunk, entry_next):
    size = entry_chunk.shape[0]
    chunk = np.empty(2 * size, np.int64)
    nxt = np.empty(2 * size, np.int64)
    chunk[:size] = entry_chunk
    nxt[:size] = entry_next
    return chunk, nxt


@njit(cache=True)
def _queue(c, v, row_of, dist, hops, ldst, delay, out_ptr, out_ids, head, top, entry_chunk,
           entry_next, counters):
    """Chunk c waits at v: it joins, by its remaining hops, the buckets of v's out-links on a
    shortest path to its destination."""
    row = row_of[c]
    here = dist[row, v]
    for k in range(out_ptr[v], out_ptr[v + 1]):
        e = out_ids[k]
        w = ldst[e]
        if dist[row, w] + delay[e] <= here * (1.0 + _EPS):
            level = hops[row, w]
            i = _new_entry(entry_chunk, entry_next, counters)
            entry_chunk[i] = c
            entry_next[i] = head[e, level]
            head[e, level] = i
            if level > top[e]:
                top[e] = level


@njit(cache=True)
def _take(e, u, pos, head, top, entry_chunk, entry_next, counters):
    """A chunk waiting at u from e's highest non-empty bucket (entries of chunks that left
    through another link are recycled on the way), or -1."""
    level = top[e]
    while level >= 0:
        i = head[e, level]
        while i >= 0:
            c = entry_chunk[i]
            nxt = entry_next[i]
            head[e, level] = nxt
            entry_next[i] = counters[_FREE_ENTRY]
            counters[_FREE_ENTRY] = i
            if pos[c] == u:
                top[e] = level
                return c
            i = nxt
        level -= 1
    top[e] = 0
    return -1
