"""What an exact solver hands back, before the shared verifier has seen its schedule.

A solver claims a status and a lower bound *in the model it solved*; the results layer verifies
the schedule and decides the words (optimal / bounded) from the verified time and the proof.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from optcoll.schedules.schedule import Schedule

#: optimal: the schedule's value equals the proven bound in the solved model.
#: feasible: a schedule plus a bound that may differ (time limit, quantum rounding).
#: infeasible: proved no schedule exists within the asked limits (horizon, steps, rounds).
#: unknown: neither a schedule nor a proof within the budget.
STATUSES = ("optimal", "feasible", "infeasible", "unknown")

#: What an exact solver tells its caller each time its incumbent or bound improves: (wall seconds
#: since it started, incumbent or None, proven bound or None; seconds in the timed model, step
#: cost in the step model), one ``trace`` sample. (A
#: backend's raw objective values are ``toolkit.backends.ObjectiveProgress``; a long command's
#: display on stderr is ``sweeps.progress.ProgressDisplay``.)
Progress = Callable[[float, float | None, float | None], None]


@dataclass(frozen=True)
class SolverOutcome:
    status: str
    schedule: Schedule | None
    #: Proven lower bound on the schedule time in seconds (timed model) or on the step cost.
    lower_bound: float | None
    lower_bound_source: str
    model: str  # "timed" | "step"
    solver: str
    solver_version: str
    wall_time: float
    #: Time quantum in seconds for time-expanded encodings (None when exact or step model).
    quantum: float | None = None
    #: Producer parameters needed to reproduce the number: time_limit, threads, seed, C, S, R, ...
    params: dict[str, Any] = field(default_factory=dict)
    #: Progress samples (wall seconds, incumbent seconds, bound seconds) for plots and logs.
    trace: tuple[tuple[float, float | None, float | None], ...] = ()
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown solver status {self.status!r}")
