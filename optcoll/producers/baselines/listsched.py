"""The list scheduler every classical baseline shares: logical messages in, a timed schedule out.

A baseline is written as an ordered list of logical messages (chunk, from rank, to rank, stage);
this module maps it onto the physical network:

* a message between non-neighbours travels a shortest path (by link delay), store and forward;
* each hop starts at the earliest time its data is held, its link is idle for the transfer's
  occupancy (gaps left by earlier hops are filled) and port limits allow; among parallel links
  the one that can start first carries it;
* a node receives each chunk at most once: a message whose path reaches a node that already
  gets the chunk continues from that node's copy. The result is a tree per chunk, which keeps
  reductions exact when the schedule is reversed (``optcoll.producers.compose``) and avoids
  sending what is already there. Plain switches are the exception: they forward each arrival
  once, so every message through them is its own arrival and forward;
* ``stage`` models synchronous algorithms (recursive doubling, Bruck, binomial trees, pairwise
  exchange): a rank starts its stage-k messages only after every message it sent or received in
  earlier stages was delivered, as an MPI loop of sendrecv calls does. Pipelined algorithms
  (rings, trees in NCCL) pass no stages and are limited by data and links only.
"""
from __future__ import annotations

import sys
from collections.abc import Sequence

import numpy as np

from optcoll.producers.base import NotApplicable
from optcoll.producers.calendar import Need, Runs, Windows, earliest_start, reserve
from optcoll.producers.spread import COPY, EXCLUSIVE, SpreadProblem
from optcoll.schedules.schedule import Schedule, from_arrays

#: Logical messages (or flows) from which the schedulers run compiled (``compiled``): the verifier
#: loads numba from 20,000 transfers on anyway (``verify.verifier.COMPILED_FROM``), and below it
#: the interpreted loop takes a small fraction of a second. Once numba is loaded the kernel pays
#: from ``LOADED_FROM`` on (about 6 µs of Python per transfer against a few ms of set-up).
COMPILED_FROM = 20_000
LOADED_FROM = 1_000


def compiled_pays(problem: SpreadProblem, items: int) -> bool:
    """Whether to place ``items`` messages or flows compiled: enough of them, and no port limits
    (the compiled calendar has links only). Either way the schedule is the same."""
    enough = items >= COMPILED_FROM or (items >= LOADED_FROM and "numba" in sys.modules)
    if not enough or problem.send_ports or problem.recv_ports:
        return False
    from optcoll.instances.kernels import may_run
    from optcoll.producers.baselines import compiled  # numba: loaded only here

    return may_run(compiled)  # not compiled first under a job's clock


class ShortestPaths:
    """Shortest paths by link delay, computed per source on demand.

    ``relays`` (bool per node, optional): the only nodes a path may pass through; a path that
    would need another one does not exist (``NotApplicable``).
    """

    def __init__(self, problem: SpreadProblem, relays: np.ndarray | None = None):
        from scipy.sparse import csr_matrix  # loaded by the baselines that route, not by every synth

        m, n = problem.machine, problem.num_nodes
        keys = m.link_src * n + m.link_dst
        order = np.lexsort((problem.delay, keys))
        first = np.ones(order.size, dtype=bool)
        first[1:] = keys[order][1:] != keys[order][:-1]
        pick = order[first]
        self.graph = csr_matrix((problem.delay[pick], (m.link_src[pick], m.link_dst[pick])),
                                shape=(n, n))
        self.through = None
        if relays is not None:
            inner = pick[relays[m.link_src[pick]]]
            self.through = csr_matrix((problem.delay[inner], (m.link_src[inner], m.link_dst[inner])),
                                      shape=(n, n))
        self.pred: dict[int, list[int]] = {}
        self.machine = m

    def predecessors(self, a: int) -> list[int]:
        """Per node, its predecessor on the shortest path from a (negative: unreachable)."""
        pred = self.pred.get(a)
        if pred is None:
            from scipy.sparse import csr_matrix
            from scipy.sparse.csgraph import dijkstra

            graph = self.graph
            if self.through is not None:  # a's own links, then only links out of relays
                own = self.graph.getrow(a)
                graph = self.through.maximum(csr_matrix(
                    (own.data, (np.full(own.nnz, a), own.indices)), shape=self.graph.shape))
            _, row = dijkstra(graph, directed=True, indices=a, return_predecessors=True)
            pred = self.pred[a] = row.tolist()
        return pred

    def path(self, a: int, b: int) -> list[int]:
        """Nodes from a to b inclusive."""
        if self.machine.links_between(a, b):
            return [a, b]
        pred = self.predecessors(a)
        nodes = [b]
        while nodes[-1] != a:
            prev = pred[nodes[-1]]
            if prev < 0:
                through = "" if self.through is None else " through nodes that may relay it"
                raise NotApplicable(f"no path from {self.machine.label(a)} to "
                                    f"{self.machine.label(b)}{through} (failed links or a disconnected network?)")
            nodes.append(prev)
        return nodes[::-1]


