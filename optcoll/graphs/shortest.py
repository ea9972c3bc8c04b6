"""Shortest distances on a directed graph given as link arrays (``src[i] → dst[i]`` of length
``length[i] > 0``), in numpy alone on small graphs and scipy's Dijkstra on large ones.

Importing scipy's graph routines costs about 0.3 s of CPU, more than a whole small command
spends on its bounds (a torus 8×8 synthesis) or on a direct AllReduce's reach. So a graph whose
worst-case Bellman-Ford work (rows × links × nodes relaxations) stays under ``NUMPY_WORK`` is
relaxed with numpy, row blocks at a time; a larger one loads scipy. Both give the same floats:
each distance is the least over paths of the left-to-right sum of their lengths (float addition
of a positive length is monotone, so Dijkstra and the fixed point of Bellman-Ford agree bit for
bit; ``tests/graphs/test_graphs_shortest.py`` checks it).
"""
from __future__ import annotations

import numpy as np

#: Most rows × links × nodes (the worst-case Bellman-Ford work) relaxed with numpy: about 0.2 s
#: when every pass is needed, comparable to importing scipy; real graphs converge in a diameter
#: of passes, far fewer.
NUMPY_WORK = 1 << 26
#: Entries of the work array per block of rows.
_BLOCK = 1 << 22


def relax(best: np.ndarray, src: np.ndarray, dst: np.ndarray, length: np.ndarray) -> np.ndarray:
    """Each row of ``best`` (a start distance per node, inf where none) lowered in place along
    the links until nothing improves (Bellman-Ford, numpy only), and returned."""
    if not src.size:
        return best
    order = np.argsort(dst, kind="stable")
    src, dst, length = src[order], dst[order], np.asarray(length, dtype=float)[order]
    heads = np.flatnonzero(np.r_[True, dst[1:] != dst[:-1]])
    into = dst[heads]
    block = max(1, _BLOCK // src.size)
    for first in range(0, best.shape[0], block):
        rows = best[first:first + block]
        while True:
            arriving = np.minimum.reduceat(rows[:, src] + length, heads, axis=1)
            improved = arriving < rows[:, into]
            if not improved.any():
                break
            rows[:, into] = np.minimum(rows[:, into], arriving)
    return best


def distances(num_nodes: int, src: np.ndarray, dst: np.ndarray, length: np.ndarray,
              sources: np.ndarray) -> np.ndarray:
    """``[i, v]``: the shortest distance from ``sources[i]`` to v (inf if unreachable)."""
    sources = np.asarray(sources, dtype=np.int64).reshape(-1)
    if sources.size * max(src.size, 1) * num_nodes <= NUMPY_WORK:
        best = np.full((sources.size, num_nodes), np.inf)
        best[np.arange(sources.size), sources] = 0.0
        return relax(best, src, dst, length)
    from scipy.sparse.csgraph import dijkstra  # a large graph: Dijkstra per source is the faster

    return np.atleast_2d(dijkstra(_sparse(num_nodes, src, dst, length), directed=True, indices=sources))


def nearest(num_nodes: int, src: np.ndarray, dst: np.ndarray, length: np.ndarray,
            sources: np.ndarray) -> np.ndarray:
    """Per node, the shortest distance from the nearest of ``sources`` (inf if none reaches it)."""
    sources = np.asarray(sources, dtype=np.int64).reshape(-1)
    if max(src.size, 1) * num_nodes <= NUMPY_WORK:
        best = np.full((1, num_nodes), np.inf)
        best[0, sources] = 0.0
        return relax(best, src, dst, length)[0]
    from scipy.sparse.csgraph import dijkstra

    return dijkstra(_sparse(num_nodes, src, dst, length), directed=True, indices=sources, min_only=True)


def _sparse(num_nodes: int, src: np.ndarray, dst: np.ndarray, length: np.ndarray):
    """The links as scipy's sparse matrix, the cheapest of parallel links kept (it would sum them)."""
    from scipy.sparse import csr_array

    length = np.asarray(length, dtype=float)
    order = np.lexsort((length, dst, src))
    s, d, w = src[order], dst[order], length[order]
    first = np.ones(s.size, dtype=bool)
    first[1:] = (s[1:] != s[:-1]) | (d[1:] != d[:-1])
    return csr_array((w[first], (s[first], d[first])), shape=(num_nodes, num_nodes))


def fewest_hops(num_nodes: int, src: np.ndarray, dst: np.ndarray, length: np.ndarray, source: int,
                dist: np.ndarray) -> np.ndarray:
    """Per node v, the fewest links on a shortest path source → v, given ``dist`` (the shortest
    distances from ``source``): a breadth-first search over the tight links (dist[u] + length =
    dist[v], exactly as the distances were summed)."""
    tight = dist[src] + np.asarray(length, dtype=float) == dist[dst]
    best = np.full((1, num_nodes), np.inf)
    best[0, source] = 0.0
    return relax(best, src[tight], dst[tight], np.ones(int(tight.sum())))[0]
