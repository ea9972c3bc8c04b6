"""Dask execution: the same jobs on a ``dask.distributed`` scheduler.

Jobs carry their instance content, so workers need optcoll installed but no shared files; results
come back to the driver, which alone writes the cache. Hard deadlines cannot be enforced on
remote workers: there the producers' own time limits apply.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from optcoll.errors import InputError
from optcoll.sweeps.jobs import WORKER_LOST, Job, JobResult, execute, failed


def run_on_cluster(jobs: Sequence[Job], address: Any) -> Iterator[tuple[Job, JobResult]]:
    """``address``: a scheduler address ("tcp://host:8786") or a cluster object."""
    try:
        from distributed import Client, as_completed
    except ImportError:  # pragma: no cover - dask is a dependency
        raise InputError("--cluster needs dask.distributed: pip install 'dask[distributed]'") from None
    try:
        client = Client(address, timeout="30s")
    except (OSError, TimeoutError) as exc:
        raise InputError(f"cannot reach the Dask scheduler at {address!r}: {exc}",
                         field="cluster") from None
    with client:
        futures = {client.submit(execute, job, key=f"optcoll-{job.key}", pure=False): job
                   for job in jobs}
        try:
            for future in as_completed(futures):
                job = futures[future]
                try:
                    result = future.result()
                except Exception as exc:  # noqa: BLE001 - a lost worker fails the job, not the sweep
                    # ``execute`` never raises for a producer: this is the cluster failing (a
                    # worker lost more often than the scheduler's allowed failures, a cancel).
                    result = failed(job, f"Dask worker error: {type(exc).__name__}: {exc}",
                                    error=WORKER_LOST)
                yield job, result
        finally:
            client.cancel(list(futures))
