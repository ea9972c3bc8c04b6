"""The options every command shares, one spelling and one parser per concept (the CLI
consistency test, tests/cli/test_cli_consistency.py, holds every command to them):

* limits: a time limit as "90" (seconds), "90 s" or "2 min"; memory and sizes as "8 GiB";
  bandwidths as "25 GB/s"; latencies as "0.5 us" — each parsed once at the command line, a bad
  value one line naming the flag as the user wrote it (exit 2);
* ``-o/--out`` for what a command writes, ``-j/--jobs`` for worker processes,
  ``--progress/--no-progress`` for the progress bar, ``--seed`` and ``--threads``.
"""
from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

import click

from optcoll.errors import InputError
from optcoll.instances.budget import MAX_SEED, MAX_THREADS, parse_bytes, parse_seconds
from optcoll.producers.exact.memory import DEFAULT_SHARE
from optcoll.units import parse_bandwidth, parse_size, parse_time


class _Limit(click.ParamType):
    """A value with a unit, parsed by ``parse(value, flag)``; its ``name`` is the concept."""

    def __init__(self, name: str, parse):
        self.name, self._parse = name, parse

    def convert(self, value, param, ctx):
        if value is None or not isinstance(value, str):
            return value
        flag = param.opts[0] if param is not None else self.name
        try:
            return self._parse(value, flag)
        except InputError as exc:
            self.fail(exc.detail, param, ctx)


def _unflagged(parse):
    def parse_for(value: str, flag: str):
        return parse(value)
    return parse_for


def parse_size_list(text: str, flag: str) -> tuple[int, ...]:
    """Message sizes: ``A:B`` (the powers of two from A to B) or a comma list; a bare number is
    bytes, as in nccl-tests' own -b/-e."""
    def one(part: str) -> int:
        part = part.strip()
        value = int(part) if part.isdigit() else parse_size(part)
        if value < 1 or value != int(value):
            raise InputError(f"{part!r} is not a whole number of bytes >= 1", field=flag)
        return int(value)
    try:
        if ":" in text:
            low, high = (one(p) for p in text.split(":", 1))
            if high < low:
                raise InputError(f"{text!r}: the range ends below its start", field=flag)
            first = 1 << max(0, math.ceil(math.log2(low)))
            return tuple(s for s in (first << k for k in range(64)) if s <= high) or (low,)
        sizes = tuple(sorted({one(p) for p in text.split(",") if p.strip()}))
    except InputError as exc:
        raise exc.located(field=flag) from None
    except ValueError as exc:
        raise InputError(str(exc), field=flag) from None
    if not sizes:
        raise InputError(f"{text!r} names no size", field=flag)
    return sizes


SECONDS = _Limit("seconds", parse_seconds)
BYTES = _Limit("size", parse_bytes)
BANDWIDTH = _Limit("bandwidth", _unflagged(parse_bandwidth))
TIME = _Limit("time", _unflagged(parse_time))
SIZES = _Limit("size", parse_size_list)


def time_limit_option(*names: str, default_text: str, **kwargs):
    """A wall-clock limit in seconds or with a unit (``names`` default to ``--time-limit``)."""
    return click.option(*(names or ("--time-limit",)), type=SECONDS, metavar="TIME",
                        help=f"{default_text}; seconds, or with a unit: '90 s', '2 min'.", **kwargs)


def out_option(help: str, **kwargs):
    """``-o/--out``: what the command writes (a file, a folder or a prefix, as ``help`` says)."""
    kwargs.setdefault("type", click.Path(dir_okay=False))
    return click.option("-o", "--out", help=help, **kwargs)


#: ``--max-memory`` of every command that runs an exact solver.
max_memory_option = click.option(
    "--max-memory", type=BYTES, metavar="SIZE", default=None,
    help="Refuse to build a solver model estimated to need more memory than this, e.g. '8 GiB' "
         f"(default: {DEFAULT_SHARE:.0%} of the memory available when the model is about to be built).")
#: ``--work-limit`` of the commands that solve: CP-SAT's deterministic time, where a run must stop at
#: the same point on any machine and under any load (tests, CI gates).
work_limit_option = click.option(
    "--work-limit", type=SECONDS, metavar="WORK", default=None,
    help="CP-SAT deterministic time for the whole solve (CP-SAT only): the same stopping point on any "
         "machine and under any load, unlike --time-limit; e.g. '20' (default: the instance's [budget]).")
threads_option = click.option("--threads", type=click.IntRange(1, MAX_THREADS), default=None,
                              help="Solver threads (default: the instance's [budget]).")
seed_option = click.option("--seed", type=click.IntRange(0, MAX_SEED), default=None,
                           help="Seed, the first of --runs seeds (default: the instance's [budget]).")
runs_option = click.option("--runs", type=click.IntRange(min=1), default=None,
                           help="Seeds per randomised synthesizer, from --seed or the instance's [budget] "
                                "seed on, the fastest kept (default: report and truth: the suite's, else 20; "
                                "synth and check: 1).")
jobs_option = click.option(
    "--jobs", "-j", type=click.IntRange(min=0), default=None,
    help="Worker processes (default: all cores). 0: no pool: sweeps run in this process, check runs "
         "one instance at a time (each still in its own process).")
progress_option = click.option(
    "--progress/--no-progress", default=None,
    help="Progress on stderr: done/total and ETA where one exists, a bar on a terminal, else a line "
         "every 10 s (default: on; --no-progress: silent).")
#: ``--combining`` of the commands that solve or check combining collectives; the choices are
#: ``instances.instance.COMBINING`` (spelled here so that the CLI loads without numpy).
combining_option = click.option(
    "--combining", type=click.Choice(["copy-or-reduce", "reduce-only"]), default=None,
    help="What an arrival may do to a partial sum: copy-or-reduce (a copy may overwrite it) or reduce-only "
         "(SCCL's rules: only disjoint reductions into it); see docs/model.md §5.4 (default: the instance's [model]).")


def with_combining(instance, combining: str | None):
    """The instance with ``--combining`` applied to its time model (None: as it is)."""
    from dataclasses import replace

    if combining is None or combining == instance.model.combining:
        return instance
    return replace(instance, model=replace(instance.model, combining=combining))


@contextlib.contextmanager
def as_flags(**flags: str) -> Iterator[None]:
    """Errors about a parameter the command passed on (``hidden``) name the flag the user wrote
    (``--layer-size``) instead, and no file: the value came from the command line."""
    try:
        yield
    except InputError as exc:
        if exc.field in flags:
            raise InputError(exc.detail, field=flags[exc.field]) from None
        raise


def command_start() -> float:
    """When this command started, on ``time.perf_counter``'s scale: its process's start when run as
    ``optcoll`` (``main`` puts it in the root context), else now (a command invoked in-process)."""
    import time

    root = click.get_current_context(silent=True)
    started = (root.find_root().obj or {}).get("started") if root is not None else None
    return time.perf_counter() if started is None else started
