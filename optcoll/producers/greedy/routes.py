"""tacos+ for collectives where every chunk has one destination (AlltoAll, Gather, Scatter,
point-to-point), compiled (numba): every chunk's route planned against the others' load, then
chunks pushed along their routes, each link taking the most urgent waiting chunk when it frees.

A chunk with one destination is never copied, so it is a packet: it waits at the node that holds
it until the next link of its route takes it. Two greedy phases:

1. *Routes by load.* Chunks are routed one by one (fewest hops first: they have the fewest
   choices) over the delay-shortest paths to their destination, each on the path that adds the
   least to the sum of squared link loads (load = occupancy of the routes chosen so far): a
   convex cost, so the loads spread evenly. Later passes take each route out and route it again
   against all the others (below ``REPLANNING_BUDGET``). Taking whichever shortest-path link
   frees first instead (routes fixed by the moment, blind to the other chunks) overloads some
   links: a rail's NICs carried 9 chunks where 8 suffice (+11 % on 2 x DGX H100), tori +22-25 %.
   Where link delays differ, the same is done over the paths of fewest links and the earlier
   finish is kept: on 16 x DGX H100 rails the delay-shortest way between rails is the spine,
   saturated, and the NVLink detour of as many links relieves it (+7.3 -> +2.5 %).
2. *Pushing.* On a direct network a free link takes the waiting chunk with the most hops still
   to go (farthest first). Through switches, where a link's chunks compete for the links behind
   it, a free link takes the chunk whose next link is claimed for the shortest time by chunks
   already sent toward it (then the first in rotation order, ``rotation_rounds``): links that
   free together feed different links behind the switch instead of all the one with the most
   work.

Memory is the machine's delay matrix plus one route entry per transfer (the schedule's own size):
a 1024-NPU AlltoAll (a million chunks) is a matter of seconds, not hours as with the interpreted
engine's million-bit sets. Forward-once switches need nothing special (a packet is forwarded once
anyway); port limits are left to the interpreted engine.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from scipy.sparse.csgraph import dijkstra

from optcoll.instances.clock import check_current
from optcoll.producers.base import NotApplicable
from optcoll.producers.greedy.distance import delay_graph
from optcoll.producers.greedy.kernel import ARRIVE, ARRIVE_FREE, FREE, HEAP, csr, heap_pop, heap_push
from optcoll.producers.greedy.rotation import rotation_rounds, server_of
from optcoll.producers.spread import SpreadProblem
from optcoll.schedules.schedule import Schedule, from_arrays

#: Relative slack under which two delays count as equal when testing "on a shortest path".
_EPS = 1e-9
#: Routing passes (the first, then re-routing every chunk against all others) while the moving
#: chunks times the links stay under ``REPLANNING_BUDGET``; one pass beyond it.
PASSES = 4
REPLANNING_BUDGET = 5 * 10**7


def _distances(problem: SpreadProblem, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(delay distance, hop count) from every node to each node of ``targets`` (rows by target)."""
    graph, _ = delay_graph(problem)
    to_targets = graph.T.tocsr()
    hops = to_targets.copy()
    hops.data[:] = 1.0
    return (dijkstra(to_targets, directed=True, indices=targets),
            dijkstra(hops, directed=True, unweighted=True, indices=targets))


