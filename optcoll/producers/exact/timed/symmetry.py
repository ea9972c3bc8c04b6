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
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from optcoll.producers.exact.timed.grid import Grid
from optcoll.producers.exact.timed.linear import INF, LinearModel
from optcoll.producers.exact.timed.problem import TimedProblem

#: Candidate automorphisms tried per target node when growing a fixed-point-free group.
TRIES_PER_TARGET = 24
#: Search-tree nodes one automorphism search may visit before it gives up (finding fewer
#: symmetries is always safe; highly regular graphs without symmetries could take long).
SEARCH_NODES = 5000


@dataclass(frozen=True, eq=False)
class Symmetry:
    node: np.ndarray  # node v ↦ node[v]
    link: np.ndarray  # link e ↦ link[e]
    chunk: np.ndarray  # chunk c ↦ chunk[c]


class _Graph:
    """The problem as a coloured multigraph: node colours and per-pair link-kind tags."""

    def __init__(self, problem: TimedProblem, grid: Grid):
        held = problem.holds_at_start().sum(axis=0)
        needed = problem.needed().sum(axis=0)
        tags = [(bool(problem.copy[v]), bool(problem.port_limited[v]), int(held[v]), int(needed[v]))
                for v in range(problem.num_nodes)]
        self.n = problem.num_nodes
        self.initial = _renumber(tags)
        kinds: dict[tuple[int, int], list] = {}
        for e in range(problem.num_links):
            kinds.setdefault((int(problem.src[e]), int(problem.dst[e])), []).append(_link_kind(grid, e))
        self.edges = {pair: tuple(sorted(items)) for pair, items in kinds.items()}
        self.out: list[list[tuple[tuple, int]]] = [[] for _ in range(self.n)]
        self.inc: list[list[tuple[tuple, int]]] = [[] for _ in range(self.n)]
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

    def automorphisms(self, fixed: dict[int, int]) -> Iterator[np.ndarray]:
        """Automorphisms extending the partial map ``fixed`` (individualisation-refinement)."""
        a, b = list(self.initial), list(self.initial)
        fresh = max(a) + 1
        for i, (u, v) in enumerate(fixed.items()):
            a[u], b[v] = fresh + i, fresh + i
        yield from self._search(a, b, [SEARCH_NODES])

    def _search(self, a: list[int], b: list[int], budget: list[int]) -> Iterator[np.ndarray]:
        budget[0] -= 1
        if budget[0] < 0:
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
            yield from self._search(a2, b2, budget)


def _renumber(items: list) -> list[int]:
    names = {s: i for i, s in enumerate(sorted(set(items)))}
    return [names[s] for s in items]


def _link_kind(grid: Grid, e: int) -> tuple[float, ...]:
    return (float(grid.delay[e]), float(grid.busy[e]), float(grid.port_lo[e]), float(grid.port_hi[e]))


def lift(problem: TimedProblem, grid: Grid, node: np.ndarray) -> Symmetry | None:
    """The link and chunk maps a node map induces, or None if it is not a symmetry."""
    lanes: dict[tuple, list[int]] = {}
    for e in range(problem.num_links):
        lanes.setdefault((int(problem.src[e]), int(problem.dst[e]), _link_kind(grid, e)), []).append(e)
    link = np.empty(problem.num_links, dtype=np.int64)
    for (u, v, kind), ids in lanes.items():
        image = lanes.get((int(node[u]), int(node[v]), kind))
        if image is None or len(image) != len(ids):
            return None
        link[ids] = image
    held, need = problem.holds_at_start(), problem.needed()
    signature: dict[tuple, list[int]] = {}
    for c in range(problem.num_chunks):
        signature.setdefault((held[c].tobytes(), need[c].tobytes()), []).append(c)
    inverse = np.argsort(node)  # image pattern: v' holds iff node^-1(v') held
    chunk = np.empty(problem.num_chunks, dtype=np.int64)
    for (h, n), ids in signature.items():
        hv = np.frombuffer(h, dtype=bool)[inverse]
        nv = np.frombuffer(n, dtype=bool)[inverse]
        image = signature.get((hv.tobytes(), nv.tobytes()))
        if image is None or len(image) != len(ids):
            return None
        chunk[ids] = image
    return Symmetry(node, link, chunk)


def _compose(a: Symmetry, b: Symmetry) -> Symmetry:
    """a after b."""
    return Symmetry(a.node[b.node], a.link[b.link], a.chunk[b.chunk])


def _closure(generators: list[Symmetry], cap: int) -> list[Symmetry] | None:
    """All elements of the generated group (identity first), or None past ``cap`` elements."""
    n = generators[0].node.shape[0]
    identity = Symmetry(np.arange(n), np.arange(generators[0].link.shape[0]),
                        np.arange(generators[0].chunk.shape[0]))
    seen = {identity.node.tobytes(): identity}
    frontier = [identity]
    while frontier:
        nxt = []
        for s in frontier:
            for g in generators:
                t = _compose(g, s)
                key = t.node.tobytes()
                if key not in seen:
                    seen[key] = t
                    nxt.append(t)
                    if len(seen) > cap:
                        return None
        frontier = nxt
    return list(seen.values())


