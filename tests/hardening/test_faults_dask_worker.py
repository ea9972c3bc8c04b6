"""A Dask worker lost during a sweep (its process SIGKILLed while it solves): the scheduler runs
the task again elsewhere and the sweep finishes with the results of a local run."""
from __future__ import annotations

import os
import signal

import pytest

from fault_helpers import comparable, write_instance
from optcoll.sweeps import ResultCache, run_sweep
from optcoll.instances.suite import find_suite
from optcoll.schedules.jsonfile import schedule_to_dict
from optcoll.sweeps.plan import Settings, exact_job, synth_job

#: torus4x4 AllGather: CP-SAT has to search (about 2 s on one thread) to prove the optimum; the
#: ring8 AllGather never reaches CP-SAT (its greedy schedule meets the bound), so the torus
#: solve is the one a patched ``backends.cpsat_solve`` kills.
# the instances' own limits: a work limit ends each solve, the wall clock only a safety net
SETTINGS = Settings(runs=2, threads=1)


@pytest.fixture
def jobs(tmp_path):
    write_instance(tmp_path / "suite", "ag-torus4x4", "torus4x4", "allgather", "16 MiB")
    write_instance(tmp_path / "suite", "ring8-ag", "ring8", "allgather", "64 MiB")
    slow, fast = find_suite(str(tmp_path / "suite")).specs
    return [exact_job(slow, SETTINGS), synth_job(slow, "tacos", 2, 0), exact_job(fast, SETTINGS),
            synth_job(fast, "tacos", 2, 0), synth_job(fast, "ring", 1, 0)]


def _die_once_when_solving(marker: str) -> None:
    """Runs on each worker: the first CP-SAT solve on any worker creates ``marker`` and SIGKILLs
    its own process (the nanny starts a fresh, unpatched one); every later solve runs normally."""
    from optcoll.producers.exact.toolkit import backends

    solve = backends.cpsat_solve

    def die_once(*args, **kwargs):
        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            return solve(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGKILL)

    backends.cpsat_solve = die_once


def test_a_lost_dask_worker_does_not_change_the_results(jobs, tmp_path):
    """Fault: SIGKILL to the Dask worker process running the exact solve, at the moment CP-SAT
    starts solving (the model is built)."""
    import distributed

    marker = tmp_path / "killed"
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None, silence_logs=50) as cluster:
        with distributed.Client(cluster.scheduler_address) as client:
            client.run(_die_once_when_solving, str(marker))
        task = f"optcoll-{jobs[0].key}"
        records, stats = run_sweep(jobs, ResultCache(tmp_path / "cache"), cluster=cluster.scheduler_address,
                                   progress=False)
        story = [(start, finish, stimulus) for _, start, finish, _, stimulus, *_ in cluster.scheduler.story(task)]
    assert marker.exists(), "no worker was killed"
    # The solve was running on the lost worker: the scheduler took it back and ran it again.
    assert any(start == "processing" and stimulus.startswith("handle-worker-cleanup")
               for start, _, stimulus in story), story
    assert stats.failed == 0 and stats.computed == len(jobs)
    reference, _ = run_sweep(jobs, ResultCache(tmp_path / "local"), workers=0, progress=False)
    assert comparable(records) == comparable(reference)
    machine = jobs[0].spec.instance.machine
    stored = [ResultCache(tmp_path / folder).schedule(jobs[0].key, machine) for folder in ("cache", "local")]
    assert stored[0] is not None
    assert schedule_to_dict(stored[0], machine) == schedule_to_dict(stored[1], machine)
