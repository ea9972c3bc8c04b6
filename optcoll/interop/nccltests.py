"""The text nccl-tests and rccl-tests print: one sweep of a collective over message sizes.

Both tools (github.com/NVIDIA/nccl-tests ``src/common.cu``, github.com/ROCm/rccl-tests, a fork)
print ``#`` comment lines (the parameters, the ranks and their devices, the two-line column
header ``size count type redop root time algbw busbw #wrong`` once for the out-of-place and once
for the in-place run, ``# Out of bounds values``, ``# Avg bus bandwidth : X``), then one row per
size. rccl-tests adds lines without ``#`` (``rccl-tests: Version ...``, ``RCCL version : ...``,
``HIP version : ...``) and ``# Testing 1 cycle.``; older nccl-tests print ``error`` where newer
print ``#wrong`` and leave out the ``root`` column (``-1`` where present), and an in-place
``#wrong`` may be ``N/A``. Times are in µs, bandwidths in GB/s (1e9 B/s).

The header line ``# nThread T nGpus G ...`` says how many GPUs each test thread drives (``-g``):
one thread issues every call to its G GPUs in turn, so a run with G > 1 is also timed by that
host loop (``Sweep.gpus_per_thread``; 1 when the header is absent).

``busbw`` is ``algbw`` times a factor per collective (nccl-tests ``doc/PERFORMANCE.md``): n ranks,
AllReduce 2(n−1)/n; AllGather, ReduceScatter and AlltoAll (n−1)/n; Broadcast, Reduce and
SendRecv 1. ``algbw`` is the buffer size / time, the size being what nccl-tests prints in the
``size`` column: the full vector for AllReduce, the gathered output for AllGather, the input of
ReduceScatter (n × each rank's output), the whole send buffer for AlltoAll — optcoll's M
(docs/model.md §4).

Every malformed row is an ``InputError`` naming the file and the line; the file is read through
``optcoll.inputfiles`` (regular files only, capped in size).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

from optcoll.errors import InputError
from optcoll.inputfiles import read_text

#: nccl-tests binary stem -> optcoll collective kind.
BINARIES = {"all_reduce": "allreduce", "all_gather": "allgather", "reduce_scatter": "reducescatter",
            "alltoall": "alltoall", "broadcast": "broadcast", "reduce": "reduce", "sendrecv": "sendrecv",
            "gather": "gather", "scatter": "scatter", "hypercube": "hypercube"}
_BINARY = re.compile(r"\b(all_reduce|all_gather|reduce_scatter|alltoall|broadcast|reduce|sendrecv|gather|"
                     r"scatter|hypercube)_perf")
_RANK = re.compile(r"^#?\s*Rank\s+(\d+)\s")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)")
_VERSION = re.compile(r"^#?\s*(nccl-tests|rccl-tests|RCCL version|NCCL version|nccl-library)\b[^\n]*", re.I)
_WRONG = re.compile(r"^(\d+|N/A)$")
_GPUS = re.compile(r"\bnGpus(?:\(perProc\))?\s+(\d+)")


def busbw_factor(collective: str, ranks: int) -> float:
    """busbw / algbw for ``collective`` on ``ranks`` ranks, as nccl-tests computes it (module
    docstring)."""
    n = ranks
    if collective == "allreduce":
        return 2 * (n - 1) / n
    if collective in ("allgather", "reducescatter", "alltoall"):
        return (n - 1) / n
    if collective in ("broadcast", "reduce", "sendrecv"):
        return 1.0
    raise InputError(f"nccl-tests defines no bus bandwidth for {collective!r}")


@dataclass(frozen=True)
class Row:
    """One size: bytes, element count, and per run (out-of-place, in-place) µs-time and GB/s."""

    size: int
    count: int
    dtype: str
    redop: str
    out_time_us: float
    out_algbw: float
    out_busbw: float
    in_time_us: float | None = None
    in_algbw: float | None = None
    in_busbw: float | None = None

    @property
    def best_time(self) -> float:
        """Seconds: the faster of the two runs (nccl-tests runs the same collective both ways)."""
        times = [t for t in (self.out_time_us, self.in_time_us) if t is not None]
        return min(times) * 1e-6


@dataclass(frozen=True)
class Sweep:
    """A parsed output: the collective (None when the text names no binary), the ranks it lists
    (0 when it lists none), library version lines, rows in file order, the printed average, and
    the GPUs one test thread drives (module docstring)."""

    source: str
    collective: str | None
    ranks: int
    versions: tuple[str, ...]
    rows: tuple[Row, ...]
    avg_busbw: float | None
    gpus_per_thread: int = 1


def _number(text: str, source: str, line: int, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"{what} {text!r} is not a number", source=source, field=f"line {line}") from None
    if value != value or value in (float("inf"), float("-inf")) or value < 0:
        raise InputError(f"{what} {text!r} is not a finite non-negative number", source=source,
                         field=f"line {line}")
    return value


def _run(fields: list[str], source: str, line: int, which: str) -> tuple[float, float, float]:
    if not _WRONG.match(fields[3]):
        raise InputError(f"{which} #wrong column {fields[3]!r} is not a count or N/A", source=source,
                         field=f"line {line}")
    return tuple(_number(f, source, line, f"{which} {name}")  # type: ignore[return-value]
                 for f, name in zip(fields[:3], ("time", "algbw", "busbw")))


def _row(text: str, source: str, line: int) -> Row:
    fields = text.split()
    # size count type redop [root] then 4 or 8 run fields (time algbw busbw #wrong, per run).
    lead = 5 if len(fields) in (9, 13) else 4 if len(fields) in (8, 12) else None
    if lead is None:
        raise InputError(f"a result row has {len(fields)} fields; nccl-tests prints 8, 9, 12 or 13 "
                         "(size count type redop [root] time algbw busbw #wrong [same in place])",
                         source=source, field=f"line {line}")
    if not fields[0].isdigit():
        raise InputError(f"size {fields[0]!r} is not a whole number of bytes", source=source,
                         field=f"line {line}")
    if not fields[1].isdigit():
        raise InputError(f"count {fields[1]!r} is not a whole number of elements", source=source,
                         field=f"line {line}")
    out = _run(fields[lead:lead + 4], source, line, "out-of-place")
    inplace = _run(fields[lead + 4:lead + 8], source, line, "in-place") if len(fields) > lead + 4 else None
    if out[0] <= 0 or (inplace is not None and inplace[0] <= 0):
        raise InputError("a time of 0 us is not a measurement", source=source, field=f"line {line}")
    return Row(int(fields[0]), int(fields[1]), fields[2], fields[3], *out,
               *(inplace if inplace is not None else (None, None, None)))


def _looks_like_row(line: str) -> bool:
    """A result row, or a broken one: starts with a digit, or has a row's shape (8, 9, 12 or 13
    fields, a type name third, a #wrong count last) whatever its first field."""
    if line.startswith("#"):
        return False
    fields = line.split()
    return line[0].isdigit() or (len(fields) in (8, 9, 12, 13) and fields[2].isalnum()
                                 and fields[2][0].isalpha() and bool(_WRONG.match(fields[-1])))


