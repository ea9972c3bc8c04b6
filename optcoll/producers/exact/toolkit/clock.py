"""The limits of one exact solve while it runs (docs/model.md §6: a time limit or Ctrl-C ends
a solve with the best schedule so far and the bound proven so far).

A ``Clock`` is made from the solve's ``Budget`` when the solve starts, so everything the solve
does — greedy starts, symmetry detection, model building, every solver call — counts against one
wall-clock limit. Phases take a share of the time and the work left (``part``); work they spend
is spent on every clock above them, and they share the interrupt flag, so a Ctrl-C seen in one
phase ends them all.

The work limit (``Budget.work_limit``) counts CP-SAT's deterministic time, which depends on the
model and the search, not on the machine's load: tests and benchmarks that must stop at the same
point on any machine use it instead of seconds.
"""
from __future__ import annotations

import time

from optcoll.instances.budget import Budget


class Clock:
    """Wall-clock end, CP-SAT work left and the interrupt flag of one solve (module docstring)."""

    def __init__(self, budget: Budget, start: float | None = None, *, end: float | None = None,
                 parent: "Clock | None" = None, work: float | None = None):
        self.budget = budget
        self.start = time.perf_counter() if start is None else start
        self.end = self.start + budget.time_limit if end is None else end
        self._parent = parent
        self._work_left = budget.work_limit if parent is None else work
        self.work_spent = 0.0  # CP-SAT deterministic time spent under this clock
        self._interrupted = False

    @property
    def root(self) -> "Clock":
        return self if self._parent is None else self._parent.root

    # -- the interrupt --------------------------------------------------------------------------
    @property
    def interrupted(self) -> bool:
        return self.root._interrupted

    def interrupt(self) -> None:
        self.root._interrupted = True

    # -- time and work ----------------------------------------------------------------------------
    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def left(self) -> float:
        """Seconds left (0 once interrupted or out of work)."""
        if self.interrupted or self.work_left() == 0.0:
            return 0.0
        return max(0.0, self.end - time.perf_counter())

    def work_left(self) -> float | None:
        """CP-SAT deterministic time left to this clock, or None without a work limit."""
        if self._work_left is None:
            return None
        left = max(0.0, self._work_left)
        return left if self._parent is None else min(left, self._parent.work_left())

    def spend_work(self, amount: float) -> None:
        clock: Clock | None = self
        while clock is not None:
            clock.work_spent += amount
            if clock._work_left is not None:
                clock._work_left -= amount
            clock = clock._parent

    def limits(self) -> dict[str, float | int]:
        """The limits a result records: the budget's, with a phase's own span as its time limit."""
        params = self.budget.to_params()
        if self._parent is not None:
            params["time_limit"] = self.end - self.start
        return params

    def work_params(self) -> dict[str, float]:
        """{"work": spent} for a result's parameters when the solve has a work limit."""
        return {} if self.budget.work_limit is None else {"work": round(self.work_spent, 6)}

    def limit_reached(self) -> str:
        """Which limit ended the time left: "the work limit (W)" or "the time limit (T s)"."""
        if self.work_left() == 0.0:
            return f"the work limit ({self.budget.work_limit:g})"
        return f"the time limit ({self.budget.time_limit:g} s)"

    def capped(self, seconds: float | None) -> "Clock":
        """A phase that ends after ``seconds`` or with this clock, whichever comes first (a
        per-question limit); None: this clock itself."""
        if seconds is None:
            return self
        now = time.perf_counter()
        return Clock(self.budget, now, end=min(self.end, now + seconds), parent=self, work=self.work_left())

    def part(self, share: float) -> "Clock":
        """A phase that may use ``share`` of the time and of the work left now; it shares the
        interrupt, and what it spends is spent here too."""
        now = time.perf_counter()
        work = self.work_left()
        return Clock(self.budget, now, end=now + max(0.0, self.end - now) * share, parent=self,
                     work=None if work is None else work * share)
