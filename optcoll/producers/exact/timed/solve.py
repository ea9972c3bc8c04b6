"""The exact timed solver's entry points: ``solve_timed`` and ``export_timed_model``.

One solve: build the (possibly dual) problem, start from the best greedy schedule and the best
analytic lower bound, then run phases until they meet: on an exact grid the time-expanded
horizon search; when the grid rounds, the exact continuous model first, then the rounded-up grid
(schedules) and the rounded-down grid (a lower bound). Every schedule is retimed in true seconds;
"optimal" only when its time meets a proven bound in the true model.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass, replace
from pathlib import Path

from optcoll.bounds import best_lower_bound
from optcoll.errors import InputError
from optcoll.instances.budget import Budget
from optcoll.instances.clock import Clock, OutOfTime, clock_for, phase, running, terminating
from optcoll.instances.instance import Instance
from optcoll.producers import compose
from optcoll.producers.base import NotApplicable
from optcoll.producers.exact.allreduce.timed import direct_phase
from optcoll.producers.exact.timed.start import Start, best_start
from optcoll.producers.exact.memory import ModelTooLarge, require_fits
from optcoll.producers.exact.timed import coarse, continuous, expanded
from optcoll.producers.exact.timed.grid import MAX_UNITS_PER_LINK, Grid, choose_grids, fine_grid, seconds_grid
from optcoll.producers.exact.timed.listsched import Transfers, greedy, retime, to_seconds
from optcoll.producers.exact.timed.problem import TimedProblem, direct_problem, dual_problem
from optcoll.producers.exact.timed.reach import egress_bound, ingress_bound, latency_bound, reach
from optcoll.producers.exact.timed.reverse import essential, from_schedule, to_schedule
from optcoll.producers.exact.timed.search import search
from optcoll.producers.exact.timed.star import shift_transfers
from optcoll.producers.exact.timed.stitch import allgather_holders, stitched
from optcoll.producers.exact.timed.symmetry import rank_group_links
from optcoll.producers.exact.toolkit import check_solver, export, solver_version
from optcoll.producers.exact.toolkit.allreduce import compose_allreduce
from optcoll.producers.registry import IMPLEMENTS, get_synthesizer
from optcoll.results.outcome import Progress, SolverOutcome
from optcoll.schedules.schedule import Schedule
from optcoll.units import format_time

#: Relative slack when comparing a schedule's time with a bound (float noise only).
TIME_TOLERANCE = 1e-9
#: Synthesizers from the registry tried for the first upper bound, with our own fallback (the
#: LP-guided one only where it implements the collective: unicast ones).
REGISTRY_GREEDIES = ("tacos", "tacos+", "mcf")
#: Shares of the time left: the continuous model when epochs follow it, the rounded-up grid when
#: the rounded-down one follows it.
CONTINUOUS_SHARE = 0.5
UPPER_SHARE = 0.5
#: Share of the time left for a coarse grid when the fine model is big (``coarse``).
COARSE_SHARE = 0.5
#: Share of the time left for the rail sub-problems of a stitched start (``stitch``).
STITCH_SHARE = 0.3
FORMULATIONS = ("auto", "expanded", "continuous")
EXPORT_FORMATS = (".mps", ".lp", ".pbtxt", ".pb")
#: Share of an AllReduce's time for ReduceScatter then AllGather; the direct model gets the rest.
FAMILY_SHARE = 0.5
#: Share of the time limit the AllReduce start schedules may use (``timed.start``).
START_SHARE = 0.5


def _problem(instance: Instance) -> TimedProblem:
    coll = instance.collective
    return dual_problem(instance) if coll.combining else direct_problem(instance)


class _Trace:
    """Best incumbent and bound over time, in true seconds, told to the caller as they improve."""

    def __init__(self, start: float, progress: Progress | None):
        self.start, self.progress = start, progress
        self.rows: list[tuple[float, float | None, float | None]] = []
        self.incumbent: float | None = None
        self.bound: float | None = None

    def record(self, incumbent: float | None, bound: float | None) -> None:
        changed = False
        if incumbent is not None and (self.incumbent is None or incumbent < self.incumbent):
            self.incumbent, changed = incumbent, True
        if bound is not None and (self.bound is None or bound > self.bound):
            self.bound, changed = bound, True
        if changed:
            row = (time.perf_counter() - self.start, self.incumbent, self.bound)
            self.rows.append(row)
            if self.progress is not None:
                self.progress(*row)


def _analytic_bound(instance: Instance, problem: TimedProblem, clock: Clock | None = None) -> tuple[float, str]:
    """The best true-time lower bound: optcoll.bounds (those computed within ``clock``), and the
    solver's own per-problem ones."""
    r = reach(problem, problem.delay)
    own = [(latency_bound(problem, r), "latency (shortest delivery paths)"),
           (ingress_bound(problem, r, seconds_grid(problem)), "per-node ingress"),
           (egress_bound(problem, r, seconds_grid(problem)), "per-holder egress")]
    shared = best_lower_bound(instance.machine, instance.collective, instance.model, clock)
    own.append((float(shared.value), f"{shared.name} bound ({shared.witness()})"))
    return max(own, key=lambda item: item[0])


