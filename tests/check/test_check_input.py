"""Synthesizer specs and bad input: everything that cannot run is exit code 2 with one line naming
what is wrong, before any instance runs."""
import shlex
import sys

import pytest

from check_helpers import CHAOS, PY_CHAOS
from optcoll.producers.external.spec import parse_synth
from optcoll.errors import InputError

RING = "ring8-allgather-c1"
PYTHON = shlex.quote(sys.executable)


def test_each_prefix_and_the_unprefixed_forms(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "made").mkdir()
    assert parse_synth("builtin:tacos") == parse_synth("tacos")
    assert str(parse_synth("tacos")) == "builtin:tacos"
    assert str(parse_synth("made")) == f"dir:{tmp_path / 'made'}"
    assert parse_synth(f"{CHAOS}:synthesize") == parse_synth(PY_CHAOS)
    assert str(parse_synth("json:loads")) == "py:json:loads"
    assert str(parse_synth("os.path:join")) == "py:os.path:join"
    command = f"{PYTHON} x.py {{instance}} {{out}}.json"
    assert parse_synth(command) == parse_synth(f"cmd:{command}")
    assert parse_synth(command).fields == {"instance", "out"}
    # a relative .py path is made absolute, so workers find it from anywhere
    (tmp_path / "mine.py").write_text("def run(instance):\n    return None\n")
    assert str(parse_synth("py:mine.py:run")) == f"py:{tmp_path / 'mine.py'}:run"


@pytest.mark.parametrize("spec, words", [
    ("nothing-like-a-spec", "cannot tell what 'nothing-like-a-spec' is"),
    ("py:no_such_module_xyz:run", "cannot import 'no_such_module_xyz': ModuleNotFoundError"),
    ("py:json:no_such_function", "'json' has no attribute 'no_such_function'"),
    ("py:json:decoder", "json:decoder is a module, not a function"),
    ("py:/no/such/file.py:run", "no Python file '/no/such/file.py'"),
    ("py:just-a-word", "is not MODULE:FUNCTION"),
    ("cmd:no-such-program-xyz {instance} {out}", "program 'no-such-program-xyz' not found"),
    (f"cmd:{PYTHON} x.py {{instance}}", "the command must write its schedule where {out} says"),
    (f"cmd:{PYTHON} x.py {{out}} {{bogus}}", "unknown placeholder {bogus} in the command"),
    (f"cmd:{PYTHON} x.py {{out:>9}}", "unknown placeholder {out:>9}"),
    (f"cmd:{PYTHON} 'unclosed {{out}}", "cannot read the command template"),
    ("cmd:", "the command template is empty"),
    ("dir:/no/such/dir", "no schedule directory '/no/such/dir'"),
    ("builtin:no-such", "unknown built-in synthesizer 'no-such'; known: tacos"),
])
def test_a_bad_spec_is_exit_2_before_anything_runs(spec, words, make_suite, run_cli):
    suite = make_suite({"good": RING})
    code, out, err = run_cli("--synth", spec, "--suite", suite)
    assert code == 2 and out == ""
    assert err.startswith("optcoll: error: --synth: ") and words in err, err
    assert len(err.strip().splitlines()) == 1


def test_an_ambiguous_unprefixed_spec_asks_for_the_prefix(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tacos").mkdir()
    with pytest.raises(InputError, match=r"'tacos' is ambiguous: it could be dir or builtin; add "
                                         r"the prefix \(dir:, builtin:\)"):
        parse_synth("tacos")
    assert str(parse_synth("builtin:tacos")) == "builtin:tacos"


def test_a_module_that_fails_to_import_is_bad_input(tmp_path, run_cli, make_suite):
    (tmp_path / "broken_import.py").write_text("raise RuntimeError('no import for you')\n")
    code, _, err = run_cli("--synth", f"py:{tmp_path / 'broken_import.py'}:run", "--suite",
                           make_suite({"good": RING}))
    assert code == 2 and "RuntimeError: no import for you" in err


@pytest.mark.parametrize("toml, words", [
    ("[check]\nmax_gap = 0.9\n", "suite.toml: check.max_gap: must be a ratio ≥ 1"),
    ("[check]\nmax_gap = '10 %'\n", "check.max_gap: must be a ratio ≥ 1"),
    ("[check]\nthreshold = 1.2\n", "check.threshold: unknown key; allowed: instances, max_gap"),
    ("[check.instances.nope]\nmax_gap = 1.2\n", "check.instances.nope: no instance file nope.toml"),
    ("[check.instances.good]\nmax_gap = 1.2\nskip = true\n",
     "check.instances.good: must be a table with max_gap (and nothing else)"),
    ("[checks]\nmax_gap = 1.2\n", "unknown section [checks] (did you mean [check]?); allowed: check, plots, suite"),
])
def test_a_bad_check_section_in_suite_toml_is_exit_2(toml, words, make_suite, run_cli):
    code, out, err = run_cli("--synth", PY_CHAOS, "--suite", make_suite({"good": RING}, toml))
    assert code == 2 and words in err, err


@pytest.mark.parametrize("args, words", [
    (["--suite", "no-such-suite"], "no suite directory or instance file 'no-such-suite'"),
    (["--max-gap", "0.95"], "--max-gap"),
    (["--time-limit", "0"], "--time-limit"),
    (["--time-limit", "soon"], "--time-limit"),
    (["--jobs", "-1"], "--jobs"),
    (["--against", "worst"], "--against"),
])
def test_bad_options_are_exit_2(args, words, make_suite, run_cli):
    suite = make_suite({"good": RING})
    code, out, err = run_cli("--synth", PY_CHAOS, "--suite", suite, *args)
    assert code == 2 and words in err, err


def test_run_check_validates_its_numbers_like_the_cli(make_suite):
    from optcoll.check import run_check

    suite = make_suite({"good": RING})
    for kwargs, words in [({"max_gap": 0.5}, "--max-gap: must be a ratio ≥ 1"),
                          ({"timeout": -1}, "--time-limit: must be a positive number"),
                          ({"jobs": 0}, "--jobs: must be a positive integer"),
                          ({"against": "median"}, "--against: must be one of best, bound")]:
        with pytest.raises(InputError, match=words.replace("(", r"\(")):
            run_check(PY_CHAOS, suite, **kwargs)
