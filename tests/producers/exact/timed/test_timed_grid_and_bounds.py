"""Quanta and the solver's own bounds: exact units found with fractions, rounding in the right
direction, bounds that never exceed the proven optimum."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optcoll.instances.instance import TimeModel
from optcoll.machines import generators as G
from optcoll.producers.exact.timed.solve import solve_timed
from optcoll.producers.exact.timed.grid import choose_grids, fine_grid, make_grid, seconds_grid
from optcoll.producers.exact.toolkit.epochs import exact_unit
from optcoll.producers.exact.timed.reach import egress_bound, ingress_bound, latency_bound, reach
from optcoll.producers.exact.timed.solve import _problem

from solver_checks import proof_budget
from timed_helpers import BW, LAT, close, instance, link_time, small_instances


def test_exact_unit_uses_fractions():
    assert close(exact_unit(np.array([800.5e-6, 3203e-6 / 6]), 10**6), 1e-6 / 6)
    assert close(exact_unit(np.array([2e-6, 3e-6, 4.5e-6]), 100), 0.5e-6)
    assert exact_unit(np.array([1.0, math.sqrt(2)]), 1000) is None
    assert exact_unit(np.array([1.0, 30.0]), 24) is None  # too many units per link


def test_uniform_links_give_one_exact_grid_of_one_link_time():
    problem = _problem(instance(G.torus([3, 3], BW, LAT)))
    upper, lower = choose_grids(problem)
    assert upper.exact and lower is None
    assert close(upper.quantum, link_time(instance(G.torus([3, 3], BW, LAT))))
    assert set(upper.delay.tolist()) == set(upper.busy.tolist()) == {1}


def test_commensurable_links_give_an_exact_finer_grid():
    # 2 ms and 3 ms links: 1 ms epochs, exact.
    inst = instance(G.mesh([2, 2], [0.5 * BW, BW / 3], [0.0, 0.0]))
    upper, lower = choose_grids(_problem(inst))
    assert upper.exact and lower is None and close(upper.quantum, 1e-3)
    assert sorted(set(upper.delay.tolist())) == [2, 3]


def test_incommensurable_links_are_bracketed():
    problem = _problem(instance(G.mesh([2, 3], [1.25e9, 1.875e9], [0.5e-6, 0.5e-6])))
    upper, lower = choose_grids(problem)
    assert upper.rounding == "up" and lower.rounding == "down"
    assert np.all(upper.delay * upper.quantum >= problem.delay * (1 - 1e-12))
    assert np.all(lower.delay * lower.quantum <= problem.delay * (1 + 1e-12))
    assert np.all(lower.delay >= 1)
    assert close(fine_grid(problem).quantum, 1e-6 / 6)


def test_serialization_port_windows_round_outwards_up_and_inwards_down():
    inst = instance(G.ring(4, BW, 0.3e-3), "reducescatter", model=TimeModel(occupancy="serialization", send_ports=1))
    problem = _problem(inst)
    assert problem.inverted and np.all(problem.port_shift > 0)
    up, down = make_grid(problem, 0.4e-3, "up"), make_grid(problem, 0.4e-3, "down")
    q = 0.4e-3
    assert np.all(up.port_lo * q <= problem.port_shift + 1e-15)
    assert np.all(up.port_hi * q >= problem.port_shift + problem.busy - 1e-15)
    assert np.all(down.port_lo * q >= problem.port_shift - 1e-15)
    assert np.all(down.port_hi * q <= problem.port_shift + problem.busy + 1e-15)


INSTANCES = small_instances()


@pytest.mark.parametrize("inst", INSTANCES, ids=[i.name for i in INSTANCES])
def test_own_bounds_never_exceed_the_optimum(inst):
    problem = _problem(inst)
    grid = seconds_grid(problem)
    r = reach(problem, grid.delay)
    optimum = solve_timed(inst, budget=proof_budget()).lower_bound
    for bound in (latency_bound(problem, r), ingress_bound(problem, r, grid), egress_bound(problem, r, grid)):
        assert bound <= optimum * (1 + 1e-9)


def test_port_aware_ingress_bound_is_tight_on_one_port_fully_connected():
    inst = instance(G.fully_connected(6, BW, LAT), model=TimeModel(send_ports=1, recv_ports=1))
    problem = _problem(inst)
    grid = seconds_grid(problem)
    assert close(ingress_bound(problem, reach(problem, grid.delay), grid), 5 * link_time(inst))


def test_egress_bound_of_a_broadcast_root():
    """The root of a 4-chunk broadcast on a ring sends every chunk over its 2 links."""
    inst = instance(G.ring(6, BW, LAT), "broadcast", 4, root=0)
    problem = _problem(inst)
    grid = seconds_grid(problem)
    tau = link_time(inst)
    # 4 departures over 2 links: the last leaves at τ and still needs a hop: 2τ... plus the
    # nearest non-root is one hop away, so the 4th departure arrives no earlier than 2τ.
    assert close(egress_bound(problem, reach(problem, grid.delay), grid), 2 * tau)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.integers(1, 6), st.integers(1, 7),
       st.lists(st.tuples(st.integers(0, 5), st.integers(0, 6)), max_size=40), st.integers(1, 4))
def test_per_chunk_min_equals_the_pairwise_minimum_in_any_block_size(chunks, nodes, pairs, rows_per_block):
    """Blocks split chunks anywhere (here a few rows each); the answer is the plain per-pair min."""
    from optcoll.producers.exact.timed import reach as R

    pairs = [(c % chunks, w % nodes) for c, w in pairs]
    chunk = np.array([c for c, _ in pairs], dtype=np.int64)
    node = np.array([w for _, w in pairs], dtype=np.int64)
    table = np.arange(nodes * nodes, dtype=float).reshape(nodes, nodes)[::-1] % 7 + np.eye(nodes)
    expected = np.full((chunks, nodes), np.inf)
    np.minimum.at(expected, chunk, table[node])
    old = R.BLOCK_BYTES
    try:
        R.BLOCK_BYTES = 8 * nodes * rows_per_block
        assert np.array_equal(R.per_chunk_min(chunks, chunk, node, table), expected)
    finally:
        R.BLOCK_BYTES = old


@pytest.mark.parametrize("inst", small_instances(), ids=lambda i: i.name)
def test_reach_is_the_minimum_over_every_holder_and_every_needing_node(inst):
    """earliest and togo against their definitions, pair by pair (switches, sub-communicators,
    inverted ReduceScatter, AlltoAll, ports)."""
    from optcoll.producers.exact.timed.reach import distances

    problem = _problem(inst)
    dist = distances(problem.num_nodes, problem.src, problem.dst, problem.delay)
    r = reach(problem, problem.delay)
    earliest = np.full((problem.num_chunks, problem.num_nodes), np.inf)
    togo = np.full((problem.num_chunks, problem.num_nodes), np.inf)
    for c, u in zip(*problem.holders.pairs()):
        earliest[c] = np.minimum(earliest[c], dist[u])
    for c, w in zip(problem.need_chunk, problem.need_node):
        togo[c] = np.minimum(togo[c], dist[:, w])
    assert np.array_equal(r.earliest, earliest) and np.array_equal(r.togo, togo)


@pytest.mark.parametrize("kind", ["allgather", "alltoall", "broadcast", "reducescatter", "gather"])
def test_earliest_and_togo_match_a_minimum_over_every_pair(kind):
    """``reach``'s tables, computed per chunk or all at once where a chunk has one holder or one
    needing node (AlltoAll), against the plain minimum over every (chunk, holder) and (chunk,
    needing node) pair of the all-pairs distances, on links of two speeds."""
    from optcoll.producers.exact.timed.reach import distances

    machine = G.torus([3, 2], [BW, 2 * BW], [LAT, 3 * LAT])
    inst = instance(machine, kind, root=0 if kind in ("broadcast", "gather") else None)
    problem = _problem(inst)
    r = reach(problem, problem.delay)
    dist = distances(problem.num_nodes, problem.src, problem.dst, problem.delay)
    earliest = np.full((problem.num_chunks, problem.num_nodes), np.inf)
    for c, w in zip(*problem.holders.pairs()):
        earliest[c] = np.minimum(earliest[c], dist[w])
    togo = np.full((problem.num_chunks, problem.num_nodes), np.inf)
    for c, w in zip(problem.need_chunk, problem.need_node):
        togo[c] = np.minimum(togo[c], dist[:, w])
    assert np.array_equal(r.earliest, earliest) and np.array_equal(r.togo, togo)
