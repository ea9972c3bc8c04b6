"""Running a sweep: skip what the cache holds, run the rest locally or on Dask, store each result
as it arrives. Interrupt it at any point and run it again: finished jobs are not redone. A job
whose worker was lost (killed, out of memory) is reported failed but not stored, so the next run
computes it again and ends with the results of an undisturbed run."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from optcoll.sweeps.cache import ResultCache
from optcoll.sweeps.jobs import FAILED, WORKER_LOST, Job
from optcoll.sweeps.pool import SWEEP_GRACE, run_in_process, run_local
from optcoll.sweeps.progress import Progress



@dataclass(frozen=True)
class SweepStats:
    total: int
    cached: int
    computed: int
    failed: int

    def line(self) -> str:
        return (f"{self.total} jobs: {self.cached} from the cache, {self.computed} computed, "
                f"{self.failed} failed")


def run_sweep(jobs: Sequence[Job], cache: ResultCache, *, workers: int = 1, cluster: Any = None,
              progress: bool | None = None, retry_failed: bool = False, desc: str = "sweep"
              ) -> tuple[dict[str, dict[str, Any]], SweepStats]:
    """Records of every job by key, and what the run did.

    ``workers = 0`` runs in this process; ``cluster`` (a Dask scheduler address or cluster
    object) runs the jobs there instead of locally. Failed records are kept (a failure is a
    result) unless ``retry_failed``; a lost worker's never are (``jobs.WORKER_LOST``).
    """
    unique: dict[str, Job] = {}
    for job in jobs:
        unique.setdefault(job.key, job)
    records: dict[str, dict[str, Any]] = {}
    pending = []
    for key, job in unique.items():
        record = cache.get(key)
        if record is None or (retry_failed and record.get("status") == FAILED):
            pending.append(job)
        else:
            records[key] = record
    cached = len(records)
    bar = Progress(len(unique), cached, desc, progress)
    try:
        if not pending:
            stream = iter(())
        elif cluster is not None:
            from optcoll.sweeps.cluster import run_on_cluster
            stream = run_on_cluster(pending, cluster)
        elif workers == 0:
            stream = run_in_process(pending)
        else:
            stream = run_local(pending, workers, SWEEP_GRACE)
        for job, result in stream:
            if result.record.get("error") != WORKER_LOST:
                cache.put(job.key, result.record, result.schedule)
            records[job.key] = result.record
            bar.advance(f"{job.spec.name} {job.label}", result.record.get("status") == FAILED)
    finally:
        bar.close()
    failed_total = sum(1 for r in records.values() if r.get("status") == FAILED)
    return records, SweepStats(len(unique), cached, len(records) - cached, failed_total)
