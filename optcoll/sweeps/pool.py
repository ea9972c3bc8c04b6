"""Local execution: worker processes with a hard deadline per job.

``concurrent.futures`` cannot stop one task that overruns, so this small pool gives each worker
its own pipe: the driver hands out one job at a time, waits on the pipes and the process
sentinels, and kills a worker whose job outlives its hard deadline (a solver that ignores its
time limit) or replaces one that died (out of memory); either way the job becomes a ``failed``
record and the sweep goes on. Workers ignore SIGINT: Ctrl-C (or SIGTERM, which the CLI handles
the same way) reaches the driver, which stops them: SIGTERM, then SIGKILL after ``STOP_GRACE``.

Workers are forked where the platform can (fast, and safe for ``python -m optcoll``, whose main
module a spawned child would run again); elsewhere they are spawned.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait

from optcoll.producers.exact import memory
from optcoll.sweeps.jobs import WORKER_LOST, Job, JobResult, execute, failed

#: A job's hard deadline in seconds (None: no deadline).
Deadline = Callable[[Job], "float | None"]
#: Seconds a worker asked to stop (SIGTERM) has before it is killed.
STOP_GRACE = 2.0


@dataclass(frozen=True)
class Grace:
    """The one grace policy of the process harnesses: a job with time limit T is stopped (its
    process killed) factor·T + seconds after it started. A producer overruns its limit a little
    while it returns its best answer and bound; one stuck in native code never returns."""

    factor: float
    seconds: float

    def after(self, time_limit: float | None) -> float | None:
        return None if time_limit is None else self.factor * float(time_limit) + self.seconds

    def __call__(self, job: Job) -> float | None:
        return self.after(job.params.get("time_limit"))


#: optcoll's own producers in a sweep (model building and the return path may take a while).
SWEEP_GRACE = Grace(2.0, 60.0)
#: A user's synthesizer in ``optcoll check``: interrupted at its limit, killed soon after.
USER_CODE_GRACE = Grace(1.5, 5.0)
#: One rung of the exact benchmark: T + max(30 s, T/10) for the limits it is run with.
BENCH_GRACE = Grace(1.1, 30.0)


def _context():
    methods = mp.get_all_start_methods()
    return mp.get_context("fork" if "fork" in methods else "spawn")


def _stop_on_term(signum, frame) -> None:
    raise SystemExit(128 + signum)


def _serve(conn: Connection, driver_end: Connection, workers: int) -> None:
    # A forked worker inherits the driver's end of its own pipe; holding it open would keep
    # ``recv`` from ever seeing EOF, so a killed driver would leave the worker waiting forever.
    driver_end.close()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # SIGTERM (the driver stopping it) unwinds the job, so that whatever the job started (a
    # synthesizer's command, in its own process group) is stopped on the way out.
    signal.signal(signal.SIGTERM, _stop_on_term)
    # The command's stdout is its result (``--json``): whatever a job prints (a user's
    # synthesizer, a solver's log) goes to stderr.
    sys.stdout.flush()
    os.dup2(2, 1)
    memory.share_among(workers)  # the workers' models may all be large at once
    try:
        while (job := conn.recv()) is not None:
            conn.send(execute(job))
    except (EOFError, BrokenPipeError, OSError):
        pass  # the driver is gone: stop quietly


class _Worker:
    def __init__(self, ctx, workers: int) -> None:
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_serve, args=(child, self.conn, workers), daemon=True)
        self.process.start()
        child.close()
        self.job: Job | None = None
        self.deadline = float("inf")

    def give(self, job: Job, limit: float | None) -> None:
        self.job = job
        self.deadline = time.monotonic() + limit if limit is not None else float("inf")
        self.conn.send(job)

    def stop(self, force: bool) -> None:
        """Asks the worker to end (``force``: SIGTERM, whatever it is doing; else after its job)."""
        if force:
            self.process.terminate()
        else:
            try:
                self.conn.send(None)
            except (BrokenPipeError, OSError):
                pass

    def reap(self, grace: float) -> None:
        """Waits ``grace`` seconds for the worker to end, then kills it (a solver deep in C code
        runs no signal handler until it returns)."""
        self.process.join(timeout=grace)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.conn.close()


def _stop_all(pool: list[_Worker], force: bool) -> None:
    for worker in pool:
        worker.stop(force)
    for worker in pool:
        worker.reap(STOP_GRACE if force else 5.0)


def run_local(jobs: Sequence[Job], workers: int, deadline: Deadline,
              tick: Callable[[list[str]], None] | None = None, every: float = 3600.0
              ) -> Iterator[tuple[Job, JobResult]]:
    """Runs ``jobs`` on ``workers`` processes; yields (job, result) in completion order.
    ``tick`` is told the running jobs at least every ``every`` seconds (progress lines)."""
    ctx = _context()
    queue = deque(jobs)
    size = max(1, min(workers, len(jobs)))
    pool = [_Worker(ctx, size) for _ in range(size)]
    clean = False
    try:
        while True:
            for worker in pool:
                if worker.job is None and queue:
                    job = queue.popleft()
                    worker.give(job, deadline(job))
            busy = [w for w in pool if w.job is not None]
            if not busy:
                break
            timeout = max(0.0, min(w.deadline for w in busy) - time.monotonic())
            ready = set(wait([w.conn for w in busy] + [w.process.sentinel for w in busy],
                             timeout=min(timeout, 3600.0, every)))
            if tick is not None:
                tick([f"{w.job.spec.name} {w.job.label}" for w in busy])
            for i, worker in enumerate(pool):
                job = worker.job
                if job is None:
                    continue
                result: JobResult | None = None
                if worker.conn in ready:
                    try:
                        result = worker.conn.recv()
                    except (EOFError, OSError):
                        result = None
                    if result is not None:
                        worker.job = None
                        yield job, result
                        continue
                if worker.process.sentinel in ready or worker.conn in ready:
                    worker.process.join(timeout=1.0)  # the pipe may close before it is reaped
                    reason = f"worker process died (exit code {worker.process.exitcode})"
                    error = WORKER_LOST
                elif time.monotonic() >= worker.deadline:
                    reason = (f"exceeded its hard time limit of {deadline(job):.3g} s "
                              f"(time limit {job.params.get('time_limit')} s) and was stopped")
                    error = "Timeout"
                else:
                    continue
                _stop_all([worker], force=True)
                pool[i] = _Worker(ctx, size)
                yield job, failed(job, reason, error=error)
        clean = True
    finally:
        _stop_all(pool, force=not clean)


def run_in_process(jobs: Sequence[Job]) -> Iterator[tuple[Job, JobResult]]:
    """One job after another in this process (no deadlines): for debugging and profiling."""
    for job in jobs:
        yield job, execute(job)
