"""Symmetries of a timed problem: relabellings of nodes, links and chunks that keep every duration
and map the collective to itself (rotations of rings and tori, hypercube translations, the four
DGX-1 relabellings, permutations of a switch's NPUs).

Two uses, one sound and one a restriction:

* ``lex_leader_rows``: among the schedules a symmetry maps onto each other keep only the
  lexicographically smallest (on a prefix of the x variables). Every orbit keeps its leader, so
  optimality and infeasibility proofs stay valid.
* ``orbit_classes``: force the schedule itself to be invariant under a group acting without
  fixed points (every chunk's plan is a relabelled copy of one representative, TACCL's rotation
  offsets). A *restriction*: it finds good schedules fast, and proves nothing by itself.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from optcoll.collectives.builtins import make_collective
from optcoll.graphs.automorphisms import ColouredGraph, grow_semiregular
from optcoll.instances.clock import Clock
from optcoll.instances.instance import Instance
from optcoll.producers.exact.timed.grid import Grid, choose_grids
from optcoll.producers.exact.timed.problem import TimedProblem, direct_problem
from optcoll.producers.exact.toolkit.lex import Affine, lex_leq
from optcoll.producers.exact.toolkit.model import LinearModel
from optcoll.producers.exact.toolkit.symmetry import ChunkRoles, find_automorphisms

#: Candidate automorphisms tried per target node when growing a fixed-point-free group.
TRIES_PER_TARGET = 24


@dataclass(frozen=True, eq=False)
class Symmetry:
    node: np.ndarray  # node v ↦ node[v]
    link: np.ndarray  # link e ↦ link[e]
    chunk: np.ndarray  # chunk c ↦ chunk[c]


def _link_kind(grid: Grid, e: int) -> tuple[float, ...]:
    return (float(grid.delay[e]), float(grid.busy[e]), float(grid.port_lo[e]), float(grid.port_hi[e]),
            float(grid.capacity[e]))


class Relabelling:
    """A timed problem seen as a coloured graph: node colours (copy rights, port limits, chunks
    held and needed), per-pair tags (the kinds of its parallel links); node maps lifted to links
    and chunks."""

    def __init__(self, problem: TimedProblem, grid: Grid):
        self.problem, self.grid = problem, grid
        self.roles = ChunkRoles(problem.holds_at_start(), problem.needed())
        self.lanes: dict[tuple, list[int]] = {}
        for e in range(problem.num_links):
            self.lanes.setdefault((int(problem.src[e]), int(problem.dst[e]), _link_kind(grid, e)), []).append(e)

    @cached_property
    def graph(self) -> ColouredGraph:
        p = self.problem
        colours = [(bool(p.copy[v]), bool(p.port_limited[v]), *counts)
                   for v, counts in enumerate(self.roles.node_colours())]
        kinds: dict[tuple[int, int], list] = {}
        for (u, v, kind), ids in self.lanes.items():
            kinds.setdefault((u, v), []).extend([kind] * len(ids))
        return ColouredGraph.labelled(colours, {pair: tuple(sorted(items)) for pair, items in kinds.items()})

    def lift(self, node: np.ndarray) -> Symmetry | None:
        """The link and chunk maps a node map induces, or None if it is not a symmetry."""
        link = np.empty(self.problem.num_links, dtype=np.int64)
        for (u, v, kind), ids in self.lanes.items():
            image = self.lanes.get((int(node[u]), int(node[v]), kind))
            if image is None or len(image) != len(ids):
                return None
            link[ids] = image
        chunk = self.roles.chunk_map(node)
        return None if chunk is None else Symmetry(node, link, chunk)


@dataclass(frozen=True, eq=False)
class Group:
    generators: list[Symmetry]
    elements: list[Symmetry]  # identity first

    @property
    def order(self) -> int:
        return len(self.elements)


def fixed_point_free_group(problem: TimedProblem, grid: Grid, deadline: float | None = None) -> Group:
    """A group of symmetries in which no element but the identity fixes an NPU.

    Grown greedily over the nodes not yet in the orbit of node 0: first an automorphism mapping 0
    there that commutes with the group so far (it is then fixed on the whole orbit, which is how
    translations of tori and hypercubes are found at once), else a few others; keep the first that
    leaves the group fixed-point free. DGX-1 gets its four relabellings this way. At ``deadline``
    (time.perf_counter seconds) the group found so far is returned.
    """
    n = problem.num_nodes
    relabel = Relabelling(problem, grid)
    npus = problem.machine.num_npus
    generators, elements = grow_semiregular(
        lambda fixed, target: find_automorphisms(relabel.graph, fixed, deadline=deadline),
        n, range(1, npus), npus, TRIES_PER_TARGET, n, accept=lambda perm: relabel.lift(perm) is not None)
    # Lifting is a homomorphism (parallel links and alike chunks keep their rank), so every
    # element of a group of liftable generators lifts.
    return Group([relabel.lift(g) for g in generators], [relabel.lift(e) for e in elements])


def rank_group(instance: Instance, clock: Clock) -> list[Symmetry]:
    """The elements of ``fixed_point_free_group`` of the instance's machine as an AllGather of its
    ranks sees it (every rank a holder: the automorphisms keep timings and the ranks), searched
    until ``clock`` ends."""
    collective = instance.collective
    allgather = make_collective("allgather", collective.ranks, collective.size_bytes, collective.chunks_per_rank)
    spread = direct_problem(Instance(instance.name, instance.machine, allgather, instance.model, instance.budget))
    grid, _ = choose_grids(spread)
    return list(fixed_point_free_group(spread, grid, deadline=clock.end).elements)


def rank_group_links(instance: Instance, clock: Clock) -> list[np.ndarray]:
    """The link maps of ``rank_group``: what the direct AllReduce model's symmetric restriction uses."""
    return [s.link for s in rank_group(instance, clock)]