def _grid_floor(problem: TimedProblem, grid: Grid, true_bound: float | None) -> tuple[int, str]:
    r = reach(problem, grid.delay)
    found = [(latency_bound(problem, r), "latency"), (ingress_bound(problem, r, grid), "ingress"),
             (egress_bound(problem, r, grid), "egress")]
    if true_bound is not None:
        found.append((math.ceil(true_bound / grid.quantum * (1 - TIME_TOLERANCE)), "analytic bound"))
    value, name = max(found, key=lambda item: item[0])
    return int(math.ceil(value - 1e-9)), f"{name} bound on the grid"


def _starts(instance: Instance, problem: TimedProblem, seed: int, hint: Schedule | None,
            notes: list[str], bound: float, clock: Clock | None = None) -> Iterator[tuple[str, Transfers]]:
    """First schedules, in true seconds, each yielded as it is made: the registry's greedies and
    the user's hint (callers fall back on the earliest-arrival greedy when none serves). They are
    compared in true seconds (a rounded grid can make the best of them look worse), and a greedy
    schedule that meets ``bound`` ends them: it is optimal, so no other start can matter.

    Within ``clock``, each greedy gets an equal share of the time left to the greedies still to
    run (what one leaves goes to the next), so a slow one cannot starve the rest (tacos takes
    17 s on a 256-chip AlltoAll, where tacos+ and mcf take 0.4 s each); the greedies after the
    first that serves are run only while the clock has time left. After Ctrl-C (the clock
    interrupted) the first greedy still runs if nothing was made, whatever it takes."""
    true_grid = seconds_grid(problem)
    names = [name for name in REGISTRY_GREEDIES if instance.collective.kind in IMPLEMENTS[name]]
    made = False
    for order, name in enumerate(names):
        if clock is not None and clock.expired() and (made or not clock.interrupted):
            notes.append(f"{name} not run as a start: {clock.limit_reached()} reached")
            continue
        share = clock.part(1.0 / (len(names) - order)) if clock is not None and not clock.expired() else None
        try:
            with running(share) if share is not None else nullcontext(), phase(clock, f"start: {name}"):
                transfers = from_schedule(problem, get_synthesizer(name)(instance, seed))
        except NotApplicable as error:
            notes.append(f"{name} does not apply: {error}")
            continue
        except OutOfTime:
            if share is None:  # the caller's clock ended (SIGTERM): nothing more is made
                raise
            notes.append(f"{name} stopped as a start: {share.limit_reached()} reached")
            continue
        made = True
        yield name, transfers
        if transfers.makespan(true_grid) <= bound * (1 + TIME_TOLERANCE) + 1e-15:
            return
    if hint is not None:
        yield "hint", from_schedule(problem, hint)


def start_on_grid(instance: Instance, problem: TimedProblem, grid: Grid, bound: float) -> Transfers:
    """The best first schedule retimed on ``grid`` (the horizon a model on it starts from)."""
    retimed = [retime(problem, grid, t) for _, t in _starts(instance, problem, 0, None, [], bound)]
    return min(retimed, key=lambda t: t.makespan(grid)) if retimed else greedy(problem, grid)


