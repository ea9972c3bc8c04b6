"""Running a sweep: skip what the cache holds, run the rest locally or on Dask, store each result
as it arrives. Interrupt it at any point and run it again: finished jobs are not redone. A job
whose worker was lost (killed, out of memory) is reported failed but not stored, so the next run
computes it again and ends with the results of an undisturbed run. A cached record that does not
re-verify (``sweeps.recheck``) is computed again, and the stats say so."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from optcoll.sweeps.cache import Damaged, ResultCache
from optcoll.sweeps.jobs import FAILED, WORKER_LOST, Job
from optcoll.sweeps.pool import SWEEP_GRACE, run_in_process, run_local
from optcoll.sweeps.progress import LINE_INTERVAL, Progress
from optcoll.sweeps.recheck import recheck



@dataclass(frozen=True)
class SweepStats:
    """What a sweep did: ``damaged`` lists (job, why) for cached records that did not re-verify
    and were computed again; ``failures`` (job label, reason) every failed job it reports."""

    total: int
    cached: int
    computed: int
    failed: int
    damaged: tuple[tuple[str, str], ...] = ()
    failures: tuple[tuple[str, str], ...] = ()

    def line(self) -> str:
        text = (f"{self.total} jobs: {self.cached} from the cache, {self.computed} computed, "
                f"{self.failed} failed")
        if self.damaged:
            label, why = self.damaged[0]
            more = f" (and {len(self.damaged) - 1} more)" if len(self.damaged) > 1 else ""
            text += (f"; {len(self.damaged)} cached record(s) did not re-verify and were computed "
                     f"again: {label}: {why}{more}")
        return text

    def failure_line(self) -> str | None:
        """One line on the failed jobs: how many, and their commonest reasons."""
        if not self.failures:
            return None
        by_reason: dict[str, list[str]] = {}
        for label, reason in self.failures:
            by_reason.setdefault(reason, []).append(label)
        ranked = sorted(by_reason.items(), key=lambda item: -len(item[1]))
        parts = [f"{reason} ({len(labels)} jobs)" if len(labels) > 1 else f"{labels[0]}: {reason}"
                 for reason, labels in ranked[:3]]
        more = f"; and {len(ranked) - 3} other reasons" if len(ranked) > 3 else ""
        return f"{self.failed} of {self.total} jobs failed: {'; '.join(parts)}{more}"


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
    damaged: list[tuple[str, str]] = []
    for key, job in unique.items():
        try:
            record = cache.lookup(key)
            if record is not None:
                recheck(job, record, cache)
        except Damaged as why:
            damaged.append((f"{job.spec.name} {job.label}", str(why)))
            cache.discard(key)
            record = None
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
            stream = run_local(pending, workers, SWEEP_GRACE, bar.tick, LINE_INTERVAL)
        for job, result in stream:
            if result.record.get("error") != WORKER_LOST:
                cache.put(job.key, result.record, result.schedule)
            records[job.key] = result.record
            bar.advance(f"{job.spec.name} {job.label}", result.record.get("status") == FAILED)
    finally:
        bar.close()
    failures = tuple((f"{r.get('instance')} {r.get('label')}", _first_line(r.get("reason")))
                     for r in records.values() if r.get("status") == FAILED)
    return records, SweepStats(len(unique), cached, len(records) - cached, len(failures),
                               tuple(damaged), failures)


def _first_line(reason: Any) -> str:
    lines = str(reason or "no reason given").strip().splitlines()
    return lines[0] if lines else "no reason given"
