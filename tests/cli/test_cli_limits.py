"""Every limit option takes the same forms on every command — "90" (seconds), "90 s", "2 min" for
a time, "8 GiB" for memory — and a bad one is one line naming the flag as it was written."""
from __future__ import annotations

import pytest

from optcoll.errors import InputError
from optcoll.instances.budget import Budget, parse_bytes, parse_seconds

MISSING = "no-such-file.toml"
#: (command words, its limit flag); each command fails on MISSING only after parsing its options.
LIMITS = [
    (["solve", MISSING], "--time-limit"),
    (["pareto", MISSING], "--time-limit"),
    (["report", MISSING], "--time-limit"),
    (["truth", "update", MISSING], "--time-limit"),
    (["check", "--synth", "builtin:ring", "--suite", MISSING], "--time-limit"),
    (["bench", "exact", "--families", "no-such-family"], "--time-limit"),
    (["bench", "exact", "--families", "no-such-family"], "--pareto-limit"),
]
IDS = [f"{' '.join(words[:2])} {flag}" for words, flag in LIMITS]


@pytest.mark.parametrize("words, flag", LIMITS, ids=IDS)
@pytest.mark.parametrize("value", ["90", "90 s", "2 min", "0.5"])
def test_every_time_limit_takes_seconds_and_units(run, words, flag, value):
    code, _, err = run(*words, flag, value)
    assert code == 2 and f"{flag}:" not in err  # the limit passed; the missing file did not
    assert "no-such" in err


@pytest.mark.parametrize("words, flag", LIMITS, ids=IDS)
@pytest.mark.parametrize("value, says", [
    ("2 mins", "needs a unit"), ("0", "must be a positive number of seconds, got '0'"),
    ("-1 s", "must be positive"), ("soon", "cannot read 'soon' as a time"), ("inf", "got 'inf'")])
def test_a_bad_time_limit_is_one_line_naming_the_flag(run, words, flag, value, says):
    code, out, err = run(*words, flag, value)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert err.startswith(f"optcoll: error: {flag}: ") and says in err


@pytest.mark.parametrize("words", [["solve", MISSING], ["pareto", MISSING], ["report", MISSING]])
def test_memory_limits_take_sizes_with_units(run, words):
    code, _, err = run(*words, "--max-memory", "8 GiB")
    assert code == 2 and "no-such" in err
    code, _, err = run(*words, "--max-memory", "8")
    assert code == 2 and err.startswith("optcoll: error: --max-memory: size '8' has no unit")


def test_the_budget_is_parsed_and_checked_once_and_packs_into_plain_parameters():
    assert parse_seconds("90", "t") == parse_seconds("1.5 min", "t") == parse_seconds(90, "t") == 90.0
    assert parse_bytes("1 GiB", "m") == 2**30
    with pytest.raises(InputError, match="budget.time_limit: expected a time with a unit"):
        parse_seconds(60, "budget.time_limit", bare=False)  # in files a time carries its unit
    budget = Budget(30, 1, 4, max_memory=2**30)
    assert budget.to_params() == {"time_limit": 30.0, "threads": 1, "seed": 4, "max_memory": 2**30}
    assert Budget.from_params({**budget.to_params(), "solver": "cpsat"}) == budget
    assert budget.overridden(time_limit=None, threads=2) == Budget(30, 2, 4, max_memory=2**30)
    for bad, field in (({"time_limit": 0}, "time_limit"), ({"threads": 0}, "threads"),
                       ({"seed": 1.5}, "seed"), ({"max_memory": -1}, "max_memory"),
                       ({"work_limit": float("nan")}, "work_limit")):
        with pytest.raises(InputError) as err:
            Budget(**bad)
        assert err.value.field == field


def test_solve_counts_its_time_limit_from_the_commands_start():
    """The limit covers the whole command: a command started 60 s ago (as ``main`` records its
    process's start) has no time left for a 5 s solve, which stops at once with what it has."""
    import json
    import time

    from click.testing import CliRunner

    from cli_paths import REPO
    from optcoll.cli.main import cli

    path = REPO / "instances" / "quick" / "ring8-allgather-c1.toml"
    result = CliRunner().invoke(cli, ["solve", str(path), "--time-limit", "5", "--json"],
                                obj={"started": time.perf_counter() - 60.0}, catch_exceptions=False)
    data = json.loads(result.stdout)
    assert data["wall_time"] >= 60.0 and data["status"] == "unknown"
    assert any(note.startswith("no first schedule: the time limit (5 s) reached") for note in data["notes"])


def test_solve_verbose_prints_each_phase_with_the_time_left(run):
    """``solve --verbose``: one stderr line per phase as it ends — the start-up first, the answer's
    verification and the outputs last — each with the seconds left to the limit; the answer on
    stdout is the same as without it."""
    from cli_paths import REPO

    path = str(REPO / "instances" / "quick" / "ring8-allgather-c1.toml")
    code, out, err = run("solve", path, "--verbose", "--no-progress", "--work-limit", "5")
    lines = [line.split(")  ", 1)[1] for line in err.splitlines() if line.startswith("  phase ")]
    assert code == 0 and lines[0] == "start-up and reading the instance"
    assert lines[-2:] == ["verify the answer", "write the outputs"]
    assert "allgather: lower bounds" in lines and "  latency bound" in lines  # nested: indented
    assert all(" s left)" in line for line in err.splitlines() if line.startswith("  phase "))
    quiet = run("solve", path, "--no-progress", "--work-limit", "5")
    assert quiet[0] == 0 and quiet[1].splitlines()[1] == out.splitlines()[1] and "phase" not in quiet[2]