def solve_timed(instance: Instance, *, solver: str = "cpsat", quantum: float | None = None,
                time_limit: float | None = None, threads: int | None = None, seed: int | None = None,
                hint: Schedule | None = None, progress: Progress | None = None, formulation: str = "auto",
                max_memory: int | None = None, budget: Budget | None = None,
                structured: bool = True, clock: Clock | None = None) -> SolverOutcome:
    """The optimal makespan in the timed model (docs/model.md §5-§6), or the best schedule
    found and a proven lower bound when time runs out or Ctrl-C is pressed.

    ``quantum`` (seconds) overrides the time-expanded grid; by default the exact common unit of
    the link times when it is coarse enough, else one chunk on the fastest link (then rounded-up
    and rounded-down grids bracket the optimum). ReduceScatter and Reduce are solved by
    inversion; AllReduce as ReduceScatter then AllGather (``toolkit.allreduce``).

    ``formulation``: "expanded" (time-expanded, any solver), "continuous" (exact intervals,
    CP-SAT) or "auto": the time-expanded model on an exact grid; when the grid rounds and the
    solver is CP-SAT, the continuous model first and the rounded grids after it.

    Limits: ``budget`` (default: the instance's), with ``time_limit``, ``threads``, ``seed`` and
    ``max_memory`` replacing its fields when given. The time limit covers the whole solve (start
    schedules, symmetry detection, model building, solver calls). ``max_memory`` (bytes) caps each
    model's estimated memory (default: a share of the memory available, see memory.py); a model
    over it is not built, and, as when time runs out, the result is the best schedule so far with
    the bound proven so far (the refusals are in the notes and in ``params["refused"]``).
    ``structured=False`` skips the schedules built from the machine's structure (shift schedule,
    stitched rails, the AllReduce producers' start ``timed.start``), to measure the solver from the
    greedies alone (and to solve ReduceScatter then AllGather where such a start answers at once).
    ``clock``: the job's running clock (``run.exact``), which then holds the limits (the keyword
    limits must be left unset).
    """
    clock = clock_for(budget or instance.budget, clock, time_limit=time_limit, threads=threads, seed=seed,
                      max_memory=max_memory)
    check_solver(solver, clock.budget.work_limit)
    if formulation not in FORMULATIONS:
        raise InputError(f"unknown formulation {formulation!r}; use one of {', '.join(FORMULATIONS)}",
                         field="formulation")
    if not instance.collective.equal_chunks:
        raise NotApplicable(f"the exact timed model cuts time for equal chunks; {instance.collective.kind}'s "
                            "chunks differ in size")
    if instance.collective.kind == "allreduce":
        def part(sub: Instance, part_clock: Clock) -> SolverOutcome:
            with part_clock.phase(f"allreduce: its {sub.collective.kind} part"):
                return _Run(sub, solver, part_clock, _Trace(clock.start, progress)).solve(quantum, None, formulation)

        try:
            with clock.phase("allreduce: lower bounds"):
                overall = best_lower_bound(instance.machine, instance.collective, instance.model, clock)
        except KeyboardInterrupt:  # the bounds an ended clock still makes (the first, at once)
            clock.interrupt()
            overall = best_lower_bound(instance.machine, instance.collective, instance.model, clock)
        bound = (float(overall.value), f"{overall.name} bound ({overall.detail})")
        start_notes: list[str] = []
        try:  # Ctrl-C among the producers keeps the starts made (``best_start``)
            with clock.phase("allreduce: start schedules"):
                start = best_start(instance, clock.part(START_SHARE), start_notes) if structured else None
        except KeyboardInterrupt:  # the family still makes its start schedules, at once
            clock.interrupt()
            start = None
        if start is not None and start.time <= bound[0] * (1 + TIME_TOLERANCE):
            return _start_optimal(instance, solver, clock, _Trace(clock.start, progress), start, bound)
        composed = compose_allreduce(instance, clock.part(FAMILY_SHARE), part, lambda s: compose.makespan(s, instance),
                                     bound)
        return _allreduce(instance, solver, clock, replace(composed, notes=(*start_notes, *composed.notes)), start)
    return _Run(instance, solver, clock, _Trace(clock.start, progress), structured).solve(quantum, hint, formulation)


