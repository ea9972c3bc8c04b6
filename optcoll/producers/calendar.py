"""The one link/port calendar of the list schedulers (docs/model.md §5.1, rules 3-4): when is a link,
or an NPU's ports, free for a transfer that holds it over a given window?

A resource answers ``blocked_until(lo, hi)``: None if the window [lo, hi) fits, else the
earliest start worth trying next; ``earliest_start`` moves a transfer's start until every
resource it needs (each with the offsets of its window relative to the start) lets it through.
Shared by the classical baselines' list scheduler and the exact solvers' retiming and greedy, in
float seconds or integer epochs alike.
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Sequence
from typing import Protocol

import numpy as np


class Resource(Protocol):
    def blocked_until(self, lo: float, hi: float) -> float | None: ...

    def add(self, lo: float, hi: float) -> None: ...


class Windows:
    """Busy windows of one resource of some capacity (the port count of an NPU)."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.starts: list[float] = []
        self.ends: list[float] = []

    def blocked_until(self, lo: float, hi: float) -> float | None:
        """None if a window [lo, hi) fits; else the earliest start ≥ lo worth trying next.

        Coverage is highest at lo or at a window start inside (lo, hi). Where it is full at p, no
        start before the first end of the windows covering p can fit, nor (so) before the first
        end after p of any window: that is the answer (the same one when windows are equally long).
        """
        if hi <= lo or not self.starts:
            return None
        for p in [lo, *self.starts[bisect_right(self.starts, lo):bisect_left(self.starts, hi)]]:
            if bisect_right(self.starts, p) - bisect_right(self.ends, p) >= self.capacity:
                return self.ends[bisect_right(self.ends, p)]
        return None

    def add(self, lo: float, hi: float) -> None:
        if hi > lo:
            insort(self.starts, lo)
            insort(self.ends, hi)


class Runs:
    """Busy time of a resource of capacity 1 (a link) as disjoint runs, touching windows merged.

    Same answers as ``Windows(1)``, but a transfer waiting behind a long busy stretch jumps to
    its end at once instead of stepping window by window, which made retiming quadratic in the
    transfers per link (it dominated exact solves of large tori).

    ``width``: every window asked about is this long (a link whose transfers all move one chunk
    size). A gap narrower than it can never be used, so it is merged into the runs around it:
    the same answers, but a transfer ready early no longer steps over every dead gap a later
    placement left (which made NVLS list schedules quadratic in the chunks).
    """

    def __init__(self, width: float = 0.0) -> None:
        self.starts: list[float] = []
        self.ends: list[float] = []
        self.width = width

    def blocked_until(self, lo: float, hi: float) -> float | None:
        if hi <= lo:
            return None
        i = bisect_right(self.starts, lo) - 1
        if i >= 0 and self.ends[i] > lo:
            return self.ends[i]
        if i + 1 < len(self.starts) and self.starts[i + 1] < hi:
            return self.ends[i + 1]
        return None

    def add(self, lo: float, hi: float) -> None:
        if hi <= lo:
            return
        i = bisect_right(self.starts, lo)
        if i > 0 and (self.ends[i - 1] >= lo or self.ends[i - 1] + self.width > lo):
            i -= 1
            lo, hi = self.starts[i], max(hi, self.ends[i])
            del self.starts[i], self.ends[i]
        while i < len(self.starts) and (self.starts[i] <= hi or self.starts[i] < hi + self.width):
            hi = max(hi, self.ends[i])
            del self.starts[i], self.ends[i]
        self.starts.insert(i, lo)
        self.ends.insert(i, hi)


#: A resource a transfer needs and its window relative to the transfer's start: [t + lo, t + hi).
Need = tuple[Resource, float, float]


def earliest_start(needs: Sequence[Need], ready: float) -> float:
    """The earliest start ≥ ``ready`` at which every resource lets its window through."""
    t = ready
    moved = True
    while moved:
        moved = False
        for resource, lo, hi in needs:
            until = resource.blocked_until(t + lo, t + hi)
            if until is not None:
                t, moved = until - lo, True
                while t + lo < until:  # float rounding must not leave the window overlapping
                    t = float(np.nextafter(t, np.inf))
    return t


def reserve(needs: Sequence[Need], start: float) -> None:
    for resource, lo, hi in needs:
        resource.add(start + lo, start + hi)
