"""A schedule: a list of transfers (chunk, link, start time, op[, step][, via]).

Stored column-wise in numpy arrays so a million-transfer schedule is cheap to verify and save.
Timed schedules carry start times in seconds; step-model schedules carry step numbers (1..S) and
the rounds of each step, and no start times (NaN).

``via`` is how a plain switch knows what to forward (docs/model.md, "Switches: forwarding
simultaneous arrivals"): a transfer sent by a plain switch may name, by its row, the transfer
whose arrival it forwards (-1: none named). Rows are positions in this schedule, so everything
that reorders or drops transfers goes through ``take``, which renumbers them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from optcoll.errors import InputError
from optcoll.machines.machine import Machine

COPY, REDUCE = 0, 1
OPS = {"copy": COPY, "reduce": REDUCE}
OP_NAMES = {v: k for k, v in OPS.items()}


@dataclass(frozen=True, eq=False)
class Schedule:
    chunk: np.ndarray  # int64
    link: np.ndarray  # int64
    start: np.ndarray  # float64 seconds (NaN in step-model schedules)
    op: np.ndarray  # uint8: COPY or REDUCE
    step: np.ndarray  # int64, 0 when the schedule has no steps
    #: Step model only: rounds of each step 1..S (``rounds[s-1]``).
    rounds: tuple[int, ...] | None = None
    #: Who made it and how (producer name, parameters, seed, ...). Free-form, JSON-serialisable.
    meta: dict[str, Any] = field(default_factory=dict)
    #: int64 per transfer: the row of the arrival a plain switch forwards, -1 where none is named;
    #: None when no transfer names one (most schedules: no memory spent).
    via: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = self.chunk.shape[0]
        for name in ("link", "start", "op", "step") + (("via",) if self.via is not None else ()):
            if getattr(self, name).shape[0] != n:
                raise ValueError(f"schedule column {name} has {getattr(self, name).shape[0]} rows, expected {n}")

    @property
    def model(self) -> str:
        return "step" if self.rounds is not None else "timed"

    def __len__(self) -> int:
        return int(self.chunk.shape[0])

    @property
    def num_steps(self) -> int:
        return len(self.rounds) if self.rounds is not None else 0

    def with_meta(self, **meta: Any) -> "Schedule":
        return Schedule(self.chunk, self.link, self.start, self.op, self.step, self.rounds,
                        {**self.meta, **meta}, self.via)

    def take(self, rows: np.ndarray) -> "Schedule":
        """The transfers at ``rows``, in that order, ``via`` renumbered to the new rows. A kept
        transfer must not name a dropped one (its switch would forward nothing)."""
        rows = np.asarray(rows, dtype=np.int64)
        via = None
        if self.via is not None:
            new = np.full(len(self) + 1, -1, dtype=np.int64)  # last entry: "none named" stays -1
            new[rows] = np.arange(rows.size)
            named = self.via[rows]
            via = new[named]
            if np.any((named >= 0) & (via < 0)):
                raise ValueError("take drops a transfer that a kept one forwards (via)")
        return Schedule(self.chunk[rows], self.link[rows], self.start[rows], self.op[rows],
                        self.step[rows], self.rounds, self.meta, via)

    def sorted(self) -> "Schedule":
        """Transfers in a canonical order (start or step, then link, then chunk)."""
        key_time = self.start if self.rounds is None else self.step.astype(float)
        return self.take(np.lexsort((self.chunk, self.link, key_time)))

    @staticmethod
    def concat(first: "Schedule", second: "Schedule", offset: float = 0.0) -> "Schedule":
        """``second`` after ``first``: a timed ``second`` shifted by ``offset`` seconds; a step
        ``second``'s steps after ``first``'s (its rounds follow first's; ``offset`` must be 0)."""
        if first.model != second.model:
            raise ValueError("concat joins two timed or two step schedules")
        steps = first.model == "step"
        if steps and offset:
            raise ValueError("step schedules follow each other by steps, not by an offset")
        via = None
        if first.via is not None or second.via is not None:
            shifted = second.named()
            via = np.concatenate([first.named(), np.where(shifted >= 0, shifted + len(first), -1)])
        return Schedule(np.concatenate([first.chunk, second.chunk]),
                        np.concatenate([first.link, second.link]),
                        np.concatenate([first.start, second.start + offset]),
                        np.concatenate([first.op, second.op]),
                        np.concatenate([first.step, second.step + first.num_steps]),
                        first.rounds + second.rounds if steps else None,
                        {**first.meta, **second.meta}, via)

    def named(self) -> np.ndarray:
        """``via`` as a column (-1 everywhere when no transfer names one)."""
        return self.via if self.via is not None else np.full(len(self), -1, dtype=np.int64)


class ScheduleBuilder:
    """Python API for writing schedules by hand or from a producer.

    >>> b = ScheduleBuilder(machine)
    >>> b.send(chunk=0, src=0, dst=1, start=0.0)
    >>> schedule = b.build()
    """

    def __init__(self, machine: Machine, *, rounds: list[int] | None = None, **meta: Any):
        self.machine = machine
        self.rounds = list(rounds) if rounds is not None else None
        self.meta = meta
        self._rows: list[tuple[int, int, float, int, int, int]] = []

    def add(self, chunk: int, link: int, start: float | None = None, op: str = "copy",
            step: int | None = None, via: int | None = None) -> int:
        """One transfer on a link given by id; ``via``: the row of the arrival a plain switch
        forwards (module docstring). Returns its row."""
        if op not in OPS:
            raise InputError(f"unknown op {op!r}; use copy or reduce")
        self._rows.append((int(chunk), int(link), np.nan if start is None else float(start),
                           OPS[op], 0 if step is None else int(step), -1 if via is None else int(via)))
        return len(self._rows) - 1

    def send(self, chunk: int, src: int, dst: int, start: float | None = None, op: str = "copy",
             step: int | None = None, lane: int = 0, via: int | None = None) -> int:
        """One transfer src→dst; ``lane`` picks among parallel links. Returns the link id."""
        ids = self.machine.links_between(src, dst)
        if not ids:
            raise InputError(f"no link {src}->{dst} in machine {self.machine.name!r}")
        if not 0 <= lane < len(ids):
            raise InputError(f"link {src}->{dst} has {len(ids)} parallel lanes, not lane {lane}")
        self.add(chunk, ids[lane], start, op, step, via)
        return ids[lane]

    def build(self) -> Schedule:
        cols = list(zip(*self._rows)) if self._rows else [[]] * 6
        via = np.array(cols[5], dtype=np.int64)
        return Schedule(np.array(cols[0], dtype=np.int64), np.array(cols[1], dtype=np.int64),
                        np.array(cols[2], dtype=float), np.array(cols[3], dtype=np.uint8),
                        np.array(cols[4], dtype=np.int64),
                        tuple(self.rounds) if self.rounds is not None else None, dict(self.meta),
                        via if (via >= 0).any() else None)


def from_arrays(chunk, link, start=None, op=None, step=None, rounds=None, via=None,
                **meta: Any) -> Schedule:
    """A schedule straight from arrays (producers that compute whole columns at once)."""
    chunk = np.asarray(chunk, dtype=np.int64)
    n = chunk.shape[0]
    via = None if via is None else np.asarray(via, dtype=np.int64)
    return Schedule(chunk, np.asarray(link, dtype=np.int64),
                    np.full(n, np.nan) if start is None else np.asarray(start, dtype=float),
                    np.zeros(n, np.uint8) if op is None else np.asarray(op, dtype=np.uint8),
                    np.zeros(n, np.int64) if step is None else np.asarray(step, dtype=np.int64),
                    None if rounds is None else tuple(int(r) for r in rounds), meta,
                    via if via is not None and (via >= 0).any() else None)
