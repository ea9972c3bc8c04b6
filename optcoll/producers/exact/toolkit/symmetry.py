"""Symmetries shared by the exact formulations: how they search a coloured graph for
automorphisms, and what a node relabelling does to the chunks of a collective.

Both the timed and the step model describe their problem as a ``ColouredGraph`` (the one finder,
``optcoll.graphs.automorphisms``; node colours say what a node may do and how many chunks it
holds and needs, edge tags what its links cost) and search it with ``find_automorphisms``; each model
then maps them onto its own variables (lex-leader rows, the symmetric restriction). A symmetry of
the collective maps every chunk's holders and destinations onto another chunk's (``chunk_map``);
chunks with the same holders and destinations are interchangeable (``interchangeable``).
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np

from optcoll.graphs.automorphisms import ColouredGraph

#: Search-tree nodes one automorphism search may visit before it gives up (highly regular graphs
#: without symmetries could take long).
SEARCH_NODES = 5000
#: Graphs with more nodes than this are not searched.
MAX_NODES = 1024


def find_automorphisms(graph: ColouredGraph, fixed: Mapping[int, int] | None = None, *,
                  deadline: float | None = None) -> Iterator[np.ndarray]:
    """Automorphisms (node v ↦ perm[v]) extending the partial map ``fixed``, fixed-point-free
    ones first where there is a choice; none on graphs over ``MAX_NODES`` nodes. The search
    stops after ``SEARCH_NODES`` nodes or at ``deadline`` (time.perf_counter seconds)."""
    if graph.n > MAX_NODES:
        return iter(())
    return graph.automorphisms(fixed, nodes=SEARCH_NODES, deadline=deadline)


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
