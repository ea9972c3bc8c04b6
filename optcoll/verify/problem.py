"""One verification problem, prepared once and shared by both engines and the message writers.

Preparing means: check that the collective fits the machine, find malformed transfers (unknown
chunk, link or op, bad start time or step), and turn every well-formed transfer into columns of
*engine time*: its start, its delivery and (timed model) the end of its link occupancy.

The step model reuses the timed engines: a transfer of step s starts at engine time s and is
delivered at s + 1/2, so it is visible to sends of step s+1 and not of step s, and every delivery
of one step happens at the same instant. ``Problem.seconds`` maps engine time back to seconds.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from optcoll.collectives.collective import Collective
from optcoll.errors import InputError
from optcoll.instances.instance import TimeModel
from optcoll.machines.machine import Machine
from optcoll.schedules.schedule import REDUCE, Schedule
from optcoll.units import format_time
from optcoll.verify.result import Violation

#: Order of the checks on one transfer at one instant (lower is reported first). Kinds found on
#: delivery, at the end or for the whole schedule never tie with these and take 0.
PRIORITY = {"bad-time": 0, "step-order": 0, "unknown-chunk": 0, "unknown-link": 0, "unknown-op": 0,
            "bad-via": 0, "op-not-allowed": 1, "switch-reduce": 2, "causality": 3,
            "switch-forward": 3, "ambiguous-forward": 3,
            "link-overlap": 4, "step-capacity": 4, "send-ports": 5, "recv-ports": 6,
            "double-count": 0, "ambiguous-arrival": 0, "overwrite": 0,
            "postcondition": 0, "missing-contribution": 0, "step-rounds": 0}

#: Every violation kind the verifier reports (stable identifiers).
VIOLATION_KINDS = tuple(PRIORITY)

#: Relative tolerance on times, so schedules computed in integer quanta and converted pass.
RELATIVE_TOLERANCE = 1e-9
ABSOLUTE_TOLERANCE = 1e-15

#: Work done per chunk (the event engine), per link or per node (the timing checks) runs over
#: contiguous ranges of them holding at most about this many transfers, so its Python objects
#: and sort buffers stay bounded however large the schedule is (a 4096-NPU AllReduce has 33.5 M).
BATCH_TRANSFERS = 1 << 20


class Finding(NamedTuple):
    """A violation with the key that orders violations: (engine time, transfer id, priority)."""

    time: float
    transfer: float
    priority: int
    violation: Violation


class Outcome(NamedTuple):
    """What an engine decides: the first violation, else the engine time the postcondition holds."""

    finding: Finding | None
    time: float


def earliest(*findings: Finding | None) -> Finding | None:
    present = [f for f in findings if f is not None]
    return min(present, key=lambda f: (f.time, f.transfer, f.priority)) if present else None


def ranges(weights: np.ndarray, limit: int) -> list[tuple[int, int]]:
    """Consecutive ranges [lo, hi) covering ``weights``' indices, each weighing at most ``limit``
    (a single index heavier than that gets a range of its own)."""
    total = np.cumsum(weights, dtype=np.int64)
    out: list[tuple[int, int]] = []
    lo, before = 0, 0
    while lo < total.size:
        hi = max(int(np.searchsorted(total, before + limit, side="right")), lo + 1)
        out.append((lo, hi))
        lo, before = hi, int(total[hi - 1])
    return out


def within(column: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Positions whose ``column`` value lies in [lo, hi)."""
    return np.flatnonzero((column >= lo) & (column < hi))


