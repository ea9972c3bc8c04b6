"""Integer time: the quantum q and the problem's durations in whole quanta (docs/model.md §6).

When every duration is a multiple of q (found exactly with fractions, e.g. q = 1/6 µs makes
800.5 µs and 533.83 µs integral) one integer grid is exact. Otherwise two grids bracket the truth:

* ``up``: delays and windows rounded outwards. A transfer at epoch k started at k·q in true time
  delivers no later than its discrete delivery and its true windows lie inside the discrete ones,
  so every discrete schedule is valid in the true model: an *upper* bound.
* ``down``: a true schedule mapped to epochs ⌊t/q⌋ satisfies the rounded-inwards grid (⌊a+b⌋ ≥
  ⌊a⌋+⌊b⌋, and windows that share an epoch share a true instant), so the discrete optimum times q
  is a *lower* bound on the true optimum.

Links shorter than an epoch carry several transfers per epoch (``capacity``; "ports as shared
capacity"), so a coarse q (many transfers per epoch) does not round each transfer up to a whole
epoch. For a link with occupancy b < q and delay d:

* ``up``: capacity c ≤ ⌊q/b⌋, chosen as large as costs no delay: the i-th (0-based, in chunk
  order) of the ≤ c transfers of epoch k starts at k·q + i·b (``listsched.to_seconds``). *Link*: they
  run back to back and the last ends by k·q + c·b ≤ (k+1)·q, so epochs never overlap. *Causality*:
  it delivers by k·q + (c−1)·b + d ≤ (k + delay)·q with delay = ⌈((c−1)·b + d)/q⌉, and a chunk
  delivered by epoch k is held at k·q. *Ports*: its port window lies in [k·q + s, k·q + s + c·b),
  inside the discrete window [k + ⌊s/q⌋, k + ⌈(s + c·b)/q⌉), so the discrete port counts bound the
  true ones. Every discrete schedule is therefore valid in true time, and c = 1 is the plain rule.
* ``down``: starts on a link are at least b apart, so a half-open epoch holds at most ⌈q/b⌉ of
  them: capacity ⌈q/b⌉ with occupancy 1 epoch (rather than no limit) is still a relaxation.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from optcoll.errors import InputError
from optcoll.producers.exact.timed.problem import TimedProblem
from optcoll.producers.exact.toolkit.epochs import MAX_EPOCHS_PER_LINK, TOLERANCE, exact_unit

#: The continuous model accepts a fine exact unit with up to this many units per link.
MAX_UNITS_PER_LINK = 10**6


@dataclass(frozen=True, eq=False)
class Grid:
    """Durations of a ``TimedProblem`` in whole quanta.

    A transfer at epoch k delivers at k + ``delay[e]``, holds its link over epochs
    ``[k, k + busy[e])`` and an NPU port over ``[k + port_lo[e], k + port_hi[e])``; at most
    ``capacity[e]`` transfers occupy link e in any epoch.
    """

    quantum: float  # seconds per epoch
    rounding: str  # "exact" | "up" | "down", or "seconds" for the true model in float seconds
    delay: np.ndarray  # int64 per link, >= 1
    busy: np.ndarray  # int64 per link, >= 0 (0: unlimited, only where the true occupancy is 0)
    port_lo: np.ndarray
    port_hi: np.ndarray
    capacity: np.ndarray  # int64 per link, >= 1

    @property
    def exact(self) -> bool:
        return self.rounding == "exact"

    def seconds(self, epochs: float) -> float:
        return float(epochs) * self.quantum


def seconds_grid(problem: TimedProblem) -> Grid:
    """The true model itself, in float seconds (for list scheduling and retiming)."""
    return Grid(1.0, "seconds", problem.delay, problem.busy, problem.port_shift,
                problem.port_shift + problem.busy, np.ones(problem.num_links, dtype=np.int64))


def _values(problem: TimedProblem) -> np.ndarray:
    return np.concatenate([problem.delay, problem.busy, problem.port_shift])


def _integral(values: np.ndarray, q: float) -> bool:
    ratio = values / q
    return bool(np.all(np.abs(ratio - np.round(ratio)) <= TOLERANCE * np.maximum(ratio, 1.0)))


def make_grid(problem: TimedProblem, quantum: float, rounding: str) -> Grid:
    """The problem's durations in quanta of ``quantum`` seconds, rounded as asked."""
    ratio = {"delay": problem.delay / quantum, "busy": problem.busy / quantum,
             "lo": problem.port_shift / quantum, "hi": (problem.port_shift + problem.busy) / quantum}

    def up(x: np.ndarray) -> np.ndarray:  # the slack keeps an integral ratio from rounding away
        return np.ceil(x - TOLERANCE * np.maximum(x, 1.0)).astype(np.int64)

    def down(x: np.ndarray) -> np.ndarray:
        return np.floor(x + TOLERANCE * np.maximum(x, 1.0)).astype(np.int64)

    capacity = np.ones(problem.num_links, dtype=np.int64)
    if rounding == "exact":
        if not _integral(_values(problem), quantum):
            raise ValueError("durations are not multiples of the quantum")
        delay, busy, port_lo, port_hi = (np.round(ratio[k]).astype(np.int64) for k in ("delay", "busy", "lo", "hi"))
    elif rounding == "up":  # outwards: later deliveries, longer windows
        b, d = ratio["busy"], ratio["delay"]
        short = (b > 0) & (b < 1)
        # As many back-to-back transfers as fit in an epoch without delivering an epoch later.
        fits = np.floor((1.0 + TOLERANCE) / np.where(short, b, 1.0))
        free = np.floor((up(d) - d) * (1.0 + TOLERANCE) / np.where(short, b, 1.0) + TOLERANCE) + 1
        capacity = np.where(short, np.maximum(np.minimum(fits, free), 1), 1).astype(np.int64)
        spread = (capacity - 1) * b  # the last transfer of an epoch starts this many epochs in
        delay, busy = up(d + spread), up(capacity * b)
        port_lo, port_hi = down(ratio["lo"]), up(ratio["lo"] + capacity * b)
    elif rounding == "down":  # inwards: earlier deliveries, shorter windows
        delay, busy, port_lo, port_hi = down(ratio["delay"]), down(ratio["busy"]), up(ratio["lo"]), down(ratio["hi"])
        short = (busy == 0) & (problem.busy > 0)  # starts ≥ b apart: ⌈q/b⌉ per half-open epoch
        capacity[short] = np.ceil((1.0 + TOLERANCE) / ratio["busy"][short]).astype(np.int64)
        busy[short] = 1
    else:
        raise ValueError(f"unknown rounding {rounding!r}")
    return Grid(float(quantum), rounding, delay, busy, port_lo, port_hi, capacity)


