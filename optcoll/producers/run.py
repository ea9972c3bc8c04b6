"""One path from a producer run to a verified result record (docs/model.md §7: producers
never talk to reports directly; everything passes through the verifier and a result record).

``exact`` runs an exact formulation (``formulations``: the instance's time model's by default),
``synthesized`` the best of some seeds of a synthesizer from the registry; both hand the schedule
to ``optcoll.results.record``, which verifies it and decides the status words. The CLI (``solve``, ``synth``), the sweeps behind
``report`` and ``truth``, ``check``'s built-in synthesizers and the benchmarks all run producers
through here, so a number is produced, verified and named the same way wherever it is shown.

An instance that leaves C free (``optcoll.instances.chunks``) runs here at each allowed C, each
schedule verified at its own C (``over_chunks``): the fastest verified schedule wins and names its
C; the bound is the least over C of the per-C bounds, so "optimal" needs the winner to meet that
least bound. The exact solver solves in increasing C, each C with an equal share of the time
left (what a C proven early leaves goes to the next; a deterministic work limit is split
equally); an interrupt or the time limit stops at the C being solved, and the C values not
reached count in the least bound with their analytic bound. A timed AllReduce is the exception:
every C is reached, those after the limit sharing ``late_grace`` (the slack a job may take over its
limit), time for the producers' start schedules (``exact.timed.start``) and no model, so the answer
is never slower than a producer at any allowed C (issue 34) unless even that grace ends; a note
then names the producers not run.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from optcoll.instances.budget import Budget
from optcoll.instances.clock import Clock, clock_for, running
from optcoll.instances.instance import Instance
from optcoll.producers.formulations import choose
from optcoll.results.outcome import Progress, SolverOutcome
from optcoll.results.record import Result, evaluate_outcome, evaluate_schedule, meets
from optcoll.schedules.schedule import Schedule
from optcoll.units import format_time


def late_grace(time_limit: float) -> float:
    """Seconds the C values a C-free timed AllReduce reaches after its limit share, for their
    start schedules only (module docstring): the slack a job may take over its limit, 10 % or 2 s."""
    return max(2.0, 0.1 * time_limit)


@dataclass(frozen=True)
class Produced:
    """A verified result and what it was made from."""

    result: Result
    schedule: Schedule | None
    outcome: SolverOutcome | None = None  # an exact solver's own account (trace, notes, params)
    times: tuple[float, ...] = ()  # a synthesizer's verified time per seed, in seed order


def exact(instance: Instance, *, solver: str = "cpsat", budget: Budget | None = None,
          progress: Progress | None = None, quantum: float | None = None, steps: int | None = None,
          rounds: int | None = None, objective: str = "cost", clock: Clock | None = None,
          formulation: str | None = None) -> Produced:
    """The exact ``formulation`` (``producers.formulations``; default: the instance's time
    model's, ``solve_timed`` or ``solve_step`` with its ``steps``, ``rounds`` and ``objective``)
    within ``clock`` (the job's, started where the job started; default: a clock started now from
    ``budget``, default the instance's), its schedule verified."""
    clock = clock_for(budget or instance.budget, clock)
    if instance.chunk_choices:
        budget = clock.budget
        count = len(instance.chunk_choices)

        late: list[Clock] = []  # the grace clock of the C values reached after the limit

        def at(fixed: Instance, left: int) -> Produced:  # the time left, shared by the C values left
            if not clock.expired():
                share = clock.part(1.0 / left, work=budget.work_limit and budget.work_limit / count)
            else:
                if not late:
                    late.append(clock_for(budget.overridden(time_limit=late_grace(budget.time_limit))))
                share = late[0].part(1.0 / left)
            return exact(fixed, solver=solver, progress=progress, quantum=quantum, steps=steps,
                         rounds=rounds, objective=objective, clock=share, formulation=formulation)
        every_c = instance.collective.kind == "allreduce" and instance.model.kind == "timed"
        produced = over_chunks(instance, at, None if every_c else clock)  # the record names the whole budget
        result = produced.result
        return replace(produced, result=replace(result, params={**result.params, **budget.to_params()}))
    chosen = choose(instance, formulation)
    outcome = chosen.solve(instance, clock, {"solver": solver, "progress": progress, "quantum": quantum,
                                             "steps": steps, "rounds": rounds, "objective": objective})
    with clock.phase("verify the answer"), running(clock):  # running: no first compile under the limit
        result = evaluate_outcome(instance, f"exact-{outcome.model}", outcome, clock)
    if clock.root.interpreted:
        result = replace(result, notes=result.notes + (
            f"ran interpreted under the time limit: {', '.join(sorted(clock.root.interpreted))} compiled kernels "
            "not in numba's cache (a first compile takes 20-40 s that no limit can stop); `optcoll warm` "
            "compiles them once",))
    return Produced(result, outcome.schedule, outcome)


def synthesized(instance: Instance, algo: str, runs: int = 1, seed: int | None = None,
                params: dict[str, Any] | None = None, *, portfolio: bool = False) -> Produced:
    """The best verified schedule of synthesizer ``algo`` over ``runs`` seeds from ``seed``
    (default: the instance's budget seed); ``params`` are recorded with the result.
    ``portfolio``: every other synthesizer of the collective runs too and the best schedule of
    all is kept (``registry.best_of``); the producer then names who made it."""
    from optcoll.producers.registry import best_of, get_synthesizer

    if instance.chunk_choices:
        return over_chunks(instance, lambda fixed, _: synthesized(fixed, algo, runs, seed, params,
                                                                   portfolio=portfolio))
    from optcoll.producers.size import require_fits

    require_fits(instance)
    first = instance.budget.seed if seed is None else seed
    start = time.perf_counter()
    schedule, times = best_of(instance, get_synthesizer(algo), runs, first, portfolio)
    wall = time.perf_counter() - start
    producer = f"{algo} portfolio (best: {schedule.meta.get('producer', algo)})" if portfolio else algo
    recorded = {"runs": len(times), "seed": first} if params is None else params
    return Produced(evaluate_schedule(instance, producer, schedule, wall, recorded), schedule,
                    times=tuple(float(t) for t in times))


def over_chunks(instance: Instance, produce: Callable[[Instance, int], Produced],
                clock: Clock | None = None) -> Produced:
    """``produce(fixed instance, how many C values are left)`` at each allowed C of a C-free
    instance, in increasing C, until an interrupt or the end of ``clock``; the
    fastest verified schedule (the smaller C on a tie) with the least of the per-C bounds
    (module docstring)."""
    from optcoll.instances.chunks import choices
    from optcoll.producers.chunks import least_words

    allowed = choices(instance)
    runs = _runs_over_chunks(instance, produce, clock, allowed)
    bound_c, bound, source = _least_chunk_bound(instance, runs, allowed)
    timed = [(p.result.time, c, p) for c, p in runs if p.result.time is not None]
    chosen_c, chosen = min(timed, key=lambda t: (t[0], t[1]))[1:] if timed else runs[0]
    result = chosen.result
    notes = tuple(f"C={c}: " + (f"{format_time(p.result.time)} ({p.result.status} at that C)"
                                if p.result.time is not None else p.result.status) for c, p in runs)
    reached = {c for c, _ in runs}
    if reached != set(allowed):
        notes += (f"stopped before C={', '.join(str(c) for c in allowed if c not in reached)} "
                  "(interrupted or out of time); their analytic bounds count in the least bound",)
    params = {**result.params, "chunks_per_rank": chosen_c, "chunk_choices": list(allowed),
              "bound_chunks": bound_c}
    chosen_result = replace(result, instance=instance.name, status=_status_over_chunks(instance, chosen, bound),
                            lower_bound=bound, lower_bound_source=f"{source} at C={bound_c}; {least_words(allowed)}",
                            wall_time=sum(p.result.wall_time for _, p in runs), params=params,
                            notes=result.notes + notes)
    schedule = chosen.schedule.with_meta(chunks_per_rank=chosen_c) if chosen.schedule is not None else None
    return Produced(chosen_result, schedule, chosen.outcome, chosen.times)


def _runs_over_chunks(instance: Instance, produce: Callable[[Instance, int], Produced], clock: Clock | None,
                      allowed) -> list[tuple[int, Produced]]:
    """(C, what ``produce`` made at C) in increasing C, until an interrupt or the clock's end
    (the first C always runs)."""
    from optcoll.producers.chunks import at_chunks

    runs: list[tuple[int, Produced]] = []
    for i, c in enumerate(allowed):
        if i and clock is not None and clock.expired():
            break
        produced = produce(at_chunks(instance, c), len(allowed) - i)
        runs.append((c, produced))
        if produced.outcome is not None and produced.outcome.params.get("interrupted"):
            break
    return runs


def _least_chunk_bound(instance: Instance, runs: list[tuple[int, Produced]], allowed
                       ) -> tuple[int, float, str]:
    """(C, bound, source) of the least per-C bound: each C's own run, or where a C was not run
    (or gave none) when not every C did, its analytic bound."""
    from optcoll.producers.chunks import at_chunks, least_bound

    bounds = {c: (p.result.lower_bound, p.result.lower_bound_source) for c, p in runs
              if p.result.lower_bound is not None}
    if {c for c, _ in runs} != set(allowed) or len(bounds) < len(allowed):
        for c in tuple(c for c in allowed if c not in bounds):
            analytic = least_bound(at_chunks(instance, c))
            bounds[c] = (analytic.value, analytic.name)
    bound_c = min(bounds, key=lambda c: (bounds[c][0], c))
    return (bound_c, *bounds[bound_c])


def _status_over_chunks(instance: Instance, chosen: Produced, bound: float) -> str:
    """The chosen schedule's status against the least bound over every C: optimal when it meets
    it (an exact solver's, or any schedule in the timed model); an exact solver's optimum at its
    own C that does not is only bounded, a heuristic's only heuristic."""
    result = chosen.result
    if result.time is None:
        return result.status
    exact = chosen.outcome is not None
    if meets(result.time, bound) and (exact or instance.model.kind == "timed"):
        return "optimal"
    if result.status == "optimal":
        return "bounded" if exact else "heuristic"
    return result.status