def parse(text: str, source: str = "<text>", collective: str | None = None) -> Sweep:
    """The sweep printed in ``text`` (module docstring). ``collective``: the one the caller expects;
    a text that names another binary is refused."""
    named: str | None = None
    ranks: set[int] = set()
    versions: list[str] = []
    rows: list[Row] = []
    avg = None
    gpus = 1
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        found = _BINARY.search(line)
        if found and (line.startswith("#") or "_perf" in line) and not line[0].isdigit():
            kind = BINARIES[found.group(1)]
            if named is not None and kind != named:
                raise InputError(f"names two collectives, {named} and {kind}; one sweep per file",
                                 source=source, field=f"line {number}")
            named = kind
        if line.startswith("#") and (per := _GPUS.search(line)) is not None and int(per.group(1)) > 0:
            gpus = int(per.group(1))
        if (rank := _RANK.match(line)) is not None:
            ranks.add(int(rank.group(1)))
        if (version := _VERSION.match(line)) is not None:
            versions.append(version.group(0).lstrip("# ").strip())
        if (mean := _AVG.match(line)) is not None:
            avg = _number(mean.group(1), source, number, "Avg bus bandwidth")
        if _looks_like_row(line):
            rows.append(_row(line, source, number))
    if not rows:
        raise InputError("holds no nccl-tests result row (size count type redop ... time algbw busbw)",
                         source=source)
    if collective is not None and named is not None and named != collective:
        raise InputError(f"is an nccl-tests output of {named}, not of {collective}", source=source)
    return Sweep(source, named or collective, len(ranks), tuple(versions), tuple(rows), avg, gpus)


def read_sweep(path: str | os.PathLike, collective: str | None = None) -> Sweep:
    """``parse`` of a file (regular files only, at most the ``input_bytes`` cap)."""
    return parse(read_text(path), str(path), collective)
