"""A sweep worker killed (SIGKILL) while its exact solver runs: the job is reported failed with
the reason, nothing half-done reaches the cache, and the next run computes only that job and ends
with the results of an undisturbed run. (Killing the driver itself: tests/sweeps/test_sweep_resume.py.)"""
from __future__ import annotations

import os
import signal

from optcoll.producers.exact.toolkit import backends

from fault_helpers import comparable, temporary_files, write_instance
from optcoll.sweeps import FAILED, ResultCache, run_sweep
from optcoll.instances.suite import find_suite
from optcoll.sweeps.jobs import WORKER_LOST
from optcoll.sweeps.plan import Settings, exact_job, synth_job

#: torus4x4 AllGather: CP-SAT has to search (about 2 s on one thread) to prove the optimum; the
#: ring8 AllGather never reaches CP-SAT (its greedy schedule meets the bound), so the torus
#: solve is the one a patched ``backends.cpsat_solve`` kills. (hypercube4 AlltoAll served until the
#: LP-guided start met its flow bound.)
SLOW_EXACT = ("ag-torus4x4", "torus4x4", "allgather", "16 MiB")
# the instances' own limits: a work limit ends each solve, the wall clock only a safety net
SETTINGS = Settings(runs=2, threads=1)


def _jobs(tmp_path):
    write_instance(tmp_path / "suite", *SLOW_EXACT)
    write_instance(tmp_path / "suite", "ring8-ag", "ring8", "allgather", "64 MiB")
    slow, fast = find_suite(str(tmp_path / "suite")).specs
    return [exact_job(slow, SETTINGS), synth_job(slow, "tacos", 2, 0), exact_job(fast, SETTINGS),
            synth_job(fast, "ring", 1, 0)]


def _die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)


def test_a_worker_killed_mid_solve_fails_its_job_and_the_next_run_recovers(tmp_path, monkeypatch):
    """Fault: SIGKILL to the worker process at the moment CP-SAT starts solving (the model is
    built; the forked worker inherits a patched ``backends.cpsat_solve``, so the kill lands at that exact
    point however fast the machine is)."""
    jobs = _jobs(tmp_path)
    cache = ResultCache(tmp_path / "cache")
    with monkeypatch.context() as patch:
        patch.setattr(backends, "cpsat_solve", _die)
        records, stats = run_sweep(jobs, cache, workers=1, progress=False)

    lost = records[jobs[0].key]
    assert lost["status"] == FAILED and lost["error"] == WORKER_LOST
    assert lost["reason"] == f"worker process died (exit code {-signal.SIGKILL})"
    assert stats.failed == 1 and all(records[j.key]["status"] != FAILED for j in jobs[1:])
    assert cache.get(jobs[0].key) is None  # a lost worker's job is not a result: not cached
    assert all(cache.get(j.key) == records[j.key] for j in jobs[1:])
    assert temporary_files(cache.root) == []

    again, stats = run_sweep(jobs, cache, workers=1, progress=False)
    assert (stats.cached, stats.computed, stats.failed) == (3, 1, 0)
    assert again[jobs[0].key]["status"] == "optimal"
    reference, _ = run_sweep(jobs, ResultCache(tmp_path / "undisturbed"), workers=0, progress=False)
    assert comparable(again) == comparable(reference)
    assert cache.schedule_path(jobs[0].key).read_bytes() == \
        ResultCache(tmp_path / "undisturbed").schedule_path(jobs[0].key).read_bytes()
