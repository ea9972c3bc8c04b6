"""Result records: the only way a number about a schedule reaches a person or a file.

A producer's schedule is run through the shared verifier here; the status words follow docs/model.md
§6: "optimal" only with a proof in the stated model, "bounded" for a verified schedule
plus a different proven bound, "heuristic" for a verified schedule with only analytic bounds.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import date
from typing import Any

import optcoll
from optcoll.errors import ScheduleRejected
from optcoll.instances.clock import Clock
from optcoll.instances.instance import Instance
from optcoll.results.outcome import SolverOutcome
from optcoll.schedules.schedule import Schedule

#: Relative tolerance under which a verified time "meets" a proven bound.
MEET_TOLERANCE = 1e-9


@dataclass(frozen=True)
class Result:
    instance: str
    producer: str
    status: str  # optimal | bounded | heuristic | infeasible | unknown | failed
    model: str
    time: float | None  # verified seconds (timed) or step cost (step model)
    lower_bound: float | None
    lower_bound_source: str
    wall_time: float
    params: dict[str, Any] = field(default_factory=dict)
    solver: str | None = None
    solver_version: str | None = None
    quantum: float | None = None
    steps: int | None = None
    rounds: int | None = None
    notes: tuple[str, ...] = ()
    optcoll_version: str = optcoll.__version__
    date: str = field(default_factory=lambda: date.today().isoformat())

    @property
    def gap(self) -> float | None:
        """time / lower bound − 1 (0 for optimal); None without both numbers."""
        if self.time is None or not self.lower_bound:
            return None
        return self.time / self.lower_bound - 1.0

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["notes"] = list(self.notes)
        data["gap"] = self.gap
        return data


def meets(time: float, bound: float) -> bool:
    return abs(time - bound) <= MEET_TOLERANCE * max(abs(time), abs(bound), 1e-30)


def verified(instance: Instance, schedule: Schedule, producer: str):
    """The shared verifier's verdict on a producer's schedule (every path to a number about a
    schedule goes through here); ``ScheduleRejected``, with the first violation as
    ``.violation``, names the producer and the instance."""
    from optcoll.verify import require_valid

    try:
        return require_valid(instance.machine, instance.collective, schedule, instance.model)
    except ScheduleRejected as rejected:
        error = ScheduleRejected(f"{producer} produced an invalid schedule for {instance.name}: "
                                 f"{rejected.violation.message}")
        error.violation = rejected.violation  # type: ignore[attr-defined]
        raise error from None


def evaluate_schedule(instance: Instance, producer: str, schedule: Schedule, wall_time: float,
                      params: dict[str, Any] | None = None) -> Result:
    """A heuristic's schedule, verified, against the best analytic lower bound."""
    from optcoll.bounds import best_lower_bound

    verification = verified(instance, schedule, producer)
    bound = best_lower_bound(instance.machine, instance.collective, instance.model)
    status = "optimal" if instance.model.kind == "timed" and meets(verification.time, bound.value) \
        else "heuristic"
    return Result(instance.name, producer, status, schedule.model, verification.time, bound.value,
                  bound.name, wall_time, dict(params or {}), steps=schedule.num_steps or None,
                  rounds=sum(schedule.rounds) if schedule.rounds else None)


def evaluate_outcome(instance: Instance, producer: str, outcome: SolverOutcome, clock: Clock | None = None) -> Result:
    """An exact solver's claim, with its schedule verified and its status checked against it; the
    analytic bounds it is checked against are those computed within the job's ``clock``."""
    base = dict(instance=instance.name, producer=producer, model=outcome.model,
                wall_time=outcome.wall_time, params=dict(outcome.params), solver=outcome.solver,
                solver_version=outcome.solver_version, quantum=outcome.quantum,
                notes=outcome.notes)
    bound, source = outcome.lower_bound, outcome.lower_bound_source
    if outcome.model == "timed":  # the step model's bounds are the solver's own
        from optcoll.bounds import best_lower_bound

        analytic = best_lower_bound(instance.machine, instance.collective, instance.model, clock)
        if bound is None or analytic.value > bound:
            bound, source = analytic.value, analytic.name
    if outcome.schedule is None:
        status = outcome.status if outcome.status in ("infeasible", "unknown") else "unknown"
        return Result(status=status, time=None, lower_bound=bound, lower_bound_source=source, **base)
    verification = verified(instance, outcome.schedule, producer)
    time = verification.time
    if bound is not None and time < bound * (1 - MEET_TOLERANCE) - 1e-15:
        raise ScheduleRejected(f"{producer}: verified time {time} is below the proven lower bound "
                               f"{bound} ({source}) on {instance.name} — a bug in a bound or a solver")
    status = "optimal" if bound is not None and meets(time, bound) else "bounded"
    if outcome.status == "optimal" and status != "optimal":
        raise ScheduleRejected(f"{producer} claims optimal on {instance.name}, but its verified time "
                               f"{time} does not meet its bound {bound} ({source})")
    schedule = outcome.schedule
    return Result(status=status, time=time, lower_bound=bound, lower_bound_source=source,
                  steps=schedule.num_steps or None,
                  rounds=sum(schedule.rounds) if schedule.rounds else None, **base)
