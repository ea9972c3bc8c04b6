"""Copying one source's share of routes or of a schedule to every source by a symmetry group.

With a semiregular group G (``optcoll.machines.automorphisms``) and a demand G keeps, every
moving chunk is the image g(c) of exactly one chunk c of a representative source under exactly
one element g: the chunk of pair (g(s), g(d)) with the same piece number. A transfer (c, e, t)
becomes (g(c), g(e), t) for every g. Two images share a link only if their originals are on one
link orbit, which the scheduler treats as one resource; so the copies never overlap when every
link orbit is free (no element but the identity fixes a link).
"""
from __future__ import annotations

import numpy as np

from optcoll.machines.automorphisms import SymmetryGroup
from optcoll.producers.flow.routes import PairRoutes, Route


class ChunkImages:
    """Maps (element, chunk) to the image chunk, for chunks given by holder and destination."""

    def __init__(self, chunk: np.ndarray, source: np.ndarray, dest: np.ndarray, num_nodes: int):
        self.n = num_nodes
        order = np.lexsort((chunk, dest, source))
        self.chunk = chunk[order]
        pair = source[order] * num_nodes + dest[order]
        first = np.concatenate([[True], pair[1:] != pair[:-1]])
        start = np.maximum.accumulate(np.where(first, np.arange(pair.size), 0))
        self.piece = np.arange(pair.size) - start
        self.width = int(self.piece.max(initial=0)) + 1
        self.keys = pair * self.width + self.piece
        self.by_chunk = {int(c): i for i, c in enumerate(self.chunk.tolist())}
        self.source, self.dest = source[order], dest[order]

    def positions(self, chunks: np.ndarray) -> np.ndarray:
        """Where chunks (ids of this table) sit in it."""
        return np.array([self.by_chunk[int(c)] for c in chunks.tolist()], dtype=np.int64)

    def image(self, node_map: np.ndarray, at: np.ndarray) -> np.ndarray:
        """The chunks at positions ``at`` under the node permutation ``node_map``."""
        key = (node_map[self.source[at]] * self.n + node_map[self.dest[at]]) * self.width + self.piece[at]
        where = np.searchsorted(self.keys, key)
        if np.any(where >= self.keys.size) or np.any(self.keys[np.minimum(where, self.keys.size - 1)] != key):
            raise ValueError("the demand is not invariant under the symmetry group")
        return self.chunk[where]


def expand_transfers(group: SymmetryGroup, images: ChunkImages, chunk: np.ndarray, link: np.ndarray,
                     start: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every element's copy of the transfers (identity first)."""
    at = images.positions(chunk)
    chunks = [images.image(group.node[g], at) for g in range(group.order)]
    return (np.concatenate(chunks), group.link[:, link].reshape(-1),
            np.tile(start, group.order))


def expand_routes(group: SymmetryGroup, routes: list[PairRoutes]) -> list[PairRoutes]:
    """Every element's image of ``routes`` (element-major: all of g's routes, then the next g)."""
    out: list[PairRoutes] = []
    for g in range(group.order):
        nodes, links = group.node[g], group.link[g]
        for pair in routes:
            dag = pair.dag
            moved = {int(nodes[u]): [int(links[e]) for e in es] for u, es in dag.out.items()}
            togo = {int(nodes[u]): t for u, t in dag.togo.items()}
            paths = [([int(links[e]) for e in path], amount) for path, amount in pair.paths]
            out.append(PairRoutes(Route(int(nodes[dag.source]), int(nodes[dag.dest]), moved, togo), paths))
    return out
