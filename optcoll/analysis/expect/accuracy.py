"""How well the calibrated model predicts the collection's measurements (issue targets: within
10 % at every size ≥ 64 MiB, within 25 % from 4 KiB to 32 MiB), per entry and size, with each
entry's role (``fit``: the calibration used it; ``holdout``: it did not)."""
from __future__ import annotations

from dataclasses import dataclass

from optcoll.analysis.expect.predict import Choice, context
from optcoll.analysis.expect.rows import runtime_choice
from optcoll.interop.measurements import Measurement
from optcoll.machines.calibration import generation_of
from optcoll.machines.catalog import load_machine
from optcoll.text.table import percent, table
from optcoll.units import format_size, format_time

KIB, MIB = 1024, 1 << 20


def target(size: int) -> float | None:
    """The allowed |prediction / measurement − 1| at this size, or None (not judged)."""
    if size >= 64 * MIB:
        return 0.10
    return 0.25 if size >= 4 * KIB else None


@dataclass(frozen=True)
class Point:
    size: int
    measured: float
    predicted: Choice

    @property
    def error(self) -> float:
        return self.predicted.seconds / self.measured - 1

    @property
    def ok(self) -> bool | None:
        limit = target(self.size)
        return None if limit is None else abs(self.error) <= limit


def points(entry: Measurement) -> list[Point]:
    """The prediction of what the entry ran (its forced algorithm, else the library's own choice)."""
    ctx = context(load_machine(entry.machine), generation_of(entry.machine))
    forced = entry.algorithm if entry.algorithm != "default" else None
    return [Point(size, seconds, runtime_choice(ctx, entry.collective, size, forced))
            for size, seconds in sorted(entry.points) if size >= KIB]


def report(entries: list[Measurement]) -> str:
    lines = ["# Calibrated predictions against the measurements collection", "",
             "Prediction: `optcoll expect`'s NCCL/RCCL choice (the entry's forced algorithm, else the "
             "library's own) in the calibrated model. Targets: |error| ≤ 10 % at ≥ 64 MiB, ≤ 25 % from "
             "4 KiB to 32 MiB. Role `fit`: the calibration used the entry; `holdout`: it did not.", ""]
    summary = []
    for entry in entries:
        found = points(entry)
        judged = [p for p in found if p.ok is not None]
        summary.append([entry.name, entry.role, f"{sum(bool(p.ok) for p in judged)}/{len(judged)}",
                        percent(min(p.error for p in found)) + " .. " + percent(max(p.error for p in found))])
        lines += [f"## {entry.name} ({entry.role})", "", entry.describe(), "", "```", table(
            ["size", "measured", "predicted", "choice", "error", "target"],
            [[format_size(p.size), format_time(p.measured), format_time(p.predicted.seconds),
              f"{p.predicted.algorithm}/{p.predicted.protocol}", percent(p.error),
              "-" if p.ok is None else ("ok" if p.ok else "MISSED")] for p in found]), "```", ""]
    return "\n".join(lines[:4] + ["```", table(["entry", "role", "within target", "error range"], summary),
                                  "```", ""] + lines[4:])
