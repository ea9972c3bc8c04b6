"""How well the long commands keep their time limit (issue 37): on the machines suite's largest
instances, the limit against the wall and CPU time of ``optcoll solve``, of a sweep's exact job
(what ``report`` and ``truth update`` run per instance) and of ``truth update``'s exact job.

A time limit is a limit on the whole job: setup (reading the instance, bounds, start schedules,
model building) counts, so a job should end within 10 % (or 2 s) of its limit; the ``kept``
column says whether it did. Each measurement runs in a child process (``bench.step.run_command``):
``solve`` is timed as a user feels it (interpreter start and imports included); the exact job is
timed around ``sweeps.jobs.execute`` inside its child, as a sweep's worker runs it (its imports
paid once per worker); ``truth update`` runs on a copy of the instance (every producer, one seed
each) and its exact job's own wall time is read from its cache record (the solver's return, before
the record is written). Figures, not tests.
"""
from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from optcoll.bench.file import Section
from optcoll.bench.step import Measured, run_command
from optcoll.instances.suite import InstanceSpec, find_suite

SUITE = "machines"
#: How many of the largest machine sizes of the suite are measured (the first machine by name of each).
SIZES = 2
#: A limit is kept when a job ends within this share over it, or within ``KEPT_SECONDS``.
KEPT_SHARE, KEPT_SECONDS = 0.10, 2.0

#: The child that runs one sweep's exact job (suite, instance name, time limit) and prints its
#: wall and CPU seconds around ``execute`` (threads' CPU included).
_JOB = """
import json, sys, time
from optcoll.instances.suite import find_suite
from optcoll.sweeps.jobs import execute
from optcoll.sweeps.plan import Settings, instance_jobs
suite, name, limit = sys.argv[1], sys.argv[2], float(sys.argv[3])
spec = find_suite(suite).spec(name)
job = next(j for j in instance_jobs(spec, Settings(time_limit=limit), 1) if j.producer == "exact")
wall, cpu = time.perf_counter(), time.process_time()
result = execute(job)
print(json.dumps({"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu,
                  "status": result.record.get("status")}))
"""


def largest(suite: str = SUITE, sizes: int = SIZES) -> list[InstanceSpec]:
    """Per collective, the instances of the ``sizes`` largest NPU counts (the first machine by
    name of each count), in suite order."""
    specs = find_suite(suite).specs
    counts = sorted({s.instance.machine.num_npus for s in specs}, reverse=True)[:sizes]
    chosen: dict[tuple[str, int], InstanceSpec] = {}
    for spec in sorted(specs, key=lambda s: s.path.stem):
        key = (spec.instance.collective.kind, spec.instance.machine.num_npus)
        if key[1] in counts:
            chosen.setdefault(key, spec)
    return sorted(chosen.values(), key=lambda s: (-s.instance.machine.num_npus, s.path.stem))


def kept(wall: float, limit: float) -> bool:
    return wall <= max(limit * (1 + KEPT_SHARE), limit + KEPT_SECONDS)


def _row(spec: InstanceSpec, command: str, limit: float, wall: float | None, cpu: float, status: str,
         whole: Measured | None = None) -> list[str]:
    over = "-" if wall is None else f"{wall / limit - 1:+.0%}"
    whole_text = "" if whole is None else f"{whole.wall:.1f} / {whole.cpu:.1f}"
    return [spec.path.stem, str(spec.instance.machine.num_npus), command, f"{limit:g}",
            "-" if wall is None else f"{wall:.1f}", f"{cpu:.1f}", over,
            "-" if wall is None else "yes" if kept(wall, limit) else "NO", status, whole_text]


def _status(measured: Measured) -> str:
    try:
        return str(json.loads(measured.output).get("status"))
    except (json.JSONDecodeError, AttributeError):
        return f"no answer (exit {measured.code})"


def _truth_update_row(spec: InstanceSpec, limit: float, timeout: float) -> list[str]:
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch) / "suite"
        folder.mkdir()
        shutil.copy(spec.path, folder / spec.path.name)
        if (spec.path.parent / "schedules").is_dir():
            shutil.copytree(spec.path.parent / "schedules", folder / "schedules")
        cache = Path(scratch) / "cache"
        whole = run_command(["truth", "update", str(folder), "--time-limit", f"{limit:g}", "--jobs", "1",
                             "--runs", "1", "--cache-dir", str(cache), "--no-progress"], timeout)
        records = [json.loads(p.read_text()) for p in cache.rglob("*.json") if not p.name.endswith(".schedule.json")]
        exact = [r for r in records if r.get("producer") == "exact"]
    if not exact:
        return _row(spec, "truth update (exact job)", limit, None, whole.cpu, f"no exact record (exit {whole.code})",
                    whole)
    return _row(spec, "truth update (exact job)", limit, float(exact[0]["wall_time"]), whole.cpu,
                str(exact[0].get("status")), whole)


def limit_rows(limit: float, truth: bool = True, echo: Callable[[str], None] = lambda line: None) -> list[list[str]]:
    """One row per (largest instance, command); ``truth``: with the (long) truth-update rows."""
    timeout = 2 * limit + 60  # the sweeps' own hard deadline (``pool.SWEEP_GRACE``)
    rows = []
    for spec in largest():
        path = str(spec.path)
        solve = run_command(["solve", path, "--time-limit", f"{limit:g}", "--no-progress", "--json"], timeout)
        rows.append(_row(spec, "solve", limit, solve.wall if solve.code in (0, 1) else None, solve.cpu, _status(solve)))
        job = run_command([SUITE, spec.path.stem, f"{limit:g}"], timeout, code=_JOB)
        try:
            inside = json.loads(job.output.splitlines()[-1])
            rows.append(_row(spec, "sweep's exact job", limit, inside["wall"], inside["cpu"], str(inside["status"]),
                             job))
        except (json.JSONDecodeError, IndexError, KeyError):
            rows.append(_row(spec, "sweep's exact job", limit, None, job.cpu, f"no answer (exit {job.code})", job))
        if truth:
            rows.append(_truth_update_row(spec, limit, 30 * 60))
        for row in rows[-(3 if truth else 2):]:
            echo(" | ".join(row))
    return rows


def limits_section(limit: float, truth: bool = True, echo: Callable[[str], None] = lambda line: None) -> Section:
    rows = limit_rows(limit, truth, echo)
    return ("Time limits kept", ["instance", "NPUs", "command", "limit (s)", "wall (s)", "CPU (s)", "over",
                                 "kept", "status", "whole process wall / CPU (s)"], rows,
            f"Limit {limit:g} s, one solver thread (the instances' budget). 'kept': the job ended within "
            f"{KEPT_SHARE:.0%} or {KEPT_SECONDS:g} s of its limit. solve: the whole command in its own process "
            "(interpreter start and imports included); sweep's exact job: ``sweeps.jobs.execute`` timed inside "
            "its process (the last column: that process, imports included); truth update: the exact job's own "
            "wall time from its cache record, the last column the whole command (every producer, one seed each). "
            "CPU counts every thread.")