def run(problem: SpreadProblem, rng: np.random.Generator) -> Schedule:
    """tacos+'s schedule on a problem this engine covers (``coverage.routes_cover``)."""
    m, n = problem.machine, problem.num_nodes
    src = problem.pre.nodes.astype(np.int64)
    dest = problem.post.nodes.astype(np.int64)
    targets, row_of = np.unique(dest, return_inverse=True)
    row_of = row_of.astype(np.int64)
    dist, hops = _distances(problem, targets)
    moving = np.flatnonzero(src != dest)
    far = hops[row_of[moving], src[moving]]
    if np.any(~np.isfinite(far)):
        c = int(moving[np.flatnonzero(~np.isfinite(far))[0]])
        raise NotApplicable(f"chunk {c} cannot reach node {m.label(int(dest[c]))}: no path from a "
                            f"node that holds it (failed links or a disconnected network?)")
    delay = problem.delay.astype(np.float64)
    busy = problem.busy.astype(np.float64)
    # Room for each route: hops of a delay-shortest path are at most distance / shortest delay.
    longest = np.floor(dist[row_of[moving], src[moving]] / max(float(delay.min()), 1e-300) + 1e-6)
    room = np.zeros(src.size + 1, np.int64)
    room[moving + 1] = np.maximum(longest, far).astype(np.int64)
    start = np.cumsum(room)
    out_ptr, out_ids = csr(m.link_src, n)
    in_flight = np.ceil(delay / np.maximum(busy, 1e-300)).clip(1, None)
    switched = m.num_nodes > m.num_npus
    rounds = np.zeros(src.size, np.int64)
    order = moving[rng.permutation(moving.size)]
    if switched:
        # Through switches in rotation order (a random order collides there: +25 % on one
        # NVSwitch); direct networks keep the random order.
        rounds[moving] = rotation_rounds(server_of(m), src[moving], dest[moving], m.num_npus,
                                         m.num_npus)
        order = order[np.argsort(rounds[order], kind="stable")]
    passes = PASSES if moving.size * m.num_links <= REPLANNING_BUDGET else 1
    plan_order = order[np.argsort(hops[row_of[order], src[order]], kind="stable")]
    # Shortest paths by delay; where link delays differ, by hop count as well (the earlier
    # finish is kept): fewest links lets bandwidth-bound traffic avoid a saturated fast hop.
    metrics = [(dist, delay)]
    if np.any(delay != delay[0]):
        metrics.append((hops, np.ones_like(delay)))
    best: tuple[float, Schedule] | None = None
    for metric, length_of in metrics:
        check_current()  # under a solver's clock (a start schedule), between compiled phases
        length, links = _plan(plan_order, src, dest, row_of, metric, m.link_dst.astype(np.int64),
                              length_of, busy, out_ptr, out_ids, start, passes)
        transfers = int(length.sum())
        events = int(min(2 * float(in_flight.sum()), 2.0 * transfers)) + 16
        check_current()
        chunk, link, begin = _route(order, dest, start[:-1], length, links, rounds, switched,
                                    m.link_src.astype(np.int64), m.link_dst.astype(np.int64),
                                    delay, busy, out_ptr, out_ids, int(length.max(initial=0)),
                                    events, transfers)
        finish = float((begin + delay[link]).max(initial=0.0))
        if best is None or finish < best[0]:
            best = (finish, from_arrays(chunk, link, begin))
    assert best is not None
    return best[1]


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
def _plan(order, src, dest, row_of, dist, ldst, delay, busy, out_ptr, out_ids, start, passes):
    """Every chunk's route (module docstring, phase 1): of the shortest paths under a metric
    (``dist[row, v]``: v's distance to the row's target, ``delay[e]``: link e's length; delay
    or hop count), the one that adds the least to the sum of squared link loads, then the one
    with the lowest busiest link. Chunk c's route is links[start[c]:start[c] + length[c]];
    returns (length, links)."""
    n = out_ptr.shape[0] - 1
    layered = True
    for e in range(delay.shape[0]):
        if delay[e] != delay[0]:
            layered = False
    load = np.zeros(ldst.shape[0])
    stamp = np.full(n, -1, np.int64)
    cost = np.zeros(n)
    peak = np.zeros(n)
    step = np.full(n, -1, np.int64)
    nodes = np.empty(n, np.int64)
    keys = np.empty(n)
    ranked = np.empty(n, np.int64)
    first = np.empty(n + 1, np.int64)  # node nodes[i]'s links on a shortest path: tight[first[i]:first[i + 1]]
    tight = np.empty(ldst.shape[0], np.int64)
    length = np.zeros(src.shape[0], np.int64)
    links = np.empty(start[-1], np.int32)  # link ids: the schedule's size again, kept small
    tick = 0
    for _ in range(passes):
        for c in order:
            row, s, d = row_of[c], src[c], dest[c]
            for i in range(start[c], start[c] + length[c]):
                load[links[i]] -= busy[links[i]]
            # the nodes on c's shortest paths: from s along links that keep it on one
            stamp[s] = tick
            nodes[0] = s
            count, i, found = 1, 0, 0
            while i < count:
                v = nodes[i]
                first[i] = found
                i += 1
                if v == d:
                    continue
                for j in range(out_ptr[v], out_ptr[v + 1]):
                    e = out_ids[j]
                    w = ldst[e]
                    if dist[row, w] + delay[e] <= dist[row, v] * (1.0 + _EPS):
                        tight[found] = e
                        found += 1
                        if stamp[w] != tick:
                            stamp[w] = tick
                            nodes[count] = w
                            count += 1
            first[count] = found
            if not layered:
                for i in range(count):
                    keys[i] = dist[row, nodes[i]]
                ranked[:count] = np.argsort(keys[:count])
            for k in range(count):  # nearest to d first: successors come first
                # equal lengths: found in rounds of equal distance, so nearest to d last
                i = count - 1 - k if layered else ranked[k]
                v = nodes[i]
                if v == d:
                    cost[v], peak[v] = 0.0, 0.0
                    continue
                best_cost, best_peak, best = np.inf, np.inf, -1
                for j in range(first[i], first[i + 1]):
                    e = tight[j]
                    w = ldst[e]
                    through = cost[w] + busy[e] * (2.0 * load[e] + busy[e])
                    top = max(peak[w], load[e] + busy[e])
                    if through < best_cost or (through == best_cost and top < best_peak):
                        best_cost, best_peak, best = through, top, e
                cost[v], peak[v], step[v] = best_cost, best_peak, best
            tick += 1
            i, v = start[c], s
            while v != d:
                e = step[v]
                links[i] = e
                i += 1
                load[e] += busy[e]
                v = ldst[e]
            length[c] = i - start[c]
    return length, links


