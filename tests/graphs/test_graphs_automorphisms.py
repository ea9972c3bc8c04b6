"""The one automorphism finder: a ring's dihedral group, a directed ring's rotations, a partial map
extended, budgets and deadlines that stop it, the closure of generators, and a semiregular group
grown from translations."""
from __future__ import annotations

import itertools
import time

import numpy as np

from optcoll.graphs.automorphisms import SearchBudget, ColouredGraph, closure, grow_semiregular, translations
from optcoll.producers.exact.toolkit.symmetry import find_automorphisms


def ring(n: int, both_ways: bool = True) -> ColouredGraph:
    edges = {(v, (v + 1) % n): 1 for v in range(n)}
    if both_ways:
        edges.update({((v + 1) % n, v): 1 for v in range(n)})
    return ColouredGraph.labelled([0] * n, edges)


def test_a_rings_rotations_and_reflections_and_a_deadline_that_stops_the_search():
    n = 6
    found = {tuple(p.tolist()) for p in find_automorphisms(ring(n))}
    assert len(found) == 2 * n  # the dihedral group
    assert all(ring(n).edge_map(np.array(p)) is not None for p in found)
    assert list(find_automorphisms(ring(n), deadline=time.perf_counter() - 1)) == []
    one_way = ring(n, both_ways=False)
    assert len(list(find_automorphisms(one_way))) == n
    assert [p.tolist() for p in find_automorphisms(one_way, {0: 2})] == [[(v + 2) % n for v in range(n)]]


def test_fixed_point_free_maps_come_first_and_colours_are_kept():
    graph = ColouredGraph.labelled(["npu"] * 4 + ["switch"], {**{(v, 4): "up" for v in range(4)},
                                                              **{(4, v): "down" for v in range(4)}})
    first = next(graph.automorphisms(nodes=100))
    assert first[4] == 4 and not np.any(first[:4] == np.arange(4))
    assert all(p[4] == 4 for p in graph.automorphisms(nodes=100))
    assert graph.edge_map(np.array([4, 1, 2, 3, 0])) is None  # a switch is no NPU


def test_a_shared_budget_ends_every_search_that_draws_on_it():
    """A ring's first automorphism takes three search nodes: the root, one NPU individualised, a
    neighbour individualised (the reflection then follows by refinement)."""
    assert len(list(itertools.islice(ring(8).automorphisms(nodes=3), 1))) == 1
    budget = SearchBudget(total=2)
    assert list(ring(8).automorphisms(nodes=1000, budget=budget)) == []
    assert budget.spent > 2
    assert list(ring(8).automorphisms(nodes=1000, budget=budget)) == []


def test_closure_lists_the_identity_first_and_stops_past_its_cap():
    shift = np.roll(np.arange(6), -1)
    elements = closure(shift[None, :], 6)
    assert elements.shape == (6, 6) and elements[0].tolist() == list(range(6))
    assert {tuple(e) for e in elements.tolist()} == {tuple(np.roll(np.arange(6), -k)) for k in range(6)}
    assert closure(shift[None, :], 5) is None


def test_a_torus_grows_its_translations():
    side = 4
    nodes = np.arange(side * side).reshape(side, side)
    edges = {}
    for axis in (0, 1):
        for step in (1, -1):
            for u, v in zip(nodes.ravel(), np.roll(nodes, step, axis=axis).ravel()):
                edges[(int(u), int(v))] = 1
    graph = ColouredGraph.labelled([0] * side * side, edges)
    budget = SearchBudget()
    generators, elements = grow_semiregular(
        lambda fixed, target: graph.automorphisms(fixed, nodes=1000, budget=budget, order=translations(target, False)),
        16, range(16), 16, 8, 16)
    assert len(generators) == 2 and elements.shape == (16, 16)
    assert not np.any(elements[1:] == np.arange(16))
