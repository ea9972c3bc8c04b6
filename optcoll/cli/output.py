"""Printing for the CLI: one place decides between human text and ``--json``, and every line
goes through ``echo``, which shows control characters from input files as escapes
(``optcoll.text.printable``) instead of letting them drive the terminal."""
from __future__ import annotations

import json
import math
from typing import Any

import click
import numpy as np

from optcoll.text.printable import printable


def echo(message: Any = "", *, err: bool = False, nl: bool = True) -> None:
    """``click.echo`` of ``message`` with its control characters escaped."""
    click.echo(printable(str(message)), err=err, nl=nl)


#: Every command takes ``--json``: the same facts, machine-readable.
json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def emit_json(data: Any) -> None:
    echo(json.dumps(_plain(data), indent=2, sort_keys=False))


def done(as_json: bool, message: str, **data: Any) -> None:
    """The last word of a command that wrote files: a sentence, or the same facts as JSON."""
    if as_json:
        emit_json(data)
    else:
        echo(message)