class _Run:
    """One solve of one (possibly dual) problem: the incumbent in true seconds, the best proven
    bound, and the phases that improve them. Ctrl-C anywhere ends the phases, never the run."""

    def __init__(self, instance: Instance, solver: str, clock: Clock, trace: _Trace, structured: bool = True):
        self.instance, self.solver, self.clock, self.trace = instance, solver, clock, trace
        self.structured = structured
        self.problem = _problem(instance)
        self.true_grid = seconds_grid(self.problem)
        self.notes: list[str] = []
        self.ran: list[str] = []
        self.params: dict = {**clock.limits(),
                             "chunks_per_rank": instance.collective.chunks_per_rank,
                             "occupancy": instance.model.occupancy, "inverted": self.problem.inverted}
        self.best: Transfers | None = None
        self.bound, self.source = 0.0, "none"

    # -- bookkeeping ------------------------------------------------------------------------------
    def makespan(self) -> float:
        return self.best.makespan(self.true_grid) if self.best is not None else math.inf

    def offer(self, transfers: Transfers, *, in_seconds: bool = False) -> bool:
        """A schedule in any grid's unit; kept (retimed in seconds, unless ``in_seconds`` says it
        already is) if it beats the incumbent."""
        retimed = transfers if in_seconds else retime(self.problem, self.true_grid, transfers)
        better = retimed.makespan(self.true_grid) < self.makespan()
        if better:
            self.best = retimed
        self.trace.record(self.makespan(), None)
        return better

    def prove(self, value: float, why: str, searched: bool) -> None:
        """A proven bound; ``searched``: a solver's search proved it (else analytic reasoning)."""
        if value > self.bound * (1 + TIME_TOLERANCE) + 1e-15:  # not float noise on the same bound
            self.bound, self.source = value, why
            self.params["bound_from"] = "search" if searched else "analytic"
        self.trace.record(None, self.bound)

    def closed(self) -> bool:
        return self.clock.left() <= 0 or self.makespan() <= self.bound * (1 + TIME_TOLERANCE) + 1e-15

    def outcome(self, status: str) -> SolverOutcome:
        """The result; the quantum is the time-expanded grid's when that formulation ran."""
        q = self.params.get("quantum") if "time-expanded" in self.ran else None
        schedule = None
        if self.best is not None:
            schedule = to_schedule(self.problem, self.best, producer="optcoll-timed", solver=self.solver,
                                   seed=self.clock.budget.seed)
        return SolverOutcome(status, schedule, self.bound, self.source, "timed", self.solver,
                             solver_version(self.solver), self.clock.elapsed(), q,
                             self.params, tuple(self.trace.rows), tuple(self.notes))

    # -- the solve -------------------------------------------------------------------------------
    def solve(self, quantum: float | None, hint: Schedule | None, formulation: str) -> SolverOutcome:
        problem = self.problem
        missing = reach(problem, problem.delay).unreachable(problem)
        if missing is not None:
            c, v = missing
            self.notes.append(f"no path delivers chunk {c} to node {problem.machine.label(v)}")
            self.source = "unreachable destination: no schedule exists"
            return replace(self.outcome("infeasible"), lower_bound=None)
        upper, lower = choose_grids(problem, quantum)
        fine = fine_grid(problem) if self.solver == "cpsat" else None
        if formulation == "continuous" and fine is None:
            raise NotApplicable("the continuous model needs CP-SAT and link times with a common unit "
                                f"of at most {MAX_UNITS_PER_LINK} per link")
        use_expanded = formulation in ("auto", "expanded")
        use_continuous = fine is not None and (formulation == "continuous"
                                               or (formulation == "auto" and not upper.exact))
        # Phases in order with their share of the time left. When the grid rounds, the exact
        # continuous model goes first: rounded epochs make poor schedules on uneven links.
        phases: list[tuple[str, Callable[[Clock], None], float]] = []
        if use_continuous:
            phases.append(("continuous model", lambda clock: self.continuous(fine, clock),
                           CONTINUOUS_SHARE if use_expanded else 1.0))
        if use_expanded:
            phases.append(("coarse grid", lambda clock: self.coarse(upper, clock), 1.0))
            phases.append(("time-expanded model", lambda clock: self.expanded(upper, clock),
                           UPPER_SHARE if lower is not None else 1.0))
            if lower is not None:
                phases.append(("rounded-down grid", lambda clock: self.relaxation(lower, clock), 1.0))
        try:
            with self.clock.phase(f"{self.instance.collective.kind}: lower bounds"):
                self.prove(*_analytic_bound(self.instance, problem, self.clock), searched=False)
            with self.clock.phase(f"{self.instance.collective.kind}: first schedule"):
                first = self.first_schedule(hint)
            self.notes.append(f"first upper bound from {first}: {format_time(self.makespan())}" if first else
                              "no first schedule: " + ("interrupted" if self.clock.interrupted else
                                                       f"{self.clock.limit_reached()} reached while making it"))
            for name, phase, share in phases:
                if self.closed():
                    break
                ran = len(self.ran)
                try:
                    with self.clock.phase(f"{self.instance.collective.kind}: {name}"):
                        phase(self.clock.part(share))
                except ModelTooLarge as refused:  # like a time limit: keep what is proven so far
                    del self.ran[ran:]  # a refused formulation did not run
                    self.notes.append(f"memory limit: {refused.detail}")
                    self.params.setdefault("refused", []).append(refused.detail)
        except KeyboardInterrupt:
            self.clock.interrupt()
        if self.clock.interrupted:
            self.notes.append("interrupted: returning the best schedule so far and the proven bound")
        self.params["formulation"] = "+".join(self.ran) or (
            "none (every model over the memory limit)" if "refused" in self.params
            else "none (the first schedule meets the bound)" if not self.clock.interrupted
            else "none (interrupted before any model)")
        self.params["interrupted"] = self.clock.interrupted
        self.params.update(self.clock.work_params())
        status = ("optimal" if self.makespan() <= self.bound * (1 + TIME_TOLERANCE) + 1e-15
                  else "feasible" if self.best is not None else "unknown")
        return self.outcome(status)

    def first_schedule(self, hint: Schedule | None) -> str | None:
        """The incumbent to start from, within the clock (making one counts against it): the
        structured schedules first (the greedies cost most on big machines), then the greedies and
        the hint, else the earliest-arrival greedy. Returns the name of the one kept (None: the
        clock ended before any was made). After Ctrl-C the earliest-arrival greedy is still made,
        whatever it takes (the part of an AllReduce left then has a schedule); after SIGTERM not."""
        first = None
        after_ctrl_c = self.clock.interrupted and not terminating()
        try:
            with running(None if after_ctrl_c else self.clock):
                with self.clock.phase("start: structured"):
                    first = (self.offer_structured() if self.structured else None) or first
                made = [] if self.closed() else list(_starts(
                    self.instance, self.problem, self.clock.budget.seed, hint, self.notes, self.bound, self.clock))
                with self.clock.phase("start: retiming"):
                    first = self._offer_starts(made) or first
                if self.best is None:
                    self.offer(greedy(self.problem, self.true_grid))
                    first = "earliest-arrival greedy"
        except OutOfTime:
            pass
        return first if self.best is not None else None

    def _offer_starts(self, made: list[tuple[str, Transfers]]) -> str | None:
        """Offers the starts ``made`` in order, each retimed to its earliest times while the clock
        lasts, after every producer ran (4 s for tacos+'s 0.5 M transfers on a 256-chip AlltoAll:
        time mcf needs there to meet the bound); once the clock ends, the producers' starts as
        their producers timed them (valid as made: no start made in time is lost), and no hint
        (a user's hint is valid only once retimed). Returns the name of the one kept, if any."""
        first, retiming = None, True
        for name, transfers in made:
            if retiming:
                try:
                    transfers = retime(self.problem, self.true_grid, transfers)
                except OutOfTime:
                    retiming = False
                except ValueError as error:  # a hint that is not causal
                    self.notes.append(f"{name} schedule not used as a start: {error}")
                    continue
            if not retiming and name == "hint":
                self.notes.append(f"hint not used as a start: {self.clock.limit_reached()} reached before it was checked")
            elif self.offer(transfers, in_seconds=True):
                first = name
        return first

    def offer_structured(self) -> str | None:
        """Schedules built from the machine's structure for AllGather-shaped problems: the shift
        schedule of a single switch (``star``), else the symmetry-decomposed schedule of servers
        joined by rails (``stitch``, each class of identical rails solved once within a share of
        the time). Returns the name of the one that became the incumbent, if any."""
        try:
            holder = allgather_holders(self.problem)
        except NotApplicable:
            return None
        part = self.clock.part(STITCH_SHARE)

        def solve_rail(sub: Instance) -> Schedule:
            out = _Run(sub, self.solver, part, _Trace(time.perf_counter(), None)).solve(None, None, "auto")
            if out.schedule is None:  # its share ended before any schedule: no stitched start
                raise NotApplicable(f"the rail sub-problem found no schedule ({out.status})")
            self.notes.append(f"rail sub-problem ({sub.machine.num_npus} NPUs): {out.status}, "
                              f"{format_time(compose.makespan(out.schedule, sub))}")
            return out.schedule

        for name, build in (("the shift schedule of the switch", lambda: shift_transfers(self.problem, holder)),
                            ("the stitched rails and servers", lambda: stitched(self.instance, self.problem, solve_rail))):
            try:
                transfers = retime(self.problem, self.true_grid, build())
            except NotApplicable:
                continue
            self.notes.append(f"{name}: {format_time(transfers.makespan(self.true_grid))}")
            return name if self.offer(transfers, in_seconds=True) else None
        return None

    def coarse(self, fine: Grid, clock: Clock) -> None:
        """When the fine model is big (``coarse.needed``): schedules from a coarse grid first
        (``coarse``); they prove nothing. Its search gets ``COARSE_SHARE`` of the time left once
        the grid is chosen (choosing it list-schedules, and may route, every transfer)."""
        budget = self.clock.budget
        why = coarse.needed(self.problem, fine, self.best, self.solver, budget.threads, budget.max_memory)
        if why is None:
            return
        found = coarse.coarse_grid(self.problem, self.best, self.makespan(), self.bound, self.solver,
                                   budget.threads, budget.max_memory)
        if found is None:
            self.notes.append(f"coarse grid: {why}, and no coarse grid fits the memory limit")
            return
        grid, first, size = found
        self.ran.append("coarse time-expanded")
        capacity = (int(grid.capacity.min()), int(grid.capacity.max()))
        floor, floor_source = _grid_floor(self.problem, grid, self.bound)
        out = search(self.problem, grid, floor, floor_source, first, self.solver,
                     clock.part(COARSE_SHARE),
                     lambda inc, low: self.trace.record(None if inc is None else grid.seconds(inc), None))
        self.offer(to_seconds(self.problem, grid, out.best))
        self.params["coarse"] = {"quantum": grid.quantum, "capacity": list(capacity), "epochs": out.makespan,
                                 "variables": size.variables, "terms": size.terms}
        self.notes.append(f"coarse grid ({why}): q = {format_time(grid.quantum)}, capacity "
                          f"{capacity[0]}..{capacity[1]} per link and epoch, {size.variables} variables; "
                          f"{out.makespan} epochs, retimed {format_time(self.makespan())} (an upper bound only)")
        idle = "its first schedule meets its floor" if out.floor >= out.makespan else "no time left to search it"
        self.notes.extend(f"coarse grid: {phase}" for phase in out.phases or [idle])

    def expanded(self, upper: Grid, clock: Clock) -> None:
        """The rounded-up (or exact) grid: schedules, and on an exact grid proofs."""
        self.ran.append("time-expanded")
        self.params.update(quantum=upper.quantum, rounding=upper.rounding)
        floor, floor_source = _grid_floor(self.problem, upper, self.bound)
        up = search(self.problem, upper, floor, floor_source, retime(self.problem, upper, self.best), self.solver,
                    clock, lambda inc, low: self.trace.record(
                        None if inc is None else upper.seconds(inc),
                        upper.seconds(low) if low is not None and upper.exact else None))
        self.params["epochs"] = up.makespan
        self.notes.extend(up.phases)
        self.offer(to_seconds(self.problem, upper, up.best))
        if upper.exact:
            self.prove(upper.seconds(up.floor), f"time-expanded proof on the exact grid ({up.proved_by})",
                       up.searched)

    def relaxation(self, lower: Grid, clock: Clock) -> None:
        """The rounded-down grid: its optimum times the quantum is a lower bound."""
        floor, floor_source = _grid_floor(self.problem, lower, None)
        down = search(self.problem, lower, floor, floor_source, retime(self.problem, lower, self.best), self.solver,
                      clock, lambda inc, low: self.trace.record(None, None if low is None else lower.seconds(low)))
        self.notes.extend(f"rounded-down grid: {phase}" for phase in down.phases)
        self.params["relaxation_epochs"] = down.floor
        self.prove(lower.seconds(down.floor), f"relaxation with durations rounded down ({down.proved_by})",
                   down.searched)

    def continuous(self, fine: Grid, clock: Clock) -> None:
        self.ran.append("continuous")
        self.params["unit"] = fine.quantum
        assert self.best is not None
        floor = math.ceil(self.bound / fine.quantum * (1 - TIME_TOLERANCE))
        result, proven = _continuous(self.problem, fine, retime(self.problem, fine, self.best), floor, clock,
                                     self.trace, self.notes)
        if result is not None:
            self.offer(result)
        if proven is not None:
            self.prove(proven, "continuous CP-SAT model in an exact unit", searched=True)


