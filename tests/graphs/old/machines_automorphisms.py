"""Relabellings of a machine that keep every link (docs/model.md §3), grown into a group that
moves every NPU (a *semiregular* group: no element but the identity fixes an NPU).

Such a group is what lets large symmetric networks be analysed through a few representatives:
one source's share of a flow, or one source's share of a schedule, rotated by every element, is
everyone's (tori and hypercubes by their translations, a switch star by rotating its NPUs, a
multi-node cluster by shifting servers and GPUs, DGX-1 by its four relabellings).

The search is individualisation–refinement on the machine as a coloured multigraph (colours:
the caller's node classes, link classes by latency and bandwidth), vectorised: colour refinement
hashes each node's multiset of (link class, neighbour colour) with 64-bit mixing, so a hash
collision can only make the search miss a symmetry; every permutation it returns is checked link
by link. Finding fewer symmetries is always safe for the callers.
"""
from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from optcoll.machines.machine import Machine

#: Search-tree nodes one automorphism search may visit before it gives up, and all searches of
#: one group together, per node of the machine plus a constant (a server of interchangeable GPUs
#: takes one individualisation per GPU; highly symmetric networks without a semiregular group
#: would otherwise be searched for long).
SEARCH_NODES = (2, 100)
TOTAL_SEARCH_NODES = (20, 2000)
#: Automorphisms tried per target NPU when growing the group (besides the commuting one).
TRIES_PER_TARGET = 8