@dataclass(frozen=True, eq=False)
class Problem:
    """Columns of the well-formed transfers (``ids`` maps them back to schedule rows)."""

    machine: Machine
    collective: Collective
    schedule: Schedule
    model: TimeModel
    step_model: bool
    ids: np.ndarray
    chunk: np.ndarray
    link: np.ndarray
    op: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    start: np.ndarray  # engine time
    arrive: np.ndarray  # engine time
    occ_end: np.ndarray  # engine time; equals ``arrive`` in the step model (no occupancy)
    eps: float
    #: Step model: seconds at which step s starts for s = 1..S+1 (entry 0 is t = 0, "before").
    step_start: np.ndarray | None
    #: Schedule row of the arrival each transfer forwards (-1: none named); None: none anywhere.
    via: np.ndarray | None = None

    @property
    def num_nodes(self) -> int:
        return self.machine.num_nodes

    def restrict(self, positions: np.ndarray) -> "Problem":
        """The same problem over the transfers at ``positions`` only (same tolerance and clock).
        ``via`` keeps naming schedule rows, so it stays right in any subset holding whole chunks."""
        via = None if self.via is None else self.via[positions]
        return dataclasses.replace(self, via=via,
                                   **{name: getattr(self, name)[positions] for name in _COLUMNS})

    # -- time --------------------------------------------------------------------------------
    def seconds(self, t: float | np.ndarray) -> float | np.ndarray:
        """Engine time → seconds (step model: integral t = start of step t, else its end)."""
        if self.step_start is None:
            return t
        t = np.asarray(t, dtype=float)
        step = np.floor(t).astype(np.int64)
        out = np.where(t == step, self.step_start[np.clip(step, 0, self.step_start.size - 1)],
                       self.step_start[np.clip(step + 1, 0, self.step_start.size - 1)])
        return float(out) if out.ndim == 0 else out

    def when(self, t: float) -> str:
        """'at 1.5 us' or 'in step 3'."""
        if self.step_start is None:
            return f"at {format_time(t)}"
        return f"in step {int(math.floor(t))}" if t > 0 else "at the start"

    # -- names -------------------------------------------------------------------------------
    def node(self, v: int) -> str:
        return self.machine.label(int(v))

    def link_name(self, e: int) -> str:
        e = int(e)
        return f"link {e} ({self.node(self.machine.link_src[e])}->{self.node(self.machine.link_dst[e])})"

    def nodes_text(self, nodes: list[int], limit: int = 8) -> str:
        names = [self.node(v) for v in nodes[:limit]]
        more = f" and {len(nodes) - limit} more" if len(nodes) > limit else ""
        return ", ".join(names) + more

    def transfer_text(self, j: int) -> str:
        """'chunk 5 on link 12 (npu3->npu4) at 1.5 us (transfer 9)' for position j."""
        return (f"chunk {int(self.chunk[j])} on {self.link_name(self.link[j])} "
                f"{self.when(float(self.start[j]))} (transfer {int(self.ids[j])})")

    def finding(self, kind: str, message: str, j: int, *, at: float | None = None,
                node: int | None = None) -> Finding:
        """A finding about position j, ordered at its start unless ``at`` (a delivery) says otherwise."""
        t = float(self.start[j]) if at is None else at
        step = int(math.floor(t)) if self.step_model else None
        return Finding(t, int(self.ids[j]), PRIORITY[kind],
                       Violation(kind, message, float(self.seconds(t)), int(self.chunk[j]),
                                 int(self.link[j]), int(self.ids[j]), node, step))


#: The per-transfer columns of ``Problem``.
_COLUMNS = ("ids", "chunk", "link", "op", "src", "dst", "start", "arrive", "occ_end")


def _check_fit(machine: Machine, collective: Collective) -> None:
    """The collective must name NPUs of this machine (switches never hold pre/post buffers)."""
    n = machine.num_npus
    for name, nodes in (("ranks", np.asarray(collective.ranks, dtype=np.int64)),
                        ("pre", collective.pre.nodes), ("post", collective.post.nodes)):
        bad = nodes[(nodes < 0) | (nodes >= n)]
        if bad.size:
            raise InputError(f"names node {int(bad[0])}, but machine {machine.name!r} has NPUs "
                             f"0..{n - 1} (switches never hold pre/post buffers)",
                             field=f"collective.{name}")
    if collective.post.num_chunks != collective.pre.num_chunks:
        raise InputError("pre and post list different numbers of chunks", field="collective.post")
    if not (collective.chunk_bytes > 0 and math.isfinite(collective.chunk_bytes)):
        raise InputError(f"must be positive and finite, got {collective.chunk_bytes}",
                         field="collective.chunk_bytes")