def _continuous(problem: TimedProblem, grid: Grid, first: Transfers, floor: int, clock: Clock, trace: _Trace,
                notes: list[str]) -> tuple[Transfers | None, float | None]:
    """One continuous-model solve from ``first``: (its best schedule, its proven bound in seconds)."""
    first = essential(problem, first, grid.delay)
    horizon = int(round(first.makespan(grid)))
    budget = clock.budget
    require_fits(continuous.size(problem, grid, horizon), "cpsat", budget.threads, budget.max_memory)
    model = continuous.build(problem, grid, horizon, min(floor, horizon))
    if not continuous.hint(model, first):
        notes.append("continuous model: the start schedule could not be hinted")

    def progress(objective: float | None, bound: float | None) -> None:
        trace.record(None if objective is None else grid.seconds(objective),
                     None if bound is None else grid.seconds(math.ceil(bound - 1e-6)))

    if clock.left() <= 0:
        return None, None
    res = continuous.solve(model, clock, progress=progress)
    notes.append(f"continuous model ({len(model.candidates)} optional transfers, unit {grid.quantum:g} s): "
                 f"{res.status} ({res.wall:.2f} s)")
    found = model.decode(res.values) if res.values is not None else None
    if res.status == "optimal" and res.objective is not None:
        return found, grid.seconds(round(res.objective))
    if res.bound is not None:
        return found, grid.seconds(min(math.ceil(res.bound - 1e-6), horizon))
    return found, None


