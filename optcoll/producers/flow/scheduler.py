"""Event-driven list scheduling of unicast chunks along routes, in the timed model.

Why not the baselines' list scheduler (``producers/baselines/listsched.py``): it places
messages one by one in a given order on fixed shortest paths; here a chunk's next link is
chosen when a link frees, among those its route allows, which is what lets a torus's links
stay busy from the first moment to the last.

Every link belongs to a *resource* that carries one transfer at a time: the link itself, or,
when a symmetry group will copy the schedule to every source (``optcoll.producers.flow.expand``),
the link's orbit, since the images of two transfers on one orbit at once would meet on one link.

At every instant something arrives or a resource frees, the idle resources (in the caller's
order) each start one of the chunks waiting at the tail of one of their route links: the one
with the longest way still to go (the least route delay to its destination, critical path
first), ties by the caller's key, then by a seeded random rank. With ``lookahead`` k, among the
k most urgent equally urgent chunks it takes the one whose next resource has the fewest chunks
waiting for it or on their way to it (delivering beats everything), so that a switch's output
links are not all fed at once while others idle. A chunk starts as soon as it arrives if a
resource is free: the schedule is work-conserving. Times come from ``TimeModel.link_timing``
per chunk size.
"""
from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from optcoll.instances.clock import check_current
from optcoll.instances.instance import TimeModel
from optcoll.machines.machine import Machine
from optcoll.producers.flow.routes import Route

#: Two routes' remaining delays this close (relatively) are equally urgent.
URGENCY_TOLERANCE = 1e-9


@dataclass(frozen=True, eq=False)
class Timed:
    """Transfers as columns (chunk ids are the caller's), and the last delivery."""

    chunk: np.ndarray
    link: np.ndarray
    start: np.ndarray
    makespan: float


@dataclass(frozen=True, eq=False)
class Chunks:
    """What to schedule: chunk ``ids[i]`` of ``size[i]`` bytes along ``routes[route[i]]``, ties
    broken by ``tie[i]`` (lower first)."""

    ids: np.ndarray
    route: np.ndarray
    size: np.ndarray
    tie: np.ndarray


def _route_timing(machine: Machine, model: TimeModel, routes: list[Route], chunks: Chunks
                  ) -> list[dict[int, tuple[float, float]]]:
    """Per route: link → (delay, busy) for its chunks' size (the chunks of one route are equal)."""
    size = np.zeros(len(routes))
    size[chunks.route] = chunks.size
    out = []
    for r, route in enumerate(routes):
        links = np.array(sorted({e for lanes in route.out.values() for e in lanes}), dtype=np.int64)
        t = model.link_timing(machine, float(size[r]), links=links)
        out.append(dict(zip(links.tolist(), zip(t.delay.tolist(), t.busy.tolist()))))
    return out


def _downstream(routes: list[Route], machine: Machine, resource: np.ndarray, backlog: np.ndarray
                ) -> list[dict[int, float]]:
    """Per route and node: the largest backlog among the resources the route can still use."""
    dst = machine.link_dst
    out = []
    for route in routes:
        down: dict[int, float] = {}
        for u in sorted(route.out, key=route.togo.__getitem__):  # nearer the destination first
            down[u] = max(max(float(backlog[resource[e]]), down.get(int(dst[e]), 0.0))
                          for e in route.out[u])
        out.append(down)
    return out