_MULT = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser, elementwise on uint64 (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        z = (x.astype(np.uint64) + _MULT)
        z = (z ^ (z >> np.uint64(30))) * _MIX1
        z = (z ^ (z >> np.uint64(27))) * _MIX2
        return z ^ (z >> np.uint64(31))


@dataclass(frozen=True, eq=False)
class NodeGroup:
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


def trivial_group(machine: Machine) -> NodeGroup:
    return NodeGroup(np.arange(machine.num_nodes)[None, :], np.arange(machine.num_links)[None, :],
                     machine.num_npus)


class _Coloured:
    """The machine as a coloured multigraph, and joint colour refinement of two colourings."""

    def __init__(self, machine: Machine, node_class: np.ndarray):
        self.n, self.npus = machine.num_nodes, machine.num_npus
        self.src = machine.link_src.astype(np.int64)
        self.dst = machine.link_dst.astype(np.int64)
        kinds = np.stack([machine.link_latency, machine.link_bandwidth], axis=1)
        self.kind = np.unique(kinds, axis=0, return_inverse=True)[1].reshape(-1).astype(np.int64)
        self.initial = np.unique(node_class, return_inverse=True)[1].reshape(-1).astype(np.int64)
        keys = (self.src * self.n + self.dst) * (int(self.kind.max(initial=0)) + 1) + self.kind
        self.link_order = np.argsort(keys, kind="stable")
        self.sorted_keys = keys[self.link_order]
        self.num_kinds = int(self.kind.max(initial=0)) + 1

    def refine(self, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """Both colourings refined with shared colour names; None when they part."""
        n = self.n
        colour = np.concatenate([a, b])
        src = np.concatenate([self.src, self.src + n])
        dst = np.concatenate([self.dst, self.dst + n])
        kind = np.concatenate([self.kind, self.kind]).astype(np.uint64)
        count = len(np.unique(colour))
        while True:
            c = colour.astype(np.uint64)
            out_h = np.zeros(2 * n, dtype=np.uint64)
            in_h = np.zeros(2 * n, dtype=np.uint64)
            with np.errstate(over="ignore"):
                np.add.at(out_h, src, _mix(kind * np.uint64(1 << 32) + c[dst]))
                np.add.at(in_h, dst, _mix(_mix(kind * np.uint64(1 << 32) + c[src])))
                signature = _mix(out_h ^ _mix(in_h + np.uint64(7)))
            keys = np.stack([colour.astype(np.uint64), signature], axis=1)
            colour = np.unique(keys, axis=0, return_inverse=True)[1].reshape(-1).astype(np.int64)
            if not np.array_equal(np.sort(colour[:n]), np.sort(colour[n:])):
                return None
            new_count = len(np.unique(colour))
            if new_count == count:
                return colour[:n], colour[n:]
            count = new_count

    def link_map(self, perm: np.ndarray) -> np.ndarray | None:
        """The link permutation a node permutation induces, or None if it is no automorphism."""
        keys = (perm[self.src] * self.n + perm[self.dst]) * self.num_kinds + self.kind
        order = np.argsort(keys, kind="stable")
        if not np.array_equal(keys[order], self.sorted_keys):
            return None
        image = np.empty_like(order)
        image[order] = self.link_order
        return image

    def automorphisms(self, fixed: dict[int, int], spent: list[int], shift: int = 0, xor_first: bool = True
                      ) -> Iterator[np.ndarray]:
        """Node permutations extending ``fixed`` that keep node classes and links; each search
        node visited is counted in ``spent[0]``, and the search stops at ``SEARCH_NODES`` more or
        ``TOTAL_SEARCH_NODES`` in all. Where a node u may go to several places, u + ``shift``
        (mod the node count) is tried first, after u XOR ``shift`` when ``xor_first``, then the
        next ids round: generators number nodes regularly, so index shifts (tori, clusters,
        stars) and XORs (hypercubes) are often translations, which are fixed-point free."""
        a, b = self.initial.copy(), self.initial.copy()
        fresh = int(a.max()) + 1
        for i, (u, v) in enumerate(fixed.items()):
            a[u], b[v] = fresh + i, fresh + i
        one, total = (per * self.n + extra for per, extra in (SEARCH_NODES, TOTAL_SEARCH_NODES))
        yield from self._search(a, b, spent, min(spent[0] + one, total), shift, xor_first)

    def _search(self, a: np.ndarray, b: np.ndarray, spent: list[int], stop: int, shift: int, xor_first: bool
                ) -> Iterator[np.ndarray]:
        spent[0] += 1
        if spent[0] > stop:
            return
        refined = self.refine(a, b)
        if refined is None:
            return
        a, b = refined
        sizes = np.bincount(a)
        if sizes.max() == 1:
            perm = np.empty(self.n, dtype=np.int64)
            perm[np.argsort(a)] = np.argsort(b)
            if self.link_map(perm) is not None:
                yield perm
            return
        # NPU cells first (switches follow their NPUs), the smallest, then the lowest first node.
        first = np.full(sizes.size, self.n)
        np.minimum.at(first, a, np.arange(self.n))
        open_cells = np.flatnonzero(sizes > 1)
        cell = int(open_cells[np.lexsort((first[open_cells], sizes[open_cells],
                                          first[open_cells] >= self.npus))[0]])
        u = int(first[cell])
        options = np.flatnonzero(b == cell)
        keys = ((options - u - shift) % self.n,) + ((options != (u ^ shift),) if xor_first else ())
        options = options[np.lexsort(keys)]
        fresh = int(a.max()) + 1
        for w in options.tolist():
            a2, b2 = a.copy(), b.copy()
            a2[u], b2[w] = fresh, fresh
            yield from self._search(a2, b2, spent, stop, shift, xor_first)


def _closure(generators: np.ndarray, cap: int) -> np.ndarray | None:
    """Every element the node permutations ``generators`` generate (identity first), or None past
    ``cap`` elements."""
    n = generators.shape[1]
    elements = np.arange(n)[None, :]
    seen = {elements[0].tobytes()}
    frontier = elements
    while frontier.shape[0]:
        found = []
        for g in generators:
            for row in g[frontier]:
                key = row.tobytes()
                if key not in seen:
                    seen.add(key)
                    found.append(row)
                    if len(seen) > cap:
                        return None
        frontier = np.array(found, dtype=np.int64).reshape(-1, n)
        elements = np.concatenate([elements, frontier])
    return elements


def semiregular_group(machine: Machine, node_class: np.ndarray | None = None) -> NodeGroup:
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
    graph = _Coloured(machine, classes * 4 + flags)
    stable = graph.refine(graph.initial, graph.initial)[0]  # automorphisms keep this colouring
    elements = _grown(graph, stable, npus, xor_first=True)
    if elements.shape[0] < np.count_nonzero(stable[:npus] == stable[0]):
        shifted = _grown(graph, stable, npus, xor_first=False)
        elements = shifted if shifted.shape[0] > elements.shape[0] else elements
    links = np.array([graph.link_map(g) for g in elements], dtype=np.int64).reshape(len(elements), -1)
    return NodeGroup(elements, links, npus)


def _grown(graph: _Coloured, stable: np.ndarray, npus: int, xor_first: bool) -> np.ndarray:
    """The elements of the group ``semiregular_group`` grows, identity first."""
    n = graph.n
    elements = np.arange(n)[None, :]
    generators: list[np.ndarray] = []
    spent = [0]
    for target in np.flatnonzero(stable[:npus] == stable[0]).tolist():
        if target == 0 or np.any(elements[:, 0] == target):
            continue
        if spent[0] >= TOTAL_SEARCH_NODES[0] * n + TOTAL_SEARCH_NODES[1]:
            break
        commuting = {int(g[0]): int(g[target]) for g in elements}
        candidates = itertools.chain(
            itertools.islice(graph.automorphisms(commuting, spent, target, xor_first), 1),
            itertools.islice(graph.automorphisms({0: target}, spent, target, xor_first), TRIES_PER_TARGET))
        for perm in candidates:
            bigger = _closure(np.array([*generators, perm]), npus)
            if bigger is not None and not np.any(bigger[1:, :npus] == np.arange(npus)):
                generators.append(perm)
                elements = bigger
                break
    return elements
