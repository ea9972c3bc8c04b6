"""The greedy's hot loop compiled (numba): TACOS matching on machines where every node is a plain
copying destination (no relays, no port limits, no forward-once switches).

That is every AllGather, ReduceScatter and AllReduce phase on an NPU-only network, the cases that
reach thousands of NPUs. The interpreted ``Engine`` (same module family) does exactly the same
there and also handles relays, switches that forward once and port limits; the two are checked
schedule for schedule against each other (tests), so the compiled path changes speed, not results.

Why a compiled kernel: the interpreted engine spends about 10 µs of Python per transfer with no
single hot spot (issue 23); here a transfer costs a few word operations on bitsets (one row of
``uint64`` words per node, bit c = chunk c), so a 1024-NPU torus AllGather (a million transfers)
takes well under a second. numba compiles it on first use and caches the machine code on disk
(``cache=True``), and it draws from the caller's ``numpy.random.Generator`` itself, so the random
stream, and with it every schedule, is the interpreted engine's.

The state lives in plain arrays (``KernelState``); one Python call per event time applies the
deliveries (``apply_next``) and one matches every node marked dirty, in the random order the
caller drew (``match_nodes``), exactly the interpreted engine's two phases.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from optcoll.instances.clock import check_current
from optcoll.producers.base import NotApplicable
from optcoll.producers.spread import COPY, SpreadProblem
from optcoll.schedules.schedule import Schedule, from_arrays

ARRIVE_FREE, ARRIVE, FREE = 0, 1, 2
RANDOM_BATCH = 1 << 14
#: Rarity levels kept for tacos+ (holder counts up to 2**63).
LEVELS = 64


@dataclass
class KernelState:
    """Every array the kernel reads and writes (see ``init_state``)."""

    lsrc: np.ndarray
    ldst: np.ndarray
    delay: np.ndarray
    busy: np.ndarray
    in_ptr: np.ndarray  # CSR of in-links per node (link ids, in id order)
    in_ids: np.ndarray
    out_ptr: np.ndarray  # CSR of out-links per node
    out_ids: np.ndarray
    free_in: np.ndarray  # per node, its free in-links in the engine's list order (CSR slots)
    free_count: np.ndarray
    link_free: np.ndarray
    avail: np.ndarray  # uint64[nodes, words]: chunks held
    want: np.ndarray  # uint64[nodes, words]: chunks wanted and not yet on the way
    holders: np.ndarray  # tacos+: holders (or on the way) per chunk
    rarity: np.ndarray  # tacos+: uint64[LEVELS, words], chunks by bit length of holders
    heap_time: np.ndarray
    heap_seq: np.ndarray
    heap_rec: np.ndarray  # int64[capacity, 3]: kind, link, chunk
    counters: np.ndarray  # int64: heap size, next seq, transfers, remaining, random position
    randoms: np.ndarray
    out_chunk: np.ndarray
    out_link: np.ndarray
    out_start: np.ndarray
    same_release: bool
    plus: bool


HEAP, SEQ, DONE, REMAINING, RPOS = 0, 1, 2, 3, 4


def csr(keys: np.ndarray, num_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """(ptr, ids): the link ids with key v (a node) are ids[ptr[v]:ptr[v+1]], in id order."""
    order = np.argsort(keys, kind="stable").astype(np.int64)
    ptr = np.searchsorted(keys[order], np.arange(num_nodes + 1)).astype(np.int64)
    return ptr, order


def bitsets(chunks: np.ndarray, nodes: np.ndarray, num_nodes: int, words: int) -> np.ndarray:
    """uint64[num_nodes, words] with bit c of row v set for every pair (c, v)."""
    out = np.zeros((num_nodes, words), dtype=np.uint64)
    if chunks.size:
        np.bitwise_or.at(out, (nodes, chunks >> 6),
                         np.left_shift(np.uint64(1), (chunks & 63).astype(np.uint64)))
    return out


def init_state(problem: SpreadProblem, plus: bool) -> KernelState:
    m = problem.machine
    n, K = m.num_nodes, problem.num_chunks
    words = max(1, (K + 63) // 64)
    in_ptr, in_ids = csr(m.link_dst, n)
    out_ptr, out_ids = csr(m.link_src, n)
    pre_c, pre_v = problem.pre.pairs()
    need_c, need_v = problem.needs
    holders = problem.pre.counts().astype(np.int64)
    rarity = np.zeros((LEVELS, words), dtype=np.uint64)
    if plus and K:
        levels = np.zeros(K, dtype=np.int64)
        positive = holders > 0
        levels[positive] = np.floor(np.log2(holders[positive])).astype(np.int64) + 1
        rarity = bitsets(np.arange(K, dtype=np.int64), levels, LEVELS, words)
    delay = problem.delay.astype(np.float64)
    busy = problem.busy.astype(np.float64)
    # Live events: at most two per transfer in flight, at most ceil(delay/busy) in flight per link.
    in_flight = np.ceil(delay / np.maximum(busy, 1e-300)).clip(1, None)
    capacity = int(min(2 * float(in_flight.sum()), 2.0 * need_c.size)) + 16
    counters = np.zeros(5, dtype=np.int64)
    counters[REMAINING] = need_c.size
    return KernelState(
        m.link_src.astype(np.int64), m.link_dst.astype(np.int64), delay, busy,
        in_ptr, in_ids, out_ptr, out_ids, in_ids.copy(), np.diff(in_ptr), np.ones(m.num_links, bool),
        bitsets(pre_c, pre_v, n, words), bitsets(need_c, need_v, n, words), holders, rarity,
        np.zeros(capacity), np.zeros(capacity, np.int64), np.zeros((capacity, 3), np.int64),
        counters, np.zeros(RANDOM_BATCH), np.zeros(need_c.size, np.int64),
        np.zeros(need_c.size, np.int64), np.zeros(need_c.size), bool(np.all(delay == busy)), plus)


def dirty_at_start(state: KernelState) -> np.ndarray:
    return np.flatnonzero(state.want.any(axis=1)).astype(np.int64)


def match_nodes(state: KernelState, order: np.ndarray, t: float, rng: np.random.Generator) -> None:
    s = state
    _match_nodes(order, t, rng, s.plus, s.same_release, s.lsrc, s.ldst, s.delay, s.busy,
                 s.in_ptr, s.in_ids, s.free_in, s.free_count, s.link_free, s.avail, s.want,
                 s.holders, s.rarity, s.heap_time, s.heap_seq, s.heap_rec, s.counters, s.randoms,
                 s.out_chunk, s.out_link, s.out_start)


def apply_next(state: KernelState) -> tuple[float, np.ndarray]:
    """Pops the earliest event time, applies its deliveries and releases; (time, dirty nodes)."""
    s = state
    return _apply_next(s.ldst, s.out_ptr, s.out_ids, s.in_ptr, s.free_in, s.free_count,
                       s.link_free, s.avail, s.want, s.heap_time, s.heap_seq, s.heap_rec,
                       s.counters)


# -- bitsets ---------------------------------------------------------------------------------------
@njit(cache=True, inline="always")
def _popcount(x):
    x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return np.int64((x * np.uint64(0x0101010101010101)) >> np.uint64(56))


@njit(cache=True)
def _kth_bit(x, k):
    """Index of the k-th (0-based) set bit of the bitset row x."""
    for w in range(x.shape[0]):
        word = x[w]
        count = _popcount(word)
        if k < count:
            while k > 0:
                word &= word - np.uint64(1)
                k -= 1
            low = word & (~word + np.uint64(1))
            return w * 64 + _popcount(low - np.uint64(1))
        k -= count
    return -1


@njit(cache=True, inline="always")
def _has(x, c):
    return (x[c >> 6] >> np.uint64(c & 63)) & np.uint64(1) != np.uint64(0)


@njit(cache=True)
def _random(rng, randoms, counters):
    """The interpreted engine's draw: batches of RANDOM_BATCH, popped from the end."""
    if counters[RPOS] == 0:
        randoms[:] = rng.random(RANDOM_BATCH)
        counters[RPOS] = RANDOM_BATCH
    counters[RPOS] -= 1
    return randoms[counters[RPOS]]


