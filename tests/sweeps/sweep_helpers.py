"""Shared by the sweep and report tests: small suites written to tmp dirs, and record comparison
that ignores what legitimately differs between runs (wall-clock times and dates)."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

QUICK = Path(__file__).resolve().parents[2] / "instances" / "quick"
VOLATILE = {"wall_time", "date", "generated", "trace"}

#: Runs the optcoll CLI as a real subprocess.
CLI = [sys.executable, "-m", "optcoll"]


def comparable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: comparable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, (list, tuple)):
        return [comparable(v) for v in value]
    return value


def write_instance(directory: Path, name: str, machine: str, collective: str, size: str,
                   chunks: int = 1, extra: str = "", time_limit: str = "10 min",
                   work_limit: float | None = 20.0) -> Path:
    """A one-instance file. A work limit, not the wall clock, ends its exact solve by default, so
    a test meets the same results (and the same cache hits) however loaded the machine is."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.toml"
    path.write_text(f'# {name}: a test instance\n[instance]\nmachine = "{machine}"\n'
                    f'collective = "{collective}"\nsize = "{size}"\nchunks_per_rank = {chunks}\n{extra}\n'
                    f'[budget]\ntime_limit = "{time_limit}"\nthreads = 1\nseed = 0\n'
                    + (f"work_limit = {work_limit}\n" if work_limit is not None else ""))
    return path


def small_suite(directory: Path) -> Path:
    """Three instances the exact solver proves in well under a second each."""
    # a work limit, not the wall clock, ends each solve: runs compared under any load agree
    for name, machine, collective, size in (("ring8-ag", "ring8", "allgather", "64 MiB"),
                                            ("ring4-a2a", "ring4", "alltoall", "16 MiB"),
                                            ("dgx1-ag", "dgx1", "allgather", "1 GiB")):
        write_instance(directory, name, machine, collective, size, time_limit="10 min", work_limit=20)
    return directory
