"""A directory of MSCCL XML algorithms (RCCL's production set) judged on one machine.

Per file: its collective, protocol and the message range the runtime selects it for
(``minBytes``..``maxBytes``, inclusive, as RCCL compares them), and at both ends of that range its
verified time in the physical model of the machine (serialization occupancy: a message of several
chunks pays α once), optcoll's best schedule for the same
collective, size and chunking (every synthesizer, ``best_of`` with the portfolio), the best lower bound and
the gap. The calibrated model's time goes in a column of its own (``calibrated_time``).
Then the crossovers: where one file's range ends and the next one's begins, does the physical
model also prefer the lower file just below the boundary and the upper one at it?

Ends of a range: ``maxBytes``, and ``minBytes`` raised to the smallest message the file can run
(RCCL needs count × its size multiplier to be a multiple of ``nchunksperloop``; 4-byte floats).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from optcoll.bounds.api import best_lower_bound
from optcoll.errors import InputError
from optcoll.instances.instance import Instance, TimeModel
from optcoll.interop.msccl import import_msccl_xml, parse_algo
from optcoll.interop.msccl.layout import kind_of
from optcoll.machines.machine import Machine
from optcoll.text.table import percent, table
from optcoll.units import format_size, format_time
from optcoll.verify import verify

ELEMENT = 4  # bytes of a float, the element RCCL's tests and AMD's ranges use
#: The one model every number of the report is in: a send of cnt chunks is one message (α once),
#: as MSCCL runs it, so link latency is pipelined (``importer`` docstring); optcoll's schedules
#: and bounds are computed in the same model.
SERIALIZATION = TimeModel(occupancy="serialization")
#: Two files within this much of each other per byte at a boundary are a tie for the model.
TIE = 0.01
SEED = 0


@dataclass(frozen=True)
class Point:
    size: int
    time: float | None  # None: refused (``why``)
    why: str
    best: float
    producer: str
    bound: float
    calibrated: float | None


@dataclass(frozen=True)
class FileRow:
    name: str
    coll: str
    proto: str
    inplace: bool
    min_bytes: int
    max_bytes: int
    points: tuple[Point, ...]


def calibrated_time(machine: Machine, path: Path, size: int, inplace: bool) -> float | None:
    """The file's time in the calibrated model of ``machine`` (``expect.rccl.file_choice``: RCCL's
    MSCCL executor on the calibrated machine of the file's protocol, plus its call latency), or
    None where the machine has no calibration."""
    from optcoll.analysis.expect.predict import context
    from optcoll.analysis.expect.rccl import file_choice
    from optcoll.machines.calibration import catalog_machines, generation_of

    if machine.name not in catalog_machines():
        return None
    ctx = context(machine, generation_of(machine.name))
    algo = parse_algo(path)[0]
    return file_choice(ctx, kind_of(algo.coll), size, path, algo, inplace).seconds


def _smallest(algo) -> int:
    multiplier = algo.ngpus if kind_of(algo.coll) in ("alltoall", "allgather", "reducescatter") else 1
    step = algo.nchunksperloop // _gcd(algo.nchunksperloop, multiplier)  # count must be a multiple
    return step * multiplier * ELEMENT


def _gcd(a: int, b: int) -> int:
    while b:
        a, b = b, a % b
    return a


def _aligned(size: int, unit: int) -> int:
    return max(unit, size // unit * unit)


def judge_file(path: Path, machine: Machine) -> FileRow:
    algo, _, _ = parse_algo(path)
    unit = _smallest(algo)
    low = _aligned(max(algo.min_bytes, unit) + unit - 1, unit)
    high = _aligned(algo.max_bytes, unit) if algo.max_bytes else low
    points = tuple(_point(path, machine, size, algo) for size in sorted({low, high}))
    return FileRow(path.name.removesuffix(".gz"), kind_of(algo.coll), algo.proto,
                   bool(algo.inplace and not algo.outofplace), algo.min_bytes, algo.max_bytes, points)


def _point(path: Path, machine: Machine, size: int, algo) -> Point:
    from optcoll.collectives.builtins import make_collective
    from optcoll.producers.registry import best_of, get_synthesizer

    kind = kind_of(algo.coll)
    why, time, model = "", None, SERIALIZATION
    collective = make_collective(kind, range(machine.num_npus), float(size), 1)
    try:
        imported = import_msccl_xml(path, machine, size=float(size), runtime="rccl", model=model)
        collective = imported.collective  # the file's own chunking: bounds depend on C
        result = verify(imported.machine, imported.collective, imported.schedule, model)
        if result.valid and imported.faithful:
            time = result.time
        else:
            why = result.violation.message if not result.valid else imported.problems[0]
    except InputError as exc:
        why = exc.detail
    inst = Instance(f"{machine.name}-{kind}", machine, collective, model)
    schedule, _ = best_of(inst, get_synthesizer("tacos+"), 1, SEED, portfolio=True)
    best = verify(machine, inst.collective, schedule, inst.model).time
    bound = best_lower_bound(machine, inst.collective, inst.model).value
    calibrated = calibrated_time(machine, path, size, bool(algo.inplace and not algo.outofplace)) if time else None
    return Point(size, time, why, best, str(schedule.meta.get("producer", "tacos+")), bound, calibrated)


def crossovers(rows: list[FileRow]) -> list[tuple[str, str, int, str]]:
    """(lower file, upper file, AMD's boundary, the model's verdict) for every two files of one
    collective and buffer layout whose ranges meet (or leave a gap)."""
    out = []
    groups: dict[tuple[str, bool], list[FileRow]] = {}
    for row in rows:
        groups.setdefault((row.coll, row.inplace), []).append(row)
    for group in groups.values():
        group.sort(key=lambda r: r.min_bytes)
        for a, b in zip(group, group[1:]):
            ta, tb = a.points[-1].time, b.points[0].time
            if ta is None or tb is None:
                verdict = "cannot tell (a file is refused)"
            else:
                per_a = ta / a.points[-1].size
                per_b = tb / b.points[0].size
                diff = per_a / per_b - 1
                verdict = ("tie: within 1 % per byte at the boundary (the choice is not the physical "
                           "model's to make)" if abs(diff) < TIE else
                           "agrees: the lower file is faster per byte at its top" if diff < 0 else
                           f"disagrees: at the boundary the upper file is {percent(diff)} faster per byte")
            gap = "" if b.min_bytes <= a.max_bytes + 1 else f" (no file for {a.max_bytes + 1}..{b.min_bytes - 1} B)"
            out.append((a.name, b.name + gap, a.max_bytes, verdict))
    return out


def report(directory: str | os.PathLike, machine: Machine, command: str, source: str) -> tuple[str, list[FileRow]]:
    paths = sorted(p for p in Path(directory).iterdir() if p.name.endswith((".xml", ".xml.gz")))
    if not paths:
        raise InputError("no .xml or .xml.gz files", source=str(directory))
    rows = [judge_file(p, machine) for p in paths]
    lines = [f"# MSCCL algorithms of {source} on {machine.name}", "",
             f"Generated by `{command}`. Physical model: {machine.description}. Each file is imported as RCCL's loader reads it and verified at both ends of "
             "its message range; optcoll's best is the best of every synthesizer and baseline for the "
             "same collective, size and chunks as the file, the bound optcoll's best lower bound there "
             "(bounds depend on the chunking), all in the timed model with serialization occupancy "
             "(a send of several chunks is one message, α once, as MSCCL runs it). Calibrated: the file "
             "run by RCCL's MSCCL executor in optcoll's calibrated model (`optcoll/analysis/expect/rccl.py`, "
             "`optcoll/machines/calibration.py`), call latency included: what rccl-tests should measure.", ""]
    body = []
    for row in rows:
        for p in row.points:
            time = format_time(p.time) if p.time is not None else f"refused: {p.why}"
            gap = percent(p.time / p.best - 1) if p.time is not None else "-"
            body.append([row.name, row.coll + (" in-place" if row.inplace else ""), row.proto,
                         f"{row.min_bytes}..{row.max_bytes or 'any'}", format_size(p.size), time,
                         "-" if p.calibrated is None else format_time(p.calibrated),
                         f"{format_time(p.best)} ({p.producer})", format_time(p.bound), gap])
    lines += ["```", table(["file", "collective", "proto", "range (B)", "size", "physical", "calibrated",
                            "optcoll best", "bound", "file vs best"], body), "```"]
    lines += ["", "## Crossovers", "",
              "AMD's boundary between two files of one collective, and whether the physical model agrees "
              "that the lower file is the better one up to it (time per byte at the boundary).", ""]
    lines += ["```", table(["lower file", "upper file", "boundary (B)", "physical model"],
                           [[a, b, str(s), v] for a, b, s, v in crossovers(rows)]), "```"]
    return "\n".join(lines) + "\n", rows