#: Recent ``ShortestPaths`` by what they depend on: a producer places several lists on one
#: problem (rail-exchange compares six), and ``optcoll expect`` runs several producers on one
#: rated machine and chunk size; each source's Dijkstra is then run once.
_ROUTES: dict[tuple, ShortestPaths] = {}
_ROUTES_KEPT = 8


def shortest_paths(problem: SpreadProblem, relays: np.ndarray | None = None) -> ShortestPaths:
    """``ShortestPaths(problem, relays)``, shared with earlier calls on an equal graph (and node
    names, which its refusals use), delays and relays: the same paths, it is deterministic."""
    m = problem.machine
    key = (m.labels, *(np.asarray(x, dtype=t).tobytes() for x, t in ((m.link_src, np.int64), (m.link_dst, np.int64),
                                                                     (problem.delay, np.float64))),
           None if relays is None else relays.astype(np.bool_).tobytes())
    routes = _ROUTES.pop(key, None) or ShortestPaths(problem, relays)
    _ROUTES[key] = routes  # most recent last
    while len(_ROUTES) > _ROUTES_KEPT:
        del _ROUTES[next(iter(_ROUTES))]
    return routes


class Calendar:
    """When each link and each NPU's send/receive ports are busy (the shared calendar,
    ``optcoll.producers.calendar``): the earliest start of a transfer on a link that its link and
    both ports allow, and booking it."""

    def __init__(self, problem: SpreadProblem):
        self.machine = problem.machine
        self.busy = problem.busy.tolist()
        self.port_shift = problem.port_shift.tolist()
        self.limits = {"send": problem.send_ports, "recv": problem.recv_ports}
        self.links: dict[int, Runs] = {}
        self.ports: dict[tuple[str, int], Windows] = {}

    def _port(self, side: str, v: int) -> Windows | None:
        limit = self.limits[side]
        if not limit or v >= self.machine.num_npus:
            return None
        windows = self.ports.get((side, v))
        if windows is None:
            windows = self.ports[(side, v)] = Windows(limit)
        return windows

    def earliest(self, e: int, ready: float) -> tuple[float, list[Need]]:
        """The earliest start ≥ ready on link e, and what to book at it."""
        a, b = int(self.machine.link_src[e]), int(self.machine.link_dst[e])
        link = self.links.get(e)
        if link is None:
            link = self.links[e] = Runs(self.busy[e])
        shift, busy = self.port_shift[e], self.busy[e]
        needs: list[Need] = [(link, 0.0, busy)] + [(r, shift, shift + busy) for r in
                                                   (self._port("send", a), self._port("recv", b)) if r is not None]
        return earliest_start(needs, ready), needs

    def book(self, e: int, t: float, needs: list[Need]) -> None:
        reserve(needs, t)


