"""Coarse epochs for machines whose fine time-expanded model is too big (docs/model.md §6).

The fine model has a variable per (chunk, link, epoch) with epochs of about one transfer, so a
switch with N ports and N chunks needs ~N epochs and ~N³ variables (a 256-port switch: over
100 GiB). A coarse grid takes epochs of m transfers on the fastest link and lets a link carry
several transfers per epoch (``Grid.capacity``, rounded up as ``grid`` proves sound), so the
horizon shrinks m-fold and every schedule on it is still valid in true time.

A coarse grid only finds schedules: its optimum times q is an upper bound, never a proof. Proofs
stay with exact grids, the rounded-down grid and the analytic bounds.
"""
from __future__ import annotations

import math

from optcoll.producers.exact.memory import ModelTooLarge, ModelSize, require_fits
from optcoll.producers.exact.timed import expanded
from optcoll.producers.exact.timed.grid import Grid, make_grid
from optcoll.producers.exact.timed.listsched import Transfers, greedy, retime
from optcoll.producers.exact.timed.problem import TimedProblem
from optcoll.producers.exact.timed.reach import reach

#: A fine model with more epochs than this (or over the memory limit) gets a coarse grid first;
#: the coarse grid aims at this many epochs over the incumbent's makespan.
COARSE_EPOCHS = 64
#: How many times the coarse quantum may double to bring the model under the memory limit.
MAX_DOUBLINGS = 6


def shortest_transfer(problem: TimedProblem) -> float:
    """Seconds one transfer occupies the fastest link that is ever busy (the coarse grid's step:
    epochs of m such transfers waste nothing on that link)."""
    busy = problem.busy[problem.busy > 0]
    return float(busy.min()) if busy.size else float(problem.delay.min())


def fits(size: ModelSize, solver: str, threads: int, max_memory: int | None) -> bool:
    try:
        require_fits(size, solver, threads, max_memory)
    except ModelTooLarge:
        return False
    return True


def needed(problem: TimedProblem, fine: Grid, start: Transfers, solver: str, threads: int,
           max_memory: int | None) -> str | None:
    """Why the fine grid needs a coarse one first (None when it does not)."""
    k = int(round(retime(problem, fine, start).makespan(fine)))
    if k > COARSE_EPOCHS:
        return f"the fine grid needs {k} epochs"
    size = expanded.size(problem, fine, reach(problem, fine.delay), k)
    return None if fits(size, solver, threads, max_memory) else f"the fine model at {k} epochs is over the memory limit"


def coarse_grid(problem: TimedProblem, start: Transfers, makespan: float, floor_seconds: float, solver: str,
                threads: int, max_memory: int | None, epochs: int = COARSE_EPOCHS
                ) -> tuple[Grid, Transfers, ModelSize] | None:
    """(grid, first schedule on it, size of its first model): the up grid of m transfers on the
    fastest link per epoch, with m ≥ 2 the least giving at most ``epochs`` epochs over
    ``makespan`` (seconds), doubled until the model fits the memory limit; None when it never
    does. ``start`` (any unit: only its order counts) is list-scheduled on the grid; when that
    takes over twice its makespan in epochs (a start relaying through many hops pays a whole
    epoch per hop), the earliest-arrival greedy routed on that grid is tried from then on."""
    step = shortest_transfer(problem)
    m = max(2, math.ceil(makespan / epochs / step))
    starts = [start]
    for _ in range(MAX_DOUBLINGS + 1):
        grid = make_grid(problem, m * step, "up")
        first = min((retime(problem, grid, s) for s in starts), key=lambda t: t.makespan(grid))
        k = int(round(first.makespan(grid)))
        if len(starts) == 1 and k > 2 * math.ceil(makespan / grid.quantum):
            starts.append(greedy(problem, grid))
            first = min(first, retime(problem, grid, starts[-1]), key=lambda t: t.makespan(grid))
            k = int(round(first.makespan(grid)))
        size = expanded.size(problem, grid, reach(problem, grid.delay), k,
                             min(k, math.ceil(floor_seconds / grid.quantum)))
        if fits(size, solver, threads, max_memory):
            return grid, first, size
        m *= 2
    return None
