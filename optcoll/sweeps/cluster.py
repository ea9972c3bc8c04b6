"""Dask execution: the same jobs on a ``dask.distributed`` scheduler.

Jobs carry their instance content, so workers need optcoll installed but no shared files; results
come back to the driver, which alone writes the cache. Hard deadlines cannot be enforced on
remote workers: there the producers' own time limits apply.

A lost worker costs only its task (the scheduler runs it again). A lost scheduler ends the
sweep: every job not finished by then fails with one reason naming the scheduler, so the command
exits non-zero with one line instead of the library's tracebacks (its loggers are quiet while
the sweep runs; what happened is in the failed records).
"""
from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

from optcoll.errors import InputError
from optcoll.sweeps.jobs import WORKER_LOST, Job, JobResult, execute, failed


@contextmanager
def _quiet_dask() -> Iterator[None]:
    """Silences dask's loggers (some set levels and handlers of their own) for the block."""
    loggers = [logging.getLogger("distributed")] + [
        logger for name, logger in logging.root.manager.loggerDict.items()
        if name.startswith("distributed.") and isinstance(logger, logging.Logger)]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


def _reason(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())


def run_on_cluster(jobs: Sequence[Job], address: Any) -> Iterator[tuple[Job, JobResult]]:
    """``address``: a scheduler address ("tcp://host:8786") or a cluster object."""
    try:
        from distributed import Client, as_completed
    except ImportError:  # pragma: no cover - dask is a dependency
        raise InputError("--cluster needs dask.distributed: pip install 'dask[distributed]'") from None
    with _quiet_dask():
        try:
            client = Client(address, timeout="30s")
        except (OSError, TimeoutError, ValueError, TypeError) as exc:
            raise InputError(f"cannot reach the Dask scheduler at {address!r}: {_reason(exc)}",
                             field="cluster") from None
        with client:
            futures = {client.submit(execute, job, key=f"optcoll-{job.key}", pure=False): job
                       for job in jobs}
            pending = dict(futures)
            try:
                for future in as_completed(futures):
                    job = pending.pop(future)
                    try:
                        result = future.result()
                    except Exception as exc:  # noqa: BLE001 - the cluster failing, not the job
                        # ``execute`` never raises for a producer: a worker lost more often than
                        # the scheduler's allowed failures, a cancel, or the scheduler gone.
                        if client.status != "running":
                            where = getattr(address, "scheduler_address", address)
                            lost = f"the Dask scheduler at {where} was lost ({type(exc).__name__})"
                            for other in [job, *pending.values()]:
                                yield other, failed(other, lost, error=WORKER_LOST)
                            return
                        result = failed(job, f"Dask worker error: {_reason(exc)}", error=WORKER_LOST)
                    yield job, result
            finally:
                with suppress(Exception):  # a scheduler that is gone cannot cancel anything
                    client.cancel(list(pending))
