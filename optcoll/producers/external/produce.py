"""Getting a schedule out of a synthesizer for one instance, within its time limit.

Runs in a sweep worker process. Every way it can go wrong before there is a schedule to verify
raises ``Failed`` with a stable status and words a person can act on:

- ``timeout``: no schedule within the time limit. Python callables are interrupted by SIGALRM at
  the limit (and the worker is killed later if they do not respond: ``optcoll.check.run``);
  commands are killed with their whole process group.
- ``error``: the callable raised, the command exited non-zero; ``crash``: the command died of a
  signal (a dying worker process is reported by the pool).
- ``missing``: no schedule file; ``malformed``: something that is not a readable schedule.
- ``skipped``: the synthesizer raised ``NotApplicable`` for this instance.
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from optcoll.producers.external.spec import SynthSpec, load_callable
from optcoll.errors import InputError
from optcoll.instances.instance import Instance
from optcoll.schedules.schedule import Schedule
from optcoll.instances.suite import InstanceSpec
from optcoll.units import format_time

#: How a schedule file may be named (per instance in a directory, or after {out} of a command).
SUFFIXES = (".json", ".json.gz", ".xml")
#: Lines of a traceback or of a command's stderr kept for the report.
TAIL_LINES = 25


class Failed(Exception):
    """No schedule to verify. ``detail``: a traceback or a command's output, for the report."""

    def __init__(self, status: str, message: str, detail: str = "", seconds: float | None = None):
        super().__init__(message)
        self.status, self.message, self.detail, self.seconds = status, message, detail, seconds


@dataclass(frozen=True, eq=False)
class Produced:
    """A schedule and where it came from. ``problems``: an MSCCL file's departures from optcoll's
    model (the importer's list); the file is invalid even when the verifier accepts the schedule."""

    schedule: Schedule
    source: str
    seconds: float | None
    problems: tuple[str, ...] = ()


class _Alarm(BaseException):
    """Raised into a Python synthesizer at its time limit (BaseException: not caught by
    ``except Exception`` in the synthesizer)."""


