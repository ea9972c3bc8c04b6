"""Sweeps run the same jobs to the same results in this process, in worker processes and on a
real Dask LocalCluster; failures are records, not crashes."""
import pytest

from optcoll.sweeps import FAILED, NOT_APPLICABLE, Job, ResultCache, run_sweep
from optcoll.instances.suite import find_suite
from optcoll.sweeps.plan import Settings, instance_jobs
from optcoll.sweeps.pool import run_local
from sweep_helpers import comparable, small_suite

# the instances' own limits: a work limit ends each solve, the wall clock only a safety net
SETTINGS = Settings(runs=3, threads=1)


@pytest.fixture(scope="module")
def suite_jobs(tmp_path_factory):
    suite = find_suite(str(small_suite(tmp_path_factory.mktemp("suite"))))
    return [job for spec in suite.specs for job in instance_jobs(spec, SETTINGS, 3)]


@pytest.fixture(scope="module")
def in_process(suite_jobs, tmp_path_factory):
    records, stats = run_sweep(suite_jobs, ResultCache(tmp_path_factory.mktemp("c0")), workers=0,
                               progress=False)
    assert stats.computed == len(suite_jobs) and stats.failed == 0
    return records


def test_results_are_verified_and_complete(in_process, suite_jobs):
    by_label = {(r["instance"], r["label"]): r for r in in_process.values()}
    for name in ("ring8-ag", "ring4-a2a", "dgx1-ag"):
        assert by_label[(name, "exact")]["status"] == "optimal"
        assert by_label[(name, "tacos")]["status"] in ("optimal", "heuristic")
        assert len(by_label[(name, "tacos")]["times"]) == 3
        bound = max(b["value"] for b in by_label[(name, "bounds")]["bounds"])
        for label in ("exact", "tacos", "tacos+", "ring"):
            assert by_label[(name, label)]["result"]["time"] >= bound * (1 - 1e-9)
    assert by_label[("ring4-a2a", "recursive-doubling")]["status"] == NOT_APPLICABLE


def test_local_processes_give_the_in_process_results(in_process, suite_jobs, tmp_path):
    records, stats = run_sweep(suite_jobs, ResultCache(tmp_path), workers=2, progress=False)
    assert comparable(records) == comparable(in_process)


def test_dask_local_cluster_gives_the_local_results(in_process, suite_jobs, tmp_path):
    import distributed
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:
        records, stats = run_sweep(suite_jobs, ResultCache(tmp_path), cluster=cluster.scheduler_address,
                                   progress=False)
    assert stats.computed == len(set(j.key for j in suite_jobs))
    assert comparable(records) == comparable(in_process)


def test_a_failing_job_is_recorded_and_the_sweep_goes_on(suite_jobs, tmp_path):
    spec = suite_jobs[0].spec
    bad = [Job(spec, "synth", {"algo": "no-such-algo", "runs": 1, "seed0": 0}),
           Job(spec, "exact", {"solver": "cpsat", "time_limit": -1.0, "threads": 1, "seed": 0})]
    good = Job(spec, "synth", {"algo": "ring", "runs": 1, "seed0": 0})
    records, stats = run_sweep([*bad, good], ResultCache(tmp_path), workers=2, progress=False)
    assert stats.failed == 2 and records[good.key]["status"] == "heuristic"
    assert "unknown synthesizer 'no-such-algo'" in records[bad[0].key]["reason"]
    assert "time_limit" in records[bad[1].key]["reason"]
    # A cached failure is a result; --retry-failed runs it again.
    _, again = run_sweep([*bad, good], ResultCache(tmp_path), workers=0, progress=False)
    assert again.computed == 0
    _, retried = run_sweep([*bad, good], ResultCache(tmp_path), workers=0, progress=False,
                           retry_failed=True)
    assert retried.computed == 2


def test_a_job_over_its_hard_deadline_is_stopped(suite_jobs):
    spec = suite_jobs[0].spec
    slow = Job(spec, "synth", {"algo": "tacos", "runs": 400, "seed0": 0})
    quick = Job(spec, "synth", {"algo": "direct", "runs": 1, "seed0": 0})
    done = dict((job.key, result) for job, result in
                run_local([slow, quick], 1, lambda job: 0.2 if job is slow else None))
    assert done[slow.key].record["status"] == FAILED
    assert "hard time limit" in done[slow.key].record["reason"]
    assert done[quick.key].record["status"] == "heuristic"  # the replacement worker carried on