def _malformed(machine: Machine, collective: Collective, schedule: Schedule, step_model: bool,
               engine_start: np.ndarray) -> tuple[np.ndarray, tuple[str, str, int, float] | None]:
    """Mask of well-formed rows, and the first malformed row as (kind, message, row, engine time).

    A bad start time or step cannot be placed in time, so it is reported first (engine time
    -inf); an unknown chunk, link or op is ordered at its start among the other violations (it
    delivers nothing, so nothing before its start depends on it).
    """
    K, L, S = collective.num_chunks, machine.num_links, schedule.num_steps
    if step_model:
        bad_time = (schedule.step < 1) | (schedule.step > S)
    else:
        bad_time = ~np.isfinite(schedule.start) | (schedule.start < 0)
    bad_chunk = (schedule.chunk < 0) | (schedule.chunk >= K)
    bad_link = (schedule.link < 0) | (schedule.link >= L)
    bad_op = schedule.op > REDUCE
    bad_via = _bad_via(machine, schedule, ~(bad_chunk | bad_link))
    ok = ~(bad_time | bad_chunk | bad_link | bad_op | bad_via)
    if ok.all():
        return ok, None

    def describe(i: int, timed: bool = True) -> str:
        c, e = int(schedule.chunk[i]), int(schedule.link[i])
        chunk = f"chunk {c}" if 0 <= c < K else f"chunk id {c}"
        link = (f"link {e} ({machine.label(int(machine.link_src[e]))}->"
                f"{machine.label(int(machine.link_dst[e]))})" if 0 <= e < L else f"link id {e}")
        when = ""
        if timed:
            when = (f" in step {int(schedule.step[i])}" if step_model
                    else f" at {format_time(float(schedule.start[i]))}")
        return f"transfer {i} ({chunk} on {link}{when})"

    if bad_time.any():
        i = int(np.flatnonzero(bad_time)[0])
        if step_model:
            return ok, ("step-order", f"{describe(i, False)} is in step {int(schedule.step[i])}, but the "
                        f"schedule has steps 1..{S} (one per entry of rounds)", i, -math.inf)
        return ok, ("bad-time", f"{describe(i, False)} has start time {float(schedule.start[i])!r} s; start "
                    f"times must be finite and non-negative seconds", i, -math.inf)
    rows = np.flatnonzero(~ok)
    i = int(rows[np.lexsort((rows, engine_start[rows]))[0]])
    if bad_chunk[i]:
        kind, msg = "unknown-chunk", (f"{describe(i)} names chunk {int(schedule.chunk[i])}, but the "
                                      f"{collective.kind} has {K} chunks (0..{K - 1})")
    elif bad_link[i]:
        kind, msg = "unknown-link", (f"{describe(i)} uses link {int(schedule.link[i])}, but machine "
                                     f"{machine.name!r} has {L} links (0..{L - 1})")
    elif bad_via[i]:
        kind, msg = "bad-via", f"{describe(i)} {_via_problem(machine, schedule, i)}"
    else:
        kind, msg = "unknown-op", (f"{describe(i)} has op {int(schedule.op[i])}; ops are 0 (copy) "
                                   f"and 1 (reduce)")
    return ok, (kind, msg, i, float(engine_start[i]))


def plain_switches(machine: Machine) -> np.ndarray:
    """Per node: a switch that neither multicasts nor reduces (it forwards each arrival once)."""
    return np.array([False] * machine.num_npus + [not (s.multicast or s.reduce) for s in machine.switches],
                    dtype=bool)


def _bad_via(machine: Machine, schedule: Schedule, known: np.ndarray) -> np.ndarray:
    """Rows whose ``via`` cannot name what they forward: a sender that is not a plain switch, a
    row that does not exist, is itself, or is not a delivery of the same chunk into the sender
    (docs/model.md, "Switches: forwarding simultaneous arrivals")."""
    n = len(schedule)
    if schedule.via is None:
        return np.zeros(n, dtype=bool)
    via = schedule.via
    named = (via >= 0) & known
    bad = named & (via >= n)
    rows = np.flatnonzero(named & ~bad)
    r = via[rows]
    sender = machine.link_src[schedule.link[rows]]
    wrong = (~plain_switches(machine)[sender]) | (r == rows) | ~known[r]
    fine = ~wrong
    wrong[fine] = ((machine.link_dst[schedule.link[r[fine]]] != sender[fine])
                   | (schedule.chunk[r[fine]] != schedule.chunk[rows[fine]]))
    bad[rows[wrong]] = True
    return bad


def _via_problem(machine: Machine, schedule: Schedule, i: int) -> str:
    """Why row i's ``via`` names nothing it can forward (one of ``_bad_via``'s reasons)."""
    r, n = int(schedule.via[i]), len(schedule)
    u = int(machine.link_src[schedule.link[i]])
    if not plain_switches(machine)[u]:
        what = "an NPU" if u < machine.num_npus else "a switch that multicasts or reduces"
        return (f"names transfer {r} as the arrival it forwards (via), but its sender "
                f"{machine.label(u)} is {what}, which sends the value it holds; only a plain switch "
                f"forwards a named arrival")
    if r >= n:
        return f"names transfer {r} as the arrival it forwards (via), but the schedule has {n} transfers"
    if r == i:
        return "names itself as the arrival it forwards (via)"
    into = int(machine.link_dst[schedule.link[r]]) if 0 <= schedule.link[r] < machine.num_links else None
    return (f"names transfer {r} (chunk {int(schedule.chunk[r])} into "
            f"{machine.label(into) if into is not None else 'an unknown link'}) as the arrival it forwards "
            f"(via), but it forwards chunk {int(schedule.chunk[i])} out of {machine.label(u)}")


