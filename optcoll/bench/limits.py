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

Beyond the suite, the AllReduce of 1 GiB at C = 1 on the 512-GPU rail cluster (``LARGE``, the
one ``bench exact`` solves) is solved as a user would, from an instance file, at ``LARGE_LIMIT``:
once with numba's kernels compiled ahead by ``optcoll warm`` (run first, outside every timed
row) and once with an empty numba cache (``NUMBA_CACHE_DIR`` fresh), where the compiled paths
run interpreted rather than compile under the limit (``instances.kernels``).
"""
from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from optcoll.bench.file import Section
from optcoll.bench.isolate import ChildRun, run_child
from optcoll.bench.step import OPTCOLL, run_command
from optcoll.instances.suite import InstanceSpec, find_suite

SUITE = "machines"
#: How many of the largest machine sizes of the suite are measured (the first machine by name of each).
SIZES = 2
#: A limit is kept when a job ends within this share over it, or within ``KEPT_SECONDS``.
KEPT_SHARE, KEPT_SECONDS = 0.10, 2.0
#: The 512-GPU rail cluster's AllReduce (module docstring) and its limit.
LARGE, LARGE_LIMIT = "dgxh100-rail-64x8", 120.0
LARGE_INSTANCE = f"""[instance]
machine = "{LARGE}"
collective = "allreduce"
size = "1 GiB"
chunks_per_rank = 1

[budget]
time_limit = "{LARGE_LIMIT:g} s"
threads = 1
seed = 0
"""

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


def _row(name: str, npus: int, command: str, limit: float, wall: float | None, cpu: float, status: str,
         peak: float, whole: ChildRun | None = None) -> list[str]:
    over = "-" if wall is None else f"{wall / limit - 1:+.0%}"
    whole_text = "" if whole is None else f"{whole.wall:.1f} / {whole.cpu:.1f}"
    return [name, str(npus), command, f"{limit:g}", "-" if wall is None else f"{wall:.1f}", f"{cpu:.1f}", over,
            "-" if wall is None else "yes" if kept(wall, limit) else "NO", status, f"{peak / 2**20:.0f}", whole_text]


def _spec_row(spec: InstanceSpec, *args, **kwargs) -> list[str]:
    return _row(spec.path.stem, spec.instance.machine.num_npus, *args, **kwargs)


def _status(measured: ChildRun) -> str:
    try:
        return str(json.loads(measured.stdout).get("status"))
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
        return _spec_row(spec, "truth update (exact job)", limit, None, whole.cpu,
                         f"no exact record (exit {whole.code})", whole.peak_bytes, whole)
    return _spec_row(spec, "truth update (exact job)", limit, float(exact[0]["wall_time"]), whole.cpu,
                     str(exact[0].get("status")), whole.peak_bytes, whole)


def warm_kernels() -> ChildRun:
    """``optcoll warm`` in a child: numba's kernels compiled before any timed row."""
    return run_command(["warm", "--json"], 30 * 60)


def large_rows(echo: Callable[[str], None] = lambda line: None) -> list[list[str]]:
    """``optcoll solve`` of the 512-GPU AllReduce at ``LARGE_LIMIT``, with numba's kernels warm
    (``warm_kernels`` ran first) and with an empty numba cache."""
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / f"{LARGE}-allreduce-c1.toml"
        path.write_text(LARGE_INSTANCE, encoding="utf-8")
        for cache, env in (("kernels warm", None), ("numba cache empty", {"NUMBA_CACHE_DIR": str(Path(scratch) / "numba")})):
            solve = run_child(["-c", OPTCOLL, "solve", str(path), "--no-progress", "--json"],
                              timeout=2 * LARGE_LIMIT + 60, env=env)
            rows.append(_row(path.stem, 512, f"solve ({cache})", LARGE_LIMIT,
                             solve.wall if solve.code in (0, 1) else None, solve.cpu, _answer(solve), solve.peak_bytes))
            echo(" | ".join(rows[-1]))
    return rows


def _answer(measured: ChildRun) -> str:
    """The status and the verified time of a solve's JSON answer."""
    try:
        data = json.loads(measured.stdout)
    except json.JSONDecodeError:
        return f"no answer (exit {measured.code})"
    time = data.get("time")
    return str(data.get("status")) + ("" if time is None else f", {time * 1e3:.6g} ms")


def limit_rows(limit: float, truth: bool = True, echo: Callable[[str], None] = lambda line: None) -> list[list[str]]:
    """One row per (largest instance, command); ``truth``: with the (long) truth-update rows."""
    timeout = 2 * limit + 60  # the sweeps' own hard deadline (``pool.SWEEP_GRACE``)
    rows = []
    for spec in largest():
        path = str(spec.path)
        solve = run_command(["solve", path, "--time-limit", f"{limit:g}", "--no-progress", "--json"], timeout)
        rows.append(_spec_row(spec, "solve", limit, solve.wall if solve.code in (0, 1) else None, solve.cpu,
                              _status(solve), solve.peak_bytes))
        job = run_command([SUITE, spec.path.stem, f"{limit:g}"], timeout, code=_JOB)
        try:
            inside = json.loads(job.stdout.splitlines()[-1])
            rows.append(_spec_row(spec, "sweep's exact job", limit, inside["wall"], inside["cpu"],
                                  str(inside["status"]), job.peak_bytes, job))
        except (json.JSONDecodeError, IndexError, KeyError):
            rows.append(_spec_row(spec, "sweep's exact job", limit, None, job.cpu, f"no answer (exit {job.code})",
                                  job.peak_bytes, job))
        if truth:
            rows.append(_truth_update_row(spec, limit, 30 * 60))
        for row in rows[-(3 if truth else 2):]:
            echo(" | ".join(row))
    return rows


def limits_section(limit: float, truth: bool = True, large: bool = True,
                   echo: Callable[[str], None] = lambda line: None) -> Section:
    warm = warm_kernels()
    echo(f"optcoll warm: {warm.wall:.1f} s wall, {warm.cpu:.1f} s CPU (exit {warm.code})")
    rows = (large_rows(echo) if large else []) + limit_rows(limit, truth, echo)
    suite_note = (f"limit {limit:g} s, one solver thread (the instances' budget). 'kept': the job ended within "
                  f"{KEPT_SHARE:.0%} or {KEPT_SECONDS:g} s of its limit. solve: the whole command in its own process "
                  "(interpreter start and imports included); sweep's exact job: ``sweeps.jobs.execute`` timed inside "
                  "its process (the last column: that process, imports included); truth update: the exact job's own "
                  "wall time from its cache record, the last column the whole command (every producer, one seed each). "
                  "CPU counts every thread.")
    note = suite_note[0].upper() + suite_note[1:]
    if large:
        note = (f"The {LARGE}-allreduce-c1 rows: AllReduce of 1 GiB at C = 1 on 512 GPUs (not a suite instance), "
                f"`optcoll solve` of its instance file at {LARGE_LIMIT:g} s, with numba's kernels compiled ahead "
                f"(`optcoll warm`, run first: {warm.wall:.0f} s wall, {warm.cpu:.0f} s CPU) and with an empty numba "
                "cache (its compiled paths then run interpreted under the limit, slower, rather than compile). "
                f"The other rows: {suite_note}")
    return ("Time limits kept", ["instance", "NPUs", "command", "limit (s)", "wall (s)", "CPU (s)", "over",
                                 "kept", "status", "peak RSS (MiB)", "whole process wall / CPU (s)"], rows, note)