def schedule(machine: Machine, model: TimeModel, routes: list[Route], chunks: Chunks,
             resource: np.ndarray, resource_rank: np.ndarray, seed: int = 0,
             lookahead: int = 0, backlog: np.ndarray | None = None) -> Timed:
    """The list schedule of the module docstring. ``resource[e]`` is link e's resource;
    ``resource_rank[r]`` orders resources that start at one instant (lower first). With
    ``backlog`` (seconds of work per resource), a chunk's urgency also counts the largest backlog
    still ahead of it, so chunks bound for a hot link go first and it is never starved."""
    src, dst = machine.link_src.tolist(), machine.link_dst.tolist()
    res = resource.tolist()
    count = int(resource.max()) + 1
    timing = _route_timing(machine, model, routes, chunks)
    random = np.random.default_rng(seed).permutation(chunks.ids.size)
    rank = np.empty(chunks.ids.size, dtype=np.int64)
    rank[np.lexsort((random, chunks.tie))] = np.arange(chunks.ids.size)
    rank_of = rank.tolist()
    res_rank = resource_rank.tolist()
    route_of = chunks.route.tolist()
    ahead = (_downstream(routes, machine, resource, backlog) if backlog is not None
             else [dict.fromkeys(route.togo, 0.0) for route in routes])
    at = [routes[r].source for r in route_of]  # node where each chunk waits, -1 in flight
    waiting: list[list[tuple[float, int, int, int]]] = [[] for _ in range(count)]
    wanted = [0] * count  # chunks waiting for a resource or on their way to its links' tails
    free_at = [0.0] * count
    idle = set(range(count))
    events: list[tuple[float, int, int, int]] = []  # (time, 0 arrive / 1 free, chunk or resource, node)
    out_chunk: list[int] = []
    out_link: list[int] = []
    out_start: list[float] = []
    last = 0.0

    def want(c: int, u: int, step: int) -> None:
        route = routes[route_of[c]]
        if u != route.dest:
            for e in route.out[u]:
                wanted[res[e]] += step

    def pressure(c: int, e: int) -> int:
        route = routes[route_of[c]]
        v = dst[e]
        return -1 if v == route.dest else min(wanted[res[f]] for f in route.out[v])

    def offer(c: int, u: int, touched: set[int]) -> None:
        route = routes[route_of[c]]
        if u == route.dest:
            return
        at[c] = u
        for e in route.out[u]:
            r = res[e]
            heapq.heappush(waiting[r], (-(route.togo[u] + ahead[route_of[c]][u]), rank_of[c], c, e))
            if r in idle:
                touched.add(r)

    touched: set[int] = set()
    for c in range(chunks.ids.size):
        offer(c, at[c], touched)
        want(c, at[c], 1)
    now = 0.0
    while True:
        check_current()  # under a solver's clock (a start schedule), until it ends; each step (one may be long)
        for r in sorted(touched, key=res_rank.__getitem__):
            chosen = _pick(waiting[r], at, src, lookahead, pressure)
            if chosen is None:
                continue
            _, _, c, e = chosen
            want(c, src[e], -1)
            want(c, dst[e], 1)
            delay, busy = timing[route_of[c]][e]
            at[c] = -1
            idle.discard(r)
            free_at[r] = now + busy
            heapq.heappush(events, (now + busy, 1, r, 0))
            heapq.heappush(events, (now + delay, 0, c, dst[e]))
            out_chunk.append(c)
            out_link.append(e)
            out_start.append(now)
            last = max(last, now + delay)
        touched = set()
        if not events:
            break
        now = events[0][0]
        while events and events[0][0] == now:
            _, kind, ident, node = heapq.heappop(events)
            if kind == 1:
                if free_at[ident] == now:
                    idle.add(ident)
                    touched.add(ident)
            else:
                offer(ident, node, touched)
    chunk = chunks.ids[np.array(out_chunk, dtype=np.int64)]
    return Timed(chunk, np.array(out_link, dtype=np.int64), np.array(out_start, dtype=float), last)


def _pick(heap: list[tuple[float, int, int, int]], at: list[int], src: list[int], lookahead: int,
          pressure: Callable[[int, int], int]) -> tuple[float, int, int, int] | None:
    """The waiting entry a free resource takes: the most urgent whose chunk still waits at the
    link's tail (stale entries dropped); with ``lookahead``, among up to that many about as
    urgent, the one whose next hop is least wanted (``pressure``), then by rank."""
    found: list[tuple[float, int, int, int]] = []
    while heap and len(found) < max(1, lookahead):
        entry = heapq.heappop(heap)
        if at[entry[2]] != src[entry[3]]:
            continue  # stale: the chunk has left that node
        if found and entry[0] > found[0][0] * (1 - URGENCY_TOLERANCE):
            heapq.heappush(heap, entry)
            break
        found.append(entry)
    if not found:
        return None
    best = min(found, key=lambda x: (pressure(x[2], x[3]), x[1])) if lookahead else found[0]
    for entry in found:
        if entry is not best:
            heapq.heappush(heap, entry)
    return best
