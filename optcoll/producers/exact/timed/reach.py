"""Who can hold which chunk when: shortest delivery times, pruning windows and simple bounds.

All in one unit system, integers on a ``Grid`` or seconds (the formulas are the same): a chunk
cannot be at node v before ``earliest[c, v]`` (shortest delivery path from a holder) and a copy
of c at v is useless after ``horizon - togo[c, v]`` (it could not reach a node needing c in time).
"""
from __future__ import annotations

from dataclasses import dataclass
from weakref import WeakKeyDictionary

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import shortest_path

from optcoll.bounds.release import kth_arrivals, late_ingress, per_chunk_rows
from optcoll.producers.exact.timed.grid import Grid
from optcoll.producers.exact.timed.problem import TimedProblem


def distances(num_nodes: int, src: np.ndarray, dst: np.ndarray, delay: np.ndarray) -> np.ndarray:
    """All-pairs shortest delivery time (inf when unreachable), cheapest of parallel links."""
    best = np.full((num_nodes, num_nodes), np.inf)
    np.minimum.at(best, (src, dst), delay.astype(float))
    rows, cols = np.nonzero(np.isfinite(best))
    graph = csr_matrix((best[rows, cols], (rows, cols)), shape=(num_nodes, num_nodes))
    return shortest_path(graph, method="D", directed=True)


