"""The progress bar of long commands: done/total, rate and ETA on stderr (tqdm).

Shown when stderr is a terminal (or when forced); cached jobs count as done from the start, so
the ETA reflects only the work left. Instance names are shown with control characters escaped.
"""
from __future__ import annotations

import sys
from typing import Any

from optcoll.text.printable import printable


class Progress:
    def __init__(self, total: int, done: int, desc: str, enabled: bool | None = None):
        from tqdm import tqdm

        tqdm.monitor_interval = 0  # no monitor thread: the local pool forks workers
        show = sys.stderr.isatty() if enabled is None else enabled
        self.failed = 0
        self._bar: Any = tqdm(total=total, initial=done, desc=printable(desc), unit="job",
                              file=sys.stderr, disable=not show, dynamic_ncols=True, smoothing=0.1)

    def advance(self, label: str, failed: bool) -> None:
        self.failed += failed
        self._bar.set_postfix_str(printable(label) + (f", {self.failed} failed" if self.failed else ""),
                                  refresh=False)
        self._bar.update(1)

    def close(self) -> None:
        self._bar.close()