@njit(cache=True)
def _route(order, dest, start, length, links, rounds, switched, lsrc, ldst, delay, busy, out_ptr,
           out_ids, longest, events, transfers):
    """Pushes the chunks along their routes (module docstring, phase 2)."""
    n = out_ptr.shape[0] - 1
    num_links = lsrc.shape[0]
    same_release = True
    for e in range(num_links):
        if delay[e] != busy[e]:
            same_release = False
    levels = 1 if switched else longest
    head = np.full((num_links, levels), -1, np.int64)
    top = np.zeros(num_links, np.int64)
    size = max(16, 2 * order.shape[0])
    entry_chunk = np.empty(size, np.int64)
    entry_next = np.empty(size, np.int64)
    hop = np.zeros(dest.shape[0], np.int64)
    claimed = np.zeros(num_links)  # through switches: until when a link is claimed by chunks sent toward it
    link_free = np.ones(num_links, np.bool_)
    dirty = np.zeros(n, np.bool_)
    heap_time = np.empty(events)
    heap_seq = np.empty(events, np.int64)
    heap_rec = np.empty((events, 3), np.int64)
    counters = np.zeros(4, np.int64)
    counters[_FREE_ENTRY] = -1
    out_chunk = np.empty(transfers, np.int64)
    out_link = np.empty(transfers, np.int64)
    out_start = np.empty(transfers)
    done = 0
    left = order.shape[0]
    for c in order:
        if counters[_USED] == entry_chunk.shape[0]:
            entry_chunk, entry_next = _grown(entry_chunk, entry_next)
        e = links[start[c]]
        _push(c, e, 0 if switched else length[c] - 1, head, top, entry_chunk, entry_next, counters)
        dirty[lsrc[e]] = True
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
                if switched:
                    c = _take_unclaimed(e, t, head, entry_chunk, entry_next, counters, claimed,
                                        hop, start, length, links, rounds)
                else:
                    c = _take_farthest(e, head, top, entry_chunk, entry_next, counters)
                if c < 0:
                    continue
                if switched and hop[c] + 1 < length[c]:
                    f = links[start[c] + hop[c] + 1]
                    claimed[f] = max(claimed[f], t + delay[e]) + busy[f]
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
                    hop[c] += 1
                    if counters[_USED] == entry_chunk.shape[0]:
                        entry_chunk, entry_next = _grown(entry_chunk, entry_next)
                    _push(c, links[start[c] + hop[c]], 0 if switched else length[c] - 1 - hop[c],
                          head, top, entry_chunk, entry_next, counters)
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
def _push(c, e, level, head, top, entry_chunk, entry_next, counters):
    """Chunk c waits for link e, in e's bucket ``level``."""
    i = _new_entry(entry_chunk, entry_next, counters)
    entry_chunk[i] = c
    entry_next[i] = head[e, level]
    head[e, level] = i
    if level > top[e]:
        top[e] = level


@njit(cache=True)
def _release(i, entry_next, counters):
    entry_next[i] = counters[_FREE_ENTRY]
    counters[_FREE_ENTRY] = i


@njit(cache=True)
def _take_farthest(e, head, top, entry_chunk, entry_next, counters):
    """A chunk waiting for e from its highest non-empty bucket (most hops to go), or -1."""
    level = top[e]
    while level >= 0:
        i = head[e, level]
        if i >= 0:
            head[e, level] = entry_next[i]
            top[e] = level
            _release(i, entry_next, counters)
            return entry_chunk[i]
        level -= 1
    top[e] = 0
    return -1


@njit(cache=True)
def _take_unclaimed(e, t, head, entry_chunk, entry_next, counters, claimed, hop, start, length,
                    links, rounds):
    """The chunk waiting for e whose next link is claimed until the earliest (now, when it has
    none or the link is unclaimed), first in rotation order on ties; or -1."""
    best, best_until, best_rest, best_round, before_best = -1, np.inf, 0, 0, -1
    before, i = -1, head[e, 0]
    while i >= 0:
        c = entry_chunk[i]
        nxt = start[c] + hop[c] + 1
        rest = start[c] + length[c] - nxt
        until = t if rest == 0 else max(t, claimed[links[nxt]])
        if until < best_until or (until == best_until and (rest > best_rest or (
                rest == best_rest and rounds[c] < best_round))):
            best, best_until, best_rest, best_round, before_best = i, until, rest, rounds[c], before
        before, i = i, entry_next[i]
    if best < 0:
        return -1
    if before_best < 0:
        head[e, 0] = entry_next[best]
    else:
        entry_next[before_best] = entry_next[best]
    _release(best, entry_next, counters)
    return entry_chunk[best]
