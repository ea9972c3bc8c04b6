"""Least steps of a direct AllReduce in the step model with one round per step (SCCL's R = S).

Partial sums as in docs/model.md §5.4 (issue 13): in each step a rank sends its current partial
sum, the receiver reduces it into its own or (``combining = "copy-or-reduce"``, the default)
replaces its own with it, and every contribution is counted exactly once; this is the direct model
(``encoding``) on a step grid. The search asks S = L, L+1, ... until a schedule exists, L the hop
latency (and, once S = L is refuted, the analytic bounds in steps), so every S below the answer
is proven infeasible. Without plain switches the step grid is the
step model itself (sends in step s see exactly the deliveries of steps before s), so the answer
is the least S; with plain switches the model forwards every arrival in the next step, and the
answer is the least S of those schedules only (its status says "feasible").

With ``model.combining = "reduce-only"`` (SCCL's own rules: nothing is overwritten) a schedule
may exist at no S at all. On Line(3) rank 1 must relay rank 2's contribution to rank 0 in a
partial without rank 0's, and rank 0's to rank 2 in one without rank 2's; its partial only grows,
so it can never hold the one without the other's already being there (SCCL's search, which asks
S = 1, 2, ..., never ends). Partial sums only grow under these rules
and every delivery adds a contribution its receiver lacked, so dropping the steps that deliver
nothing keeps a schedule valid: a schedule exists at some S iff one exists within ``ceiling``
steps, the number of (chunk, node, contribution) triples not held at the start. That horizon is
asked once the models that refuted S = L, L+1, ... are together as large as the ceiling's (in
variables): the first questions are often the answer and far cheaper (HubAndSpoke(8) refutes S =
1, 2 and answers 3 in about 1 s; its 56-step ceiling model took 22 s), and by the doubling argument
the search then spends at most about twice what the better of the two orders would. Infeasible
there proves "no schedule at any S"; otherwise its schedule bounds the upward search.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable

from optcoll.instances.clock import Clock
from optcoll.instances.instance import Instance
from optcoll.producers.exact.allreduce import encoding
from optcoll.producers.exact.allreduce.problem import DirectProblem, step_problem
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
    hops = int(problem.reach()[:, problem.member_index() >= 0].max(initial=0))
    first = max(1, hops, steps or 0)
    notes = [f"steps from {first}: the farthest contribution ({hops} step(s))"]
    params = {**clock.limits(), "objective": "steps",
              "steps_limit": steps, "family": "direct", "restrictions": list(problem.restrictions)}
    proven, found, S = first, None, first
    trace: list[tuple[float, float | None, float | None]] = []
    fallback, never, last = None, False, None  # reduce-only: the ceiling's schedule and its steps; none at any S
    top = ceiling(problem) if problem.reduce_only and steps is None else None
    ceiling_size = encoding.size(problem, top).variables if top is not None else 0
    refuted = 0  # variables of the models that refuted an S so far
    try:
        while not never and found is None and (steps is None or S <= steps):
            if last is not None and S >= last:
                found = fallback
                break
            if top is not None and top > S and last is None and refuted >= ceiling_size:
                out, fallback = solve(problem, top, top, clock)
                notes.append(f"S = {top} (the ceiling of reduce-only schedules): {out.status} "
                             f"({out.size.variables} variables, {out.wall:.2f} s)")
                never = out.status == "infeasible"
                if fallback is None and not never:
                    raise TimeoutError("the ceiling question was not settled")
                last = None if fallback is None else fallback.makespan(problem)
                continue
            if clock.expired():
                if not clock.interrupted:
                    notes.append(f"{clock.limit_reached()} reached before S = {S}")
                break
            out, best = solve(problem, S, S, clock)
            notes.append(f"S = {S}: {out.status} ({out.size.variables} variables, {out.wall:.2f} s)")
            if best is not None:
                found = best
            elif out.status == "infeasible":
                refuted += out.size.variables
                proven = S + 1
                never = top is not None and S >= top
                S += 1
                if S == first + 1 and steps is None:  # the hop bound was not the answer: the analytic bounds
                    S = proven = _analytic_start(instance, S, per_step, notes)
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
    except TimeoutError as why:
        notes.append(f"time limit: {why}")
    except KeyboardInterrupt:
        clock.interrupt()
    if found is None and fallback is not None:  # stopped early: the ceiling's schedule still stands
        found = fallback
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
        "infeasible" if (steps is not None and proven > steps) or (never and exact) else "unknown")
    where = f" with S = {steps}" if steps is not None else " over every S"
    rules = ("SCCL's combining rules (reduce-only: no copy overwrites a partial sum)" if problem.reduce_only
             else "copy-or-reduce combining")
    proof = (f"proves no schedule at any S (none within the ceiling of {top} steps)" if never
             else f"proves S < {proven} infeasible")
    source = (f"step model, least steps with one round per step at C = {instance.collective.chunks_per_rank}"
              f"{where}, {rules}: direct AllReduce model (CP-SAT) {proof}")
    if not exact:
        source += f" among schedules where {', '.join(problem.restrictions)}"
    bound = None if never else proven * per_step if exact else first * per_step
    return SolverOutcome(status, schedule, bound, source, "step", "cpsat", solver_version("cpsat"),
                         time.perf_counter() - began, None, params, tuple(trace), tuple(notes))


def ceiling(problem: DirectProblem) -> int:
    """Under reduce-only, the most steps a schedule needs if it exists at all (module docstring):
    the (chunk, node, contribution) triples not held at the start."""
    return problem.num_chunks * problem.num_members * (problem.num_nodes - 1)


def _analytic_start(instance: Instance, S: int, per_step: float, notes: list[str]) -> int:
    """The next S to ask once the hop bound is refuted: at least the analytic lower bound in
    steps. Computed only then: the bounds load scipy's graph routines (about 0.25 s), more than a
    small question that the hop bound settles takes in all (Ring(4): 0.54 s with, 0.3 s without)."""
    from optcoll.bounds import best_lower_bound

    analytic = best_lower_bound(instance.machine, instance.collective, instance.model)
    steps = math.ceil(analytic.value / per_step * (1 - 1e-9))
    notes.append(f"then from {max(S, steps)}: the {analytic.name} bound ({analytic.value / per_step:.4g} steps "
                 f"of {per_step:g} s)")
    return max(S, steps)