def _start_optimal(instance: Instance, solver: str, clock: Clock, trace: _Trace,
                   start: Start, bound: tuple[float, str]) -> SolverOutcome:
    """The producers' start meets the proven bound: optimal, no model built (the family
    ReduceScatter then AllGather is not solved, so ``params`` has no family entries)."""
    schedule, made, name = start.schedule, start.time, start.producer
    trace.record(made, bound[0])
    params = {**clock.limits(), "chunks_per_rank": instance.collective.chunks_per_rank,
              "occupancy": instance.model.occupancy, "bound_from": "analytic",
              "formulation": f"none (the {name} schedule meets the bound)", "interrupted": False,
              "start": start.params(), **clock.work_params()}
    notes = (start.note(),)
    return SolverOutcome("optimal", schedule, bound[0], bound[1], "timed", solver, solver_version(solver),
                         clock.elapsed(), None, params, tuple(trace.rows), notes)


def _allreduce(instance: Instance, solver: str, clock: Clock, composed: SolverOutcome,
               start: Start | None) -> SolverOutcome:
    """After ReduceScatter then AllGather (``composed``), unless it or the producers' start
    (``start``, when one applies) meets the bound, the direct AllReduce model
    (``allreduce.timed``) with the time left, from the faster of the two.

    ``params["family_time"]`` keeps the family's own time, ``params["direct"]`` what the direct
    model did; the bound is the composed one (it holds for every AllReduce schedule) unless the
    direct phase proved a higher one for every timed schedule (its pieces relaxation).
    """
    schedule, bound, source = composed.schedule, composed.lower_bound, composed.lower_bound_source
    made = compose.makespan(schedule, instance) if schedule is not None else math.inf
    params = {**composed.params, "family_time": made if schedule is not None else None}
    notes = list(composed.notes)
    if start is not None:
        params["start"] = start.params()
        notes.append(start.note())
    if start is not None and start.time < made * (1 - TIME_TOLERANCE):
        schedule, made, name = start.schedule, start.time, start.producer
        notes.append(f"the {name} schedule ({format_time(made)}) beats ReduceScatter then AllGather")
    if (bound is None or made > bound * (1 + TIME_TOLERANCE)) and not clock.interrupted and solver == "cpsat":
        with clock.phase("allreduce: direct model"):
            direct = direct_phase(instance, schedule, made, bound or 0.0, clock,
                                  lambda phase: rank_group_links(instance, phase))
        params.update(clock.work_params())
        notes += direct.notes
        params["direct"] = direct.params
        params["interrupted"] = clock.interrupted
        if direct.schedule is not None and compose.makespan(direct.schedule, instance) < made * (1 - TIME_TOLERANCE):
            schedule, made = direct.schedule, compose.makespan(direct.schedule, instance)
            notes.append("the direct AllReduce schedule beats ReduceScatter then AllGather")
        if direct.lower_bound is not None and (bound is None or direct.lower_bound > bound):
            bound, source = direct.lower_bound, direct.lower_bound_source
    status = composed.status
    if schedule is not None and bound is not None and made <= bound * (1 + TIME_TOLERANCE):
        status = "optimal"
    interrupted = "interrupted: returning the best schedule so far and the proven bound"
    if clock.interrupted and not any(note.endswith(interrupted) for note in notes):
        notes.append(interrupted)
    return replace(composed, status=status, schedule=schedule, wall_time=time.perf_counter() - clock.start,
                   params=params, notes=tuple(notes), lower_bound=bound, lower_bound_source=source)


