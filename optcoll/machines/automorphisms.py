"""Relabellings of a machine that keep every link (docs/model.md §3), grown into a group that
moves every NPU (a *semiregular* group: no element but the identity fixes an NPU).

Such a group is what lets large symmetric networks be analysed through a few representatives:
one source's share of a flow, or one source's share of a schedule, rotated by every element, is
everyone's (tori and hypercubes by their translations, a switch star by rotating its NPUs, a
multi-node cluster by shifting servers and GPUs, DGX-1 by its four relabellings).

The machine is a coloured multigraph (colours: the caller's node classes and the switches' kinds,
edge tags: link classes by latency and bandwidth) searched by ``optcoll.graphs.automorphisms``,
the one finder; this module only says what a machine's colours are and how hard to search.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from optcoll.graphs.automorphisms import SearchBudget, ColouredGraph, grow_semiregular, translations
from optcoll.machines.machine import Machine

#: Search-tree nodes one automorphism search may visit before it gives up, and all searches of
#: one group together, per node of the machine plus a constant (a server of interchangeable GPUs
#: takes one individualisation per GPU; highly symmetric networks without a semiregular group
#: would otherwise be searched for long).
SEARCH_NODES = (2, 100)
TOTAL_SEARCH_NODES = (20, 2000)
#: Automorphisms tried per target NPU when growing the group (besides the commuting one).
TRIES_PER_TARGET = 8


@dataclass(frozen=True, eq=False)
class SymmetryGroup:
    """Machine automorphisms as permutation tables; row 0 is the identity.

    ``node[g, v]`` is the image of node v under element g, ``link[g, e]`` that of link e (parallel
    links of one class are matched in id order). Every element but the identity moves every NPU.
    """

    node: np.ndarray
    link: np.ndarray
    num_npus: int

    @property
    def order(self) -> int:
        return int(self.node.shape[0])

    @cached_property
    def representatives(self) -> np.ndarray:
        """The smallest NPU of each NPU orbit, ascending."""
        return np.unique(self.node[:, :self.num_npus].min(axis=0))

    @cached_property
    def npu_orbit(self) -> np.ndarray:
        """For every NPU, the index (into ``representatives``) of its orbit."""
        smallest = self.node[:, :self.num_npus].min(axis=0)
        return np.searchsorted(self.representatives, smallest)

    @cached_property
    def carrier(self) -> np.ndarray:
        """For every NPU v, the element g with g(representative of v's orbit) = v."""
        reps = self.representatives[self.npu_orbit]
        out = np.empty(self.num_npus, dtype=np.int64)
        for g in range(self.order):
            hit = self.node[g, reps] == np.arange(self.num_npus)
            out[hit] = g
        return out

    @cached_property
    def link_orbit(self) -> np.ndarray:
        """Orbit id of every link, numbered 0.. in order of each orbit's smallest link."""
        smallest = self.link.min(axis=0)
        return np.unique(smallest, return_inverse=True)[1].astype(np.int64)

    @cached_property
    def link_orbit_size(self) -> np.ndarray:
        return np.bincount(self.link_orbit)

    @property
    def links_free(self) -> bool:
        """Whether only the identity fixes any link (every link orbit has ``order`` links)."""
        return bool(np.all(self.link_orbit_size == self.order))


def trivial_group(machine: Machine) -> SymmetryGroup:
    return SymmetryGroup(np.arange(machine.num_nodes)[None, :], np.arange(machine.num_links)[None, :],
                     machine.num_npus)


def semiregular_group(machine: Machine, node_class: np.ndarray | None = None) -> SymmetryGroup:
    """A group of automorphisms of ``machine`` in which no element but the identity fixes an NPU.

    ``node_class`` (one integer per node) restricts relabellings to nodes of equal class (e.g.
    members of a communicator versus other NPUs); NPUs and switches never mix, nor switches with
    different multicast/reduce flags. Grown greedily over target NPUs outside the orbit of NPU 0
    (only those colour refinement cannot tell from NPU 0):
    first an automorphism mapping 0 there that commutes with the group so far (how translations of
    tori and hypercubes are found at once), else a few others; the first that keeps the group
    semiregular is kept. Grown twice, trying index XORs before index shifts and not, and the
    larger kept: XORs make the hypercubes' group, but on a star of 72 NPUs they stop at 8 (an
    XOR by 64 leaves the NPUs) where shifts make all 72. The trivial group when nothing is found.
    """
    n, npus = machine.num_nodes, machine.num_npus
    classes = np.zeros(n, dtype=np.int64) if node_class is None else np.asarray(node_class, dtype=np.int64)
    flags = np.array([0] * npus + [1 + s.multicast + 2 * s.reduce for s in machine.switches])
    kinds = np.stack([machine.link_latency, machine.link_bandwidth], axis=1)
    tags = np.unique(kinds, axis=0, return_inverse=True)[1].reshape(-1)
    graph = ColouredGraph(classes * 4 + flags, machine.link_src, machine.link_dst, tags)
    stable = graph.refine(graph.initial, graph.initial)[0]  # automorphisms keep this colouring
    elements = _grown(graph, stable, npus, xor_first=True)
    if elements.shape[0] < np.count_nonzero(stable[:npus] == stable[0]):
        shifted = _grown(graph, stable, npus, xor_first=False)
        elements = shifted if shifted.shape[0] > elements.shape[0] else elements
    links = np.array([graph.edge_map(g) for g in elements], dtype=np.int64).reshape(len(elements), -1)
    return SymmetryGroup(elements, links, npus)


def _grown(graph: ColouredGraph, stable: np.ndarray, npus: int, xor_first: bool) -> np.ndarray:
    """The elements of the group ``semiregular_group`` grows, identity first: targets are the NPUs
    colour refinement cannot tell from NPU 0, tried at index shifts (and XORs) first, every search
    within a share of one budget for the whole group."""
    n = graph.n
    one, total = (per * n + extra for per, extra in (SEARCH_NODES, TOTAL_SEARCH_NODES))
    budget = SearchBudget(total)

    def find(fixed: dict[int, int], target: int):
        return graph.automorphisms(fixed, nodes=one, budget=budget, order=translations(target, xor_first),
                                   leading=npus)

    targets = np.flatnonzero(stable[:npus] == stable[0]).tolist()
    return grow_semiregular(find, n, targets, npus, TRIES_PER_TARGET, npus,
                            exhausted=lambda: budget.spent >= total)[1]