# -- the event heap (time, then push order) --------------------------------------------------------
@njit(cache=True, inline="always")
def _before(heap_time, heap_seq, i, j):
    return heap_time[i] < heap_time[j] or (heap_time[i] == heap_time[j] and heap_seq[i] < heap_seq[j])


@njit(cache=True)
def _swap(heap_time, heap_seq, heap_rec, i, j):
    heap_time[i], heap_time[j] = heap_time[j], heap_time[i]
    heap_seq[i], heap_seq[j] = heap_seq[j], heap_seq[i]
    for k in range(3):
        heap_rec[i, k], heap_rec[j, k] = heap_rec[j, k], heap_rec[i, k]


@njit(cache=True)
def heap_push(heap_time, heap_seq, heap_rec, counters, t, kind, e, c):
    """Adds event (kind, link e, chunk c) at time t; events pop by time, then in push order."""
    i = counters[HEAP]
    if i == heap_time.shape[0]:
        raise RuntimeError("greedy kernel: event heap full")
    counters[HEAP] = i + 1
    heap_time[i] = t
    heap_seq[i] = counters[SEQ]
    counters[SEQ] += 1
    heap_rec[i, 0], heap_rec[i, 1], heap_rec[i, 2] = kind, e, c
    while i > 0:
        parent = (i - 1) >> 1
        if not _before(heap_time, heap_seq, i, parent):
            break
        _swap(heap_time, heap_seq, heap_rec, i, parent)
        i = parent