@dataclass(frozen=True)
class ExportInfo:
    path: str
    horizon: int  # epochs
    floor: int  # the makespan objective's lower limit, epochs
    quantum: float  # seconds per epoch
    rounding: str
    variables: int
    rows: int


def export_timed_model(instance: Instance, path: str | Path, *, horizon: int | None = None,
                       quantum: float | None = None) -> ExportInfo:
    """Writes the time-expanded model (minimise the makespan in epochs) as .mps, .lp, .pbtxt or .pb.

    ``horizon`` defaults to the greedy schedule's makespan, so the model is feasible; its optimum
    times the quantum is the optimal makespan when the grid is exact (an upper bound otherwise).
    The makespan variable is bounded below by the analytic bounds (at most horizon − 1, so the
    objective is always there).
    """
    if instance.collective.kind == "allreduce":
        raise InputError("export the reducescatter and allgather parts of an allreduce separately",
                         field="collective")
    suffix = Path(path).suffix.lower()
    if suffix not in EXPORT_FORMATS:
        raise InputError(f"cannot export the timed model to {Path(path).name!r}: use one of "
                         f"{', '.join(EXPORT_FORMATS)}", field="export-model")
    problem = _problem(instance)
    missing = reach(problem, problem.delay).unreachable(problem)
    if missing is not None:
        raise InputError(f"chunk {missing[0]} cannot reach node {missing[1]}: nothing to export",
                         field="collective")
    grid, _ = choose_grids(problem, quantum)
    true_bound, _ = _analytic_bound(instance, problem)
    floor, _ = _grid_floor(problem, grid, true_bound)
    if horizon is None:
        horizon = int(round(start_on_grid(instance, problem, grid, true_bound).makespan(grid)))
    elif isinstance(horizon, bool) or not isinstance(horizon, int) or horizon < 1:
        raise InputError(f"must be a positive number of epochs, got {horizon!r}", field="horizon")
    floor = min(floor, horizon - 1)
    model = expanded.build(problem, grid, reach(problem, grid.delay), horizon, floor)
    if model is None:
        raise InputError(f"no schedule fits {horizon} epochs of {grid.quantum:g} s (some delivery "
                         "path is longer)", field="horizon")
    export(model.linear, path, name="optcoll_timed")
    return ExportInfo(str(path), horizon, floor, grid.quantum, grid.rounding, model.linear.num_vars,
                      model.linear.num_rows)
