"""Printing for the CLI: one place decides between human text and ``--json``, and every line
goes through ``echo``, which shows control characters from input files as escapes
(``optcoll.text.printable``) instead of letting them drive the terminal."""
from __future__ import annotations

import json
import math
from typing import Any

import click

from optcoll.text.printable import printable


def progress_shown(enabled: bool | None) -> bool:
    """Whether progress is said at all (``optcoll.sweeps.progress.progress_mode``): unless
    ``--no-progress``; off a terminal as plain lines."""
    from optcoll.sweeps.progress import progress_mode

    return progress_mode(enabled) is not None


class Ticker:
    """The sweeps' progress bar (``optcoll.sweeps.progress``) for a loop that reports
    (done, total, label) as it goes: made on the first report, when the total is known; a context
    manager that closes it."""

    def __init__(self, desc: str, enabled: bool | None):
        self.desc, self.enabled, self._bar, self._done = desc, enabled, None, 0

    def __call__(self, done: int, total: int, label: str) -> None:
        from optcoll.sweeps.progress import Progress

        if self._bar is None:
            self._bar, self._done = Progress(total, done, self.desc, self.enabled), done
        while self._done < done:
            self._done += 1
            self._bar.advance(label, False)

    def __enter__(self) -> "Ticker":
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.close()


def echo(message: Any = "", *, err: bool = False, nl: bool = True) -> None:
    """``click.echo`` of ``message`` with its control characters escaped."""
    click.echo(printable(str(message)), err=err, nl=nl)


#: Every command takes ``--json``: the same facts, machine-readable.
json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")


def _plain(value: Any, scalars: type) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v, scalars) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, scalars) for v in value]
    if isinstance(value, scalars):
        return value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def emit_json(data: Any) -> None:
    import numpy as np  # for its scalar type only: `optcoll --help` and the CLI's set-up need no numpy

    echo(json.dumps(_plain(data, np.generic), indent=2, sort_keys=False))


def done(as_json: bool, message: str, **data: Any) -> None:
    """The last word of a command that wrote files: a sentence, or the same facts as JSON."""
    if as_json:
        emit_json(data)
    else:
        echo(message)


def say_overwrites(path: str) -> None:
    """On stderr, before a command writes: that ``path`` replaces a file or folder of the optcoll
    checkout it runs in (a committed report, say), so the user can stop it or diff it after."""
    from pathlib import Path

    from optcoll.bundled import checkout_root

    root, target = checkout_root(), Path(path).resolve()
    if root is not None and target.exists() and target.is_relative_to(root):
        where = target.relative_to(root)
        echo(f"optcoll: this overwrites {where} in the checkout {root} (`git diff -- {where}` shows "
             "what changed)", err=True)


def say_suite_origin(ref: str) -> None:
    """On stderr: which copy of a built-in suite a command reads (checkout or installed)."""
    from optcoll.instances.suite import builtin_suite_origin

    line = builtin_suite_origin(ref)
    if line is not None:
        echo(f"optcoll: {line}", err=True)


class WholeHelpGroup(click.Group):
    """A command group whose listing shows each command's first sentence whole (click cuts it at
    the terminal width with "..."); the formatter wraps long ones instead."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, command.get_short_help_str(limit=1_000))
                for name in self.list_commands(ctx)
                if (command := self.get_command(ctx, name)) is not None and not command.hidden]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
