"""Ctrl-C (or SIGTERM to the ``optcoll`` command) during a solver call: the solver stops cleanly
and its best answer so far is kept.

Every backend (CP-SAT, HiGHS, SCIP, z3) runs in a worker thread while the main thread waits for
it. For the length of the call, SIGINT only takes a note: the main thread then calls the
backend's stop hook (again at every wait, in case the solver had not started yet) and the call
returns normally with what the solver found, saying it was interrupted. CP-SAT's own handler is
turned off (it would swallow the signal, and the search would go on to its next question).
SIGTERM is held the same way where the command's own handler (``instances.clock.terminate``) is
in place; after the call the process is marked as ending, so every clock reads as interrupted,
no new job starts, and the command exits with SIGTERM's status once it has shown what it has.

Why not let KeyboardInterrupt fly and catch it: raised inside ``Thread.join`` it leaves CPython
(3.11) believing the solver thread has ended while it still runs (bpo-45274's handling releases
a lock the joiner never held), so the call returned before the solver did and its solution was
lost; raised inside ``Thread.start`` it may leave no thread at all.
"""
from __future__ import annotations

import os
import signal
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from optcoll.instances.clock import request_termination, terminate


def run_interruptibly(work: Callable[[], None], stop: Callable[[], None]) -> bool:
    """Runs ``work`` in a thread until it returns; True if Ctrl-C (SIGINT) or the command's
    SIGTERM asked it to ``stop``.
    An exception raised by ``work`` is raised here. Where SIGINT cannot reach Python — outside
    the main thread, or in a process that ignores it (a sweep's worker) — ``work`` simply runs.

    A handler some native library left behind (``getsignal`` says None: SCIP installs one) is
    replaced for the call and Python's own default put back after it: left alone, it made Ctrl-C
    do nothing in one solve and kill the process without a word in a later one."""
    previous = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or previous is signal.SIG_IGN:
        work()
        return False
    failure: list[BaseException] = []
    done = threading.Event()

    def guarded() -> None:
        try:
            work()
        except BaseException as error:  # noqa: BLE001 - handed to the calling thread
            failure.append(error)
        finally:
            done.set()

    pressed: list[int] = []
    held = (signal.SIGINT, signal.SIGTERM) if signal.getsignal(signal.SIGTERM) is terminate else (signal.SIGINT,)
    for signum in held:
        signal.signal(signum, lambda signum, frame: pressed.append(signum))
    try:
        threading.Thread(target=guarded, daemon=True).start()
        while not done.wait(0.1):
            if pressed:
                stop()
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler if previous is None else previous)
        if signal.SIGTERM in held:
            signal.signal(signal.SIGTERM, terminate)
    if signal.SIGTERM in pressed:
        request_termination()
    if failure:
        raise failure[0]
    return bool(pressed)


@contextmanager
def filtered_stderr(noise: tuple[str, ...]) -> Iterator[None]:
    """Native stderr goes through a temporary file and comes back without the ``noise`` lines."""
    if not noise:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            lines = tmp.read().decode(errors="replace").splitlines(keepends=True)
            sys.stderr.write("".join(line for line in lines if not any(n in line for n in noise)))
