"""Searches over S on top of one backend question (least R in [lo, hi] for S steps).

``least_cost``: the least step cost S·α + R·b/B_min. S starts at the latency bound, where the
greedy schedule (free rounds) is a first incumbent; for each S the backend is asked only for R
strictly below what would beat the incumbent, which is also R_min(S) ≤ R_min(S−1) for a stretched
warm start. The best one-round-per-step schedule is the first incumbent when it is cheaper: its
cost caps R at every S before any solver runs. Each question gets half of the time left, so one
hard S does not use up the budget of the larger S that often settle the question. Since
R ≥ max(S, rounds bound) and the cost grows with S, once no R fits the search is over: it always
ends, and every S it skipped is covered by the final proof.

``least_rounds``: the least R (the bandwidth end of the front at this C), then the least S with
it. Since R ≥ S, no S at or beyond the best R so far can beat it, which makes it terminate.

``least_steps``: SCCL's least steps, every step one round (R = S), from the larger of the latency
and rounds bounds up to the best of the one-round-per-step heuristics (greedy.py: fixed trees,
rarest first, rebalanced trees), which makes it terminate. No hint: the only schedules with R = S are
answers, and the greedy's routes stretched to S (more rounds than S allows) measured slower as a
hint (torus 4×4 C = 2: 20 s against 2.9 s).

The rounds bound starts as the counting bounds (milliseconds, no LP solver loaded) and gets the
multicast flow LP (bounds.py) only when a solver question is about to be asked: whenever the
heuristics already meet the counting floor the LP could not change the answer and is never built,
and whenever a question is asked the LP pays. Measured on SCCL's question list
(reports/bench-exact.md): the LP costs 5–70 ms there, while without it CP-SAT must refute every
S between the counting floor and the flow floor itself, which it did not do in 60 s on the
AlltoAll of Line(7), Line(8) and Ring(8) (floors 6 → 12, 7 → 16 and 4 → 8 steps).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from optcoll.instances.clock import Clock
from optcoll.producers.exact.memory import ModelTooLarge
from optcoll.producers.exact.step.backends import Backend, RoundsResult
from optcoll.producers.exact.step.bounds import problem_rounds_bound
from optcoll.producers.exact.step.greedy import greedy_solution, one_round_per_step
from optcoll.producers.exact.step.problem import StepProblem
from optcoll.producers.exact.step.solution import StepSolution, stretched
from optcoll.producers.exact.step.symmetry import automorphisms, lex_constraints
from optcoll.results.outcome import Progress

#: Entries of T compared per automorphism lex constraint (see symmetry.py).
LEX_PREFIX = 16
#: Share of the time and work left that one least-cost question may use when S is open.
QUESTION_SHARE = 0.5
#: Relative slack for comparing costs (float noise only).
COST_TOLERANCE = 1e-9


@dataclass
class Found:
    """The result of one search, in the step cost (seconds) of the problem it searched."""

    solution: StepSolution | None = None
    status: str = "unknown"
    lower_bound: float | None = None
    source: str = ""
    notes: list[str] = field(default_factory=list)
    trace: list[tuple[float, float | None, float | None]] = field(default_factory=list)


class Search:
    """One problem, one backend, one clock shared by every backend call."""

    def __init__(self, problem: StepProblem, backend: Backend, clock: Clock, *,
                 symmetry: bool, progress: Progress | None = None):
        self.problem, self.backend, self.clock = problem, backend, clock
        self.progress = progress
        self.bound = problem_rounds_bound(problem, with_lp=False)
        self.rounds_floor = self.bound.rounds(problem.collective.chunks_per_rank)
        self.lex = lex_constraints(problem, automorphisms(problem), LEX_PREFIX) if symmetry else []
        self.asked: list[str] = []
        self._flow_asked = False

    def tighten(self) -> int:
        """The rounds floor with the flow LP added, computed once, just before the first solver
        question (module docstring)."""
        if not self._flow_asked:
            self._flow_asked = True
            self.bound = problem_rounds_bound(self.problem, with_lp=True)
            self.rounds_floor = self.bound.rounds(self.problem.collective.chunks_per_rank)
        return self.rounds_floor

    def out_of_time(self, found: Found, steps: int) -> bool:
        """Whether the clock has run out (or Ctrl-C stopped it) before asking about ``steps``."""
        if self.clock.left() > 0:
            return False
        if not self.clock.interrupted:
            found.notes.append(f"{self.clock.limit_reached()} reached before S = {steps}")
        return True

    def note_interrupt(self, found: Found) -> None:
        if self.clock.interrupted:
            found.notes.append("interrupted: returning the best schedule so far and the proven bound")

    def ask(self, steps: int, lo: int, hi: int, hint: StepSolution | None, share: float = 1.0) -> RoundsResult:
        """One backend question, on ``share`` of the time and work left."""
        clock = self.clock if share == 1.0 else self.clock.part(share)
        result = self.backend.minimise_rounds(self.problem, steps, lo, hi, hint=hint, lex=self.lex,
                                              clock=clock)
        self.asked.append(f"S={steps} R in [{lo}, {hi}]: {result.status}"
                          + (f" R={result.solution.total_rounds}" if result.solution else "")
                          + f" (R >= {result.bound})")
        return result

    def ask_within_memory(self, steps: int, lo: int, hi: int, hint: StepSolution | None,
                          found: Found, share: float = 1.0) -> RoundsResult | None:
        """``ask``, or None when the model is over the memory limit: then, as when time runs
        out, the search ends with the best schedule so far and the bound proven so far."""
        try:
            return self.ask(steps, lo, hi, hint, share)
        except ModelTooLarge as refused:
            found.notes.append(f"memory limit at S = {steps}: {refused.detail}")
            return None

    def record(self, found: Found, incumbent: float | None, bound: float | None) -> None:
        row = (self.clock.root.elapsed(), incumbent, bound)
        if not found.trace or found.trace[-1][1:] != row[1:]:
            found.trace.append(row)
            if self.progress is not None:
                self.progress(*row)

    # -- least cost ------------------------------------------------------------------------
    def least_cost(self, steps: int | None = None, rounds: int | None = None) -> Found:
        """The least S·α + R·β with S = ``steps`` and R ≤ ``rounds`` when given."""
        p, found = self.problem, Found()
        first = max(p.latency_bound, steps or 0)
        last = steps if steps is not None else math.inf
        cap = rounds if rounds is not None else math.inf
        share = 1.0 if steps is not None else QUESTION_SHARE  # a hard S leaves the next ones time
        best: StepSolution | None = None
        best_cost = math.inf
        open_bounds: list[float] = []  # lower bounds of the S values not settled
        start: StepSolution | None = None
        S = first
        try:
            start = greedy_solution(p)
            floor = max(p.latency_bound, self.rounds_floor)
            unit = stretched(p, one_round_per_step(p, floor), first)  # tried first
            if unit.steps <= last and unit.total_rounds <= cap:
                best, best_cost = unit, p.cost(unit.steps, unit.total_rounds)
            while S <= last:
                candidate = stretched(p, best if best is not None and best.steps <= S else start, S)
                if candidate.total_rounds <= cap and p.cost(S, candidate.total_rounds) < best_cost:
                    best, best_cost = candidate, p.cost(S, candidate.total_rounds)
                hi = min(cap, self._rounds_below(best_cost, S))
                lo = max(S, self.rounds_floor)
                if lo <= hi:  # a question is due: first the flow floor, which may settle it
                    lo = max(S, self.tighten())
                if lo > hi:
                    break  # lo only grows and hi only shrinks with S: nothing better anywhere
                if self.out_of_time(found, S):
                    open_bounds.append(p.cost(S, lo))
                    break
                result = self.ask_within_memory(S, lo, hi, candidate, found, share)
                if result is None:
                    open_bounds.append(p.cost(S, lo))
                    break
                if result.solution is not None and p.cost(S, result.solution.total_rounds) < best_cost:
                    best, best_cost = result.solution, p.cost(S, result.solution.total_rounds)
                if result.status in ("feasible", "unknown"):
                    open_bounds.append(p.cost(S, result.bound))
                self.record(found, best_cost if best else None,
                            min(open_bounds + [best_cost, p.cost(S + 1, max(S + 1, self.rounds_floor))]))
                S += 1
        except KeyboardInterrupt:
            self.clock.interrupt()
            open_bounds.append(p.cost(S, max(S, self.rounds_floor)))
        self.note_interrupt(found)
        found.solution = best
        bounds = open_bounds + ([best_cost] if best is not None else [])
        found.lower_bound = min(bounds) if bounds else None
        found.status = self._status(best_cost if best else None, found.lower_bound, bool(open_bounds))
        found.source = self._source("least step cost", steps, rounds)
        self.record(found, best_cost if best else None, found.lower_bound)
        return found

    def _rounds_below(self, cost: float, steps: int) -> float:
        """The largest R with cost(steps, R) strictly below ``cost`` (inf when cost is inf)."""
        if not math.isfinite(cost):
            return math.inf
        return math.ceil((cost - steps * self.problem.alpha) / self.problem.beta - 1e-7) - 1

    # -- least rounds --------------------------------------------------------------------------
    def least_rounds(self, steps: int | None = None) -> Found:
        """The least R, then the least S with it (``steps`` fixes S); the bound in seconds is
        the least cost any schedule with R at or above the proven least R can have."""
        p, found = self.problem, Found()
        first = max(p.latency_bound, steps or 0)
        last = steps if steps is not None else math.inf
        best: StepSolution | None = None
        open_rounds: list[int] = []  # proven bounds on R of the S values not settled
        S = first
        try:
            start = greedy_solution(p)
            while S <= last:
                candidate = stretched(p, best or start, S)
                best = best or candidate
                lo, hi = max(S, self.rounds_floor), best.total_rounds - 1
                if lo <= hi:  # a question is due: first the flow floor, which may settle it
                    lo = max(S, self.tighten())
                if lo > hi:
                    break  # lo only grows with S: no S from here on has fewer rounds
                if self.out_of_time(found, S):
                    open_rounds.append(lo)
                    break
                result = self.ask_within_memory(S, lo, hi, candidate, found)
                if result is None:
                    open_rounds.append(lo)
                    break
                if result.solution is not None and result.solution.total_rounds < best.total_rounds:
                    best = result.solution
                if result.status in ("feasible", "unknown"):
                    open_rounds.append(result.bound)
                self.record(found, p.cost(best.steps, best.total_rounds),
                            p.cost(first, min(open_rounds + [best.total_rounds, max(S + 1, self.rounds_floor)])))
                S += 1
        except KeyboardInterrupt:
            self.clock.interrupt()
            open_rounds.append(max(S, self.rounds_floor))
        self.note_interrupt(found)
        found.solution = best
        incumbent = None if best is None else p.cost(best.steps, best.total_rounds)
        if open_rounds:
            found.lower_bound = p.cost(first, min(open_rounds + ([best.total_rounds] if best else [])))
        else:
            found.lower_bound = incumbent
        found.status = self._status(incumbent, found.lower_bound, bool(open_rounds))
        found.source = self._source("least rounds, then least steps", steps, None)
        self.record(found, incumbent, found.lower_bound)
        return found

    # -- least steps ---------------------------------------------------------------------------
    def least_steps(self, steps: int | None = None) -> Found:
        """SCCL's least steps: the least S with one round per step (``steps`` fixes S)."""
        p, found = self.problem, Found()
        per_step = p.alpha + p.beta
        first = max(p.latency_bound, self.rounds_floor, steps or 0)
        unsettled: int | None = None  # the least S neither solved nor proven infeasible
        best: StepSolution | None = None
        unit: StepSolution | None = None
        try:
            unit = one_round_per_step(p, first)
            if first < unit.steps:  # a question is due: first the flow floor, which may settle it
                first = max(first, self.tighten())
            last = steps if steps is not None else max(first, unit.steps)
            for S in range(first, last + 1):
                if S >= unit.steps:
                    best = stretched(p, unit, S)
                    break
                if self.out_of_time(found, S):
                    unsettled = S if unsettled is None else unsettled
                    break
                result = self.ask_within_memory(S, S, S, None, found)
                if result is None:
                    unsettled = S if unsettled is None else unsettled
                    break
                if result.solution is not None:
                    best = result.solution
                    break
                if result.status == "unknown" and unsettled is None:
                    unsettled = S
                self.record(found, unit.steps * per_step,
                            (unsettled if unsettled is not None else S + 1) * per_step)
        except KeyboardInterrupt:
            self.clock.interrupt()
            unsettled = first if unsettled is None else unsettled
        self.note_interrupt(found)
        if best is None and steps is None:
            best = unit  # the time ran out: the greedy schedule is still a valid answer (if made)
        low = unsettled if unsettled is not None else (best.steps if best is not None else None)
        found.solution = best
        found.lower_bound = None if low is None else low * per_step
        incumbent = best.steps * per_step if best is not None else None
        found.status = self._status(incumbent, found.lower_bound, unsettled is not None)
        found.source = self._source("least steps with one round per step", steps, None)
        self.record(found, incumbent, found.lower_bound)
        return found

    @staticmethod
    def _status(incumbent: float | None, bound: float | None, open_: bool) -> str:
        if incumbent is None:
            return "unknown" if open_ else "infeasible"
        if bound is not None and incumbent <= bound * (1 + COST_TOLERANCE):
            return "optimal"
        return "feasible"

    def _source(self, what: str, steps: int | None, rounds: int | None) -> str:
        limits = [f"S = {steps}"] if steps is not None else []
        limits += [f"R <= {rounds}"] if rounds is not None else []
        where = f" with {' and '.join(limits)}" if limits else " over every S"
        C = self.problem.collective.chunks_per_rank
        return (f"step model, {what} at C = {C}{where}: {self.backend.name} proofs, "
                f"rounds bound {self.bound.source}")
