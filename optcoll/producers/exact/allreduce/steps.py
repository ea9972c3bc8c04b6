"""Least steps of a direct AllReduce in the step model with one round per step (SCCL's R = S).

Partial sums as in docs/model.md §5.4 (issue 13): in each step a rank sends its current partial
sum, the receiver reduces it into its own or (``combining = "copy-or-reduce"``, the default)
replaces its own with it, and every contribution is counted exactly once; this is the direct model
(``encoding``) on a step grid. The search asks S = L, L+1, ... until a schedule exists, L the hop
latency (and, once S = L is refuted, the analytic bounds in steps), so every S below the answer
is proven infeasible; where recursive doubling already takes L steps (Ring(4), hypercubes) it is
the answer and no solver is asked (doubling.py). Without plain switches the step grid is the
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
from dataclasses import dataclass, field

from optcoll.instances.clock import Clock
from optcoll.instances.instance import Instance
from optcoll.producers.exact.allreduce import encoding
from optcoll.producers.exact.allreduce.doubling import recursive_doubling
from optcoll.producers.exact.allreduce.problem import DirectProblem, step_problem
from optcoll.producers.exact.allreduce.solve import TooSlowToBuild, solve
from optcoll.producers.exact.allreduce.transfers import RouteTransfers, to_schedule
from optcoll.producers.exact.memory import ModelTooLarge
from optcoll.producers.exact.toolkit import solver_version
from optcoll.results.outcome import Progress, SolverOutcome
from optcoll.verify import verify


def least_steps(instance: Instance, *, steps: int | None, clock: Clock,
                progress: Progress | None = None) -> SolverOutcome:
    """The least S (``steps``: that S only) of a direct AllReduce with one round per step, within
    ``clock`` (its time and work left, its budget's threads, seed and memory limit)."""
    began = time.perf_counter()
    problem = step_problem(instance)
    hops = int(problem.reach()[:, problem.member_index() >= 0].max(initial=0))
    first = max(1, hops, steps or 0)
    top = ceiling(problem) if problem.reduce_only and steps is None else None
    search = _Search(instance, problem, clock, steps, progress, began, first, top,
                     encoding.size(problem, top).variables if top is not None else 0, first, first,
                     [f"steps from {first}: the farthest contribution ({hops} step(s))"])
    params = {**clock.limits(), "objective": "steps",
              "steps_limit": steps, "family": "direct", "restrictions": list(problem.restrictions)}
    if steps is None:
        search.found = _doubling_at_floor(instance, problem, first, search.notes)
    search.run()
    params.update(clock.work_params())
    if clock.interrupted:
        search.notes.append("interrupted: returning the best schedule so far and the proven bound")
    return _outcome(search, params)


@dataclass
class _Search:
    """The upward search over S of ``least_steps`` (module docstring): S = ``first``, first + 1,
    ... (then from the analytic bound), the reduce-only ``top`` asked once the refuted models are
    as large as its (``top_size`` variables); what is proven and found so far."""

    instance: Instance
    problem: DirectProblem
    clock: Clock
    steps: int | None
    progress: Progress | None
    began: float
    first: int
    top: int | None
    top_size: int
    proven: int  # every S below this is infeasible
    S: int  # the next S to ask
    notes: list[str]
    found: RouteTransfers | None = None
    fallback: RouteTransfers | None = None  # reduce-only: the ceiling's schedule
    last: int | None = None  # ... and its steps
    never: bool = False  # no schedule at any S
    refuted: int = 0  # variables of the models that refuted an S so far
    trace: list[tuple[float, float | None, float | None]] = field(default_factory=list)

    def run(self) -> None:
        """Ask S upward until an answer, a refusal or the clock ends it; a stop is a note."""
        try:
            while not self.never and self.found is None and (self.steps is None or self.S <= self.steps):
                if self.last is not None and self.S >= self.last:
                    self.found = self.fallback
                    break
                if self.top is not None and self.top > self.S and self.last is None and self.refuted >= self.top_size:
                    self._ask_ceiling()
                    continue
                if self.clock.expired():
                    if not self.clock.interrupted:
                        self.notes.append(f"{self.clock.limit_reached()} reached before S = {self.S}")
                    break
                if not self._ask():
                    break
        except ModelTooLarge as refused:
            self.notes.append(f"memory limit at S = {self.S}: {refused.detail}")
        except TooSlowToBuild as slow:
            self.notes.append(f"time limit at S = {self.S}: {slow}")
        except TimeoutError as why:
            self.notes.append(f"time limit: {why}")
        except KeyboardInterrupt:
            self.clock.interrupt()
        if self.found is None and self.fallback is not None:  # stopped early: the ceiling's schedule still stands
            self.found = self.fallback

    def _ask_ceiling(self) -> None:
        out, self.fallback = solve(self.problem, self.top, self.top, self.clock)
        self.notes.append(f"S = {self.top} (the ceiling of reduce-only schedules): {out.status} "
                          f"({out.size.variables} variables, {out.wall:.2f} s)")
        self.never = out.status == "infeasible"
        if self.fallback is None and not self.never:
            raise TimeoutError("the ceiling question was not settled")
        self.last = None if self.fallback is None else self.fallback.makespan(self.problem)

    def _ask(self) -> bool:
        """Ask the next S; False when the search stops here (not settled, or interrupted)."""
        S, per_step = self.S, self.problem.quantum
        out, best = solve(self.problem, S, S, self.clock)
        self.notes.append(f"S = {S}: {out.status} ({out.size.variables} variables, {out.wall:.2f} s)")
        if best is not None:
            self.found = best
        elif out.status == "infeasible":
            self.refuted += out.size.variables
            self.proven = S + 1
            self.never = self.top is not None and S >= self.top
            self.S = S + 1
            if self.S == self.first + 1 and self.steps is None:  # the hop bound was not the answer: the analytic bounds
                self.S = self.proven = _analytic_start(self.instance, self.S, per_step, self.notes)
        else:
            return False
        row = (time.perf_counter() - self.began, None if self.found is None else self.S * per_step,
               self.proven * per_step)
        self.trace.append(row)
        if self.progress is not None:
            self.progress(*row)
        return not self.clock.interrupted


def _outcome(search: _Search, params: dict) -> SolverOutcome:
    """The search's answer: its verified-to-be schedule, status, bound and what the bound proves."""
    problem, found, proven, steps, never = search.problem, search.found, search.proven, search.steps, search.never
    per_step = problem.quantum
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
    proof = (f"proves no schedule at any S (none within the ceiling of {search.top} steps)" if never
             else f"proves S < {proven} infeasible")
    source = (f"step model, least steps with one round per step at C = {search.instance.collective.chunks_per_rank}"
              f"{where}, {rules}: direct AllReduce model (CP-SAT) {proof}")
    if not exact:
        source += f" among schedules where {', '.join(problem.restrictions)}"
    bound = None if never else proven * per_step if exact else search.first * per_step
    return SolverOutcome(status, schedule, bound, source, "step", "cpsat", solver_version("cpsat"),
                         time.perf_counter() - search.began, None, params, tuple(search.trace), tuple(search.notes))


def _doubling_at_floor(instance: Instance, problem: DirectProblem, first: int, notes: list[str]
                       ) -> RouteTransfers | None:
    """Recursive doubling (doubling.py) when it takes no more than the hop bound's ``first`` steps
    and the shared verifier accepts it in the instance's model: then no S needs asking."""
    found = recursive_doubling(problem)
    if found is None or found.makespan(problem) > first:
        return None
    if not verify(problem.machine, problem.collective, to_schedule(problem, found), instance.model).valid:
        return None
    notes.append(f"S = {first}: recursive doubling meets the hop bound (no solver question)")
    return found


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
