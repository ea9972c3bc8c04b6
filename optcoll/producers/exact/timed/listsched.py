"""List scheduling on a ``Grid`` with the shared link/port calendar: retiming a transfer order, a
greedy router. In integer epochs or float seconds alike:

* ``retime``: given transfers in a valid order, start each as early as causality and the
  calendars allow. The original start stays feasible for every transfer (by induction: all
  earlier transfers only moved earlier), so retiming never makes a schedule later. Retiming a
  schedule from a rounded-up grid in true seconds compacts it; retiming a true schedule on a grid
  turns it into a solver hint.
* ``greedy``: route every (chunk, destination) in turn along its earliest-arrival path given what
  is already reserved (store-and-forward with waiting, so Dijkstra on arrival times is exact for
  one request). It is the fallback upper bound when no better producer is available.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from optcoll.instances.clock import check_current
from optcoll.producers.calendar import Need, Runs, Windows, earliest_start, reserve
from optcoll.producers.exact.timed.grid import Grid
from optcoll.producers.exact.timed.problem import TimedProblem
from optcoll.producers.exact.timed.reach import reach


@dataclass(frozen=True, eq=False)
class Transfers:
    """Transfers as columns: chunk, link and start (in the unit of the grid they were made on)."""

    chunk: np.ndarray
    link: np.ndarray
    start: np.ndarray

    def __len__(self) -> int:
        return int(self.chunk.shape[0])

    def take(self, index: np.ndarray) -> "Transfers":
        return Transfers(self.chunk[index], self.link[index], self.start[index])

    def in_time_order(self) -> "Transfers":
        return self.take(np.lexsort((self.chunk, self.link, self.start)))

    def makespan(self, grid: Grid) -> float:
        return float((self.start + grid.delay[self.link]).max(initial=0))


class Calendar:
    """Reservations of links and NPU ports on one grid (``optcoll.producers.calendar``)."""

    def __init__(self, problem: TimedProblem, grid: Grid):
        self.problem, self.grid = problem, grid
        self.links = [Runs(float(b)) if c == 1 else Windows(c) for c, b in zip(grid.capacity.tolist(), grid.busy.tolist())]
        self.send = [Windows(problem.send_ports) if problem.send_ports and problem.port_limited[v] else None
                     for v in range(problem.num_nodes)]
        self.recv = [Windows(problem.recv_ports) if problem.recv_ports and problem.port_limited[v] else None
                     for v in range(problem.num_nodes)]

    def _needs(self, e: int) -> list[Need]:
        g, u, v = self.grid, int(self.problem.src[e]), int(self.problem.dst[e])
        out: list[Need] = [(self.links[e], 0.0, float(g.busy[e]))]
        for ports in (self.send[u], self.recv[v]):
            if ports is not None:
                out.append((ports, float(g.port_lo[e]), float(g.port_hi[e])))
        return out

    def fit(self, e: int, ready: float) -> float:
        """Earliest start ≥ ready at which link e and its NPUs' ports are free."""
        return earliest_start(self._needs(e), ready)

    def reserve(self, e: int, start: float) -> None:
        reserve(self._needs(e), start)


class _Holdings:
    """When each node can send each chunk: copy nodes hold from their first arrival; a plain
    switch has a pool of arrivals, each of which may be forwarded once."""

    def __init__(self, problem: TimedProblem):
        self.problem = problem
        self.hold: dict[tuple[int, int], float] = {}
        self.pool: dict[tuple[int, int], list[float]] = {}
        chunks, nodes = problem.holders.pairs()
        for c, v in zip(chunks.tolist(), nodes.tolist()):
            self.hold[(c, v)] = 0.0

    def ready(self, c: int, u: int) -> float | None:
        if self.problem.copy[u] or (c, u) in self.hold:
            return self.hold.get((c, u))
        pool = self.pool.get((c, u))
        return pool[0] if pool else None

    def send(self, c: int, u: int) -> None:
        if not (self.problem.copy[u] or (c, u) in self.hold):
            heapq.heappop(self.pool[(c, u)])

    def deliver(self, c: int, v: int, t: float) -> None:
        if self.problem.copy[v] or (c, v) in self.hold:
            self.hold[(c, v)] = min(t, self.hold.get((c, v), np.inf))
        else:
            heapq.heappush(self.pool.setdefault((c, v), []), t)


