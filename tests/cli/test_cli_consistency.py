"""Every command's options, walked by click introspection (whatever commands exist when the test
runs, so options other branches add are checked when they merge): one spelling and one parser per
concept, help text on every option, no truncated descriptions in any --help listing."""
from __future__ import annotations

import re
from collections import defaultdict

import click
import pytest

from optcoll.cli.main import cli


def _walk(group: click.Group, path: tuple[str, ...] = ()):
    for name, command in sorted(group.commands.items()):
        yield (*path, name), command
        if isinstance(command, click.Group):
            yield from _walk(command, (*path, name))


COMMANDS = list(_walk(cli))
OPTIONS = [(" ".join(path), param) for path, command in COMMANDS for param in command.params
           if isinstance(param, click.Option)]


def _where(option: click.Option) -> str:
    return "/".join(option.opts + option.secondary_opts)


@pytest.mark.parametrize("where, option", OPTIONS, ids=[f"{w} {_where(o)}" for w, o in OPTIONS])
def test_every_option_has_help(where: str, option: click.Option):
    assert option.help and option.help.strip(), f"optcoll {where} {_where(option)} has no help text"


def _parser(option: click.Option) -> str:
    """What reads the option's value: the kind of click type (a range with its bounds, a shared
    unit parser by its concept), whether it is a flag, and any callback. Choices may differ per
    command (z3 solves only the step model), paths may be files or folders."""
    kind = option.type
    if isinstance(kind, (click.IntRange, click.FloatRange)):
        described = repr(kind)
    elif isinstance(kind, (click.Choice, click.Path)):
        described = type(kind).__name__
    else:
        described = getattr(kind, "name", type(kind).__name__)
    callback = getattr(option.callback, "__qualname__", None)
    return f"{described} flag={option.is_flag} callback={callback}"


def test_one_option_name_one_parser_everywhere():
    by_name = defaultdict(set)
    for where, option in OPTIONS:
        for name in option.opts + option.secondary_opts:
            by_name[name].add((_parser(option), tuple(sorted(option.opts)), tuple(option.secondary_opts)))
    mixed = {name: sorted(forms) for name, forms in by_name.items() if len(forms) > 1}
    assert not mixed, f"options spelled or parsed differently across commands: {mixed}"


# One spelling per concept: a pattern the option's long name must match -> the parser it must use
# (the repr of the shared click type in optcoll.cli.options / optcoll.cli.limits).
CONCEPTS = {
    r"--time-limit|--.*-limit": "seconds",      # every wall-clock limit takes '90', '90 s', '2 min'
    r"--max-memory": "size",
    r"--size|--sizes": "size",
    r"--.*bandwidth": "bandwidth",
    r"--.*latency": "time",
}
#: Spellings replaced by one shared name (the name a user should use instead).
RETIRED = {"--timeout": "--time-limit", "--prefix": "-o/--out", "--output": "-o/--out",
           "--workers": "--jobs", "--no-progress-bar": "--no-progress"}


@pytest.mark.parametrize("where, option", OPTIONS, ids=[f"{w} {_where(o)}" for w, o in OPTIONS])
def test_each_concept_has_one_spelling_and_parser(where: str, option: click.Option):
    names = option.opts + option.secondary_opts
    for name in names:
        assert name not in RETIRED, f"optcoll {where} {name}: spell it {RETIRED[name]}"
    long = max(option.opts, key=len)
    for pattern, parser in CONCEPTS.items():
        if re.fullmatch(pattern, long):
            assert getattr(option.type, "name", None) == parser, \
                f"optcoll {where} {long} should use the shared {parser!r} parser, not {option.type!r}"
    if "--out" in names:
        assert "-o" in names, f"optcoll {where} --out: every --out is also -o"
    if "--jobs" in names:
        assert "-j" in names and isinstance(option.type, click.IntRange) and option.type.min == 0
    if "--progress" in names:
        assert option.secondary_opts == ["--no-progress"] and option.default is None, \
            f"optcoll {where}: --progress/--no-progress, default: when stderr is a terminal"


@pytest.mark.parametrize("path, command", COMMANDS, ids=[" ".join(p) for p, _ in COMMANDS])
def test_help_lists_descriptions_whole(path, command):
    """No '...' in any command listing: the first sentence of every description is shown whole."""
    from click.testing import CliRunner

    result = CliRunner().invoke(cli, [*path, "--help"], terminal_width=80)
    assert result.exit_code == 0
    if isinstance(command, click.Group):
        listing = result.output.split("Commands:", 1)[1]
        assert "..." not in listing, f"optcoll {' '.join(path)} --help truncates:\n{listing}"


def test_top_level_help_lists_descriptions_whole():
    from click.testing import CliRunner

    result = CliRunner().invoke(cli, ["--help"], terminal_width=80)
    listing = result.output.split("Commands:", 1)[1]
    assert "..." not in listing, listing
