"""Horizon search on one grid: from a known schedule (upper bound) and a proven floor, never a
blind climb from 1.

Phases, each stopping early once the floor meets the best schedule:

A. *Symmetric restriction* (when the problem has a fixed-point-free symmetry group): the model
   quotiented by the group is tens of times smaller and often reaches the floor at once (the
   8×8 torus in a second). It proves nothing, it only improves the incumbent.
B. *Warm start*: the full model at the incumbent's horizon, minimising the makespan with the
   incumbent as a complete hint, so the solver's neighbourhood search starts from it.
C. *Bisection, then downward*: feasibility of the midpoint between floor and incumbent (small
   horizons prune hard, so refuting them is cheap), then the model at horizon (best − 1), with
   lex-leader rows breaking symmetries (sound: every orbit keeps its leader); infeasible proves
   the incumbent optimal, a solution lowers the incumbent and repeats.

The makespan objective lets CP-SAT and the MIP solvers report a proven bound when time runs out.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from optcoll.producers.exact.memory import require_fits
from optcoll.producers.exact.timed import expanded
from optcoll.producers.exact.timed.grid import Grid
from optcoll.producers.exact.timed.listsched import Transfers
from optcoll.producers.exact.timed.problem import TimedProblem
from optcoll.producers.exact.timed.reach import Reach, reach
from optcoll.producers.exact.timed.reverse import essential
from optcoll.producers.exact.timed.symmetry import (Group, Symmetry, breaking_symmetries, fixed_point_free_group,
                                                   lex_leader_rows, orbit_classes, variable_permutation)
from optcoll.instances.clock import Clock
from optcoll.producers.exact.toolkit import solve
from optcoll.producers.exact.toolkit.symmetry import MAX_NODES

#: Share of the remaining time the symmetric phase, the warm-start phase and each bisection probe
#: may use.
SYMMETRIC_SHARE = 0.2
WARM_SHARE = 0.15
PROBE_SHARE = 0.25
#: CPU seconds to build a time-expanded model and hand it to CP-SAT, per term (1.5 µs measured on
#: an 895k-variable, 3.5M-term NVSwitch model and a 0.9M-term 8x8 torus; x86-64, Python 3.11,
#: OR-Tools 9.15). A model is built only when its estimate fits in the time left.
BUILD_SECONDS_PER_TERM = 1.5e-6
#: Lex-leader rows: how many symmetries, over how many x variables (earliest epochs first).
LEX_SYMMETRIES = 32
LEX_PREFIX = 1000
@dataclass
class GridResult:
    best: Transfers  # epochs on the grid
    makespan: int
    floor: int  # proven: no schedule on this grid finishes before it
    proved_by: str  # what established the floor
    phases: list[str] = field(default_factory=list)
    #: Whether a solver's search raised the floor (else it is the analytic floor it was given,
    #: or a reachability argument).
    searched: bool = False


Report = Callable[[int | None, int | None], None]


def search(problem: TimedProblem, grid: Grid, floor: int, floor_source: str, best: Transfers,
           solver: str, clock: Clock, report: Report) -> GridResult:
    """Improves ``best`` and raises ``floor`` until they meet, the clock runs out or Ctrl-C
    (which the clock then says)."""
    best = essential(problem, best, grid.delay)
    out = GridResult(best, int(round(best.makespan(grid))), floor, floor_source)
    report(out.makespan, out.floor)
    try:
        _phases(problem, grid, out, _Models(problem, grid, solver, clock), clock, report)
    except _NoTime as stop:
        out.phases.append(str(stop))
    except KeyboardInterrupt:  # outside a solver call (inside one, the solver stops cleanly)
        clock.interrupt()
    return out


class _NoTime(Exception):
    """The time left is too short to build the next model: the search ends with what it has."""


class _Models:
    """Builds the models of one search through the memory guard and the build-time estimate
    (a refused model is never built), keeping the last untouched one: the symmetric phase and
    the warm start ask for the same model."""

    def __init__(self, problem: TimedProblem, grid: Grid, solver: str, clock: Clock):
        self.problem, self.grid, self.solver, self.clock = problem, grid, solver, clock
        self.kept: tuple[tuple[int, int], expanded.ExpandedModel | None] | None = None

    @cached_property
    def r(self) -> Reach:
        return reach(self.problem, self.grid.delay)

    def get(self, horizon: int, lower: int, *, to_change: bool = False) -> expanded.ExpandedModel | None:
        """The model at ``horizon`` with the makespan floor ``lower`` (None if no delivery fits
        ``horizon``); ``to_change``: the caller adds rows, so it gets a model of its own."""
        key = (horizon, lower)
        if self.kept is not None and self.kept[0] == key:
            model = self.kept[1]
            if to_change:
                self.kept = None
            return model
        size = expanded.size(self.problem, self.grid, self.r, horizon, lower)
        budget = self.clock.budget
        require_fits(size, self.solver, budget.threads, budget.max_memory)
        need = BUILD_SECONDS_PER_TERM * size.terms
        if need > self.clock.left():
            raise _NoTime(f"time limit: the model {size.what} would take about {need:.2g} s to build, "
                          f"more than the {self.clock.left():.2g} s left")
        model = expanded.build(self.problem, self.grid, self.r, horizon, lower)
        self.kept = None if to_change else (key, model)
        return model


def _phases(problem: TimedProblem, grid: Grid, out: GridResult, models: _Models, clock: Clock,
            report: Report) -> None:
    """Each step first checks the clock: symmetry detection and model building count against
    the limit like solver calls do, and none of them starts once the time is up."""
    if out.floor >= out.makespan or clock.left() <= 0:
        return
    symmetric = problem.num_nodes <= MAX_NODES
    if symmetric:
        group = fixed_point_free_group(problem, grid, deadline=time.perf_counter() + clock.left() * SYMMETRIC_SHARE)
        if group.order > 1 and clock.left() > 0:
            _symmetric_phase(problem, grid, models, group, out, clock, report)
    if out.floor < out.makespan and clock.left() > 0:
        _solve_at(problem, grid, models, out.makespan, out, clock.part(WARM_SHARE), report, "warm start")
    breaking = []
    if symmetric and clock.left() > 0:
        breaking = breaking_symmetries(problem, grid, LEX_SYMMETRIES,
                                       deadline=time.perf_counter() + clock.left() * SYMMETRIC_SHARE)
    probing = True
    while out.floor < out.makespan and clock.left() > 0.05:
        if probing and out.makespan - out.floor >= 2:
            # Bisection: is there a schedule within the midpoint? Small horizons prune hard.
            mid = (out.floor + out.makespan - 1) // 2
            before = (out.floor, out.makespan)
            _solve_at(problem, grid, models, mid, out, clock.part(PROBE_SHARE), report, "bisection",
                      breaking, floor=mid)
            probing = (out.floor, out.makespan) != before  # an inconclusive probe ends bisection
            continue
        improved = _solve_at(problem, grid, models, out.makespan - 1, out, clock, report, "downward", breaking)
        if not improved:
            break


def _accept(out: GridResult, problem: TimedProblem, grid: Grid, transfers: Transfers, report: Report) -> bool:
    transfers = essential(problem, transfers, grid.delay)  # solvers may add harmless late extras
    span = int(round(transfers.makespan(grid)))
    if span >= out.makespan:
        return False
    out.best, out.makespan = transfers, span
    report(out.makespan, None)
    return True


def _symmetric_phase(problem: TimedProblem, grid: Grid, models: _Models, group: Group, out: GridResult,
                     clock: Clock, report: Report) -> None:
    phase = clock.part(SYMMETRIC_SHARE)
    model = models.get(out.makespan, out.floor)
    if model is None or phase.left() <= 0:
        return
    classes = orbit_classes(model, group.generators)
    if classes is None:
        return
    quotient = model.linear.quotient(classes)
    if phase.left() <= 0:
        return
    res = solve(quotient, models.solver, phase)
    out.phases.append(f"symmetric restriction (group of {group.order}): {res.status}")
    if res.values is not None:
        values = res.values[classes]
        if not model.linear.check(values):
            raise AssertionError("a solution of the symmetric quotient violates the full model")
        _accept(out, problem, grid, model.decode(values), report)


def _solve_at(problem: TimedProblem, grid: Grid, models: _Models, horizon: int, out: GridResult,
              clock: Clock, report: Report, phase: str, breaking: list[Symmetry] | None = None,
              floor: int | None = None) -> bool:
    """Minimise the makespan within ``horizon`` down to ``floor`` (default: the proven floor; at
    the horizon itself, a feasibility question) until ``clock`` runs out. True if the incumbent
    improved.

    With ``breaking`` symmetries, lex-leader rows keep one schedule per orbit (no hint then: the
    incumbent need not be its orbit's leader).
    """
    model = models.get(horizon, out.floor if floor is None else floor, to_change=bool(breaking))
    if model is None:  # some delivery cannot be made by the horizon at all
        out.floor, out.proved_by = horizon + 1, f"no delivery path fits {horizon} epochs"
        report(None, out.floor)
        return False
    perms = [p for p in (variable_permutation(model, s) for s in breaking or []) if p is not None]
    if perms:
        order = np.lexsort((model.x_link, model.x_chunk, model.x_epoch))
        lex_leader_rows(model.linear, perms, model.x_index[order][:LEX_PREFIX])
        phase += f" with {len(perms)} symmetries broken"
    else:
        hint = model.assignment(out.best)
        if hint is not None:
            model.linear.hint = {i: int(v) for i, v in enumerate(hint.tolist())}

    def progress(objective: float | None, bound: float | None) -> None:
        report(None if objective is None else int(round(objective)),
               None if bound is None else max(out.floor, int(np.ceil(bound - 1e-6))))

    if clock.left() <= 0:
        return False
    res = solve(model.linear, models.solver, clock, progress=progress if model.has_objective else None)
    out.phases.append(f"{phase} at {horizon} epochs: {res.status} ({res.wall:.2f} s)")
    improved = False
    if res.values is not None:
        if not model.linear.check(res.values):
            raise AssertionError(f"{res.solver} returned values that violate the model")
        improved = _accept(out, problem, grid, model.decode(res.values), report)
    if res.status == "infeasible":
        raised, why = horizon + 1, f"{res.solver}: {horizon} epochs infeasible"
    elif res.status == "optimal" and res.objective is not None:
        raised, why = int(round(res.objective)), f"{res.solver}: optimal within {horizon} epochs"
    elif res.bound is not None:
        raised = min(int(np.ceil(res.bound - 1e-6)), horizon + 1)
        why = f"{res.solver}: objective bound at {horizon} epochs"
    else:
        raised, why = out.floor, ""
    if raised > out.floor:  # an optimum at the floor confirms it; the floor keeps its source
        out.floor, out.proved_by, out.searched = raised, why, True
    report(None, out.floor)
    return improved