def to_seconds(problem: TimedProblem, grid: Grid, transfers: Transfers) -> Transfers:
    """Transfers on ``grid`` started in true seconds: the i-th of an epoch's transfers on a link
    (in chunk order) starts i link occupancies after the epoch begins (valid on an ``up`` or
    exact grid: the proof is in ``grid``'s docstring)."""
    ordered = transfers.in_time_order()
    k, e = ordered.start, ordered.link
    new = np.ones(len(ordered), dtype=bool)
    new[1:] = (k[1:] != k[:-1]) | (e[1:] != e[:-1])
    first = np.maximum.accumulate(np.where(new, np.arange(len(ordered)), 0))
    return Transfers(ordered.chunk, e, k * grid.quantum + (np.arange(len(ordered)) - first) * problem.busy[e])


def retime(problem: TimedProblem, grid: Grid, transfers: Transfers) -> Transfers:
    """The transfers, in their start order, each started as early as possible on ``grid``; under a
    solver's clock, until it ends (``check_current``).

    Raises ValueError if the order is not causal (a sender that never holds the chunk).
    """
    ordered = transfers.in_time_order()
    cal, held = Calendar(problem, grid), _Holdings(problem)
    starts = np.empty(len(ordered), dtype=float)
    for i, (c, e) in enumerate(zip(ordered.chunk.tolist(), ordered.link.tolist())):
        if i % 1024 == 0:
            check_current()
        u, v = int(problem.src[e]), int(problem.dst[e])
        ready = held.ready(c, u)
        if ready is None:
            raise ValueError(f"chunk {c} sent from node {u} before it arrives there")
        held.send(c, u)
        t = cal.fit(e, ready)
        cal.reserve(e, t)
        held.deliver(c, v, t + float(grid.delay[e]))
        starts[i] = t
    return Transfers(ordered.chunk, ordered.link, starts)


def greedy(problem: TimedProblem, grid: Grid) -> Transfers:
    """Earliest-arrival routing of each (chunk, destination), nearest deliveries first; under a
    solver's clock, until it ends (``check_current``)."""
    r = reach(problem, grid.delay)
    order = np.lexsort((problem.need_node, problem.need_chunk,
                        r.earliest[problem.need_chunk, problem.need_node]))
    cal, held = Calendar(problem, grid), _Holdings(problem)
    out_links = [np.flatnonzero(problem.src == u).tolist() for u in range(problem.num_nodes)]
    rows: list[tuple[int, int, float]] = []
    for i in order.tolist():
        c, dest = int(problem.need_chunk[i]), int(problem.need_node[i])
        if held.hold.get((c, dest)) is not None:
            continue
        check_current()
        path = _earliest_path(problem, grid, cal, held, out_links, c, dest)
        if path is None:
            raise ValueError(f"chunk {c} cannot reach node {dest}")
        for e, t in path:
            held.send(c, int(problem.src[e]))
            cal.reserve(e, t)
            held.deliver(c, int(problem.dst[e]), t + float(grid.delay[e]))
            rows.append((c, e, t))
    cols = list(zip(*rows)) if rows else [(), (), ()]
    return Transfers(np.array(cols[0], dtype=np.int64), np.array(cols[1], dtype=np.int64),
                     np.array(cols[2], dtype=float))


def _earliest_path(problem: TimedProblem, grid: Grid, cal: Calendar, held: _Holdings,
                   out_links: list[list[int]], c: int, dest: int) -> list[tuple[int, float]] | None:
    """Dijkstra on arrival time from every node that can send c now to ``dest``.

    A plain switch that forwards in the middle of a path is passed through (its new arrival is
    forwarded once); its pool of earlier arrivals can also start a path.
    """
    best: dict[int, float] = {}
    parent: dict[int, tuple[int, int, float]] = {}
    heap: list[tuple[float, int]] = []
    for u in range(problem.num_nodes):
        t = held.ready(c, u)
        if t is not None:
            best[u] = t
            heap.append((t, u))
    heapq.heapify(heap)
    done: set[int] = set()
    while heap:
        t, u = heapq.heappop(heap)
        if u in done:
            continue
        done.add(u)
        if u == dest:
            path = []
            while u in parent:
                prev, e, start = parent[u]
                path.append((e, start))
                u = prev
            return path[::-1]
        for e in out_links[u]:
            v = int(problem.dst[e])
            if v in done:
                continue
            start = cal.fit(e, t)
            arrive = start + float(grid.delay[e])
            if arrive < best.get(v, np.inf):
                best[v] = arrive
                parent[v] = (u, e, start)
                heapq.heappush(heap, (arrive, v))
    return None
