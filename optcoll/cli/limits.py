"""The limit options every command shares, parsed once into typed values at the command line:
a time limit as "90" (seconds), "90 s" or "2 min"; memory as "8 GiB". A bad value is one line
naming the flag as the user wrote it (exit 2)."""
from __future__ import annotations

import click

from optcoll.errors import InputError
from optcoll.instances.budget import MAX_SEED, MAX_THREADS, parse_bytes, parse_seconds
from optcoll.producers.exact.memory import DEFAULT_SHARE


class _Limit(click.ParamType):
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


SECONDS = _Limit("seconds", parse_seconds)
BYTES = _Limit("size", parse_bytes)


def time_limit_option(*names: str, default_text: str, **kwargs):
    """A wall-clock limit in seconds or with a unit (``names`` default to ``--time-limit``)."""
    return click.option(*(names or ("--time-limit",)), type=SECONDS, metavar="TIME",
                        help=f"{default_text}; seconds, or with a unit: '90 s', '2 min'.", **kwargs)


#: ``--max-memory`` of every command that runs an exact solver.
max_memory_option = click.option(
    "--max-memory", type=BYTES, metavar="SIZE", default=None,
    help="Refuse to build a solver model estimated to need more memory than this, e.g. '8 GiB' "
         f"(default: {DEFAULT_SHARE:.0%} of the memory available when the model is about to be built).")
threads_option = click.option("--threads", type=click.IntRange(1, MAX_THREADS), default=None,
                              help="Solver threads (default: the instance's [budget]).")
seed_option = click.option("--seed", type=click.IntRange(0, MAX_SEED), default=None,
                           help="Seed (default: the instance's [budget]).")
