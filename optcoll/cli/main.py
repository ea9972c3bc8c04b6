"""The ``optcoll`` command. Exit codes: 0 ok, 1 a check failed, 2 bad input (or a producer's
schedule the verifier rejected: one line naming the producer), 130 interrupted (Ctrl-C), 143
terminated (SIGTERM, what ``timeout`` and CI cancellation send)."""
from __future__ import annotations

import os
import signal
import sys

# Before numpy loads: OpenBLAS starts a busy-waiting thread per core at import, and no command
# does linear algebra large enough to use them; on 2 cores they cost a third of a small
# command's CPU (DGX-1 least steps: 0.39 -> 0.26 s, mean of 5). A user's own setting wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import click

import optcoll
from optcoll.cli.output import WholeHelpGroup, echo
from optcoll.errors import InputError, ScheduleRejected
from optcoll.instances.clock import Terminated, process_start, terminate, terminating

EXIT_OK, EXIT_CHECK_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_TERMINATED = 0, 1, 2, 130, 143


class OptcollGroup(WholeHelpGroup):
    """Turns user errors into one line and an exit code instead of a traceback.

    Usage errors of subcommands (a directory where a file argument belongs, a missing option)
    get the same one line as bad file content: exit 2 always means one ``optcoll: error:`` line.
    """

    #: The arguments of the running invocation as written (``main``'s, which in-process callers
    #: such as click's test runner pass instead of ``sys.argv``).
    written: list[str] = []

    def main(self, args=None, *rest, **options):
        self.written = [str(a) for a in (sys.argv[1:] if args is None else args)]
        return super().main(args, *rest, **options)

    def invoke(self, ctx: click.Context):
        """The command, then SIGTERM's status if SIGTERM came, however the command ended: with its
        best so far (a solver call held the signal), or with whatever the signal broke on its way
        (an ``ImportError`` when it lands in a native module's initialisation)."""
        try:
            result = self._invoke(ctx)
        except BaseException:
            if terminating():
                _terminated()
            raise
        if terminating():
            _terminated()
        return result

    def _invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except InputError as exc:
            _fail(exc.one_line())
        except ScheduleRejected as exc:  # its message names the producer and the first violation
            _fail(" ".join(str(exc).split()))
        except click.exceptions.NoArgsIsHelpError:
            raise  # a bare group: click prints its help
        except click.BadParameter as exc:  # a bad option value: "FLAG: detail", as for file fields
            hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx else ""
            where = _as_written(exc.param, self.written) if isinstance(exc.param, click.Option) else None
            _fail(f"{where}: {exc.message}{hint}" if where else exc.format_message() + hint)
        except click.UsageError as exc:
            hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx else ""
            _fail(exc.format_message() + hint)
        except MemoryError:  # past every cap and guard: a limit set on this process, say
            _fail("out of memory; lower the input (or the OPTCOLL_MAX_* caps, see README) or allow "
                  "this process more memory")
        except Terminated:
            raise  # ``invoke`` says so, once
        except KeyboardInterrupt:
            echo("optcoll: interrupted", err=True)
            sys.exit(EXIT_INTERRUPTED)


def _terminated() -> None:
    echo("optcoll: terminated (SIGTERM)", err=True)
    sys.exit(EXIT_TERMINATED)


def _as_written(option: click.Option, words: list[str]) -> str:
    """The option's name as the user wrote it in ``words`` (``-o`` or ``--out``), else its long name."""
    names = option.opts + option.secondary_opts
    written = [word.split("=", 1)[0] for word in words]
    return next((name for name in names if name in written), max(option.opts, key=len))


def _fail(line: str) -> None:
    echo(f"optcoll: error: {line}", err=True)
    sys.exit(EXIT_BAD_INPUT)


@click.group(cls=OptcollGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(optcoll.__version__, prog_name="optcoll")
def cli() -> None:
    """Provably optimal or tightly bounded collective-communication schedules."""


def _register() -> None:
    from optcoll.cli import (commands_bench, commands_check, commands_core, commands_expect,
                             commands_interop, commands_mscclpp, commands_produce, commands_report)

    for module in (commands_core, commands_produce, commands_report, commands_check, commands_interop,
                   commands_mscclpp, commands_expect, commands_bench):
        for command in module.COMMANDS:
            cli.add_command(command)


_register()


def _excepthook(kind, value, traceback) -> None:
    """``Terminated`` raised in Python code a native library called (protobuf's, while OR-Tools
    loads) is printed by that library through this hook and then cleared: the command goes on to
    stop with its best so far and SIGTERM's status, so the traceback is only noise."""
    if not issubclass(kind, Terminated):
        sys.__excepthook__(kind, value, traceback)


def main() -> None:
    signal.signal(signal.SIGTERM, terminate)
    sys.excepthook = _excepthook
    cli(prog_name="optcoll", obj={"started": process_start()})
