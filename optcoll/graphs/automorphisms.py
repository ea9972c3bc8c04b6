"""Automorphisms of a coloured directed multigraph, the groups they generate, and the growth of a
group in which no element but the identity fixes an NPU (a *semiregular* group).

Machines (``machines/automorphisms.py``: flow bounds and schedules, docs/model.md §3) and the exact
solvers' problems (``producers/exact/toolkit/symmetry.py``: lex-leader rows, symmetric
restrictions) describe themselves as a ``ColouredGraph`` and ask it for automorphisms; each lifts
the node maps to its own links and chunks.

The search is individualisation–refinement: refine two colourings jointly until stable, then
individualise a node of the chosen open cell against each candidate image. Colour refinement is
vectorised: it hashes each node's multisets of (edge tag, neighbour colour), out and in, with
64-bit mixing, so a hash collision can only make the search miss a symmetry; every permutation it
yields is checked edge by edge. It is bounded by a number of search nodes (per search and over
several searches) and an optional deadline: finding fewer symmetries is always safe for callers.
"""
from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

_MULT = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)

#: Where a node may go to several places, the order its candidate images are tried in:
#: (the node, its candidates ascending, the node count) -> the candidates in trial order.
Order = Callable[[int, np.ndarray, int], np.ndarray]


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser, elementwise on uint64 (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        z = (x.astype(np.uint64) + _MULT)
        z = (z ^ (z >> np.uint64(30))) * _MIX1
        z = (z ^ (z >> np.uint64(27))) * _MIX2
        return z ^ (z >> np.uint64(31))


def _names(items: Sequence[Hashable]) -> np.ndarray:
    """Each item's rank among the distinct items, sorted."""
    names = {s: i for i, s in enumerate(sorted(set(items)))}
    return np.array([names[s] for s in items], dtype=np.int64)


def fixed_points_last(u: int, options: np.ndarray, n: int) -> np.ndarray:
    """Every image but u itself first, ascending: fixed-point-free maps are wanted."""
    return options[np.argsort(options == u, kind="stable")]


def translations(shift: int, xor_first: bool) -> Order:
    """u + ``shift`` (mod the node count) first, after u XOR ``shift`` when ``xor_first``, then the
    next ids round: generators number nodes regularly, so index shifts (tori, clusters, stars)
    and XORs (hypercubes) are often translations, which are fixed-point free."""
    def order(u: int, options: np.ndarray, n: int) -> np.ndarray:
        keys = ((options - u - shift) % n,) + ((options != (u ^ shift),) if xor_first else ())
        return options[np.lexsort(keys)]
    return order


@dataclass
class SearchBudget:
    """Search-tree nodes visited so far by one or more searches, and the most they may visit."""

    total: float = math.inf
    spent: int = 0


class ColouredGraph:
    """A directed multigraph with an integer colour per node and an integer tag per edge."""

    def __init__(self, colours: np.ndarray, src: np.ndarray, dst: np.ndarray, tags: np.ndarray):
        self.n = len(colours)
        self.initial = np.unique(np.asarray(colours), return_inverse=True)[1].reshape(-1).astype(np.int64)
        self.src, self.dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
        self.tag = np.unique(np.asarray(tags), return_inverse=True)[1].reshape(-1).astype(np.int64)
        self.num_tags = int(self.tag.max(initial=0)) + 1
        keys = (self.src * self.n + self.dst) * self.num_tags + self.tag
        self.edge_order = np.argsort(keys, kind="stable")
        self.sorted_keys = keys[self.edge_order]
        n = self.n
        self._src2 = np.concatenate([self.src, self.src + n])
        self._dst2 = np.concatenate([self.dst, self.dst + n])
        self._tag2 = np.concatenate([self.tag, self.tag]).astype(np.uint64) * np.uint64(1 << 32)

    @classmethod
    def labelled(cls, colours: Sequence[Hashable], edges: Mapping[tuple[int, int], Hashable]) -> ColouredGraph:
        """A graph from any sortable node colours and one tag per linked ordered pair."""
        pairs = list(edges)
        return cls(_names(colours), np.array([u for u, _ in pairs], dtype=np.int64).reshape(-1),
                   np.array([v for _, v in pairs], dtype=np.int64).reshape(-1),
                   _names([edges[p] for p in pairs]))

    def refine(self, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """Both colourings refined with shared colour names; None when they part."""
        n = self.n
        colour = np.concatenate([a, b])
        count = len(np.unique(colour))
        while True:
            c = colour.astype(np.uint64)
            out_h = np.zeros(2 * n, dtype=np.uint64)
            in_h = np.zeros(2 * n, dtype=np.uint64)
            with np.errstate(over="ignore"):
                np.add.at(out_h, self._src2, _mix(self._tag2 + c[self._dst2]))
                np.add.at(in_h, self._dst2, _mix(_mix(self._tag2 + c[self._src2])))
                signature = _mix(out_h ^ _mix(in_h + np.uint64(7)))
            keys = np.stack([colour.astype(np.uint64), signature], axis=1)
            colour = np.unique(keys, axis=0, return_inverse=True)[1].reshape(-1).astype(np.int64)
            if not np.array_equal(np.sort(colour[:n]), np.sort(colour[n:])):
                return None
            new_count = len(np.unique(colour))
            if new_count == count:
                return colour[:n], colour[n:]
            count = new_count

    def edge_map(self, perm: np.ndarray) -> np.ndarray | None:
        """The edge permutation a node permutation induces (parallel edges of one tag matched in id
        order), or None if it is no automorphism."""
        if not np.array_equal(self.initial[perm], self.initial):
            return None
        keys = (perm[self.src] * self.n + perm[self.dst]) * self.num_tags + self.tag
        order = np.argsort(keys, kind="stable")
        if not np.array_equal(keys[order], self.sorted_keys):
            return None
        image = np.empty_like(order)
        image[order] = self.edge_order
        return image

    def automorphisms(self, fixed: Mapping[int, int] | None = None, *, nodes: int, budget: SearchBudget | None = None,
                      deadline: float | None = None, order: Order = fixed_points_last,
                      leading: int | None = None) -> Iterator[np.ndarray]:
        """Node permutations (v ↦ perm[v]) extending the partial map ``fixed`` that keep colours
        and edges, in the search's deterministic order.

        The search visits at most ``nodes`` search-tree nodes, fewer when ``budget`` (shared by
        several searches, counting the nodes visited) runs out, and stops at ``deadline``
        (time.perf_counter seconds). It individualises the first node of the smallest open cell
        (cells holding one of the first ``leading`` nodes before the others: switches follow
        their NPUs) and tries its images in ``order``.
        """
        budget = budget or SearchBudget()
        a, b = self.initial.copy(), self.initial.copy()
        fresh = int(a.max(initial=0)) + 1
        for i, (u, v) in enumerate((fixed or {}).items()):
            a[u], b[v] = fresh + i, fresh + i
        stop = min(budget.spent + nodes, budget.total)
        yield from self._search(a, b, budget, stop, deadline, order, self.n if leading is None else leading)

    def _search(self, a: np.ndarray, b: np.ndarray, budget: SearchBudget, stop: float, deadline: float | None,
                order: Order, leading: int) -> Iterator[np.ndarray]:
        budget.spent += 1
        if budget.spent > stop or (deadline is not None and time.perf_counter() > deadline):
            return
        refined = self.refine(a, b)
        if refined is None:
            return
        a, b = refined
        sizes = np.bincount(a)
        if sizes.max() == 1:
            perm = np.empty(self.n, dtype=np.int64)
            perm[np.argsort(a)] = np.argsort(b)
            if self.edge_map(perm) is not None:
                yield perm
            return
        first = np.full(sizes.size, self.n)
        np.minimum.at(first, a, np.arange(self.n))
        open_cells = np.flatnonzero(sizes > 1)
        cell = int(open_cells[np.lexsort((first[open_cells], sizes[open_cells], first[open_cells] >= leading))[0]])
        u = int(first[cell])
        fresh = int(a.max()) + 1
        for w in order(u, np.flatnonzero(b == cell), self.n).tolist():
            a2, b2 = a.copy(), b.copy()
            a2[u], b2[w] = fresh, fresh
            yield from self._search(a2, b2, budget, stop, deadline, order, leading)


def closure(generators: np.ndarray, cap: int) -> np.ndarray | None:
    """Every element the node permutations ``generators`` generate (identity first, then breadth
    first: after each element found, each generator in turn), or None past ``cap`` elements."""
    n = generators.shape[1]
    elements = np.arange(n)[None, :]
    seen = {elements[0].tobytes()}
    frontier = elements
    while frontier.shape[0]:
        found = []
        for row in generators[:, frontier].transpose(1, 0, 2).reshape(-1, n):
            key = row.tobytes()
            if key not in seen:
                seen.add(key)
                found.append(row)
                if len(seen) > cap:
                    return None
        frontier = np.array(found, dtype=np.int64).reshape(-1, n)
        elements = np.concatenate([elements, frontier])
    return elements


def grow_semiregular(find: Callable[[dict[int, int], int], Iterator[np.ndarray]], n: int, targets: Iterable[int],
                     npus: int, tries: int, cap: int, *, accept: Callable[[np.ndarray], bool] = lambda perm: True,
                     exhausted: Callable[[], bool] = lambda: False) -> tuple[list[np.ndarray], np.ndarray]:
    """Generators and elements (identity first, as ``closure`` lists them) of a group of
    automorphisms of an ``n``-node graph in which no element but the identity fixes one of the
    first ``npus`` nodes.

    Grown greedily over the ``targets`` not yet in the orbit of node 0: first an automorphism
    ``find(fixed, target)`` mapping 0 there that commutes with the group so far (it is then fixed
    on the whole orbit, which is how translations of tori and hypercubes are found at once), else
    up to ``tries`` others mapping 0 there; the first that ``accept`` takes and that keeps the
    group semiregular (and within ``cap`` elements) is kept. Stops early once ``exhausted()``.
    """
    elements = np.arange(n)[None, :]
    generators: list[np.ndarray] = []
    for target in targets:
        if np.any(elements[:, 0] == target):
            continue
        if exhausted():
            break
        commuting = {int(g[0]): int(g[target]) for g in elements}
        candidates = itertools.chain(itertools.islice(find(commuting, target), 1),
                                     itertools.islice(find({0: target}, target), tries))
        for perm in candidates:
            if not accept(perm):
                continue
            bigger = closure(np.array([*generators, perm]), cap)
            if bigger is not None and not np.any(bigger[1:, :npus] == np.arange(npus)):
                generators.append(perm)
                elements = bigger
                break
    return generators, elements