def _semiregular(group: list[Symmetry], npus: int) -> bool:
    """No element but the identity fixes an NPU (switches may stay put)."""
    ident = np.arange(npus)
    return all(not np.any(s.node[:npus] == ident) for s in group[1:])


@dataclass(frozen=True, eq=False)
class Group:
    generators: list[Symmetry]
    elements: list[Symmetry]  # identity first

    @property
    def order(self) -> int:
        return len(self.elements)


def fixed_point_free_group(problem: TimedProblem, grid: Grid) -> Group:
    """A group of symmetries in which no element but the identity fixes an NPU.

    Grown greedily over the nodes not yet in the orbit of node 0: first an automorphism mapping 0
    there that commutes with the group so far (it is then fixed on the whole orbit, which is how
    translations of tori and hypercubes are found at once), else a few others; keep the first that
    leaves the group fixed-point free. DGX-1 gets its four relabellings this way.
    """
    n = problem.num_nodes
    graph = _Graph(problem, grid)
    identity = lift(problem, grid, np.arange(n))
    assert identity is not None
    generators: list[Symmetry] = []
    elements = [identity]
    for target in range(1, problem.machine.num_npus):
        if any(int(s.node[0]) == target for s in elements):
            continue
        commuting = {int(s.node[0]): int(s.node[target]) for s in elements}
        candidates = itertools.chain(itertools.islice(graph.automorphisms(commuting), 1),
                                     itertools.islice(graph.automorphisms({0: target}), TRIES_PER_TARGET))
        for perm in candidates:
            sym = lift(problem, grid, perm)
            if sym is None:
                continue
            bigger = _closure([*generators, sym], n)
            if bigger is not None and _semiregular(bigger, problem.machine.num_npus):
                generators.append(sym)
                elements = bigger
                break
    return Group(generators, elements)


def breaking_symmetries(problem: TimedProblem, grid: Grid, limit: int) -> list[Symmetry]:
    """Up to ``limit`` non-identity symmetries for lex-leader rows: relabellings of nodes (any,
    fixed points allowed), swaps of interchangeable chunks (same holders and destinations) and
    swaps of identical parallel links. Any set of symmetries is sound for lex-leader rows."""
    n = problem.num_nodes
    found: list[Symmetry] = []
    for perm in itertools.islice(_Graph(problem, grid).automorphisms({}), limit + 1):
        if not np.array_equal(perm, np.arange(n)):
            sym = lift(problem, grid, perm)
            if sym is not None:
                found.append(sym)
    nodes, links, chunks = np.arange(n), np.arange(problem.num_links), np.arange(problem.num_chunks)
    held, need = problem.holds_at_start(), problem.needed()
    twins: dict[bytes, list[int]] = {}
    for c in range(problem.num_chunks):
        twins.setdefault(held[c].tobytes() + need[c].tobytes(), []).append(c)
    lanes: dict[tuple, list[int]] = {}
    for e in range(problem.num_links):
        lanes.setdefault((int(problem.src[e]), int(problem.dst[e]), _link_kind(grid, e)), []).append(e)
    for group, make in ((twins.values(), lambda a, b: Symmetry(nodes, links, _swap(chunks, a, b))),
                        (lanes.values(), lambda a, b: Symmetry(nodes, _swap(links, a, b), chunks))):
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
    """x[prefix] ≤_lex x[perm[prefix]] for every variable permutation in ``perms``.

    e_i says "the prefixes agree before position i" (e_0 = 1): e_i ⇒ a_i ≤ b_i, and
    e_{i+1} ≥ 2·e_i − 1 + a_i − b_i, which forces e_{i+1} exactly when e_i = 1 and a_i = b_i and
    is vacuous once the prefixes differ. e is only ever forced upwards, so every lexicographic
    leader stays feasible: the rows cut symmetric copies, never all of an orbit.
    """
    for perm in perms:
        a, b = prefix, perm[prefix]
        moved = a != b
        if not moved.any():
            continue
        a, b = a[moved], b[moved]
        m = a.shape[0]
        e = lm.add_vars(np.zeros(m), 1.0, "lexeq", ("i",), np.arange(m)[:, None])
        lm.tighten(e[:1], lo=1.0)
        # a_i - b_i + e_i <= 1
        lm.add_rows(np.repeat(np.arange(m), 3), np.stack([a, b, e], axis=1).ravel(),
                    np.tile([1.0, -1.0, 1.0], m), -INF, 1.0, m)
        # e_{i+1} - 2 e_i - a_i + b_i >= -1
        if m > 1:
            lm.add_rows(np.repeat(np.arange(m - 1), 4),
                        np.stack([e[1:], e[:-1], a[:-1], b[:-1]], axis=1).ravel(),
                        np.tile([1.0, -2.0, -1.0, 1.0], m - 1), -1.0, INF, m - 1)
