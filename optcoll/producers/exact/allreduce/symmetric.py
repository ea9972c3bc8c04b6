"""Symmetric direct AllReduce schedules: every chunk's plan a relabelled copy of a representative's.

A group G of machine automorphisms that keeps link timings and the ranks, no element but the
identity fixing a rank (rotations of rings and tori, hypercube translations, DGX-1's four
relabellings; found by the timed solver, ``timed.symmetry.rank_group_links``), acts on schedules. Chunks are
interchangeable in an AllReduce, so when |G| divides the chunk count, chunk b·|G| + g may follow
the image under G[g] of chunk b·|G|'s plan: contributions relabel with the ranks, so each image is
a valid plan of its chunk, and only link capacity ties the images together. The model then needs
variables for the representatives only, each of their transfers counted on all its images' links.

A *restriction* (TACCL's rotation offsets): it finds good schedules fast and proves nothing.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from optcoll.producers.exact.allreduce.problem import DirectProblem
from optcoll.producers.exact.allreduce.transfers import RouteTransfers


@dataclass(frozen=True, eq=False)
class Orbit:
    """G acting on a direct problem: per element, the image of each link group and route."""

    order: int
    group_map: np.ndarray  # (|G|, groups)
    route_map: np.ndarray  # (|G|, routes)
    representatives: tuple[int, ...]

    def group_images(self, group: int) -> list[int]:
        return self.group_map[:, group].tolist()

    def expand(self, transfers: RouteTransfers) -> RouteTransfers:
        """Every chunk's transfers from the representatives' (chunk b·|G| + g: image under G[g])."""
        m = self.order
        chunk = (transfers.chunk[None, :] * m + np.arange(m)[:, None]).ravel()
        route = self.route_map[:, transfers.route].ravel()
        return RouteTransfers(chunk, route, np.tile(transfers.start, m), np.tile(transfers.op, m))


def orbit(problem: DirectProblem, link_maps: Sequence[np.ndarray]) -> Orbit | None:
    """G acting on ``problem`` from the link maps ``link_maps`` of its elements (identity first), when
    its order divides the chunk count (None otherwise, or for the identity alone)."""
    m = len(link_maps)
    if m < 2 or problem.num_chunks % m:
        return None
    group_of = np.empty(problem.machine.num_links, dtype=np.int64)
    for g, links in enumerate(problem.group_links):
        group_of[list(links)] = g
    first = np.array([links[0] for links in problem.group_links], dtype=np.int64)
    group_map = np.stack([group_of[link[first]] for link in link_maps])
    hop_group = problem.hop_group.tolist()
    hops = [tuple(hop_group[h] for h in route) for route in problem.route_hops()]
    route_of = {key: r for r, key in enumerate(hops)}
    route_map = np.array([[route_of[tuple(int(gm[g]) for g in key)] for key in hops] for gm in group_map],
                         dtype=np.int64)
    return Orbit(m, group_map, route_map, tuple(range(problem.num_chunks // m)))
