"""Published nccl-tests / rccl-tests measurements as data: the ``measurements/`` collection.

One TOML file per measured sweep::

    [measurement]
    machine = "dgxh100"          # a catalog model (optcoll model list)
    collective = "allreduce"
    ranks = 8
    library = "NCCL"             # or RCCL
    version = "2.18.5"
    algorithm = "nvls"           # what the run forced (NCCL_ALGO), or "default": the library chose
    protocol = "simple"          # NCCL_PROTO if forced, or "default"
    run = "in-place"             # which column: in-place, out-of-place or best (the faster)
    role = "fit"                 # fit: calibration uses it; holdout: only checks predictions
    gpus_per_thread = 8          # nccl-tests -g: GPUs one test thread drives (default: the raw
                                 # file's "nGpus" header, else 1)
    [source]
    url = "..."                  # where the numbers are published, at a commit
    commit = "..."
    [data]
    file = "raw/x.txt"           # a raw nccl-tests output (``nccltests``), or published tables:
    busbw = [[1024, 0.07], ...]  # bytes, bus bandwidth in GB/s, and/or
    time_us = [[1024, 12.5]]     # bytes, time in µs (sources that print the time, not the busbw)

Times come from a busbw table the same way nccl-tests derives its bandwidths
(``nccltests.busbw_factor``): time = size / (busbw / factor). A size is in at most one table.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from optcoll.bundled import bundled_dir
from optcoll.errors import InputError
from optcoll.inputfiles import known_keys, read_toml
from optcoll.interop.nccltests import busbw_factor, read_sweep

_TOP = ("measurement", "source", "data")
_MEASUREMENT = ("machine", "collective", "ranks", "library", "version", "algorithm", "protocol", "run",
                "role", "system", "gpus_per_thread")
_SOURCE = ("url", "repository", "commit", "note")
_DATA = ("file", "busbw", "time_us")
_TABLES = ("busbw", "time_us")
RUNS = ("in-place", "out-of-place", "best")
ROLES = ("fit", "holdout")


@dataclass(frozen=True)
class Measurement:
    """One published sweep: where it ran, what it forced, and (bytes, seconds) per size."""

    name: str
    machine: str
    collective: str
    ranks: int
    library: str
    version: str
    algorithm: str
    protocol: str
    role: str
    url: str
    points: tuple[tuple[int, float], ...]
    #: nccl-tests' ``-g``: one test thread issues each call to this many GPUs in turn.
    gpus_per_thread: int = 1

    def describe(self) -> str:
        forced = f"{self.algorithm}/{self.protocol}"
        threads = f", {self.gpus_per_thread} GPUs per test thread" if self.gpus_per_thread > 1 else ""
        return (f"{self.name}: {self.library} {self.version} {self.collective} on {self.machine} "
                f"({forced}{threads}, {len(self.points)} sizes; {self.url})")

    def time_at(self, size: int) -> float | None:
        return next((t for s, t in self.points if s == size), None)


def measurements_dir() -> Path:
    return bundled_dir("measurements")


def _field(table: dict, key: str, where: str, source: str) -> str:
    value = table.get(key)
    if not isinstance(value, str) or not value:
        raise InputError("missing or not a string", source=source, field=f"{where}.{key}")
    return value


def _points(path: Path, data: dict, collective: str, ranks: int, run: str
            ) -> tuple[tuple[tuple[int, float], ...], int | None]:
    """(bytes, seconds) per size, and the GPUs per thread the raw file's header states (None for
    tables)."""
    source = str(path)
    tables = [k for k in _TABLES if k in data]
    if ("file" in data) == bool(tables):
        raise InputError("give either data.file (an nccl-tests output) or published tables (data.busbw, "
                         "data.time_us)", source=source, field="data")
    if "file" in data:
        sweep = read_sweep(path.parent / _field(data, "file", "data", source), collective)
        pick = {"in-place": lambda r: r.in_time_us, "out-of-place": lambda r: r.out_time_us,
                "best": lambda r: r.best_time * 1e6}[run]
        return (tuple((row.size, pick(row) * 1e-6) for row in sweep.rows if pick(row) is not None),
                sweep.gpus_per_thread)
    factor = busbw_factor(collective, ranks)
    seconds = {"busbw": lambda size, v: size / (v * 1e9 / factor), "time_us": lambda size, v: v * 1e-6}
    unit = {"busbw": "busbw in GB/s", "time_us": "time in µs"}
    points: dict[int, float] = {}
    for key in tables:
        rows = data[key]
        for i, item in enumerate(rows if isinstance(rows, list) else [None]):
            if (not isinstance(item, list) or len(item) != 2 or not isinstance(item[0], int)
                    or not isinstance(item[1], (int, float)) or item[0] <= 0 or item[1] <= 0):
                raise InputError(f"each entry is [bytes (integer), {unit[key]} (positive)]", source=source,
                                 field=f"data.{key}[{i}]")
            if item[0] in points:
                raise InputError(f"size {item[0]} is given twice", source=source, field=f"data.{key}[{i}]")
            points[item[0]] = seconds[key](item[0], item[1])
    return tuple(sorted(points.items())), None


def load_measurement(path: str | os.PathLike) -> Measurement:
    """One collection entry (module docstring); ``InputError`` naming file and field."""
    path = Path(path)
    source = str(path)
    data = read_toml(path)
    known_keys(data, "", _TOP, source, sections=True)
    meta = data.get("measurement", {})
    known_keys(meta, "measurement", _MEASUREMENT, source)
    known_keys(data.get("source", {}), "source", _SOURCE, source)
    known_keys(data.get("data", {}), "data", _DATA, source)
    ranks = meta.get("ranks")
    if not isinstance(ranks, int) or ranks < 2:
        raise InputError("must be an integer of at least 2", source=source, field="measurement.ranks")
    run = meta.get("run", "best")
    if run not in RUNS:
        raise InputError(f"one of {', '.join(RUNS)}", source=source, field="measurement.run")
    role = meta.get("role", "holdout")
    if role not in ROLES:
        raise InputError(f"one of {', '.join(ROLES)}", source=source, field="measurement.role")
    collective = _field(meta, "collective", "measurement", source)
    points, header_gpus = _points(path, data.get("data", {}), collective, ranks, run)
    gpus = meta.get("gpus_per_thread", header_gpus or 1)
    if not isinstance(gpus, int) or isinstance(gpus, bool) or gpus < 1:
        raise InputError("must be a positive integer (nccl-tests -g)", source=source,
                         field="measurement.gpus_per_thread")
    if header_gpus is not None and gpus != header_gpus:
        raise InputError(f"is {gpus} but the output's header says nGpus {header_gpus}", source=source,
                         field="measurement.gpus_per_thread")
    return Measurement(path.stem, _field(meta, "machine", "measurement", source), collective, ranks,
                       _field(meta, "library", "measurement", source),
                       _field(meta, "version", "measurement", source),
                       meta.get("algorithm", "default").lower(), meta.get("protocol", "default").lower(),
                       role, _field(data.get("source", {}), "url", "source", source), points, gpus)


def collection(directory: str | os.PathLike | None = None) -> list[Measurement]:
    """Every entry of the collection (the bundled ``measurements/`` by default), by name."""
    folder = Path(directory) if directory is not None else measurements_dir()
    return [load_measurement(p) for p in sorted(folder.glob("*.toml"))]


def find(name: str) -> Measurement:
    """A collection entry by name, or a file path to one."""
    path = Path(name)
    if path.suffix == ".toml" and path.is_file():
        return load_measurement(path)
    candidate = measurements_dir() / f"{name}.toml"
    if not candidate.is_file():
        known = ", ".join(p.stem for p in sorted(measurements_dir().glob("*.toml")))
        raise InputError(f"no measurement named {name!r}; known: {known}")
    return load_measurement(candidate)
