"""The result of ``optcoll check`` over a suite, and its plain-text and JSON forms (JUnit XML and
Markdown live in ``junit`` and ``markdown``)."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import optcoll
from optcoll.check.verdict import FAILURES, PASS, SKIPPED, Verdict
from optcoll.units import format_time

#: What the ratio is taken against, in words every output repeats.
REFERENCE_TEXT = {
    "best": "the recorded optimum (the best known schedule where no optimum is proven)",
    "bound": "the recorded best proven lower bound",
}

HEADERS = ("instance", "result", "time", "reference", "ratio", "max", "synthesis")


@dataclass(frozen=True)
class CheckReport:
    synthesizer: str
    suite: str
    directory: str
    against: str
    outcomes: tuple[Verdict, ...]
    wall_time: float
    seeds: str = ""  # the seeds it ran, in words (run.seeds_text)

    @property
    def failures(self) -> list[Verdict]:
        return [o for o in self.outcomes if o.failed]

    @property
    def checked(self) -> int:
        return sum(o.status != SKIPPED for o in self.outcomes)

    @property
    def passed(self) -> bool:
        """No instance failed, and at least one was checked (all skipped proves nothing)."""
        return not self.failures and self.checked > 0

    def counts(self) -> dict[str, int]:
        counts = Counter(o.status for o in self.outcomes)
        return {s: counts[s] for s in (PASS, *FAILURES, SKIPPED) if counts[s]}

    def headline(self) -> str:
        n = len(self.outcomes)
        if self.passed:
            verdict = "PASSED"
        elif not self.failures:
            verdict = "FAILED: every instance was skipped, nothing was checked"
        else:
            verdict = f"FAILED: {len(self.failures)} of {n} instances"
        parts = ", ".join(f"{k} {v}" for k, v in self.counts().items())
        return f"optcoll check {verdict} ({parts}; {format_time(self.wall_time)})"

    def context(self) -> str:
        return (f"synthesizer {self.synthesizer} on suite {self.suite} ({self.directory}), "
                f"{len(self.outcomes)} instances" + (f", {self.seeds}" if self.seeds else "")
                + f"; ratio = verified time / {REFERENCE_TEXT[self.against]}")

    def rows(self) -> list[list[str]]:
        """The cells under ``HEADERS``: the text table and the Markdown table share them."""
        return [[o.instance, o.status if not o.failed else f"FAIL {o.status}",
                 "-" if o.time is None else format_time(o.time),
                 "-" if o.reference is None else f"{format_time(o.reference)} {o.reference_kind}",
                 "-" if o.ratio is None else f"{o.ratio:.4f}×", f"{o.threshold:g}×",
                 "-" if o.seconds is None else format_time(float(f"{o.seconds:.3g}"))]
                for o in self.outcomes]

    def text(self) -> str:
        from optcoll.text.table import table

        lines = [self.context(), "", table(HEADERS, self.rows())]
        if self.failures:
            lines += ["", "Failures:"] + [f"  {o.line()}" for o in self.failures]
        skipped = [o for o in self.outcomes if o.status == SKIPPED]
        if skipped:
            lines += ["", "Skipped:"] + [f"  {o.line()}" for o in skipped]
        return "\n".join(lines + ["", self.headline()])

    def failure_text(self) -> str:
        """Every failure with its detail: what a failing pytest shows."""
        lines = [self.headline(), self.context()]
        for o in self.failures:
            lines.append(f"- {o.line()}")
            lines += [f"    {d}" for d in o.detail.splitlines()]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"synthesizer": self.synthesizer, "suite": self.suite, "directory": self.directory,
                "against": self.against, "reference": REFERENCE_TEXT[self.against],
                "passed": self.passed, "counts": self.counts(), "wall_time": self.wall_time, "seeds": self.seeds,
                "optcoll_version": optcoll.__version__,
                "instances": [o.to_dict() for o in self.outcomes]}
