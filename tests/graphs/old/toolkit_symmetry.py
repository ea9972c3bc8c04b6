"""Symmetries shared by the exact formulations: automorphisms of a coloured directed graph and
what a node relabelling does to the chunks of a collective.

Both the timed and the step model describe their problem as a ``ColouredGraph`` (node colours
say what a node may do and how many chunks it holds and needs; edge tags say what its links
cost) and ask it for automorphisms; each model then maps them onto its own variables (lex-leader
rows, the symmetric restriction). A symmetry of the collective maps every chunk's holders and
destinations onto another chunk's (``chunk_map``); chunks with the same holders and destinations
are interchangeable (``interchangeable``).

The search is individualisation-refinement: refine two colourings jointly until stable, then
individualise a node of the smallest open cell against each candidate image. It is bounded by a
number of search nodes and an optional deadline: finding fewer symmetries is always safe.
"""
from __future__ import annotations

import time
from collections.abc import Hashable, Iterator, Mapping

import numpy as np

#: Search-tree nodes one automorphism search may visit before it gives up (highly regular graphs
#: without symmetries could take long).
SEARCH_NODES = 5000
#: Graphs with more nodes than this are not searched (colour refinement is quadratic).
MAX_NODES = 1024


class ColouredGraph:
    """A directed graph with a colour per node and a tag per ordered pair of linked nodes."""

    def __init__(self, colours: list[Hashable], edges: Mapping[tuple[int, int], Hashable]):
        self.n = len(colours)
        self.initial = _renumber(colours)
        self.edges = dict(edges)
        self.out: list[list[tuple[Hashable, int]]] = [[] for _ in range(self.n)]
        self.inc: list[list[tuple[Hashable, int]]] = [[] for _ in range(self.n)]
        for (u, v), tag in self.edges.items():
            self.out[u].append((tag, v))
            self.inc[v].append((tag, u))

    def refine(self, a: list[int], b: list[int]) -> tuple[list[int], list[int]] | None:
        """Colour refinement of two colourings jointly (shared colour names); None if they part."""
        while True:
            sig_a = [self._signature(a, v) for v in range(self.n)]
            sig_b = [self._signature(b, v) for v in range(self.n)]
            if sorted(sig_a) != sorted(sig_b):
                return None
            names = {s: i for i, s in enumerate(sorted(set(sig_a)))}
            new_a, new_b = [names[s] for s in sig_a], [names[s] for s in sig_b]
            if len(names) == len(set(a)):
                return new_a, new_b
            a, b = new_a, new_b

    def _signature(self, colour: list[int], v: int) -> tuple:
        return (colour[v], tuple(sorted((t, colour[w]) for t, w in self.out[v])),
                tuple(sorted((t, colour[w]) for t, w in self.inc[v])))

    def is_automorphism(self, perm: np.ndarray) -> bool:
        return all(self.initial[v] == self.initial[int(perm[v])] for v in range(self.n)) and all(
            self.edges.get((int(perm[u]), int(perm[v]))) == tag for (u, v), tag in self.edges.items())

    def automorphisms(self, fixed: Mapping[int, int] | None = None, *,
                      deadline: float | None = None) -> Iterator[np.ndarray]:
        """Automorphisms (node v ↦ perm[v]) extending the partial map ``fixed``, fixed-point-free
        ones first where there is a choice; none on graphs over ``MAX_NODES`` nodes. The search
        stops after ``SEARCH_NODES`` nodes or at ``deadline`` (time.perf_counter seconds)."""
        if self.n > MAX_NODES:
            return
        a, b = list(self.initial), list(self.initial)
        fresh = max(a, default=0) + 1
        for i, (u, v) in enumerate((fixed or {}).items()):
            a[u], b[v] = fresh + i, fresh + i
        yield from self._search(a, b, [SEARCH_NODES], deadline)

    def _search(self, a: list[int], b: list[int], budget: list[int],
                deadline: float | None) -> Iterator[np.ndarray]:
        budget[0] -= 1
        if budget[0] < 0 or (deadline is not None and time.perf_counter() > deadline):
            return
        refined = self.refine(a, b)
        if refined is None:
            return
        a, b = refined
        cells: dict[int, list[int]] = {}
        for v, c in enumerate(a):
            cells.setdefault(c, []).append(v)
        open_cells = [vs for vs in cells.values() if len(vs) > 1]
        if not open_cells:
            where = {c: w for w, c in enumerate(b)}
            perm = np.array([where[c] for c in a], dtype=np.int64)
            if self.is_automorphism(perm):
                yield perm
            return
        cell = min(open_cells, key=lambda vs: (len(vs), vs[0]))
        u = cell[0]
        options = [w for w, c in enumerate(b) if c == a[u]]
        options.sort(key=lambda w: (w == u, w))  # fixed points last: fixed-point-free maps are wanted
        fresh = max(a) + 1
        for w in options:
            a2, b2 = list(a), list(b)
            a2[u], b2[w] = fresh, fresh
            yield from self._search(a2, b2, budget, deadline)


def _renumber(items: list[Hashable]) -> list[int]:
    names = {s: i for i, s in enumerate(sorted(set(items)))}
    return [names[s] for s in items]


class ChunkRoles:
    """Who holds and who needs each chunk (boolean chunk × node matrices), grouped by pattern."""

    def __init__(self, held: np.ndarray, need: np.ndarray):
        self.held, self.need = held, need
        self.groups: dict[bytes, list[int]] = {}
        for c in range(held.shape[0]):
            self.groups.setdefault(self._key(held[c], need[c]), []).append(c)

    @staticmethod
    def _key(held: np.ndarray, need: np.ndarray) -> bytes:
        return held.tobytes() + need.tobytes()

    def node_colours(self) -> list[tuple[int, int]]:
        """Per node, how many chunks it holds and how many it needs (a symmetry keeps both)."""
        return list(zip(self.held.sum(axis=0).tolist(), self.need.sum(axis=0).tolist()))

    def chunk_map(self, node: np.ndarray) -> np.ndarray | None:
        """The chunk relabelling a node relabelling induces (the k-th chunk of a pattern to the
        k-th of its image), or None if some chunk's holders and destinations map to no chunk's."""
        inverse = np.argsort(node)  # in the image, v' holds iff node⁻¹(v') held
        chunk = np.empty(self.held.shape[0], dtype=np.int64)
        for members in self.groups.values():
            c = members[0]
            image = self.groups.get(self._key(self.held[c][inverse], self.need[c][inverse]))
            if image is None or len(image) != len(members):
                return None
            chunk[members] = image
        return chunk

    def interchangeable(self) -> list[list[int]]:
        """Classes (in chunk order) of two or more chunks with the same holders and destinations."""
        return [members for members in self.groups.values() if len(members) > 1]
