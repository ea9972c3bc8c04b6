"""Automorphisms of step problems and the lex-leader constraints built from them."""
from __future__ import annotations

import pytest

from step_helpers import BW, LAT, agreement_instances, instance

from optcoll.machines import generators as G
from optcoll.producers.exact.step.inversion import plan
from optcoll.producers.exact.step.symmetry import automorphisms, interchangeable, lex_constraints


def _problem(inst):
    return plan(inst.machine, inst.collective).problem


def test_dgx1_has_exactly_the_three_known_relabellings():
    found = {s.nodes for s in automorphisms(_problem(instance(G.dgx1())))}
    assert found == {(2, 3, 0, 1, 6, 7, 4, 5), (4, 5, 6, 7, 0, 1, 2, 3), (6, 7, 4, 5, 2, 3, 0, 1)}


@pytest.mark.parametrize("machine, kind, count", [
    (G.ring(8, BW, LAT, bidirectional=False), "allgather", 7),  # rotations
    (G.ring(8, BW, LAT), "allgather", 15),  # rotations and reflections
    (G.ring(8, BW, LAT), "broadcast", 1),  # only the reflection through the root
    (G.dgx1(), "scatter", 0),  # every DGX-1 relabelling moves GPU 0
    (G.hypercube(3, BW, LAT), "allgather", 47),
])
def test_symmetries_must_map_the_collective_to_itself(machine, kind, count):
    inst = instance(machine, kind, root=0 if kind in ("broadcast", "scatter") else None)
    assert len(automorphisms(_problem(inst))) == count


@pytest.mark.parametrize("inst", agreement_instances()[:-2], ids=lambda i: i.name)
def test_every_symmetry_preserves_capacities_and_chunks(inst):
    p = _problem(inst)
    weight = {(u, v): w for u, v, w in zip(p.edge_src.tolist(), p.edge_dst.tolist(), p.edge_weight.tolist())}
    for g in automorphisms(p):
        assert {(g.nodes[u], g.nodes[v]): w for (u, v), w in weight.items()} == weight
        assert sorted(g.chunks) == list(range(p.num_chunks))
        for c in range(p.num_chunks):
            assert {g.nodes[v] for v in p.holders[c]} == set(p.holders[g.chunks[c]])
            assert {g.nodes[v] for v in p.needers[c]} == set(p.needers[g.chunks[c]])


def test_pieces_of_one_buffer_are_interchangeable():
    p = _problem(instance(G.ring(4, BW, LAT), chunks=3))
    assert interchangeable(p) == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 10, 11]]
    chains = lex_constraints(p, [], prefix=8)
    assert len(chains) == 8  # two consecutive pairs per buffer
    assert all(a[0] + 1 == b[0] and a[1] == b[1] for chain in chains for a, b in chain)


def test_lex_constraints_skip_entries_equal_by_construction_and_respect_the_prefix():
    p = _problem(instance(G.ring(6, BW, LAT, bidirectional=False)))
    chains = lex_constraints(p, automorphisms(p), prefix=4)
    assert len(chains) == 5
    for chain in chains:
        assert 0 < len(chain) <= 4
        for (c, v), (c2, v2) in chain:
            assert (c, v) != (c2, v2)
            assert not (v in p.holders[c] and v2 in p.holders[c2])
