"""One path from a producer run to a verified result record (DESIGN.md section 7: producers
never talk to reports directly; everything passes through the verifier and a result record).

``exact`` runs the exact solver of the instance's time model, ``synthesized`` the best of some
seeds of a synthesizer from the registry; both hand the schedule to ``optcoll.results.record``,
which verifies it and decides the status words. The CLI (``solve``, ``synth``), the sweeps behind
``report`` and ``truth``, ``check``'s built-in synthesizers and the benchmarks all run producers
through here, so a number is produced, verified and named the same way wherever it is shown.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from optcoll.errors import InputError
from optcoll.instances.budget import Budget
from optcoll.instances.instance import Instance
from optcoll.results.outcome import SolverOutcome
from optcoll.results.record import Result, evaluate_outcome, evaluate_schedule
from optcoll.schedules.schedule import Schedule

#: (wall seconds, incumbent or None, proven bound or None), told as a solve improves.
Progress = Callable[[float, float | None, float | None], None]


@dataclass(frozen=True)
class Produced:
    """A verified result and what it was made from."""

    result: Result
    schedule: Schedule | None
    outcome: SolverOutcome | None = None  # an exact solver's own account (trace, notes, params)
    times: tuple[float, ...] = ()  # a synthesizer's verified time per seed, in seed order


def exact(instance: Instance, *, solver: str = "cpsat", budget: Budget | None = None,
          progress: Progress | None = None, quantum: float | None = None, steps: int | None = None,
          rounds: int | None = None, objective: str = "cost") -> Produced:
    """The exact solver of the instance's time model (timed: ``solve_timed``, step:
    ``solve_step`` with its ``steps``, ``rounds`` and ``objective``) within ``budget`` (default:
    the instance's), its schedule verified."""
    budget = budget or instance.budget
    if instance.model.kind == "step":
        if quantum is not None:
            raise InputError("a time quantum applies to the timed model only", field="quantum")
        from optcoll.producers.exact.step import solve_step

        outcome = solve_step(instance, solver=solver, budget=budget, progress=progress, steps=steps,
                             rounds=rounds, objective=objective)
    else:
        if solver == "z3":
            raise InputError("z3 solves the step model only (use the step model)", field="solver")
        for name, value in (("steps", steps), ("rounds", rounds)):
            if value is not None:
                raise InputError(f"{name} apply to the step model only (use the step model)", field=name)
        if objective != "cost":
            raise InputError(f"objective {objective!r} applies to the step model only", field="objective")
        from optcoll.producers.exact.timed.solve import solve_timed

        outcome = solve_timed(instance, solver=solver, budget=budget, progress=progress, quantum=quantum)
    return Produced(evaluate_outcome(instance, f"exact-{outcome.model}", outcome), outcome.schedule, outcome)


def synthesized(instance: Instance, algo: str, runs: int = 1, seed: int | None = None,
                params: dict[str, Any] | None = None, *, portfolio: bool = False) -> Produced:
    """The best verified schedule of synthesizer ``algo`` over ``runs`` seeds from ``seed``
    (default: the instance's budget seed); ``params`` are recorded with the result.
    ``portfolio``: every other synthesizer of the collective runs too and the best schedule of
    all is kept (``registry.best_of``); the producer then names who made it."""
    from optcoll.producers.registry import best_of, get_synthesizer

    first = instance.budget.seed if seed is None else seed
    start = time.perf_counter()
    schedule, times = best_of(instance, get_synthesizer(algo), runs, first, portfolio)
    wall = time.perf_counter() - start
    producer = f"{algo} portfolio (best: {schedule.meta.get('producer', algo)})" if portfolio else algo
    recorded = {"runs": len(times), "seed": first} if params is None else params
    return Produced(evaluate_schedule(instance, producer, schedule, wall, recorded), schedule,
                    times=tuple(float(t) for t in times))
