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


#: Seconds to connect to a scheduler address, and then to receive its first bytes.
PROBE_SECONDS = 10.0
#: A Dask handshake is a small message; its first 8 bytes (its length) saying more is not Dask.
_HANDSHAKE_MAX = 16 * 2**20
_SCHEMES = ("tcp", "tls", "inproc", "ucx", "ws", "wss")


def check_address(address: str) -> str:
    """``address`` when it has the form of a Dask scheduler address ("tcp://host:8786", or
    "host:8786"); ``InputError`` naming --cluster otherwise. Checked before anything runs, so a
    malformed flag is refused whatever the cache holds."""
    scheme, sep, rest = address.partition("://")
    if not sep:
        scheme, rest = "tcp", address
    host, colon, port = rest.rpartition(":")
    ok = scheme in _SCHEMES and (scheme == "inproc" or (colon and host and port.isdigit() and 0 < int(port) < 65536))
    if not ok:
        raise InputError(f"must be a Dask scheduler address such as tcp://host:8786, got {address!r}",
                         field="--cluster")
    return address


def _probe(address: str) -> None:
    """Refuses, in bounded time, a tcp address that does not answer as a Dask scheduler does (it
    sends a short handshake as soon as it accepts). dask's own client would read an HTTP
    server's reply as a frame length of exabytes: out of memory, or a wait with no end."""
    import socket
    import struct

    scheme, sep, rest = address.partition("://")
    if sep and scheme != "tcp":
        return
    host, _, port = (rest if sep else address).rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=PROBE_SECONDS) as conn:
            conn.settimeout(PROBE_SECONDS)
            first = b""
            while len(first) < 8:
                more = conn.recv(8 - len(first))
                if not more:
                    break
                first += more
    except socket.timeout:
        raise InputError(f"{address!r} accepted a connection but sent no Dask handshake within "
                         f"{PROBE_SECONDS:g} s (not a Dask scheduler?)", field="--cluster") from None
    except OSError as exc:
        raise InputError(f"cannot reach the Dask scheduler at {address!r}: {_reason(exc)}",
                         field="--cluster") from None
    if len(first) < 8 or struct.unpack("<Q", first)[0] > _HANDSHAKE_MAX:
        said = "closed the connection" if len(first) < 8 else f"answered {first!r}..."
        raise InputError(f"{address!r} {said}, which is not a Dask scheduler's handshake (an HTTP "
                         f"server? the scheduler's port is 8786 by default)", field="--cluster")


def run_on_cluster(jobs: Sequence[Job], address: Any) -> Iterator[tuple[Job, JobResult]]:
    """``address``: a scheduler address ("tcp://host:8786") or a cluster object."""
    try:
        from distributed import Client, as_completed
    except ImportError:  # pragma: no cover - dask is a dependency
        raise InputError("--cluster needs dask.distributed: pip install 'dask[distributed]'") from None
    if isinstance(address, str):
        _probe(check_address(address))
    with _quiet_dask():
        try:
            client = Client(address, timeout="30s")
        except (OSError, TimeoutError, ValueError, TypeError) as exc:
            raise InputError(f"cannot reach the Dask scheduler at {address!r}: {_reason(exc)}",
                             field="--cluster") from None
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