def choose_grids(problem: TimedProblem, quantum: float | None = None) -> tuple[Grid, Grid | None]:
    """(the grid schedules come from, the grid whose optimum is a lower bound or None).

    One exact grid serves both when it exists. The default quantum is the exact unit when it is
    coarse enough (at most ``MAX_EPOCHS_PER_LINK`` epochs on the slowest link), else the time of
    one chunk on the fastest link. The ``down`` grid is dropped when a delay rounds to zero
    epochs: zero-delay relays could pass a chunk around within one epoch.
    """
    values = _values(problem)
    if quantum is None:
        unit = exact_unit(values, MAX_EPOCHS_PER_LINK)
        if unit is not None:
            return make_grid(problem, unit, "exact"), None
        quantum = float(problem.delay.min())
    elif not (quantum > 0 and math.isfinite(quantum)):
        raise InputError(f"the quantum must be a positive number of seconds, got {quantum!r}", field="quantum")
    if _integral(values, quantum) and problem.delay.min() >= quantum * (1 - TOLERANCE):
        return make_grid(problem, quantum, "exact"), None
    upper = make_grid(problem, quantum, "up")
    lower = make_grid(problem, quantum, "down")
    return upper, (lower if lower.delay.min() >= 1 else None)


def fine_grid(problem: TimedProblem) -> Grid | None:
    """The exact grid of the continuous model (up to ``MAX_UNITS_PER_LINK`` units per link)."""
    unit = exact_unit(_values(problem), MAX_UNITS_PER_LINK)
    return None if unit is None else make_grid(problem, unit, "exact")
