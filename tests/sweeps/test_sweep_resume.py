"""Interrupt a real sweep (SIGINT, then SIGKILL) and run it again: it finishes with the results an
uninterrupted run gives, and never recomputes a job that had finished."""
import signal
import subprocess
import time
from pathlib import Path

from optcoll.reports.build import plan_report, run_plan
from optcoll.sweeps import ResultCache
from optcoll.instances.suite import find_suite
from optcoll.sweeps.plan import Settings
from sweep_helpers import CLI, comparable, write_instance

RUNS = 30


def _records(cache: Path) -> dict[Path, tuple[int, bytes]]:
    return {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in cache.rglob("*.json")}


def _processes_naming(text: str) -> list[int]:
    """Live processes whose command line mentions ``text`` (Linux /proc)."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and text in (entry / "cmdline").read_bytes().decode(errors="replace"):
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


def _interrupted_run(suite: Path, cache: Path, sig: int, after: int) -> dict[Path, tuple[int, bytes]]:
    """Starts the report, waits until ``after`` more records exist, sends ``sig``; returns the
    records present once the process is gone."""
    before = len(_records(cache))
    proc = subprocess.Popen([*CLI, "report", str(suite), "--cache-dir", str(cache), "--jobs", "1",
                             "--runs", str(RUNS), "--no-progress"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while len(_records(cache)) < before + after:
        assert proc.poll() is None, f"finished before it could be interrupted: {proc.stderr.read()}"
        assert time.monotonic() < deadline
        time.sleep(0.02)
    proc.send_signal(sig)
    code = proc.wait(timeout=30)
    assert code == (130 if sig == signal.SIGINT else -signal.SIGKILL), proc.stderr.read()
    deadline = time.monotonic() + 10  # its worker processes must not outlive it
    while _processes_naming(str(cache)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _processes_naming(str(cache)) == []
    return _records(cache)


def test_killed_sweep_resumes_without_redoing_finished_jobs(tmp_path):
    suite_dir = tmp_path / "suite"
    for i in range(1, 5):
        # a work limit, not the wall clock, ends each solve: the same results under any load
        write_instance(suite_dir, f"torus-{i}", "torus4x4", "allgather", f"{i} MiB",
                       time_limit="10 min", work_limit=20)
    cache = tmp_path / "cache"

    after_int = _interrupted_run(suite_dir, cache, signal.SIGINT, 6)
    after_kill = _interrupted_run(suite_dir, cache, signal.SIGKILL, 6)
    for path, state in after_int.items():
        assert after_kill[path] == state  # not recomputed, not rewritten

    plan = plan_report([find_suite(str(suite_dir))], Settings(runs=RUNS), plots=False)
    total = len({job.key for job in plan.jobs()})
    assert len(after_kill) < total  # really interrupted midway
    records, stats = run_plan(plan, ResultCache(cache), workers=0, progress=False)
    assert (stats.cached, stats.computed) == (len(after_kill), total - len(after_kill))
    for path, state in after_kill.items():
        assert _records(cache)[path] == state

    reference, _ = run_plan(plan, ResultCache(tmp_path / "fresh"), workers=0, progress=False)
    assert comparable(records) == comparable(reference)