@contextlib.contextmanager
def _alarm(seconds: float) -> Iterator[None]:
    """SIGALRM after ``seconds`` raises ``_Alarm``; a no-op off the main thread."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def ring(signum, frame):
        raise _Alarm()

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def produce(synth: SynthSpec, spec: InstanceSpec, time_limit: float, workdir: Path) -> Produced:
    """The schedule ``synth`` makes for ``spec``; raises ``Failed``."""
    instance = spec.instance
    if synth.kind == "dir":
        return load_file(_only_file(Path(synth.target), spec.path.stem, f"in {synth.target}"), instance)
    if synth.kind == "cmd":
        return _command(synth, spec, time_limit, workdir)
    return _call(synth, instance, time_limit)


def _too_late(time_limit: float, seconds: float, how: str) -> Failed:
    return Failed("timeout", f"no schedule within the time limit of {format_time(time_limit)} "
                  f"({how} after {format_time(seconds)})", seconds=seconds)


def _tail(text: str) -> str:
    lines = text.strip().splitlines()
    return "\n".join((["..."] if len(lines) > TAIL_LINES else []) + lines[-TAIL_LINES:])


def _call(synth: SynthSpec, instance: Instance, time_limit: float) -> Produced:
    from optcoll.producers.base import NotApplicable

    if synth.kind == "builtin":
        from optcoll.producers.registry import get_synthesizer

        builtin = get_synthesizer(synth.target)

        def function(inst: Instance) -> Schedule:
            return builtin(inst, inst.budget.seed)
    else:
        function = load_callable(synth.target)
    start = time.perf_counter()
    try:
        with _alarm(time_limit):
            result = function(instance)
    except _Alarm:
        raise _too_late(time_limit, time.perf_counter() - start, "stopped") from None
    except NotApplicable as exc:
        raise Failed("skipped", f"not applicable: {exc.one_line()}") from None
    except KeyboardInterrupt as exc:
        if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
            raise  # Ctrl-C in this process (check --jobs 0): the user stops the run
        # A sweep worker ignores SIGINT (``sweeps.pool``), so the synthesizer raised it itself.
        raise Failed("error", f"the synthesizer raised {type(exc).__name__}",
                     _tail("".join(traceback.format_exception(exc))), time.perf_counter() - start) from None
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - the synthesizer's failure is the finding
        seconds = time.perf_counter() - start
        raise Failed("error", f"the synthesizer raised {type(exc).__name__}: {exc}",
                     _tail("".join(traceback.format_exception(exc))), seconds) from None
    seconds = time.perf_counter() - start
    if seconds > time_limit:
        raise _too_late(time_limit, seconds, "it returned")
    if not isinstance(result, Schedule):
        raise Failed("malformed", f"the synthesizer returned a {type(result).__name__}, not an "
                     f"optcoll Schedule", seconds=seconds)
    return Produced(result, f"returned by {synth}", seconds)


def _placeholders(synth: SynthSpec, spec: InstanceSpec, workdir: Path) -> dict[str, str]:
    instance = spec.instance
    collective = instance.collective
    values = {"instance": str(spec.path.resolve()), "out": str(workdir / "schedule"),
              "collective": collective.kind, "size": f"{collective.size_bytes:.0f}",
              "chunks": str(collective.chunks_per_rank), "name": instance.name,
              "seed": str(instance.budget.seed), "machine": ""}
    if "machine" in synth.fields:
        from optcoll.fileio import write_text_atomic
        from optcoll.machines.modelfile import machine_to_toml

        machine = workdir / "machine.toml"
        write_text_atomic(machine, machine_to_toml(instance.machine))
        values["machine"] = str(machine)
    return values


def _command(synth: SynthSpec, spec: InstanceSpec, time_limit: float, workdir: Path) -> Produced:
    workdir.mkdir(parents=True, exist_ok=True)
    values = _placeholders(synth, spec, workdir)
    argv = [arg.format_map(values) for arg in synth.argv]
    start = time.perf_counter()
    try:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, start_new_session=True)
    except OSError as exc:
        raise Failed("error", f"cannot start {argv[0]!r}: {exc}") from None
    try:
        stdout, stderr = process.communicate(timeout=time_limit)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise _too_late(time_limit, time.perf_counter() - start, "the command was killed") from None
    except BaseException:  # the worker is being stopped (SIGTERM): its command goes with it
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        raise
    seconds = time.perf_counter() - start
    output = _tail(stderr.decode(errors="replace") or stdout.decode(errors="replace"))
    last = output.splitlines()[-1] if output else "no output"
    if process.returncode < 0:
        name = signal.Signals(-process.returncode).name
        raise Failed("crash", f"the command was killed by {name}: {last}", output, seconds)
    if process.returncode:
        raise Failed("error", f"the command exited with code {process.returncode}: {last}", output,
                     seconds)
    try:
        produced = load_file(_only_file(workdir, "schedule", "where {out} points", bare=True),
                             spec.instance)
    except Failed as failure:
        failure.seconds = seconds
        raise
    return Produced(produced.schedule, f"{Path(produced.source).name} written by the command",
                    seconds, produced.problems)


def _only_file(directory: Path, stem: str, where: str, bare: bool = False) -> Path:
    """The one schedule file ``stem.json``/``stem.json.gz``/``stem.xml`` (or ``stem`` itself when
    ``bare``) in ``directory``."""
    names = ([stem] if bare else []) + [stem + s for s in SUFFIXES]
    found = [directory / n for n in names if (directory / n).is_file()]
    if not found:
        raise Failed("missing", f"no schedule file {' or '.join(names)} {where}")
    if len(found) > 1:
        raise Failed("malformed", f"several schedule files {where}: {', '.join(p.name for p in found)}; "
                     f"keep one")
    return found[0]


def _named(path: Path) -> Path:
    """A file written to bare {out}, renamed with the suffix its content shows."""
    if path.name.endswith(SUFFIXES):
        return path
    with open(path, "rb") as handle:
        head = handle.read(512)
    suffix = ".json.gz" if head[:2] == b"\x1f\x8b" else ".xml" if head.lstrip()[:1] == b"<" else ".json"
    return path.rename(path.with_name(path.name + suffix))


def load_file(path: Path, instance: Instance) -> Produced:
    """A schedule file (optcoll JSON, gzip JSON or MSCCL-IR XML) as a schedule on the instance."""
    path = _named(path)
    try:
        if path.suffix == ".xml":
            from optcoll.interop.msccl import import_msccl_xml

            imported = import_msccl_xml(path, instance.machine, collective=instance.collective,
                                        model=instance.model)
            return Produced(imported.schedule, str(path), None, imported.problems)
        from optcoll.schedules.jsonfile import load_schedule

        return Produced(load_schedule(path, instance.machine), str(path), None)
    except InputError as exc:
        raise Failed("malformed", f"unreadable schedule: {exc.one_line()}") from None
    except OSError as exc:
        raise Failed("error", f"cannot read {path}: {exc}") from None
