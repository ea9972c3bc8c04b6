"""The limits of one job while it runs (docs/model.md §6: a time limit or Ctrl-C ends a solve
with the best schedule so far and the bound proven so far): the one limits object.

A ``Clock`` is made from the job's ``Budget`` when the job starts (the command line, a sweep's
job, ``run.exact``) and travels whole down to every solver call, so everything the job does —
bounds, greedy starts, symmetry detection, model building, every solver call — counts against
one wall-clock limit; nothing below the job unpacks it into loose numbers. It lives beside
``Budget`` in ``instances`` so that the bounds, the verifier's callers and every producer can
check it (cooperative deadlines: a phase that sees ``expired`` stops with what it has). Phases take a share of the time and the work left (``part``); work they spend
is spent on every clock above them, and they share the interrupt flag, so a Ctrl-C seen in one
phase ends them all.

The work limit (``Budget.work_limit``) counts CP-SAT's deterministic time, which depends on the
model and the search, not on the machine's load: tests and benchmarks that must stop at the same
point on any machine use it instead of seconds.
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass

from optcoll.instances.budget import Budget

#: Where a clock reads the time (``time.perf_counter``; tests pass a fake one).
TimeSource = Callable[[], float]


@dataclass(frozen=True)
class PhaseTime:
    """One phase of a job as its clock saw it: seconds from the job's start (``began``,
    ``ended``), how deep it sits in the phases open around it, and the job's seconds left when
    it ended (negative: it ended past the limit). ``solve --verbose`` prints them."""

    name: str
    began: float
    ended: float
    depth: int
    left: float

    @property
    def seconds(self) -> float:
        return self.ended - self.began


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where SIGINT raises KeyboardInterrupt: everything that stops cleanly on
    Ctrl-C (sweep workers stopped, best schedule so far kept) does so on SIGTERM too."""


#: Set once the process was asked to end (SIGTERM to the ``optcoll`` command): every clock reads
#: it as an interrupt, so the job running ends with what it has, and no job starts after it.
_terminating = False


def terminate(signum: int, frame: object) -> None:
    """The ``optcoll`` command's SIGTERM handler: the process is ending (every clock interrupted,
    no new one starts) and ``Terminated`` unwinds what runs now. During a solver call
    ``toolkit.interrupt`` holds the signal instead, stops the solver cleanly and then ends the
    process's clocks the same way (``request_termination``)."""
    request_termination()
    raise Terminated()


def request_termination() -> None:
    global _terminating
    _terminating = True


def terminating() -> bool:
    """Whether the process was asked to end (the command then exits with SIGTERM's status)."""
    return _terminating