class ListScheduler:
    """Places logical messages one by one (module docstring)."""

    def __init__(self, problem: SpreadProblem):
        self.p = problem
        self.width = problem.num_nodes
        self.routes = shortest_paths(problem)
        self.calendar = Calendar(problem)
        self.delay = problem.delay.tolist()
        self.mode = problem.mode.tolist()
        pre_c, pre_v = problem.pre.pairs()
        self.held: dict[int, float] = {int(c) * self.width + int(v): 0.0
                                       for c, v in zip(pre_c.tolist(), pre_v.tolist())}
        self.last_forward: dict[int, float] = {}
        self.out_chunk: list[int] = []
        self.out_link: list[int] = []
        self.out_start: list[float] = []

    def hop(self, c: int, a: int, b: int, ready: float) -> float:
        """Chunk c from a to neighbour b, starting no earlier than ready; returns its delivery."""
        if self.mode[b] == EXCLUSIVE:
            ready = max(ready, self.last_forward.get(c * self.width + b, 0.0))
        best = None
        for e in self.p.machine.links_between(a, b):
            t, resources = self.calendar.earliest(e, ready)
            if best is None or t + self.delay[e] < best[0]:
                best = (t + self.delay[e], t, e, resources)
        assert best is not None, f"no link {a}->{b}"
        arrival, t, e, resources = best
        self.calendar.book(e, t, resources)
        self.out_chunk.append(c)
        self.out_link.append(e)
        self.out_start.append(t)
        if self.mode[a] == EXCLUSIVE:
            self.last_forward[c * self.width + a] = t
        return arrival

    def send(self, c: int, src: int, dst: int, barrier: float = 0.0) -> float:
        """Logical message: chunk c from src (which must hold it) to dst; returns its delivery."""
        width = self.width
        key = c * width + src
        if key not in self.held:
            raise AssertionError(f"baseline sends chunk {c} from {src}, which does not hold it")
        ready = max(self.held[key], barrier)
        path = self.routes.path(src, dst)
        for a, b in zip(path, path[1:]):
            key_b = c * width + b
            copy_node = self.mode[b] == COPY
            if copy_node and key_b in self.held:
                ready = max(self.held[key_b], barrier)
                continue
            ready = self.hop(c, a, b, ready)
            if copy_node:
                self.held[key_b] = ready
        return ready

    def schedule(self) -> Schedule:
        return from_arrays(self.out_chunk, self.out_link, self.out_start)


def list_schedule(problem: SpreadProblem, chunk: Sequence[int], src: Sequence[int],
                  dst: Sequence[int], stage: Sequence[int] | None = None) -> Schedule:
    """The timed schedule of logical messages in the given order (module docstring).

    ``stage``, when given, must be non-decreasing along the list.
    """
    if stage is not None and any(y < x for x, y in zip(stage, list(stage)[1:])):
        raise ValueError("stages must be non-decreasing along the message list")
    if compiled_pays(problem, len(chunk)):
        from optcoll.producers.baselines import compiled  # numba: loaded only here

        return compiled.list_schedule(problem, shortest_paths(problem), chunk, src, dst, stage)
    ls = ListScheduler(problem)
    chunk, src, dst = list(chunk), list(src), list(dst)
    if stage is None:
        for c, a, b in zip(chunk, src, dst):
            ls.send(c, a, b)
        return ls.schedule()
    stage = list(stage)
    before: dict[int, float] = {}  # node -> deliveries of its earlier stages
    current: dict[int, float] = {}  # node -> deliveries of the stage in progress
    now = stage[0] if stage else 0
    for c, a, b, k in zip(chunk, src, dst, stage):
        if k != now:
            for v, t in current.items():
                before[v] = max(before.get(v, 0.0), t)
            current, now = {}, k
        t = ls.send(c, a, b, before.get(a, 0.0))
        current[a] = max(current.get(a, 0.0), t)
        current[b] = max(current.get(b, 0.0), t)
    return ls.schedule()
