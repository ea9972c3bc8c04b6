"""The one shared verifier: every schedule's number is believed only after passing through here.

``verify`` picks the engine: the vectorised one (``fast``) for non-combining collectives whose
sending switches multicast; for everything else the event engine (``events``), run compiled
(``compiled``) from ``COMPILED_FROM`` transfers on. All implement the timed model of docs/model.md
§5 and report the earliest violation in (time, transfer id) order, in the same words.
Step-model schedules (``schedule.rounds`` set) run through the same engines in step time plus the
per-link per-step capacity and per-round port checks, and cost S·α + R·b/B_min.
"""
from __future__ import annotations

import math

import numpy as np

from optcoll.collectives.collective import Collective
from optcoll.errors import ScheduleRejected
from optcoll.instances.instance import TimeModel
from optcoll.machines.machine import Machine
from optcoll.schedules.schedule import Schedule
from optcoll.verify import events, fast, stepmodel
from optcoll.verify.problem import BATCH_TRANSFERS, earliest, prepare
from optcoll.verify.result import Verification
from optcoll.verify.stats import statistics
from optcoll.verify.timing import step_capacity, step_ports

ENGINES = ("auto", "vectorised", "compiled", "events")
#: From this many transfers on, the event engine runs compiled: below it the Python loop takes
#: well under a second, and a process that verifies only small schedules never loads the kernel.
COMPILED_FROM = 20_000


def _compiled_ready() -> bool:
    """Whether the compiled engine may run now (``instances.kernels.may_run``: not compiled first
    under a job's clock); the event engine gives the same verdict."""
    from optcoll.instances.kernels import may_run
    from optcoll.verify import compiled  # numba: loaded only here

    return may_run(compiled)


def verify(machine: Machine, collective: Collective, schedule: Schedule,
           model: TimeModel = TimeModel()) -> Verification:
    """The schedule's time and statistics, or the first violation in words a person can act on."""
    return verify_with(machine, collective, schedule, model, engine="auto")


def require_valid(machine: Machine, collective: Collective, schedule: Schedule,
                  model: TimeModel = TimeModel()) -> Verification:
    """``verify``, raising ``ScheduleRejected`` (with ``.violation``) when the schedule is invalid."""
    result = verify(machine, collective, schedule, model)
    if not result.valid:
        assert result.violation is not None
        error = ScheduleRejected(f"[{result.violation.kind}] {result.violation.message}")
        error.violation = result.violation  # type: ignore[attr-defined]
        raise error
    return result


def verify_with(machine: Machine, collective: Collective, schedule: Schedule, model: TimeModel,
                engine: str = "auto", batch: int = BATCH_TRANSFERS) -> Verification:
    """``verify`` with the engine forced: "vectorised" (only where it applies), "compiled" or "events".

    ``batch`` bounds the transfers the event engine simulates at once and the timing checks sort
    at once (``problem.BATCH_TRANSFERS``); the verdict never depends on it. For tests that check
    the engines and batch sizes against each other, and for timing them.
    """
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    step_model = schedule.rounds is not None
    step_start = weights = rounds = None
    rounds_problem = None
    if step_model:
        stepmodel.check_options(model)
        rounds_problem = stepmodel.bad_rounds(schedule)
        weights = stepmodel.link_weights(machine)
        rounds = np.asarray(schedule.rounds, dtype=np.int64)
        step_start = stepmodel.step_starts(machine, collective, schedule.rounds)
    problem, malformed = prepare(machine, collective, schedule, model, step_start)
    if engine == "auto":
        engine = ("vectorised" if fast.applies(problem) else
                  "compiled" if problem.ids.size >= COMPILED_FROM and _compiled_ready() else "events")
    if engine == "vectorised" and not fast.applies(problem):
        raise ValueError("the vectorised engine applies to non-combining collectives whose sending "
                         "switches multicast")
    first = earliest(rounds_problem, malformed)
    time = math.inf
    if first is None or math.isfinite(first.time):
        if engine == "compiled":
            from optcoll.verify import compiled  # numba: loaded only here
            outcome = compiled.run(problem, batch)
        else:
            outcome = (fast if engine == "vectorised" else events).run(problem, batch)
        capacity = [step_capacity(problem, weights, rounds), step_ports(problem, weights, rounds, "send"),
                    step_ports(problem, weights, rounds, "recv")] if step_model else []
        first = earliest(first, outcome.finding, *capacity)
        if first is None:
            time = float(step_start[-1]) if step_model else outcome.time
    stats = statistics(problem)
    loads = None
    if step_model:
        S, L = schedule.num_steps, machine.num_links
        loads = np.bincount((problem.start.astype(np.int64) - 1) * L + problem.link,
                            minlength=S * L).reshape(S, L)
    return Verification(
        valid=first is None, time=time, violation=None if first is None else first.violation,
        model=schedule.model, path=engine,
        starts=stats.starts, arrivals=stats.arrivals, makespan=stats.makespan,
        link_stats=stats.links, rank_stats=stats.ranks, redundant=stats.redundant,
        steps=schedule.num_steps if step_model else None,
        rounds=int(sum(schedule.rounds)) if step_model else None, step_loads=loads)