@dataclass(frozen=True, eq=False)
class Reach:
    """``earliest[c, v]``: first moment v can hold c; ``togo[c, v]``: least time from v to a node
    needing c (0 at such a node, inf when none is reachable)."""

    earliest: np.ndarray
    togo: np.ndarray

    def unreachable(self, problem: TimedProblem) -> tuple[int, int] | None:
        """A (chunk, node) delivery no path can make, if any."""
        bad = ~np.isfinite(self.earliest[problem.need_chunk, problem.need_node])
        if not bad.any():
            return None
        i = int(np.flatnonzero(bad)[0])
        return int(problem.need_chunk[i]), int(problem.need_node[i])

    def windows(self, problem: TimedProblem, delay: np.ndarray, horizon: float
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per (chunk, link): the first and last start of a useful transfer by ``horizon``, and
        whether there is one (the receiver lacks the chunk and some start fits both ends)."""
        held = problem.holds_at_start()
        lo = self.earliest[:, problem.src]
        hi = horizon - self.togo[:, problem.dst] - delay[None, :]
        ok = ~held[:, problem.dst] & np.isfinite(lo) & np.isfinite(hi) & (hi >= lo)
        return lo, hi, ok


#: Per problem (while it lives), its last answer: a solve asks for the same one for its check of
#: reachability, its bounds and its first schedule (seconds each on a 256-chip AlltoAll).
_last: WeakKeyDictionary[TimedProblem, tuple[np.ndarray, Reach]] = WeakKeyDictionary()


def reach(problem: TimedProblem, delay: np.ndarray) -> Reach:
    """Earliest arrivals and the time still to go per (chunk, node) with these link ``delay``s;
    the problem's last answer is kept while the problem lives, for the same delays asked again."""
    seen = _last.get(problem)
    if seen is not None and np.array_equal(seen[0], delay):
        return seen[1]
    found = _reach(problem, delay)
    _last[problem] = (delay.copy(), found)
    return found


def _reach(problem: TimedProblem, delay: np.ndarray) -> Reach:
    dist = distances(problem.num_nodes, problem.src, problem.dst, delay)
    holder_chunk, holder_node = problem.holders.pairs()
    earliest = per_chunk_min(problem.num_chunks, holder_chunk, holder_node, dist)
    return Reach(earliest, _togo(problem.num_chunks, problem.need_chunk, problem.need_node, dist))


def _togo(num_chunks: int, chunk: np.ndarray, node: np.ndarray, dist: np.ndarray) -> np.ndarray:
    """``togo[c, v]``: the least ``dist[v, w]`` over the nodes w needing c. It is 0 at those nodes
    themselves, so only the others are computed, chunk by chunk: in an AllGather that is one
    holder per chunk, where a dense minimum would scan chunks × nodes × nodes. Where each chunk
    is needed at one node (AlltoAll) the row is that node's column of ``dist`` (0 at the node
    itself), taken for all chunks at once: 65,280 chunks one by one took 0.6 s."""
    if chunk.size and np.unique(chunk).size == chunk.size:
        return per_chunk_min(num_chunks, chunk, node, np.ascontiguousarray(dist.T))
    togo = np.full((num_chunks, dist.shape[0]), np.inf)
    if chunk.size == 0:
        return togo
    order = np.argsort(chunk, kind="stable")
    chunk, node = chunk[order], node[order]
    edges = np.flatnonzero(np.r_[True, chunk[1:] != chunk[:-1], True])
    for i, j in zip(edges[:-1].tolist(), edges[1:].tolist()):
        row, members = togo[chunk[i]], node[i:j]
        row[members] = 0.0
        others = np.flatnonzero(row)
        row[others] = dist[np.ix_(others, members)].min(axis=1)
    return togo


#: Bytes of gathered table rows ``per_chunk_min`` holds at once.
BLOCK_BYTES = 64 * 2**20


def per_chunk_min(num_chunks: int, chunk: np.ndarray, node: np.ndarray, table: np.ndarray) -> np.ndarray:
    """``out[c] = min of table[w]`` over the pairs (c, w) (inf for a chunk with none).

    In blocks of pairs sorted by chunk, each reduced per chunk at once: gathering every pair's row
    in one go could take pairs × nodes floats, and ``np.minimum.at`` is slow.
    """
    out = np.full((num_chunks, table.shape[1]), np.inf)
    order = np.argsort(chunk, kind="stable")
    chunk, node = chunk[order], node[order]
    block = max(1, BLOCK_BYTES // (8 * max(1, table.shape[1])))
    single = bool(np.all(chunk[1:] != chunk[:-1]))
    for i in range(0, chunk.size, block):
        c, rows = chunk[i:i + block], table[node[i:i + block]]
        if single:  # one pair per chunk: its row is its minimum (no reduction: 1.2 s -> 0.4 s at 65,536 chunks)
            out[c] = rows
            continue
        first = np.flatnonzero(np.r_[True, c[1:] != c[:-1]])
        out[c[first]] = np.minimum(out[c[first]], np.minimum.reduceat(rows, first, axis=0))
    return out


def latency_bound(problem: TimedProblem, r: Reach) -> float:
    """The latest of the earliest deliveries: no schedule finishes before it."""
    if problem.need_chunk.size == 0:
        return 0.0
    return float(r.earliest[problem.need_chunk, problem.need_node].max())


def _port_lanes(grid: Grid, links: np.ndarray, ports: int | None, start: np.ndarray,
                extra: np.ndarray, late: np.ndarray) -> float:
    """With a port limit P, the transfers through one NPU also queue on P ports: on one port the
    j-th starts no earlier than the earliest start plus j times the narrowest window, give or take
    the spread of window offsets. So P lanes bound the events ``extra`` after each start too
    (``start``: rows × links, one row per count in ``late``)."""
    if ports is None or links.size == 0:
        return 0.0
    lo, hi = grid.port_lo[links].astype(float), grid.port_hi[links].astype(float)
    width = float((hi - lo).min())
    if width <= 0:
        return 0.0
    first = start.min(axis=1) + float(extra.min()) - float(lo.max() - lo.min())
    return float(kth_arrivals(late, np.repeat(first[:, None], ports, axis=1), np.full(ports, width)).max())


def _lanes(grid: Grid, links: np.ndarray) -> np.ndarray:
    """Each link repeated by its capacity: c transfers per occupancy are c lanes of one each."""
    return np.repeat(links, grid.capacity[links])


def ingress_bound(problem: TimedProblem, r: Reach, grid: Grid) -> float:
    """Per node: deliveries arrive one link occupancy apart on each in-link (and one port window
    apart on each receive port), and none before its chunk can be there.

    For every threshold ρ among the earliest arrivals of the chunks node v needs, the n chunks
    that cannot arrive before ρ come over in-links whose first such delivery is no earlier than
    max(ρ, earliest the sender holds one of them + delay), the next ones a link occupancy apart:
    v cannot finish before the n-th earliest of those arrivals (``optcoll.bounds.release``).
    A link of capacity c counts as c lanes of one occupancy each (at most c per occupancy).
    """
    delay, busy = grid.delay.astype(float), grid.busy.astype(float)
    best = 0.0
    for v in np.unique(problem.need_node):
        chunks = problem.need_chunk[problem.need_node == v]
        links = _lanes(grid, np.flatnonzero(problem.dst == v))
        rho, late, ready = per_chunk_rows(r.earliest[chunks, v], r.earliest[chunks][:, problem.src[links]])
        best = max(best, late_ingress(rho, late, ready, delay[links], busy[links])[0])
        ports = problem.recv_ports if problem.port_limited[v] else None
        start = np.maximum(ready, rho[:, None] - delay[links][None, :])
        best = max(best, _port_lanes(grid, links, ports, start, delay[links], late))
    return best


def egress_bound(problem: TimedProblem, r: Reach, grid: Grid) -> float:
    """Per sole holder: every chunk only it holds must leave on one of its out-links.

    The j-th departure on a link starts no earlier than (j-1)·busy and still has to travel at
    least delay plus the shortest remaining way to the chunk's nearest needing node, so with the
    smallest such tail as a common offset the count argument of ``ingress_bound`` applies.
    """
    delay, busy = grid.delay.astype(float), grid.busy.astype(float)
    holder_chunk, holder_node = problem.holders.pairs()
    sole = np.bincount(holder_chunk, minlength=problem.num_chunks) == 1
    best = 0.0
    for u in np.unique(holder_node):
        chunks = holder_chunk[(holder_node == u) & sole[holder_chunk]]
        chunks = chunks[np.isfinite(r.togo[chunks, u])]
        if chunks.size == 0:
            continue
        links = _lanes(grid, np.flatnonzero(problem.src == u))
        tail = delay[links] + r.togo[chunks][:, problem.dst[links]].min(axis=0)
        late = np.array([chunks.size])
        best = max(best, float(kth_arrivals(late, tail[None, :], busy[links])[0]))
        ports = problem.send_ports if problem.port_limited[u] else None
        best = max(best, _port_lanes(grid, links, ports, np.zeros((1, links.size)), tail, late))
    return best