def _check_resolution(machine: Machine, schedule: Schedule, ids: np.ndarray, link: np.ndarray,
                      start: np.ndarray, arrive: np.ndarray, occ_end: np.ndarray) -> None:
    """Every transfer must end after it starts in double precision: a chunk of 64 KiB that starts
    after one of 1e30 KiB has ended (about 1e24 s) would be delivered at its own start, its link
    time lost in rounding, and no verdict about it would mean anything."""
    lost = np.flatnonzero((arrive <= start) | (occ_end <= start))
    if lost.size:
        j = int(lost[0])
        e = int(link[j])
        raise InputError(
            f"transfer {int(ids[j])} (chunk {int(schedule.chunk[ids[j]])} on link {e} "
            f"({machine.label(int(machine.link_src[e]))}->{machine.label(int(machine.link_dst[e]))})) "
            f"starts at {float(start[j])!r} s, where its link time vanishes in double-precision "
            f"rounding; the sizes or times span too many orders of magnitude to be verified",
            field="schedule")


def _tolerance(start: np.ndarray, delay: np.ndarray, busy: np.ndarray) -> float:
    """Time tolerance: relative to the largest time in play, and never as long as half a
    delivery or link release, which must not look simultaneous with its own start."""
    scale = max(float(start.max(initial=0.0)), float(delay.max(initial=0.0)))
    eps = RELATIVE_TOLERANCE * scale + ABSOLUTE_TOLERANCE
    if delay.size:
        eps = min(eps, 0.5 * float(busy.min()), 0.5 * float(delay.min()))
    return eps


def prepare(machine: Machine, collective: Collective, schedule: Schedule, model: TimeModel,
            step_start: np.ndarray | None = None) -> tuple[Problem, Finding | None]:
    """The problem over well-formed transfers, and the first malformed transfer if any.

    ``step_start`` (seconds per step, from the step model) makes it a step-model problem.
    """
    _check_fit(machine, collective)
    step_model = step_start is not None
    engine_start = schedule.step.astype(float) if step_model else schedule.start.astype(float, copy=False)
    ok, malformed = _malformed(machine, collective, schedule, step_model, engine_start)
    # Memory: a 4096-NPU AllReduce has 33.5 M transfers, so the columns are the schedule's own
    # arrays when every row is well formed, indices are 32-bit where they fit, and no column is
    # built through temporaries of its own size.
    every = bool(ok.all())
    index = np.int32 if max(ok.size, machine.num_nodes) < 2**31 else np.int64
    ids = np.arange(ok.size, dtype=index) if every else np.flatnonzero(ok).astype(index)

    def rows(column: np.ndarray, dtype: type | None = None) -> np.ndarray:
        return np.asarray(column if every else column[ids], dtype=dtype)

    chunk, link, op, start = (rows(schedule.chunk, np.int64), rows(schedule.link, np.int64),
                              rows(schedule.op), rows(engine_start))
    if step_model:
        if not collective.equal_chunks:
            raise InputError("the step model counts equal chunks; these differ in size (use the timed "
                             "model)", field="collective")
        arrive = start + 0.5
        occ_end = arrive
        eps = min(RELATIVE_TOLERANCE * max(schedule.num_steps, 1) + ABSOLUTE_TOLERANCE, 0.25)
    elif collective.equal_chunks:
        timing = model.link_timing(machine, collective.chunk_bytes)
        duration, occupancy = timing.delay, timing.busy
        arrive = duration[link]
        arrive += start
        reduces = op == REDUCE
        delayed = bool(timing.reduce_extra) and bool(reduces.any())
        if delayed:
            arrive[reduces] += timing.reduce_extra
        if occupancy is duration and not delayed:
            occ_end = arrive  # the very same numbers: share them
        else:
            occ_end = occupancy[link]
            occ_end += start
        used = np.bincount(link, minlength=machine.num_links) > 0
        eps = _tolerance(start, duration[used], occupancy[used])
    else:
        # Chunks of their own sizes (AlltoAllv): the time rule per transfer.
        timing = model.link_timing(machine, collective.chunk_sizes[chunk], links=link)
        arrive = start + timing.delay
        reduces = op == REDUCE
        if np.any(timing.reduce_extra):
            arrive[reduces] += timing.reduce_extra[reduces]
        occ_end = start + timing.busy
        eps = _tolerance(start, timing.delay, timing.busy)
    if not step_model:
        _check_resolution(machine, schedule, ids, link, start, arrive, occ_end)
    via = None if schedule.via is None else rows(schedule.via, np.int64)
    problem = Problem(machine, collective, schedule, model, step_model, ids, chunk, link, op,
                      machine.link_src.astype(index)[link], machine.link_dst.astype(index)[link],
                      start, arrive, occ_end, eps, step_start, via)
    if malformed is None:
        return problem, None
    kind, message, row, t = malformed
    c, e = int(schedule.chunk[row]), int(schedule.link[row])
    seconds = float(schedule.start[row]) if not step_model else (
        float(problem.seconds(t)) if math.isfinite(t) else 0.0)
    return problem, Finding(t, row, PRIORITY[kind], Violation(
        kind, message, seconds, c if 0 <= c < collective.num_chunks else None,
        e if 0 <= e < machine.num_links else None, row, None,
        int(schedule.step[row]) if step_model else None))