@njit(cache=True)
def heap_pop(heap_time, heap_seq, heap_rec, counters):
    """Removes the root (it is copied to the slot just past the heap's new end)."""
    last = counters[HEAP] - 1
    _swap(heap_time, heap_seq, heap_rec, 0, last)
    counters[HEAP] = last
    i = 0
    while True:
        left, right, best = 2 * i + 1, 2 * i + 2, i
        if left < last and _before(heap_time, heap_seq, left, best):
            best = left
        if right < last and _before(heap_time, heap_seq, right, best):
            best = right
        if best == i:
            return last
        _swap(heap_time, heap_seq, heap_rec, i, best)
        i = best


@njit(cache=True)
def _apply_next(ldst, out_ptr, out_ids, in_ptr, free_in, free_count, link_free, avail, want,
                heap_time, heap_seq, heap_rec, counters):
    t = heap_time[0]
    n = avail.shape[0]
    is_dirty = np.zeros(n, dtype=np.bool_)
    gained = []
    while counters[HEAP] > 0 and heap_time[0] == t:
        slot = heap_pop(heap_time, heap_seq, heap_rec, counters)
        kind, e, c = heap_rec[slot, 0], heap_rec[slot, 1], heap_rec[slot, 2]
        d = ldst[e]
        if kind != FREE:
            avail[d, c >> 6] |= np.uint64(1) << np.uint64(c & 63)
            gained.append((d, c))
        if kind != ARRIVE:
            link_free[e] = True
            free_in[in_ptr[d] + free_count[d]] = e
            free_count[d] += 1
            is_dirty[d] = True
    for v, c in gained:
        for k in range(out_ptr[v], out_ptr[v + 1]):
            e = out_ids[k]
            if link_free[e] and _has(want[ldst[e]], c):
                is_dirty[ldst[e]] = True
    return t, np.flatnonzero(is_dirty).astype(np.int64)


# -- matching ----------------------------------------------------------------------------------------
@njit(cache=True)
def _assign(c, e, t, plus, same_release, lsrc, ldst, delay, busy, in_ptr, free_in, free_count,
            link_free, want, holders, rarity, heap_time, heap_seq, heap_rec, counters,
            out_chunk, out_link, out_start):
    d = ldst[e]
    i = counters[DONE]
    out_chunk[i], out_link[i], out_start[i] = c, e, t
    counters[DONE] = i + 1
    link_free[e] = False
    base, count = in_ptr[d], free_count[d]
    for k in range(base, base + count):
        if free_in[k] == e:
            for j in range(k, base + count - 1):
                free_in[j] = free_in[j + 1]
            break
    free_count[d] = count - 1
    bit = np.uint64(1) << np.uint64(c & 63)
    want[d, c >> 6] ^= bit
    counters[REMAINING] -= 1
    if same_release:
        heap_push(heap_time, heap_seq, heap_rec, counters, t + delay[e], ARRIVE_FREE, e, c)
    else:
        heap_push(heap_time, heap_seq, heap_rec, counters, t + delay[e], ARRIVE, e, c)
        heap_push(heap_time, heap_seq, heap_rec, counters, t + busy[e], FREE, e, c)
    if plus:
        before = holders[c]
        after = before + 1
        holders[c] = after
        old_level, new_level = _bit_length(before), _bit_length(after)
        if old_level != new_level:
            rarity[old_level, c >> 6] ^= bit
            rarity[new_level, c >> 6] |= bit


@njit(cache=True, inline="always")
def _bit_length(x):
    n = 0
    while x > 0:
        x >>= 1
        n += 1
    return n


