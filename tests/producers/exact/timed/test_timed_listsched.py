"""List scheduling: the fallback greedy gives verified schedules no better than the optimum, and
retiming keeps a schedule valid and never makes it slower."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optcoll.producers.exact.timed.solve import solve_timed
from optcoll.producers.exact.timed.grid import choose_grids, seconds_grid
from optcoll.producers.calendar import Runs, Windows
from optcoll.producers.exact.timed.listsched import Transfers, greedy, retime
from optcoll.producers.exact.timed.reverse import essential, from_schedule, to_schedule
from optcoll.producers.exact.timed.solve import _problem
from optcoll.producers.registry import get_synthesizer
from optcoll.machines import generators as G
from optcoll.verify import verify

from solver_checks import proof_budget
from timed_helpers import BW, LAT, instance, small_instances

INSTANCES = small_instances()


@pytest.mark.parametrize("inst", INSTANCES, ids=[i.name for i in INSTANCES])
def test_greedy_is_valid_and_no_better_than_the_optimum(inst):
    problem = _problem(inst)
    for grid in (seconds_grid(problem), choose_grids(problem)[0]):
        transfers = greedy(problem, grid)
        true = retime(problem, seconds_grid(problem), transfers)
        result = verify(inst.machine, inst.collective, to_schedule(problem, true), inst.model)
        assert result.valid, result.violation
        assert result.time >= solve_timed(inst, budget=proof_budget()).lower_bound * (1 - 1e-9)


@pytest.mark.parametrize("inst", INSTANCES, ids=[i.name for i in INSTANCES])
def test_retiming_a_registry_schedule_keeps_it_valid_and_never_slower(inst):
    schedule = get_synthesizer("tacos")(inst, 3)
    before = verify(inst.machine, inst.collective, schedule, inst.model)
    assert before.valid
    problem = _problem(inst)
    true = retime(problem, seconds_grid(problem), from_schedule(problem, schedule))
    after = verify(inst.machine, inst.collective, to_schedule(problem, true), inst.model)
    assert after.valid, after.violation
    assert after.time <= before.time * (1 + 1e-9)


def test_retime_rejects_a_sender_that_never_holds_the_chunk():
    inst = instance(G.line(3, BW, LAT))
    problem = _problem(inst)
    link = int(inst.machine.links_between(1, 2)[0])
    bogus = Transfers(np.array([0]), np.array([link]), np.array([0.0]))  # chunk 0 starts at node 0
    with pytest.raises(ValueError, match="before it arrives"):
        retime(problem, seconds_grid(problem), bogus)


def test_essential_keeps_one_delivery_per_node_and_drops_dead_ends():
    inst = instance(G.ring(4, BW, LAT))
    problem = _problem(inst)
    grid = seconds_grid(problem)
    ab, ba = (int(inst.machine.links_between(*pair)[0]) for pair in ((0, 1), (1, 0)))
    bc = int(inst.machine.links_between(1, 2)[0])
    tau = float(grid.delay[ab])
    # chunk 0: 0→1 twice (the second is redundant), 1→2, and 1→0 back to its holder (useless).
    t = Transfers(np.array([0, 0, 0, 0]), np.array([ab, ab, bc, ba]), np.array([0.0, tau, tau, 2 * tau]))
    kept = essential(problem, t, grid.delay)
    assert sorted(zip(kept.link.tolist(), kept.start.tolist())) == sorted([(ab, 0.0), (bc, tau)])


def _earliest(resource, ready: float, length: float) -> float:
    """``Calendar.fit`` for one resource: the earliest start ≥ ready of a free [t, t + length)."""
    t = ready
    while (until := resource.blocked_until(t, t + length)) is not None:
        t = until
    return t


window = st.tuples(st.integers(0, 60), st.integers(1, 12))


@settings(max_examples=150, deadline=None, derandomize=True)
@given(st.lists(window, max_size=25), st.lists(window, min_size=1, max_size=10))
def test_link_runs_give_the_earliest_start_stepping_window_by_window_gives(placed, asked):
    """A link's merged runs answer every fit exactly as the plain window list does, also after
    touching, nested and overlapping reservations (which merge)."""
    runs, windows = Runs(), Windows(1)
    for start, length in placed:
        for resource in (runs, windows):
            resource.add(float(start), float(start + length))
    for ready, length in asked:
        earliest = _earliest(windows, float(ready), float(length))
        assert _earliest(runs, float(ready), float(length)) == earliest
        assert runs.blocked_until(earliest, earliest + length) is None
    assert all(a < b < c for a, b, c in zip(runs.starts, runs.ends, runs.starts[1:]))  # disjoint, not touching


@settings(max_examples=150, deadline=None, derandomize=True)
@given(st.integers(1, 12), st.lists(st.integers(0, 200), max_size=30), st.lists(st.integers(0, 200), min_size=1,
                                                                                 max_size=10))
def test_runs_of_one_width_merge_dead_gaps_and_still_give_the_same_earliest_start(width, placed, asked):
    """A link whose windows all have one width (``Runs(width)``) merges gaps narrower than it:
    every earliest start is still the one the plain window list gives."""
    runs, windows = Runs(float(width)), Windows(1)
    for ready in placed:  # placed as a list scheduler would: each at its earliest start
        start = _earliest(windows, float(ready), float(width))
        assert _earliest(runs, float(ready), float(width)) == start
        for resource in (runs, windows):
            resource.add(start, start + width)
    for ready in asked:
        assert _earliest(runs, float(ready), float(width)) == _earliest(windows, float(ready), float(width))
    assert all(b + width <= c for b, c in zip(runs.ends, runs.starts[1:]))  # every gap left is usable
