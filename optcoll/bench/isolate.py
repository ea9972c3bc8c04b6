"""One isolation policy for every benchmark: each case runs in a process of its own, is stopped at
its timeout, may have its address space capped (a case too big for the machine then fails alone
instead of waking the kernel's OOM killer for every job on it), and its CPU time and peak memory
are the child's own, read from the kernel when it is reaped (``os.wait4``).

* ``run_child``: ``python args`` in a fresh interpreter: a case's figures then include none of
  the parent's imports or memory.
* ``call``: a function, named ``"module:function"``, called on a JSON case through ``run_child``
  (the child's entry is this module's ``__main__``); its JSON result, or the case with an
  ``"error"``.
* ``call_forked``: a function on in-memory arguments (say, a ladder's machine builders) in a
  forked child, for cases a fresh interpreter cannot rebuild; its picklable result, or why there
  is none.
"""
from __future__ import annotations

import importlib
import json
import multiprocessing as mp
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

#: The directory holding the optcoll package: children import this checkout's code.
ROOT = str(Path(__file__).resolve().parents[2])


@dataclass(frozen=True)
class ChildRun:
    """A finished child: exit code (negative: the signal that ended it), its own CPU seconds
    (user + system) and peak resident bytes, wall seconds, its output, and whether the timeout
    stopped it."""

    code: int
    cpu: float
    peak_bytes: float
    wall: float
    stdout: str
    stderr: str
    timed_out: bool = False

    def last_error_line(self) -> str:
        return (self.stderr.strip().splitlines() or [f"exit status {self.code}"])[-1]


def child_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``env`` as given, else this environment with the optcoll checkout first on PYTHONPATH
    (and bytecode written, as a user's shell would)."""
    if env is not None:
        return dict(env)
    out = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    out["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
    return out


def _cap(memory_cap: float | None) -> Callable[[], None] | None:
    if memory_cap is None:
        return None
    limit = int(memory_cap)
    return lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def run_child(args: Sequence[str], *, timeout: float | None = None, memory_cap: float | None = None,
              env: Mapping[str, str] | None = None, cwd: str | None = None) -> ChildRun:
    """``python args`` in a fresh process (module docstring); killed after ``timeout`` seconds,
    its address space capped at ``memory_cap`` bytes."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        child = subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE, stderr=err, text=True,
                                 env=child_env(env), cwd=cwd, preexec_fn=_cap(memory_cap))
        fired = threading.Event()
        timer = None if timeout is None else threading.Timer(timeout, lambda: (fired.set(), child.kill()))
        if timer is not None:
            timer.start()
        try:
            assert child.stdout is not None
            output = child.stdout.read()
            _, status, usage = os.wait4(child.pid, 0)  # this child's own CPU and peak memory
        finally:
            if timer is not None:
                timer.cancel()
            if child.stdout is not None:
                child.stdout.close()
        child.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        stderr = err.read().decode(errors="replace")
    return ChildRun(child.returncode, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024.0,
                    time.perf_counter() - start, output, stderr, fired.is_set())


def call(target: str, case: dict[str, Any], *, timeout: float | None = None,
         memory_cap: float | None = None) -> dict[str, Any]:
    """``target`` (``"module:function"``, taking and returning JSON-able dicts) called on
    ``case`` in a fresh process; its result, or ``case`` with an ``"error"``."""
    run = run_child(["-m", "optcoll.bench.isolate", target, json.dumps(case)], timeout=timeout,
                    memory_cap=memory_cap)
    if run.timed_out:
        return {**case, "error": f"stopped after {timeout:.0f} s"}
    if run.code != 0:
        return {**case, "error": run.last_error_line()}
    return json.loads(run.stdout.strip().splitlines()[-1])


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@dataclass(frozen=True)
class Forked:
    """What ``call_forked`` brings back: the result (None when there is none: the child died,
    ``why`` says how, or it ``timed_out``), and the child's wall and CPU seconds."""

    result: Any
    why: str | None
    timed_out: bool
    wall: float
    cpu: float


def _forked_child(conn: Connection, function: Callable[..., Any], args: tuple[Any, ...],
                  memory_cap: float | None) -> None:
    cap = _cap(memory_cap)
    if cap is not None:
        cap()
    conn.send(function(*args))
    conn.close()


def call_forked(function: Callable[..., Any], *args: Any, timeout: float, memory_cap: float | None = None
                ) -> Forked:
    """``function(*args)`` in a forked child (spawned where the platform cannot fork), killed
    when it has not answered after ``timeout`` seconds, its address space capped at
    ``memory_cap`` bytes."""
    ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_forked_child, args=(send, function, args, memory_cap), daemon=True)
    wall0, cpu0 = time.perf_counter(), _children_cpu()
    child.start()
    send.close()
    result, why, timed_out = None, None, False
    try:
        if receive.poll(timeout):
            try:
                result = receive.recv()
            except EOFError:
                child.join()
                why = f"its process died (exit code {child.exitcode}; -9 is a kill, e.g. out of memory)"
        else:
            timed_out = True
    finally:
        if child.is_alive():
            child.kill()
        child.join()
        receive.close()
    return Forked(result, why, timed_out, time.perf_counter() - wall0, _children_cpu() - cpu0)


def main(argv: Sequence[str] | None = None) -> None:
    """The child's side of ``call``: ``python -m optcoll.bench.isolate module:function JSON``."""
    target, case = sys.argv[1:3] if argv is None else argv
    module, function = target.split(":")
    print(json.dumps(getattr(importlib.import_module(module), function)(json.loads(case))))


if __name__ == "__main__":
    main()