@njit(cache=True)
def _offers(d, lsrc, in_ptr, free_in, free_count, avail, want, offer_e, offer_x, offer_n):
    """Free links into d whose source holds something d wants: (link, chunks, count) rows."""
    words = want.shape[1]
    k = 0
    for j in range(in_ptr[d], in_ptr[d] + free_count[d]):
        e = free_in[j]
        u = lsrc[e]
        total = 0
        for w in range(words):
            x = avail[u, w] & want[d, w]
            offer_x[k, w] = x
            total += _popcount(x)
        if total:
            offer_e[k], offer_n[k] = e, total
            k += 1
    return k


@njit(cache=True)
def _still_open(k, c, offer_e, offer_x, offer_n):
    """Offers after chunk c was taken: c removed, emptied offers dropped (order kept)."""
    w, bit = c >> 6, np.uint64(1) << np.uint64(c & 63)
    kept = 0
    for i in range(k):
        if offer_x[i, w] & bit:
            offer_x[i, w] ^= bit
            offer_n[i] -= 1
        if offer_n[i]:
            if kept != i:
                offer_e[kept], offer_n[kept] = offer_e[i], offer_n[i]
                offer_x[kept, :] = offer_x[i, :]
            kept += 1
    return kept


@njit(cache=True)
def _remove(k, i, offer_e, offer_x, offer_n):
    for j in range(i, k - 1):
        offer_e[j], offer_n[j] = offer_e[j + 1], offer_n[j + 1]
        offer_x[j, :] = offer_x[j + 1, :]
    return k - 1


@njit(cache=True)
def _match_nodes(order, t, rng, plus, same_release, lsrc, ldst, delay, busy, in_ptr, in_ids,
                 free_in, free_count, link_free, avail, want, holders, rarity, heap_time,
                 heap_seq, heap_rec, counters, randoms, out_chunk, out_link, out_start):
    """At time t, each node of ``order`` that wants chunks takes one per free in-link from the
    senders' offers: tacos+'s pick (``_plus_offer``, ``_rarest_chunk``) or TACOS's
    (``_plain_offer``)."""
    words = want.shape[1]
    max_in = 1
    for v in range(in_ptr.shape[0] - 1):
        max_in = max(max_in, in_ptr[v + 1] - in_ptr[v])
    offer_e = np.empty(max_in, np.int64)
    offer_n = np.empty(max_in, np.int64)
    offer_x = np.empty((max_in, words), np.uint64)
    holding = np.empty(max_in, np.int64)
    sources = np.empty(max_in, np.int64)
    not_others = np.empty((max_in, words), np.uint64)
    prefix = np.empty((max_in + 1, words), np.uint64)
    pool = np.empty(words, np.uint64)
    rarest = np.empty(words, np.uint64)
    for d in order:
        if free_count[d] == 0:
            continue
        wanted = False
        for w in range(words):
            if want[d, w]:
                wanted = True
                break
        if not wanted:
            continue
        k = _offers(d, lsrc, in_ptr, free_in, free_count, avail, want, offer_e, offer_x, offer_n)
        if plus and k:
            _not_others(d, lsrc, in_ptr, in_ids, avail, sources, not_others, prefix)
        while k > 0:
            if plus:
                chosen = _plus_offer(k, lsrc, offer_e, offer_x, offer_n, sources, not_others, pool, rng, randoms,
                                     counters)
                c = _rarest_chunk(pool, rarity, rarest, rng, randoms, counters)
            elif k == 1:
                chosen, c = 0, _kth_bit(offer_x[0], np.int64(_random(rng, randoms, counters) * offer_n[0]))
            else:
                chosen, c = _plain_offer(k, offer_e, offer_x, offer_n, holding, delay, rng, randoms, counters)
            e = offer_e[chosen]
            k = _remove(k, chosen, offer_e, offer_x, offer_n)
            _assign(c, e, t, plus, same_release, lsrc, ldst, delay, busy, in_ptr, free_in,
                    free_count, link_free, want, holders, rarity, heap_time, heap_seq, heap_rec,
                    counters, out_chunk, out_link, out_start)
            k = _still_open(k, c, offer_e, offer_x, offer_n)


@njit(cache=True)
def _plus_offer(k, lsrc, offer_e, offer_x, offer_n, sources, not_others, pool, rng, randoms, counters):
    """tacos+'s offer among the first ``k``: fewest chunks only its sender can give (none
    counting last), then fewest chunks, then a random draw; ``pool`` gets the chunks to pick
    from (the sender's own where there are any)."""
    words = offer_x.shape[1]
    best, best_only, best_count, best_r = -1, 0, 0, 0.0
    for i in range(k):
        u = lsrc[offer_e[i]]
        row = 0
        while sources[row] != u:
            row += 1
        only = 0
        for w in range(words):
            only += _popcount(offer_x[i, w] & not_others[row, w])
        r = _random(rng, randoms, counters)
        first, second = (0, only) if only else (1, offer_n[i])
        if (best < 0 or first < best_only or (first == best_only and second < best_count)
                or (first == best_only and second == best_count and r < best_r)):
            best, best_only, best_count, best_r = i, first, second, r
            if only:
                for w in range(words):
                    pool[w] = offer_x[i, w] & not_others[row, w]
            else:
                pool[:] = offer_x[i, :]
    return best


