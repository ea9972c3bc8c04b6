"""Faults for the hardening tests, injected at the operating-system boundary where possible.

* ``full_disk``: ``os.write`` (what ``optcoll.fileio`` writes with) accepts a few bytes of a
  temporary file, then fails with ENOSPC, as a disk that fills up in the middle of a write does.
* ``run_cli``: the real ``optcoll`` command in a fresh process, with faults armed inside it
  (a full disk, or SIGKILL at the n-th call of a function: a kill at an exact point).
* Small suites and file snapshots to compare what a fault left behind.
"""
from __future__ import annotations

import errno
import importlib
import json
import os
import resource
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "sweeps"))  # the sweep tests' helpers (small suites)

from sweep_helpers import comparable, write_instance  # noqa: E402

ENOSPC_TEXT = os.strerror(errno.ENOSPC)


def _is_temporary(fd: int, where: str) -> bool:
    """An optcoll temporary file (``.<name>.<random>.tmp``) whose path contains ``where``."""
    try:
        target = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return False
    name = os.path.basename(target)
    return name.startswith(".") and name.endswith(".tmp") and where in target


@contextmanager
def full_disk(after: int = 16, where: str = "") -> Iterator[list[str]]:
    """Within the block, a temporary file whose path contains ``where`` takes ``after`` bytes,
    then every write fails with ENOSPC. Yields the paths that hit the full disk."""
    real = os.write
    taken: dict[int, int] = {}
    hit: list[str] = []

    def write(fd: int, data) -> int:
        if not _is_temporary(fd, where):
            return real(fd, data)
        room = after - taken.get(fd, 0)
        if room <= 0:
            hit.append(os.readlink(f"/proc/self/fd/{fd}"))
            raise OSError(errno.ENOSPC, ENOSPC_TEXT)
        written = real(fd, bytes(memoryview(data)[:room]))
        taken[fd] = taken.get(fd, 0) + written
        return written

    os.write = write
    try:
        yield hit
    finally:
        os.write = real


def kill_on_call(target: str, call: int) -> None:
    """SIGKILL this process when ``module:function`` is called for the ``call``-th time (before
    the call runs): a crash at an exact point of a real run."""
    module_name, name = target.split(":")
    module = importlib.import_module(module_name)
    original = getattr(module, name)
    calls = [0]

    def wrapper(*args, **kwargs):
        calls[0] += 1
        if calls[0] == call:
            os.kill(os.getpid(), signal.SIGKILL)
        return original(*args, **kwargs)

    setattr(module, name, wrapper)


_ARMED: list[Any] = []  # held so that the armed context managers are never closed


def arm(faults: dict[str, Any]) -> None:
    """Runs in the child process of ``run_cli`` before the command."""
    if "full_disk" in faults:
        _ARMED.append(full_disk(**faults["full_disk"]))
        _ARMED[-1].__enter__()
    if "kill_on_call" in faults:
        kill_on_call(**faults["kill_on_call"])


_CHILD = """
import json, sys
sys.path.insert(0, {here!r})
import fault_helpers
fault_helpers.arm(json.loads({faults!r}))
from optcoll.cli.main import main
sys.argv = ["optcoll", *json.loads({args!r})]
main()
"""


def cli_command(args: list[str], **faults: Any) -> list[str]:
    """The argv of a fresh ``optcoll`` process with ``faults`` armed (see ``arm``)."""
    code = _CHILD.format(here=str(HERE), faults=json.dumps(faults), args=json.dumps([str(a) for a in args]))
    return [sys.executable, "-c", code]


def run_cli(args: list[str], timeout: float = 300, *, memory: int | None = None,
            env: dict[str, str] | None = None, **faults: Any) -> subprocess.CompletedProcess:
    """The real ``optcoll`` in a fresh process; ``memory``: its address space is capped at that
    many bytes (``RLIMIT_AS``: an allocation beyond it fails, as a MemoryError or a crash, never
    by exhausting the machine); ``env``: variables added to the environment."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    return subprocess.run(cli_command(args, **faults), capture_output=True, text=True, timeout=timeout,
                          preexec_fn=limit if memory else None, env={**os.environ, **(env or {})})


def invoke(args: list[Any]) -> subprocess.CompletedProcess:
    """The ``optcoll`` command in this process (faults armed with the context managers here),
    its outcome in ``run_cli``'s form. Exceptions the CLI does not handle propagate."""
    from click.testing import CliRunner

    from optcoll.cli.main import cli

    result = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    return subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.stderr)


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` by relative path, with its bytes."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def temporary_files(root: Path) -> list[str]:
    return [p.as_posix() for p in root.rglob(".*.tmp")]


def assert_one_line_error(proc: subprocess.CompletedProcess, *fragments: str) -> str:
    """Exit 2 and exactly one ``optcoll: error:`` line on stderr (no traceback); returns it."""
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1 and lines[0].startswith("optcoll: error: "), proc.stderr
    assert "Traceback" not in proc.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


__all__ = ["ENOSPC_TEXT", "arm", "assert_one_line_error", "cli_command", "comparable", "full_disk", "invoke",
           "kill_on_call", "run_cli", "snapshot", "temporary_files", "write_instance"]
