"""The one limits object of a job (``optcoll.instances.clock``), on a fake time source: the same
answers on any machine and under any load."""
from __future__ import annotations

import time

import pytest

from optcoll.instances.budget import Budget
from optcoll.instances.clock import Clock, clock_for, process_start

IMPORTED = time.perf_counter()


class FakeTime:
    """A time source that moves only when told to."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_time_left_is_counted_from_the_jobs_start_not_from_when_a_phase_asks():
    time = FakeTime()
    clock = Clock(Budget(time_limit=10.0), start=time.now - 3.0, now=time)  # setup took 3 s already
    assert clock.left() == pytest.approx(7.0) and clock.elapsed() == pytest.approx(3.0)
    phase = clock.part(0.5)
    assert phase.left() == pytest.approx(3.5) and phase.now is time  # a phase reads its parent's time
    time.now += 3.5
    assert phase.expired() and not clock.expired() and clock.left() == pytest.approx(3.5)
    assert phase.limit_reached() == "its share of the time limit (3.5 s of 10 s)"
    time.now += 4.0
    assert clock.expired() and clock.limit_reached() == "the time limit (10 s)"


def test_a_phase_takes_its_share_of_the_work_or_the_work_it_is_given_and_spends_on_every_clock_above():
    clock = Clock(Budget(time_limit=100.0, work_limit=8.0), now=FakeTime())
    equal = clock.part(0.5, work=2.0)
    assert equal.work_left() == pytest.approx(2.0)
    equal.spend_work(1.5)
    assert clock.work_left() == pytest.approx(6.5) and clock.part(0.5).work_left() == pytest.approx(3.25)
    equal.spend_work(1.0)  # over its share: nothing left in the phase, the rest stays above it
    assert equal.expired() and equal.limit_reached() == "the work limit (8)" and clock.work_left() == pytest.approx(5.5)
    capped = clock.capped(5.0)
    assert capped.left() == pytest.approx(5.0) and capped.work_left() == pytest.approx(5.5)
    capped.interrupt()
    assert clock.interrupted and clock.expired() and clock.part(1.0).interrupted


def test_a_running_clock_holds_the_limits_and_refuses_a_second_set():
    clock = Clock(Budget(time_limit=5.0, threads=1), now=FakeTime())
    assert clock_for(Budget(), clock) is clock
    with pytest.raises(TypeError, match="leave threads, time_limit unset"):
        clock_for(Budget(), clock, time_limit=9.0, threads=2, seed=None)
    fresh = clock_for(Budget(time_limit=5.0), None, time_limit=9.0)
    assert fresh.budget.time_limit == 9.0 and fresh.left() > 8.0


def test_a_command_clock_starts_when_its_process_did():
    """Before anything this process did (this module's import among them), so the interpreter's
    start and the imports count against a command's limit."""
    assert process_start() <= IMPORTED


def test_phases_are_booked_on_the_jobs_clock_nested_with_the_time_left():
    """A phase timed on any clock of a job lands on the job's (root) clock, with its start and
    end from the job's start, its depth among the phases open around it and the seconds left
    (negative past the limit); ``on_phase`` hears each as it ends, the inner one first."""
    time = FakeTime()
    clock = Clock(Budget(time_limit=10.0), start=time.now, now=time)
    heard = []
    clock.on_phase = heard.append
    part = clock.part(0.5)
    with clock.phase("outer"):
        time.now += 2.0
        with part.phase("inner"):
            time.now += 3.0
        time.now += 7.0
    clock.record("since the start", clock.start)
    assert [(p.name, p.began, p.ended, p.depth, p.left) for p in clock.phases] == [
        ("inner", 2.0, 5.0, 1, 5.0), ("outer", 0.0, 12.0, 0, -2.0), ("since the start", 0.0, 12.0, 0, -2.0)]
    assert heard == clock.phases and part.phases == [] and clock.phases[0].seconds == 3.0
