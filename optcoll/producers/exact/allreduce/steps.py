"""Least steps of a direct AllReduce in the step model with one round per step (SCCL's R = S).

SCCL's combining semantics (issue 13): in each step a rank sends its current partial sum, the
receiver reduces it into its own or replaces its own with it, and every contribution is counted
exactly once; this is the direct model (``encoding``) on a step grid. The search asks S = L, L+1,
... until a schedule exists, L the larger of the hop latency and the analytic bounds in steps,
so every S below the answer is proven infeasible. Without plain switches the step grid is the
step model itself (sends in step s see exactly the deliveries of steps before s), so the answer
is the least S; with plain switches the model forwards every arrival in the next step, and the
answer is the least S of those schedules only (its status says "feasible").
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable

from optcoll.bounds import best_lower_bound
from optcoll.instances.clock import Clock
from optcoll.instances.instance import Instance
from optcoll.producers.exact.allreduce.problem import step_problem
from optcoll.producers.exact.allreduce.solve import TooSlowToBuild, solve
from optcoll.producers.exact.allreduce.transfers import to_schedule
from optcoll.producers.exact.memory import ModelTooLarge
from optcoll.producers.exact.toolkit import solver_version
from optcoll.results.outcome import SolverOutcome

#: (wall seconds, incumbent step cost or None, proven bound or None)
Progress = Callable[[float, float | None, float | None], None]


def least_steps(instance: Instance, *, steps: int | None, clock: Clock,
                progress: Progress | None = None) -> SolverOutcome:
    """The least S (``steps``: that S only) of a direct AllReduce with one round per step, within
    ``clock`` (its time and work left, its budget's threads, seed and memory limit)."""
    began = time.perf_counter()
    problem = step_problem(instance)
    per_step = problem.quantum
    analytic = best_lower_bound(instance.machine, instance.collective, instance.model, clock)
    hops = int(problem.reach()[:, problem.member_index() >= 0].max(initial=0))
    first = max(1, hops, math.ceil(analytic.value / per_step * (1 - 1e-9)))
    first = max(first, steps or 0)
    notes = [f"steps from {first}: the larger of the farthest contribution ({hops} step(s)) and the "
             f"{analytic.name} bound ({analytic.value / per_step:.4g} steps of {per_step:g} s)"]
    params = {**clock.limits(), "objective": "steps",
              "steps_limit": steps, "family": "direct", "restrictions": list(problem.restrictions)}
    proven, found, S = first, None, first
    trace: list[tuple[float, float | None, float | None]] = []
    try:
        while found is None and (steps is None or S <= steps):
            if clock.expired():
                if not clock.interrupted:
                    notes.append(f"{clock.limit_reached()} reached before S = {S}")
                break
            out, best = solve(problem, S, S, clock)
            notes.append(f"S = {S}: {out.status} ({out.size.variables} variables, {out.wall:.2f} s)")
            if best is not None:
                found = best
            elif out.status == "infeasible":
                proven = S + 1
                S += 1
            else:
                break
            row = (time.perf_counter() - began, None if found is None else S * per_step, proven * per_step)
            trace.append(row)
            if progress is not None:
                progress(*row)
            if clock.interrupted:
                break
    except ModelTooLarge as refused:
        notes.append(f"memory limit at S = {S}: {refused.detail}")
    except TooSlowToBuild as slow:
        notes.append(f"time limit at S = {S}: {slow}")
    except KeyboardInterrupt:
        clock.interrupt()
    params.update(clock.work_params())
    if clock.interrupted:
        notes.append("interrupted: returning the best schedule so far and the proven bound")
    schedule = None
    if found is not None:
        schedule = to_schedule(problem, found, producer="exact-step", solver="cpsat", objective="steps",
                               family="direct")
        params.update(S=found.makespan(problem), R=found.makespan(problem))
    exact = not problem.restrictions
    optimal = found is not None and exact and found.makespan(problem) <= proven
    status = "optimal" if optimal else "feasible" if found is not None else (
        "infeasible" if steps is not None and proven > steps else "unknown")
    where = f" with S = {steps}" if steps is not None else ""
    source = (f"step model, least steps with one round per step{where}: direct AllReduce model (CP-SAT) "
              f"proves S < {proven} infeasible")
    if not exact:
        source += f" among schedules where {', '.join(problem.restrictions)}"
    bound = proven * per_step if exact else first * per_step
    return SolverOutcome(status, schedule, bound, source, "step", "cpsat", solver_version("cpsat"),
                         time.perf_counter() - began, None, params, tuple(trace), tuple(notes))
