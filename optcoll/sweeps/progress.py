"""Progress of long commands on stderr: on a terminal a bar (done/total, rate and ETA, tqdm);
elsewhere (CI logs, ``nohup``) a plain line every ``LINE_INTERVAL`` seconds, so a long run is
never silent; ``--no-progress`` silences both.

Cached jobs count as done from the start, so the ETA reflects only the work left. Instance names
are shown with control characters escaped.
"""
from __future__ import annotations

import sys
import time
from typing import Any

from optcoll.text.printable import printable
from optcoll.units import format_time

#: Seconds between two progress lines when stderr is not a terminal.
LINE_INTERVAL = 10.0
BAR, LINES = "bar", "lines"


def progress_mode(enabled: bool | None) -> str | None:
    """``--progress`` (or a terminal): the bar; ``--no-progress``: None; else plain lines."""
    if enabled is False:
        return None
    return BAR if enabled or sys.stderr.isatty() else LINES


class Every:
    """True at most once per ``interval`` seconds, the first time ``interval`` after it is made
    (a command done sooner says nothing)."""

    def __init__(self, interval: float | None = None):
        self.interval = LINE_INTERVAL if interval is None else interval
        self.start = time.monotonic()
        self._next = self.start + self.interval

    def __call__(self) -> bool:
        now = time.monotonic()
        if now < self._next:
            return False
        self._next = now + self.interval
        return True

    def elapsed(self) -> float:
        return time.monotonic() - self.start


def line(text: str) -> None:
    """One progress line on stderr."""
    print(printable(text), file=sys.stderr, flush=True)


class Progress:
    def __init__(self, total: int, done: int, desc: str, enabled: bool | None = None):
        from tqdm import tqdm

        tqdm.monitor_interval = 0  # no monitor thread: the local pool forks workers
        self.mode = progress_mode(enabled)
        self.failed = 0
        self.total, self.done, self.first, self.desc = total, done, done, desc
        self.every = Every()
        self._bar: Any = tqdm(total=total, initial=done, desc=printable(desc), unit="job",
                              file=sys.stderr, disable=self.mode != BAR, dynamic_ncols=True, smoothing=0.1)

    def advance(self, label: str, failed: bool) -> None:
        self.failed += failed
        self.done += 1
        self._bar.set_postfix_str(printable(label) + (f", {self.failed} failed" if self.failed else ""),
                                  refresh=False)
        self._bar.update(1)
        self.tick((), label)

    def tick(self, running: tuple[str, ...] | list[str] = (), last: str | None = None) -> None:
        """Lines mode: a line when one is due, with the jobs running (or the one just done)."""
        if self.mode != LINES or not self.every():
            return
        elapsed = self.every.elapsed()
        ran = self.done - self.first
        left = self.total - self.done
        eta = f", about {format_time(elapsed / ran * left)} left" if ran and left else ""
        failed = f", {self.failed} failed" if self.failed else ""
        now = (f"; running {', '.join(running[:3])}" + (f" and {len(running) - 3} more" if len(running) > 3 else "")
               if running else f"; last done {last}" if last else "")
        line(f"{self.desc}: {self.done}/{self.total} jobs{failed} after {format_time(elapsed)}{eta}{now}")

    def close(self) -> None:
        self._bar.close()
