"""The timed solver's first schedules under its clock: each start producer gets a share of the
time left, and a start made in time is kept (issue 37: a job ends within 10 % of its limit)."""
from __future__ import annotations

import itertools

import pytest

from optcoll.instances.budget import Budget
from optcoll.instances.clock import Clock, OutOfTime, running
from optcoll.machines import generators as G
from optcoll.producers.exact.timed import solve as timed
from optcoll.producers.exact.timed.grid import seconds_grid
from timed_helpers import BW, LAT, instance, verified


def _ticking(time_limit: float) -> Clock:
    """A clock whose time advances one second at each reading: how far a producer gets is then
    the number of clock checks it makes, the same on any machine and under any load."""
    reads = itertools.count()
    return Clock(Budget(time_limit=time_limit), now=lambda: float(next(reads)))


def test_a_slow_start_producer_is_stopped_at_its_share_and_the_others_still_run():
    """On an 8x8 torus AlltoAll tacos checks the clock 4,767 times, tacos+ 3 and mcf 66: with
    300 readings, tacos stops at its third and the other two still make their starts (before,
    tacos alone ran into the limit and no start was made at all)."""
    inst = instance(G.torus([8, 8], BW, LAT), "alltoall")
    problem, notes = timed._problem(inst), []
    clock = _ticking(300.0)
    with running(clock):
        made = [name for name, _ in timed._starts(inst, problem, 0, None, notes, 0.0, clock)]
    assert made == ["tacos+", "mcf"]
    assert notes == ["tacos stopped as a start: its share of the time limit (99 s of 300 s) reached"]


def test_a_start_made_in_time_is_kept_when_the_clock_ends_while_retiming_it():
    """Retiming a start to its earliest times checks the clock; when it ends there, the start is
    kept with the times its producer gave it, and it verifies. A user's hint, valid only once
    retimed, is then left out with a note."""
    inst = instance(G.torus([4, 4], BW, LAT), "alltoall")
    run = timed._Run(inst, "cpsat", _ticking(1.0), timed._Trace(0.0, None))
    made = list(timed._starts(inst, run.problem, 0, None, [], 0.0))[:1]
    start = made[0][1]
    with running(run.clock), pytest.raises(OutOfTime):  # its first check finds the clock ended
        run.offer(start)
    assert run.best is None
    with running(run.clock):
        assert run._offer_starts([*made, ("hint", start)]) == made[0][0]
    assert run.makespan() == start.makespan(seconds_grid(run.problem))
    assert verified(inst, run.outcome("feasible")) <= run.makespan() * (1 + 1e-9)
    assert run.notes == ["hint not used as a start: the time limit (1 s) reached before it was checked"]


def test_with_time_left_every_start_is_retimed_and_the_first_fastest_kept():
    """Retimed, a start is never slower than as made; the first of the fastest is kept."""
    inst = instance(G.torus([4, 4], BW, LAT), "alltoall")
    run = timed._Run(inst, "cpsat", _ticking(1e6), timed._Trace(0.0, None))
    made = list(timed._starts(inst, run.problem, 0, None, [], 0.0))
    grid = seconds_grid(run.problem)
    retimed = [timed.retime(run.problem, grid, t).makespan(grid) for _, t in made]
    assert all(r <= t.makespan(grid) * (1 + 1e-12) for r, (_, t) in zip(retimed, made))
    with running(run.clock):
        kept = run._offer_starts(made)
    assert kept == made[retimed.index(min(retimed))][0] and run.makespan() == min(retimed)