def breaking_symmetries(problem: TimedProblem, grid: Grid, limit: int,
                        deadline: float | None = None) -> list[Symmetry]:
    """Up to ``limit`` non-identity symmetries for lex-leader rows: relabellings of nodes (any,
    fixed points allowed, as many as are found by ``deadline``), swaps of interchangeable chunks
    (same holders and destinations) and swaps of identical parallel links. Any set of
    symmetries is sound for lex-leader rows."""
    n = problem.num_nodes
    relabel = Relabelling(problem, grid)
    found: list[Symmetry] = []
    for perm in itertools.islice(find_automorphisms(relabel.graph, deadline=deadline), limit + 1):
        if not np.array_equal(perm, np.arange(n)):
            sym = relabel.lift(perm)
            if sym is not None:
                found.append(sym)
    nodes, links, chunks = np.arange(n), np.arange(problem.num_links), np.arange(problem.num_chunks)
    for group, make in ((relabel.roles.interchangeable(), lambda a, b: Symmetry(nodes, links, _swap(chunks, a, b))),
                        (relabel.lanes.values(), lambda a, b: Symmetry(nodes, _swap(links, a, b), chunks))):
        for ids in group:
            found.extend(make(a, b) for a, b in zip(ids, ids[1:]))
    return found[:limit]


def _swap(identity: np.ndarray, a: int, b: int) -> np.ndarray:
    out = identity.copy()
    out[a], out[b] = b, a
    return out


# -- acting on model variables ----------------------------------------------------------------------
def variable_permutation(model, sym: Symmetry) -> np.ndarray | None:
    """Variable i ↦ the variable it becomes under ``sym`` (None if the model is not invariant)."""
    perm = np.arange(model.linear.num_vars)
    K1 = model.horizon + 1
    E = model.problem.num_links
    keys = (model.x_chunk * E + model.x_link) * K1 + model.x_epoch
    order = np.argsort(keys)
    image = (sym.chunk[model.x_chunk] * E + sym.link[model.x_link]) * K1 + model.x_epoch
    pos = np.minimum(np.searchsorted(keys[order], image), max(keys.shape[0] - 1, 0))
    if keys.size and not np.array_equal(keys[order][pos], image):
        return None
    perm[model.x_index] = model.x_index[order][pos]
    for block in (model.have, model.stock):
        # Image of the window of (c, v) is the window of (chunk[c], node[v]): same epochs.
        base2 = block.base[sym.chunk][:, sym.node]
        first2 = block.first[sym.chunk][:, sym.node]
        length2 = block.length[sym.chunk][:, sym.node]
        present = block.base >= 0
        if not (np.array_equal(present, base2 >= 0) and np.array_equal(block.first[present], first2[present])
                and np.array_equal(block.length[present], length2[present])):
            return None
        length = block.length[present]
        offsets = np.arange(int(length.sum())) - np.repeat(np.cumsum(length) - length, length)
        perm[np.repeat(block.base[present], length) + offsets] = np.repeat(base2[present], length) + offsets
    return perm


def orbit_classes(model, generators: list[Symmetry]) -> np.ndarray | None:
    """Class id per variable: its orbit under the generated group (None if not invariant)."""
    n = model.linear.num_vars
    rows, cols = [], []
    for sym in generators:
        perm = variable_permutation(model, sym)
        if perm is None:
            return None
        rows.append(np.arange(n))
        cols.append(perm)
    if not rows:
        return np.arange(n)
    graph = coo_matrix((np.ones(n * len(rows)), (np.concatenate(rows), np.concatenate(cols))), shape=(n, n))
    _, labels = connected_components(graph, directed=False)
    return labels


def lex_leader_rows(lm: LinearModel, perms: list[np.ndarray], prefix: np.ndarray) -> None:
    """x[prefix] ≤_lex x[perm[prefix]] for every variable permutation in ``perms`` (0/1 variables,
    positions a permutation leaves in place skipped), by the toolkit's lex-leader rows."""
    for perm in perms:
        a, b = prefix, perm[prefix]
        moved = a != b
        if moved.any():
            lex_leq(lm, Affine.of_vars(a[moved]), Affine.of_vars(b[moved]), 1.0)
