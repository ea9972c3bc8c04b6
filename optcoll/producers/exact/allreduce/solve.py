"""One solve of the direct AllReduce model: build it at a horizon, hint it with a known schedule,
let CP-SAT minimise the makespan, decode the best schedule and the proven bound (in epochs).

The caller verifies the schedule with the shared verifier and decides what the bound proves:
on exact epochs with no restriction it is the least makespan in the model solved.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from optcoll.instances.clock import Clock
from optcoll.producers.exact.allreduce import encoding
from optcoll.producers.exact.allreduce.problem import DirectProblem
from optcoll.producers.exact.allreduce.transfers import RouteTransfers, partial_sums
from optcoll.producers.exact.memory import ModelSize, require_fits
from optcoll.producers.exact.toolkit import run_cpsat

if TYPE_CHECKING:  # the symmetry quotient (scipy's graph routines) loads only where it is used
    from optcoll.producers.exact.allreduce.symmetric import Orbit

#: Terms of the direct model built per second, measured on 2 shared cores at load average 9-12:
#: 107 k/s for DGX-2 C = 1 at 33 epochs (27.4 M terms, 256 s), 115-126 k/s for DGX-1 and the
#: 4×4 torus, 58 k/s for ring8 (163 k terms).
BUILD_TERMS_PER_SECOND = 1e5
#: Share of a solve's time limit its model's estimated build may take (the proto translation, the
#: presolve and the search need the rest).
BUILD_SHARE = 0.25


class TooSlowToBuild(Exception):
    """A model whose estimated build time exceeds its share of the time limit; it was not built
    (a time limit is a limit of the whole solve, docs/model.md §6)."""


def check_build_time(size: ModelSize, terms_per_second: float, clock: Clock) -> None:
    """Raises ``TooSlowToBuild`` when building ``size`` at ``terms_per_second`` would take more
    than ``BUILD_SHARE`` of the time ``clock`` has left."""
    build, left = size.terms / terms_per_second, clock.left()
    if build > BUILD_SHARE * left:
        raise TooSlowToBuild(f"the model {size.what} ({size.variables} variables, {size.terms} terms) would take "
                             f"about {build:.0f} s to build, over {BUILD_SHARE:.0%} of the {left:.0f} s left; "
                             "not built")


#: (incumbent epochs or None, proven bound epochs or None), told as they improve.
Progress = Callable[[int | None, int | None], None]


@dataclass(frozen=True)
class DirectOutcome:
    """What one solve proved and cost; the schedule comes beside it as route transfers."""

    bound: int | None  # no schedule of the model finishes before this epoch (solver's proof)
    status: str  # CP-SAT's: optimal | feasible | infeasible | unknown
    size: ModelSize
    wall: float
    interrupted: bool
    hinted: str  # "complete", "partial" or "none"
    work: float = 0.0  # CP-SAT deterministic time spent


def solve(problem: DirectProblem, horizon: int, floor: int, clock: Clock, *, start: RouteTransfers | None = None,
          orbit: Orbit | None = None, progress: Progress | None = None
          ) -> tuple[DirectOutcome, RouteTransfers | None]:
    """Minimise the makespan over [floor, horizon] epochs (a feasibility question when they are
    equal), over every schedule or (``orbit``) the symmetric ones only, within ``clock`` (building
    the model counts). Returns the outcome and the best route transfers (None when none was found)."""
    floor = min(int(floor), int(horizon))
    size = encoding.size(problem, horizon, None if orbit is None else len(orbit.representatives))
    require_fits(size, "cpsat", clock.budget.threads, clock.budget.max_memory)
    check_build_time(size, BUILD_TERMS_PER_SECOND, clock)
    began = time.perf_counter()
    model = encoding.build(problem, horizon, floor, orbit)
    hinted = _hint(model, start) if start is not None and len(start) and orbit is None else "none"

    def told(objective: float | None, bound: float | None) -> None:
        if progress is not None:
            progress(None if objective is None else int(round(objective)),
                     None if bound is None else math.ceil(bound - 1e-6))

    res = run_cpsat(model.cp, clock, progress=told, has_objective=model.makespan is not None)
    best = decode(model, res.values, orbit) if res.values is not None else None
    if res.status == "infeasible":
        bound = horizon + 1
    elif res.status == "optimal":
        bound = best.makespan(problem) if best is not None else None
    elif res.bound is not None:
        bound = max(floor, math.ceil(res.bound - 1e-6))
    else:
        bound = None
    outcome = DirectOutcome(bound, res.status, size, time.perf_counter() - began, res.interrupted, hinted,
                            res.work)
    return outcome, best


def decode(model: encoding.DirectModel, values: np.ndarray, orbit: Orbit | None = None) -> RouteTransfers:
    """The transfers of a solution (every chunk's, under ``orbit``) that start before its
    makespan (later ones change nothing)."""
    rows = []
    cand = model.cand
    for (c, j), lit in model.copy.items():
        if values[lit.index]:
            rows.append((c, int(cand.route[j]), int(cand.start[j]), 0))
    for (c, j), lit in model.reduce.items():
        if values[lit.index]:
            rows.append((c, int(cand.route[j]), int(cand.start[j]), 1))
    cols = [np.array(col, dtype=np.int64) for col in zip(*rows)] if rows else [np.zeros(0, dtype=np.int64)] * 4
    found = RouteTransfers(cols[0], cols[1], cols[2], cols[3].astype(np.uint8))
    if orbit is not None:
        found = orbit.expand(found)
    end = _finish(model, found)
    return found.take(np.flatnonzero(found.start < end))


def _finish(model: encoding.DirectModel, transfers: RouteTransfers) -> int:
    """The first epoch from which every rank holds every chunk's whole sum, on the replay."""
    problem = model.problem
    holds = partial_sums(problem, transfers, model.horizon)
    assert holds is not None, "a solution of the direct model breaks its own rules"
    ranks = problem.member_index() >= 0
    whole = holds[:, ranks].all(axis=(0, 1, 3))  # per epoch
    t = model.horizon
    while t > 0 and whole[t - 1]:
        t -= 1
    return t


def _hint(model: encoding.DirectModel, start: RouteTransfers) -> str:
    """Hints ``start`` (transfers within the horizon) on every variable when its replay is valid,
    else on the transfers only."""
    problem, cand, cp = model.problem, model.cand, model.cp
    where = {(int(r), int(k)): j for j, (r, k) in enumerate(zip(cand.route, cand.start))}
    chosen: dict[tuple[int, int], int] = {}
    for c, r, k, op in zip(start.chunk.tolist(), start.route.tolist(), start.start.tolist(), start.op.tolist()):
        j = where.get((r, k))
        if j is not None and (op == 0 or (c, j) in model.reduce):
            chosen[(c, j)] = op
    complete = len(chosen) == len(start)
    holds = partial_sums(problem, start, model.horizon) if complete else None
    for (c, j), lit in model.copy.items():
        cp.add_hint(lit, chosen.get((c, j)) == 0)
    for (c, j), lit in model.reduce.items():
        cp.add_hint(lit, chosen.get((c, j)) == 1)
    if holds is None:
        return "partial"
    for (c, v, t, i), lit in model.holds.items():
        if not isinstance(lit, int):
            cp.add_hint(lit, bool(holds[c, v, t, i]))
    for (c, j, i), lit in model.carries.items():
        u = int(problem.route_src[cand.route[j]])
        cp.add_hint(lit, (c, j) in chosen and bool(holds[c, u, int(cand.start[j]), i]))
    return "complete"