class Clock:
    """Wall-clock end, CP-SAT work left and the interrupt flag of one job (module docstring).

    ``now`` reads the time (default ``time.perf_counter``); a phase reads its parent's."""

    def __init__(self, budget: Budget, start: float | None = None, *, end: float | None = None,
                 parent: "Clock | None" = None, work: float | None = None, now: TimeSource | None = None):
        if parent is None and _terminating:  # a new job once SIGTERM came: the command is ending
            raise Terminated()
        self.budget = budget
        self.now: TimeSource = now or (parent.now if parent is not None else time.perf_counter)
        self.start = self.now() if start is None else start
        self.end = self.start + budget.time_limit if end is None else end
        self._parent = parent
        self._work_left = budget.work_limit if parent is None else work
        self.work_spent = 0.0  # CP-SAT deterministic time spent under this clock
        self._interrupted = False
        self.phases: list[PhaseTime] = []  # the root's: every phase timed under it, in the order they ended
        self.on_phase: Callable[[PhaseTime], None] | None = None  # the root's: told as each phase ends
        self._open = 0  # the root's: phases open now
        self.interpreted: set[str] = set()  # the root's: compiled paths run interpreted (``kernels.may_run``)

    @property
    def root(self) -> "Clock":
        return self if self._parent is None else self._parent.root

    # -- the interrupt --------------------------------------------------------------------------
    @property
    def interrupted(self) -> bool:
        return self.root._interrupted or _terminating

    def interrupt(self) -> None:
        self.root._interrupted = True

    # -- phases -----------------------------------------------------------------------------------
    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Times the block as phase ``name`` of the job (on the root clock: ``phases``, and
        ``on_phase`` when set), so a run that ends late shows which step took the time."""
        root = self.root
        began = self.now()
        root._open += 1
        try:
            yield
        finally:
            root._open -= 1
            self.record(name, began)

    def record(self, name: str, began: float) -> None:
        """Phase ``name`` ran from ``began`` (on this clock's time scale) until now (``phase``;
        a command also records its start-up, before its clock existed)."""
        root, ended = self.root, self.now()
        timed = PhaseTime(name, began - root.start, ended - root.start, root._open, root.end - ended)
        root.phases.append(timed)
        if root.on_phase is not None:
            root.on_phase(timed)

    # -- time and work ----------------------------------------------------------------------------
    def elapsed(self) -> float:
        return self.now() - self.start

    def left(self) -> float:
        """Seconds left (0 once interrupted or out of work)."""
        if self.interrupted or self.work_left() == 0.0:
            return 0.0
        return max(0.0, self.end - self.now())

    def expired(self) -> bool:
        """No time or work left, or interrupted: a phase that checks this stops with what it has."""
        return self.left() <= 0.0

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
        """Which limit ended the time left: "the work limit (W)", "the time limit (T s)", or for a
        phase that ends before the job, "its share of the time limit (S s of T s)"."""
        if self.work_left() == 0.0:
            return f"the work limit ({self.budget.work_limit:g})"
        if self.end < self.root.end:
            return f"its share of the time limit ({self.end - self.start:.3g} s of {self.budget.time_limit:g} s)"
        return f"the time limit ({self.budget.time_limit:g} s)"

    def capped(self, seconds: float | None) -> "Clock":
        """A phase that ends after ``seconds`` or with this clock, whichever comes first (a
        per-question limit); None: this clock itself."""
        if seconds is None:
            return self
        now = self.now()
        return Clock(self.budget, now, end=min(self.end, now + seconds), parent=self, work=self.work_left())

    def part(self, share: float, *, work: float | None = None) -> "Clock":
        """A phase that may use ``share`` of the time and of the work left now (``work``: that
        much work instead, never more than is left here); it shares the interrupt, and what it
        spends is spent here too."""
        now = self.now()
        left = self.work_left()
        return Clock(self.budget, now, end=now + max(0.0, self.end - now) * share, parent=self,
                     work=None if left is None else left * share if work is None else work)


def process_start() -> float:
    """When this process started, on ``time.perf_counter``'s scale (Linux: from ``/proc``; else
    now): a command's clock starts there, so the interpreter's start and the imports count too."""
    now = time.perf_counter()
    try:
        with open("/proc/self/stat", encoding="ascii") as stat:
            ticks = int(stat.read().rsplit(")", 1)[1].split()[19])  # field 22: start time since boot
        with open("/proc/uptime", encoding="ascii") as uptime:
            since_boot = float(uptime.read().split()[0])
    except (OSError, ValueError, IndexError):
        return now
    age = since_boot - ticks / os.sysconf("SC_CLK_TCK")
    return now - age if 0.0 <= age < 3600.0 else now


def phase(clock: Clock | None, name: str) -> AbstractContextManager[None]:
    """``clock.phase(name)``, or nothing to time without a clock (the Python API's calls)."""
    return clock.phase(name) if clock is not None else nullcontext()


def clock_for(budget: Budget, clock: Clock | None = None, **overrides: object) -> Clock:
    """The clock a solver entry runs under: ``clock`` when the caller's job already runs one
    (then it holds every limit, and ``overrides`` must all be None), else a new clock started now
    from ``budget`` with the fields in ``overrides`` replaced (the Python API's keywords)."""
    if clock is None:
        return Clock(budget.overridden(**overrides))
    given = sorted(name for name, value in overrides.items() if value is not None)
    if given:
        raise TypeError(f"a running clock holds the limits; leave {', '.join(given)} unset")
    return clock


class OutOfTime(Exception):
    """Code that takes no clock of its own (a synthesizer run as a solver's start) ran past the
    clock it runs under (``running``): its work is abandoned, the caller goes on without it."""


#: The clock code that takes none runs under (``running``), if any.
_current: ContextVar[Clock | None] = ContextVar("optcoll_clock", default=None)


@contextmanager
def running(clock: Clock | None) -> Iterator[Clock | None]:
    """Within the block, ``check_current`` reads ``clock``: a cooperative deadline for code whose
    signature has no clock (a synthesizer's ``(instance, seed)``); None: no deadline in the block."""
    token = _current.set(clock)
    try:
        yield clock
    finally:
        _current.reset(token)


def current() -> Clock | None:
    """The clock code that takes none runs under (``running``), if any."""
    return _current.get()


def check_current() -> None:
    """Raises ``OutOfTime`` when the clock this runs under (``running``) has ended; else nothing
    (nor outside ``running``: a synthesizer run alone has no limit)."""
    clock = _current.get()
    if clock is not None and clock.expired():
        raise OutOfTime(f"{clock.limit_reached()} reached" if not clock.interrupted else "interrupted")