@njit(cache=True)
def _rarest_chunk(pool, rarity, rarest, rng, randoms, counters):
    """A random chunk of ``pool`` among those of the rarest level present (-1 if none)."""
    words = pool.shape[0]
    for level in range(LEVELS):
        total = 0
        for w in range(words):
            total += _popcount(pool[w] & rarity[level, w])
        if total:
            for w in range(words):
                rarest[w] = pool[w] & rarity[level, w]
            return _kth_bit(rarest, np.int64(_random(rng, randoms, counters) * total))
    return -1


@njit(cache=True)
def _plain_offer(k, offer_e, offer_x, offer_n, holding, delay, rng, randoms, counters):
    """TACOS's pick among ``k`` > 1 offers: a chunk drawn uniformly over every offered chunk
    (redrawn with probability 1 - 1/h when h offers hold it, so each distinct chunk is as
    likely), then among its holders the fastest link, ties at random. Returns (offer, chunk)."""
    total = 0
    for i in range(k):
        total += offer_n[i]
    while True:
        r = _random(rng, randoms, counters) * total
        pick = k - 1
        for i in range(k):
            if r < offer_n[i]:
                pick = i
                break
            r -= offer_n[i]
        c = _kth_bit(offer_x[pick], np.int64(r))
        h = 0
        for i in range(k):
            if _has(offer_x[i], c):
                holding[h] = i
                h += 1
        if h == 1 or _random(rng, randoms, counters) * h < 1.0:
            break
    best_delay = np.inf
    ties = 0
    for j in range(h):
        de = delay[offer_e[holding[j]]]
        if de < best_delay:
            best_delay = de
            holding[0] = holding[j]
            ties = 1
        elif de == best_delay:
            holding[ties] = holding[j]
            ties += 1
    chosen = holding[0] if ties == 1 else holding[np.int64(_random(rng, randoms, counters) * ties)]
    return chosen, c


@njit(cache=True)
def _not_others(d, lsrc, in_ptr, in_ids, avail, sources, not_others, prefix):
    """For each distinct in-neighbour of d (first-seen order), ~(what the others hold)."""
    words = avail.shape[1]
    count = 0
    for j in range(in_ptr[d], in_ptr[d + 1]):
        u = lsrc[in_ids[j]]
        seen = False
        for i in range(count):
            if sources[i] == u:
                seen = True
                break
        if not seen:
            sources[count] = u
            count += 1
    prefix[0, :] = 0
    for i in range(count):
        for w in range(words):
            prefix[i + 1, w] = prefix[i, w] | avail[sources[i], w]
    for w in range(words):
        suffix = np.uint64(0)
        for i in range(count - 1, -1, -1):
            not_others[i, w] = ~(prefix[i, w] | suffix)
            suffix |= avail[sources[i], w]
    return count


def run(problem: SpreadProblem, rng: np.random.Generator, plus: bool) -> Schedule:
    """The greedy's schedule (``plus``: tacos+) on a problem the kernel covers
    (``coverage.kernel_covers``)."""
    state = init_state(problem, plus)
    dirty = dirty_at_start(state)
    t = 0.0
    while True:
        check_current()  # under a solver's clock (a start schedule), at each instant
        if dirty.size > 1:
            dirty = dirty[rng.permutation(dirty.size)]
        if dirty.size:
            match_nodes(state, dirty, t, rng)
        if state.counters[REMAINING] == 0 or state.counters[HEAP] == 0:
            break
        t, dirty = apply_next(state)
    if state.counters[REMAINING]:
        v = int(np.flatnonzero(state.want.any(axis=1))[0])
        c = int(_kth_bit(state.want[v], 0))
        raise NotApplicable(f"chunk {c} cannot reach node {problem.machine.label(v)}: no path from a "
                            f"node that holds it (failed links or a disconnected network?)")
    done = int(state.counters[DONE])
    return from_arrays(state.out_chunk[:done], state.out_link[:done], state.out_start[:done])
