"""How far every node is from each chunk's nearest holder, in delivery time.

The greedy consults it to steer relay requests toward a chunk's source and the improved greedy
to tell which incoming links bring a chunk *forward*. Rows are per distinct holder set (one per
rank for an AllGather), so memory is (holder sets × nodes), never per link.
"""
from __future__ import annotations

from dataclasses import dataclass

from typing import TYPE_CHECKING

import numpy as np

from optcoll.machines.machine import BITSET_BFS_NODES
from optcoll.producers.spread import SpreadProblem

if TYPE_CHECKING:
    from scipy.sparse import csr_matrix


@dataclass(frozen=True, eq=False)
class ChunkDistances:
    """``rows[row_of[c], v]``: shortest delivery time from chunk c's nearest holder to node v
    (inf when v cannot be reached)."""

    rows: np.ndarray
    row_of: np.ndarray

    def of(self, chunk: int) -> np.ndarray:
        return self.rows[self.row_of[chunk]]


def delay_graph(problem: SpreadProblem) -> tuple[csr_matrix, bool]:
    """The machine as a sparse matrix of the cheapest link delay per ordered pair, and whether
    every link costs the same (then breadth-first search gives the distances faster)."""
    from scipy.sparse import csr_matrix

    m, n = problem.machine, problem.num_nodes
    if m.num_links == 0:
        return csr_matrix((n, n)), True
    keys = m.link_src * n + m.link_dst
    order = np.lexsort((problem.delay, keys))
    first = np.ones(order.size, dtype=bool)
    first[1:] = keys[order][1:] != keys[order][:-1]
    pick = order[first]
    weights = problem.delay[pick]
    graph = csr_matrix((weights, (m.link_src[pick], m.link_dst[pick])), shape=(n, n))
    return graph, bool(np.all(weights == weights[0]))


def chunk_distances(problem: SpreadProblem) -> ChunkDistances:
    """Every link of one delay on a machine of at most ``BITSET_BFS_NODES`` nodes: the machine's
    hop counts (numpy only: a small synthesis need not load scipy's graph routines, about 0.2 s);
    otherwise scipy's shortest paths on ``delay_graph``."""
    holders = np.unique(problem.pre.nodes)
    m = problem.machine
    if m.num_links and m.num_nodes <= BITSET_BFS_NODES and np.all(problem.delay == problem.delay[0]):
        by_holder = m.hop_counts()[holders] * float(problem.delay[0])
    else:
        from scipy.sparse.csgraph import dijkstra, shortest_path

        graph, uniform = delay_graph(problem)
        if uniform and graph.nnz:
            hops = shortest_path(graph, method="D", directed=True, unweighted=True, indices=holders)
            by_holder = hops * float(graph.data[0])
        else:
            by_holder = dijkstra(graph, directed=True, indices=holders)
    position = {int(h): i for i, h in enumerate(holders.tolist())}
    counts = problem.pre.counts()
    if np.all(counts == 1):
        return ChunkDistances(by_holder, np.searchsorted(holders, problem.pre.nodes))
    sets: dict[tuple[int, ...], int] = {}
    rows: list[np.ndarray] = []
    row_of = np.empty(problem.num_chunks, dtype=np.int64)
    for c in range(problem.num_chunks):
        key = tuple(problem.pre.of(c).tolist())
        if key not in sets:
            sets[key] = len(rows)
            rows.append(by_holder[[position[h] for h in key]].min(axis=0))
        row_of[c] = sets[key]
    return ChunkDistances(np.array(rows), row_of)
