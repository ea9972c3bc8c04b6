"""How well the calibrated model predicts the collection's measurements (issue targets: within
10 % at every size ≥ 64 MiB, within 25 % from 4 KiB to 32 MiB), per entry and size, with each
entry's role (``fit``: the calibration used it; ``holdout``: it did not).

A prediction of an nccl-tests run is the runtime's call in the calibrated model, but never below
the host floor of the test harness: with ``-g G`` one thread issues every call to its G GPUs in
turn (nccl-tests ``src/common.cu``), so an iteration takes at least G × the generation's
``host_issue`` (``calibration.Generation``)."""
from __future__ import annotations

from dataclasses import dataclass

from optcoll.analysis.expect.predict import Choice, context, host_floor
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
class AccuracyPoint:
    size: int
    measured: float
    predicted: Choice
    host_floor: float = 0.0  # seconds: the harness's issue time (module docstring)

    @property
    def seconds(self) -> float:
        return max(self.predicted.seconds, self.host_floor)

    @property
    def error(self) -> float:
        return self.seconds / self.measured - 1

    @property
    def label(self) -> str:
        run = f"{self.predicted.algorithm}/{self.predicted.protocol}"
        return f"host floor (over {run})" if self.host_floor > self.predicted.seconds else run

    @property
    def ok(self) -> bool | None:
        limit = target(self.size)
        return None if limit is None else abs(self.error) <= limit


def points(entry: Measurement) -> list[AccuracyPoint]:
    """The prediction of what the entry ran (its forced algorithm, else the library's own choice)."""
    generation = generation_of(entry.machine)
    ctx = context(load_machine(entry.machine), generation)
    forced = entry.algorithm if entry.algorithm != "default" else None
    floor = host_floor(generation, entry.gpus_per_thread)
    return [AccuracyPoint(size, seconds, runtime_choice(ctx, entry.collective, size, forced), floor)
            for size, seconds in sorted(entry.points) if size >= KIB]


def report(entries: list[Measurement]) -> str:
    lines = ["# Calibrated predictions against the measurements collection", "",
             "Prediction: `optcoll expect`'s NCCL/RCCL choice (the entry's forced algorithm, else the "
             "library's own) in the calibrated model, never below the host floor of an nccl-tests run "
             "with -g G (G × the GPU generation's host issue time). Targets: |error| ≤ 10 % at ≥ 64 MiB, ≤ 25 % from "
             "4 KiB to 32 MiB. Role `fit`: the calibration used the entry; `holdout`: it did not.", ""]
    summary = []
    for entry in entries:
        found = points(entry)
        judged = [p for p in found if p.ok is not None]
        summary.append([entry.name, entry.role, f"{sum(bool(p.ok) for p in judged)}/{len(judged)}",
                        percent(min(p.error for p in found)) + " .. " + percent(max(p.error for p in found))])
        lines += [f"## {entry.name} ({entry.role})", "", entry.describe(), "", "```", table(
            ["size", "measured", "predicted", "choice", "error", "target"],
            [[format_size(p.size), format_time(p.measured), format_time(p.seconds), p.label, percent(p.error),
              "-" if p.ok is None else ("ok" if p.ok else "MISSED")] for p in found]), "```", ""]
    return "\n".join(lines[:4] + ["```", table(["entry", "role", "within target", "error range"], summary),
                                  "```", ""] + lines[4:])
