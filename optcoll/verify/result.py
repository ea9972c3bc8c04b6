"""What the verifier hands back: a verdict, the schedule's time, the first violation, statistics.

Plain frozen data. Per-link and per-node statistics hold Python numbers (not numpy scalars) so a
report can serialise them with ``vars()`` straight to JSON.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from optcoll.units import format_time


@dataclass(frozen=True)
class Violation:
    """The first thing wrong with a schedule.

    ``kind`` is a short stable identifier (``"causality"``, ``"link-overlap"``, ...); ``message``
    says in plain words which chunk, link, node and time, and what was missing. ``time`` is in
    seconds (for step-model schedules: the start or end of the offending step in the step cost).
    """

    kind: str
    message: str
    time: float
    chunk: int | None = None
    link: int | None = None
    transfer: int | None = None
    node: int | None = None
    step: int | None = None


@dataclass(frozen=True)
class LinkStats:
    """One link's load. ``utilisation`` is busy time over the makespan (the last delivery)."""

    link: int
    src: int
    dst: int
    transfers: int
    bytes: float
    busy_time: float
    utilisation: float


@dataclass(frozen=True)
class RankStats:
    """One node's traffic (NPUs first, then switches); activity times are None when idle.

    ``first_activity`` is the earliest start of a transfer it sends or receives, ``last_activity``
    the latest delivery of one.
    """

    node: int
    label: str
    bytes_sent: float
    bytes_received: float
    transfers_sent: int
    transfers_received: int
    first_activity: float | None
    last_activity: float | None


@dataclass(frozen=True, eq=False)
class Verification:
    """The verdict on one schedule.

    ``time`` is the moment the postcondition first holds (timed model) or the step cost
    S·α + R·b/B_min (step model); ``inf`` when the schedule is invalid. ``starts``/``arrivals``
    are per-transfer seconds (NaN for a malformed transfer). ``redundant`` counts deliveries of
    a chunk to a node that already held it (non-combining collectives; 0 otherwise).
    ``path`` says which engine decided ("vectorised", "compiled" or "events").
    """

    valid: bool
    time: float
    violation: Violation | None
    model: str
    path: str
    starts: np.ndarray
    arrivals: np.ndarray
    makespan: float
    link_stats: tuple[LinkStats, ...]
    rank_stats: tuple[RankStats, ...]
    redundant: int
    steps: int | None = None
    rounds: int | None = None
    #: Step model only: transfers per (step, link), shape (S, num_links).
    step_loads: np.ndarray | None = None

    def summary(self) -> str:
        if not self.valid:
            assert self.violation is not None
            return f"INVALID [{self.violation.kind}]: {self.violation.message}"
        text = f"valid: time {format_time(self.time)}, {self.arrivals.shape[0]} transfers"
        if self.steps is not None:
            text += f", {self.steps} steps, {self.rounds} rounds"
        return text
