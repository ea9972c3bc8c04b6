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

import numpy as np

from optcoll.producers.exact.memory import require_fits
from optcoll.producers.exact.timed import expanded, linear
from optcoll.producers.exact.timed.grid import Grid
from optcoll.producers.exact.timed.listsched import Transfers
from optcoll.producers.exact.timed.problem import TimedProblem
from optcoll.producers.exact.timed.reach import Reach, reach
from optcoll.producers.exact.timed.reverse import essential
from optcoll.producers.exact.timed.symmetry import (Group, Symmetry, breaking_symmetries, fixed_point_free_group,
                                                   lex_leader_rows, orbit_classes, variable_permutation)

#: Share of the remaining time the symmetric phase, the warm-start phase and each bisection probe
#: may use.
SYMMETRIC_SHARE = 0.2
WARM_SHARE = 0.15
PROBE_SHARE = 0.25
#: Lex-leader rows: how many symmetries, over how many x variables (earliest epochs first).
LEX_SYMMETRIES = 32
LEX_PREFIX = 1000
#: Skip symmetry detection on machines with more nodes than this (colour refinement is quadratic).
MAX_NODES_FOR_SYMMETRY = 1024


@dataclass
class Budget:
    """Wall-clock deadline and solver settings shared by the phases of one solve."""

    solver: str
    deadline: float
    threads: int
    seed: int
    max_memory: int | None = None  # bytes one model may take (None: memory.DEFAULT_SHARE)
    interrupted: bool = False

    def left(self) -> float:
        return max(0.0, self.deadline - time.perf_counter())


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
           budget: Budget, report: Report) -> GridResult:
    """Improves ``best`` and raises ``floor`` until they meet, time runs out or Ctrl-C."""
    best = essential(problem, best, grid.delay)
    out = GridResult(best, int(round(best.makespan(grid))), floor, floor_source)
    report(out.makespan, out.floor)
    try:
        _phases(problem, grid, out, budget, report)
    except KeyboardInterrupt:  # outside a solver call (inside one, the solver stops cleanly)
        budget.interrupted = True
    return out


def _phases(problem: TimedProblem, grid: Grid, out: GridResult, budget: Budget, report: Report) -> None:
    if out.floor >= out.makespan:
        return
    r = reach(problem, grid.delay)
    symmetric = problem.num_nodes <= MAX_NODES_FOR_SYMMETRY
    if symmetric:
        group = fixed_point_free_group(problem, grid)
        if group.order > 1:
            _symmetric_phase(problem, grid, r, group, out, budget, report)
    if out.floor < out.makespan and not budget.interrupted and budget.left() > 0:
        _solve_at(problem, grid, r, out.makespan, out, budget, report, budget.left() * WARM_SHARE, "warm start")
    breaking = breaking_symmetries(problem, grid, LEX_SYMMETRIES) if symmetric else []
    probing = True
    while out.floor < out.makespan and not budget.interrupted and budget.left() > 0.05:
        if probing and out.makespan - out.floor >= 2:
            # Bisection: is there a schedule within the midpoint? Small horizons prune hard.
            mid = (out.floor + out.makespan - 1) // 2
            before = (out.floor, out.makespan)
            _solve_at(problem, grid, r, mid, out, budget, report, budget.left() * PROBE_SHARE, "bisection",
                      breaking, floor=mid)
            probing = (out.floor, out.makespan) != before  # an inconclusive probe ends bisection
            continue
        improved = _solve_at(problem, grid, r, out.makespan - 1, out, budget, report, budget.left(), "downward",
                             breaking)
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


def _build(problem: TimedProblem, grid: Grid, r: Reach, horizon: int, lower: int,
           budget: Budget) -> expanded.ExpandedModel | None:
    """The model at ``horizon``, once the memory guard has let it through (every horizon is
    checked: a refused model is never built)."""
    require_fits(expanded.size(problem, grid, r, horizon, lower), budget.solver, budget.threads,
                 budget.max_memory)
    return expanded.build(problem, grid, r, horizon, lower)


def _symmetric_phase(problem: TimedProblem, grid: Grid, r: Reach, group: Group, out: GridResult,
                     budget: Budget, report: Report) -> None:
    model = _build(problem, grid, r, out.makespan, out.floor, budget)
    if model is None:
        return
    classes = orbit_classes(model, group.generators)
    if classes is None:
        return
    quotient = model.linear.quotient(classes)
    res = linear.solve(quotient, budget.solver, time_limit=budget.left() * SYMMETRIC_SHARE,
                       threads=budget.threads, seed=budget.seed)
    budget.interrupted |= res.interrupted
    out.phases.append(f"symmetric restriction (group of {group.order}): {res.status}")
    if res.values is not None:
        values = res.values[classes]
        if not model.linear.check(values):
            raise AssertionError("a solution of the symmetric quotient violates the full model")
        _accept(out, problem, grid, model.decode(values), report)


def _solve_at(problem: TimedProblem, grid: Grid, r: Reach, horizon: int, out: GridResult, budget: Budget,
              report: Report, time_limit: float, phase: str, breaking: list[Symmetry] | None = None,
              floor: int | None = None) -> bool:
    """Minimise the makespan within ``horizon`` down to ``floor`` (default: the proven floor; at
    the horizon itself, a feasibility question). True if the incumbent improved.

    With ``breaking`` symmetries, lex-leader rows keep one schedule per orbit (no hint then: the
    incumbent need not be its orbit's leader).
    """
    model = _build(problem, grid, r, horizon, out.floor if floor is None else floor, budget)
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

    res = linear.solve(model.linear, budget.solver, time_limit=time_limit, threads=budget.threads,
                       seed=budget.seed, progress=progress if model.has_objective else None)
    budget.interrupted |= res.interrupted
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
