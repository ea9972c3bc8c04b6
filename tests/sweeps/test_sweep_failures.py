"""Sweeps whose failures used to read as success (issue 21, class 4): a lost Dask scheduler, SIGTERM
to the driver (what `timeout` and CI cancellation send), a failed job, and a cache record that
was cut short or tampered with. Each now ends non-zero with one line saying how many and why, or
is recomputed and said so; no process is left behind and nothing unverified is shown."""
from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fault_helpers import assert_one_line_error, cli_command, comparable, invoke, write_instance
from optcoll.sweeps import jobs as sweep_jobs
from optcoll.sweeps.cache import _CHECKSUM, _checksum

QUICK_ARGS = ["--jobs", "0", "--runs", "1", "--no-progress"]


def _descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (Linux /proc)."""
    found, todo = set(), [pid]
    while todo:
        parent = todo.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                children = (task / "children").read_text().split()
            except OSError:
                continue
            for child in map(int, children):
                if child not in found:
                    found.add(child)
                    todo.append(child)
    return found


def _running(pid: int) -> bool:
    """Alive and not a zombie waiting to be reaped."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _all_ended(pids: set[int], within: float = 10.0) -> bool:
    """Whether every process in ``pids`` ends within ``within`` seconds of the driver's exit (a
    helper such as multiprocessing's resource tracker notices its parent's end a moment later, and
    later still on a loaded machine; what is still running after that was left behind)."""
    deadline = time.monotonic() + within
    while any(_running(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _wait_for(condition, proc: subprocess.Popen, what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert proc.poll() is None, f"ended before {what}: {proc.communicate()}"
        assert time.monotonic() < deadline, f"no {what} within {timeout} s"
        time.sleep(0.05)


def _jobs_of(instance: Path) -> list:
    """The jobs `report` runs for one instance (bounds, the exact solver, every synthesizer, and
    NCCL's algorithms with their bounds at NCCL's own chunking)."""
    from optcoll.instances.suite import find_suite
    from optcoll.sweeps.plan import Settings, instance_jobs, nccl_jobs

    spec = find_suite(str(instance)).specs[0]
    unique = {job.key: job for job in instance_jobs(spec, Settings(runs=1), 1) + nccl_jobs(spec)}
    return list(unique.values())


def _slow_suite(root: Path) -> Path:
    """hypercube4 AlltoAll: CP-SAT needs seconds to prove it; ring8 AllGather: quick jobs."""
    write_instance(root, "hc4-a2a", "hypercube4", "alltoall", "256 MiB", time_limit="60 s")
    write_instance(root, "ring8-ag", "ring8", "allgather", "64 MiB")
    return root


def test_sigterm_to_report_stops_its_busy_workers(tmp_path, record_property):
    """Fault: SIGTERM to `optcoll report --jobs 2` while its two workers solve; it exits 143
    and no worker (or anything they started) is left running."""
    suite, cache = _slow_suite(tmp_path / "suite"), tmp_path / "cache"
    proc = subprocess.Popen(cli_command(["report", suite, "--jobs", "2", "--cache-dir", cache, "--threads", "1",
                                         "--no-progress"]), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    _wait_for(lambda: len(_descendants(proc.pid)) >= 2 and list(cache.rglob("*.json")), proc, "busy workers")
    workers = _descendants(proc.pid)
    proc.send_signal(signal.SIGTERM)
    code = proc.wait(timeout=60)
    stderr = proc.stderr.read()
    assert code == 143 and stderr.strip().splitlines()[-1] == "optcoll: terminated (SIGTERM)", stderr
    assert "Traceback" not in stderr
    assert _all_ended(workers), "a worker outlived the driver"
    record_property("tried", "SIGTERM to `optcoll report --jobs 2` with both workers busy")
    record_property("message", stderr.strip())


def test_sigterm_to_check_stops_a_synthesizer_command(tmp_path, record_property):
    """Fault: SIGTERM to `optcoll check` while a cmd: synthesizer runs (in its own process group,
    out of the worker's reach by signals to the worker alone): the command is stopped too."""
    pidfile = tmp_path / "synth.pid"
    sleeper = tmp_path / "sleeper.py"
    sleeper.write_text(f"import os, time\nopen({str(pidfile)!r}, 'w').write(str(os.getpid()))\ntime.sleep(300)\n")
    write_instance(tmp_path / "suite", "ring8-ag", "ring8", "allgather", "64 MiB")
    proc = subprocess.Popen(cli_command(["check", "--synth", f"cmd:{sys.executable} {sleeper} {{out}}", "--suite",
                                         tmp_path / "suite", "--time-limit", "200", "--jobs", "1"]),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _wait_for(lambda: pidfile.exists() and pidfile.read_text(), proc, "the synthesizer")
    synth = int(pidfile.read_text())
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 143, proc.stderr.read()
    assert _all_ended({synth}), "the synthesizer's command outlived optcoll check"
    record_property("tried", "SIGTERM to `optcoll check` while a cmd: synthesizer sleeps")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def test_a_killed_dask_scheduler_fails_the_sweep_in_one_line(tmp_path, record_property):
    """Fault: SIGKILL to the Dask scheduler once a `report --cluster` has results: exit 1 (it
    was exit 0 with '55 failed' and pages of tracebacks), one line naming the lost scheduler."""
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    scheduler = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                                  "--port", str(port), "--no-dashboard"], **quiet)
    worker = None
    try:
        _wait_for(lambda: _listening(port), scheduler, "the scheduler")
        worker = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1",
                                   "--no-dashboard"], **quiet)
        suite, cache = _slow_suite(tmp_path / "suite"), tmp_path / "cache"
        proc = subprocess.Popen(cli_command(["report", suite, "--cluster", address, "--cache-dir", cache,
                                             "--threads", "1", "--no-progress"]),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _wait_for(lambda: list(cache.rglob("*.json")), proc, "a first result")
        scheduler.kill()
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        for process in (scheduler, worker):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
    lines = stderr.strip().splitlines()
    assert proc.returncode == 1 and "Traceback" not in stderr and len(lines) == 1, stderr
    assert lines[0].startswith("optcoll: ") and f"jobs failed: the Dask scheduler at {address} was lost" in lines[0]
    assert "failed" in stdout.strip().splitlines()[-1]
    record_property("tried", "SIGKILL to the Dask scheduler in the middle of `report --cluster`")
    record_property("message", lines[0].replace(address, "tcp://127.0.0.1:PORT"))


def test_an_address_that_is_not_one_is_one_line(tmp_path, record_property):
    """Input: `report --cluster notaurl` (a ValueError traceback from dask before)."""
    suite = write_instance(tmp_path / "suite", "ring8-ag", "ring8", "allgather", "64 MiB")
    line = assert_one_line_error(invoke(["report", suite, "--cluster", "notaurl", "--no-progress"]),
                                 "--cluster: must be a Dask scheduler address such as tcp://host:8786, "
                                 "got 'notaurl'")
    record_property("tried", "report --cluster notaurl")
    record_property("message", line)


def test_a_failed_job_makes_the_sweep_exit_1(tmp_path, monkeypatch, record_property):
    """Fault: the bounds job raises (a producer bug): the report is still printed (and --json
    stays JSON), then one line says how many jobs failed and why, exit 1 (it was exit 0)."""
    def boom(job):
        raise RuntimeError("boom")

    monkeypatch.setitem(sweep_jobs._RUNNERS, "bounds", boom)
    suite = write_instance(tmp_path / "suite", "ring8-ag", "ring8", "allgather", "64 MiB")
    for extra in ([], ["--json"]):
        proc = invoke(["report", suite, "--no-cache", *QUICK_ARGS, *extra])
        assert proc.returncode == 1 and "Traceback" not in proc.stderr
        planned = _jobs_of(suite)
        failed = sum(job.producer == "bounds" for job in planned)  # at the instance's C and NCCL's own C
        jobs = len(planned)
        assert failed == 2
        assert proc.stderr.strip() == f"optcoll: 2 of {jobs} jobs failed: RuntimeError: boom (2 jobs)", proc.stderr
        if extra:
            assert json.loads(proc.stdout)["failures"]
        else:
            assert f"{jobs} jobs: 0 from the cache, {jobs} computed, {failed} failed" in proc.stdout
    record_property("tried", "a report whose bounds job raises")
    record_property("message", proc.stderr.strip())


# -- the cache: records re-verified when read ------------------------------------------------------


def _records(cache: Path) -> dict[str, dict]:
    return {p.name.removesuffix(".json"): json.loads(p.read_text()) for p in cache.rglob("*.json")}


def _record_of(cache: Path, label: str) -> Path:
    for path in cache.rglob("*.json"):
        if json.loads(path.read_text()).get("label") == label:
            return path
    raise AssertionError(f"no record of {label}")


def _halve_time(path: Path, checksum: bool) -> None:
    """The record's verified time halved (a gap that does not exist), its checksum left stale or
    recomputed as someone who knows the format would."""
    record = json.loads(path.read_text())
    record["result"]["time"] /= 2
    if checksum:
        stored = {k: v for k, v in record.items() if k != _CHECKSUM}
        schedule = path.with_name(path.name.replace(".json", ".schedule.npz"))
        record[_CHECKSUM] = _checksum(stored, schedule.read_bytes() if schedule.exists() else None)
    path.write_text(json.dumps(record))


def _cut(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


DAMAGE = [
    ("a record's time halved", lambda p: _halve_time(p, False), "its checksum does not match"),
    ("a record's time halved, checksum recomputed", lambda p: _halve_time(p, True),
     "its schedule verifies at"),
    ("a record cut in half", _cut, "the record is not readable JSON"),
    ("its schedule file deleted", lambda p: p.with_name(p.name.replace(".json", ".schedule.npz")).unlink(),
     "its schedule file is missing"),
    ("its schedule file cut in half", lambda p: _cut(p.with_name(p.name.replace(".json", ".schedule.npz"))),
     "its checksum does not match"),
]


@pytest.mark.parametrize("tried, damage, says", DAMAGE, ids=[d[0] for d in DAMAGE])
def test_a_damaged_cache_record_is_recomputed_never_shown(tried, damage, says, tmp_path, record_property):
    """Fault: a cached record of the ring synthesizer damaged between two `report` runs (the
    report used to show a tampered record as a verified gap)."""
    suite = write_instance(tmp_path / "suite", "ring8-ag", "ring8", "allgather", "64 MiB")
    args = ["report", suite, "--cache-dir", tmp_path / "cache", *QUICK_ARGS]
    first = invoke([*args, "--json"])
    damage(_record_of(tmp_path / "cache", "ring"))
    again = invoke(args)
    assert again.returncode == 0, again.stderr
    jobs = len(_jobs_of(suite))
    stats = [line for line in again.stdout.splitlines() if line.startswith(f"{jobs} jobs:")][0]
    assert stats.startswith(f"{jobs} jobs: {jobs - 1} from the cache, 1 computed, 0 failed; 1 cached record(s) "
                            "did not re-verify and were computed again: ring8-ag ring: "), stats
    assert says in stats, stats
    rows = json.loads(invoke([*args, "--json"]).stdout)["rows"]
    assert comparable(rows) == comparable(json.loads(first.stdout)["rows"])
    record_property("tried", f"cache: {tried}")
    record_property("message", stats.split(": ring8-ag ring: ")[1].replace(str(tmp_path), "<tmp>"))


def test_cached_records_of_an_instance_that_leaves_c_free_are_reused(tmp_path):
    """A C-free instance's cached schedules are at the C each producer chose: re-verified there,
    they are reused, not reported as damaged and computed again on every run."""
    suite = write_instance(tmp_path / "suite", "ring8-ag-cfree", "ring8", "allgather", "64 MiB", chunks='"free"')
    args = ["report", suite, "--cache-dir", tmp_path / "cache", *QUICK_ARGS]
    assert invoke(args).returncode == 0
    again = invoke(args)
    jobs = len(_jobs_of(suite))
    stats = [line for line in again.stdout.splitlines() if line.startswith(f"{jobs} jobs:")][0]
    assert stats == f"{jobs} jobs: {jobs} from the cache, 0 computed, 0 failed", stats


def test_truth_update_with_a_truncated_cached_schedule(tmp_path, record_property):
    """Fault: every cached schedule cut in half before `truth update` runs again (it printed only
    'Aborted!'): the records are recomputed, said so, and the recorded truth verifies."""
    suite = write_instance(tmp_path / "suite", "ring4-a2a", "ring4", "alltoall", "16 MiB")
    args = ["truth", "update", suite, "--cache-dir", tmp_path / "cache", *QUICK_ARGS]
    assert invoke(args).returncode == 0
    for schedule in (tmp_path / "cache").rglob("*.schedule.npz"):
        _cut(schedule)
    proc = invoke(args)
    assert proc.returncode == 0 and "Aborted" not in proc.stdout + proc.stderr, proc.stderr
    stats = proc.stdout.splitlines()[0]
    assert "cached record(s) did not re-verify and were computed again" in stats, stats
    assert invoke(["truth", "verify", suite.parent, "--require-all"]).returncode == 0
    record_property("tried", "truth update after its cached schedules were cut short")
    record_property("message", stats.replace(str(tmp_path), "<tmp>"))
