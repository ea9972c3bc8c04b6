"""Tracebacks and raw output left after round 1 (issue 21, class 5): each is now one line (exit 2)
or output that stays what it claims to be. Text from input files (model descriptions, instance
names, a synthesizer's output) reaches the terminal, JUnit and Markdown with its control
characters escaped; `check --json` stays JSON whatever a synthesizer prints; units read as meant."""
from __future__ import annotations

import json
import shlex
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from fault_helpers import assert_one_line_error, invoke, run_cli, write_instance
from special_inputs import QUICK

ESCAPES = "\x1b]0;owned\x07\x1b[2J\r\u202e"  # set the title, clear the screen, overprint, reverse
SHOWN = "\\x1b]0;owned\\x07\\x1b[2J\\x0d\\u202e"
RING = QUICK / "ring4-alltoall-c1.toml"


def _raw(text: str, carriage_return: bool = True) -> bool:
    """Whether ``text`` holds an escape, a bell, a bidi override (or a carriage return: a
    progress bar's own are allowed on stderr)."""
    return any(c in text for c in "\x1b\x07\u202e" + ("\r" if carriage_return else ""))


@pytest.mark.parametrize("args, says", [
    (["synth", RING, "--seed", "-1"], "--seed: -1 is not in the range 0<=x<=2147483647"),
    (["solve", RING, "--seed", "2147483648"], "--seed: 2147483648 is not in the range"),
    (["solve", RING, "--threads", "10001"], "--threads: 10001 is not in the range 1<=x<=10000"),
    (["pareto", RING, "--threads", "0"], "--threads: 0 is not in the range 1<=x<=10000"),
    (["report", RING, "--seed", "99999999999"], "--seed: 99999999999 is not in the range"),
], ids=["synth --seed -1", "solve --seed 2^31", "solve --threads 10001", "pareto --threads 0",
        "report --seed 10^11"])
def test_seeds_and_threads_beyond_what_solvers_take(args, says, record_property):
    """Input: a negative seed (numpy's ValueError traceback before), a seed or thread count past
    what CP-SAT accepts (its traceback before)."""
    line = assert_one_line_error(invoke(args), says)
    record_property("tried", " ".join(str(a) for a in args).replace(str(QUICK), "quick"))
    record_property("message", line.replace(str(QUICK), "quick"))


def _instance(path: Path, size: str = "4 MB", budget: str = "") -> Path:
    path.write_text(f'[instance]\nmachine = "ring4"\ncollective = "allgather"\nsize = "{size}"\n'
                    + (f"[budget]\n{budget}\n" if budget else ""))
    return path


@pytest.mark.parametrize("fields, says", [
    ({"budget": "seed = 2147483648"}, "budget.seed: must be at most 2147483647, got 2147483648"),
    ({"budget": "threads = 10001"}, "budget.threads: must be at most 10000, got 10001"),
    ({"size": "1 Gb"}, "instance.size: size '1 Gb': 'Gb' is bits, but a size is counted in bytes: write "
                       "'1 GB' (or '1 Gbit' if you mean bits)"),
    ({"size": "512 kb"}, "instance.size: size '512 kb': 'kb' is bits, but a size is counted in bytes: "
                         "write '512 kB'"),
], ids=["budget seed 2^31", "budget threads 10001", "size 1 Gb", "size 512 kb"])
def test_instance_values_no_solver_takes_or_no_one_means(fields, says, tmp_path, record_property):
    """Input: an instance whose [budget] asks for more than CP-SAT takes (its traceback before),
    or whose size is written in bits ("1 Gb": read as gigabits, an eighth of 1 GB, without a word)."""
    path = _instance(tmp_path / "inst.toml", **fields)
    line = assert_one_line_error(invoke(["instance", "show", path]), f"{path}: {says}")
    record_property("tried", ", ".join(f"{key}: {value}" for key, value in fields.items()))
    record_property("message", line.replace(str(tmp_path), "<tmp>"))


def _model(path: Path, body: str) -> Path:
    path.write_text('[machine]\nname = "m"\n' + body)
    return path


RING_TOPOLOGY = '[topology]\nkind = "ring"\nn = 4\nbandwidth = "50 GiB/s"\nlatency = "{latency}"\n'


def test_failing_every_npu_is_one_line(tmp_path, record_property):
    """Input: a [failures] section removing every NPU (numpy's zero-size array traceback)."""
    model = _model(tmp_path / "m.toml", RING_TOPOLOGY.format(latency="1 us") + "[failures]\nnpus = [0, 1, 2, 3]\n")
    line = assert_one_line_error(invoke(["model", "show", model]),
                                 f"{model}: failures.npus: fails all 4 NPUs; at least one must remain")
    record_property("tried", "[failures] npus = every NPU")
    record_property("message", line.replace(str(tmp_path), "<tmp>"))


@pytest.mark.parametrize("latency", ["1 µs", "1 μs", "1 us"], ids=["micro sign", "greek mu", "us"])
def test_microseconds_in_any_spelling(latency, tmp_path):
    """Input: a latency in µs (U+00B5), μs (U+03BC, refused before) or us: all the same."""
    model = _model(tmp_path / "m.toml", RING_TOPOLOGY.format(latency=latency))
    proc = invoke(["model", "show", model, "--json"])
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["link_latency"] == [1e-06, 1e-06]


def test_bits_spelt_out_still_read_as_bits(tmp_path):
    """Input: size = "8 Gbit" (1 GB, unambiguous) and a bandwidth of "100 Gb/s" (bits, as networks say)."""
    path = _instance(tmp_path / "inst.toml", size="8 Gbit")
    assert json.loads(invoke(["instance", "show", path, "--json"]).stdout)["size_bytes"] == 1e9
    model = _model(tmp_path / "m.toml", RING_TOPOLOGY.format(latency="1 us").replace("50 GiB/s", "100 Gb/s"))
    assert json.loads(invoke(["model", "show", model, "--json"]).stdout)["link_bandwidth"] == [12.5e9, 12.5e9]


def test_a_model_description_cannot_drive_the_terminal(tmp_path, record_property):
    """Input: a model description holding terminal escapes, a carriage return and a bidi override."""
    model = _model(tmp_path / "m.toml",
                   f"description = {json.dumps(ESCAPES)}\n" + RING_TOPOLOGY.format(latency="1 us"))
    proc = invoke(["model", "show", model])
    assert proc.returncode == 0 and not _raw(proc.stdout) and f"m: {SHOWN}" in proc.stdout
    record_property("tried", "model show: a description with escape sequences")
    record_property("message", proc.stdout.splitlines()[0])


def test_an_instance_name_cannot_drive_the_terminal(tmp_path, record_property):
    """Input: an instance named with escapes, shown by `instance show`, `report` (table and
    progress), and in an error line quoting a key with an escape in it."""
    name = f"evil{ESCAPES}"
    inst = write_instance(tmp_path / "suite", "evil", "ring4", "allgather", "4 MB",
                          extra=f"name = {json.dumps(name)}")
    for args in (["instance", "show", inst], ["report", inst, "--no-cache", "--jobs", "0", "--runs", "1",
                                               "--progress"]):
        proc = invoke(args)
        assert proc.returncode == 0 and not _raw(proc.stdout) and not _raw(proc.stderr, False), args
        assert f"evil{SHOWN}" in proc.stdout
    bad = tmp_path / "bad.toml"
    bad.write_text('[instance]\nmachine = "ring4"\ncollective = "allgather"\nsize = "4 MB"\n"x\\u001b[2J" = 1\n')
    line = assert_one_line_error(invoke(["instance", "show", bad]), "x\\x1b[2J")
    assert not _raw(line)
    record_property("tried", "an instance name and a key with escape sequences")
    record_property("message", line.replace(str(tmp_path), "<tmp>"))


def test_junit_is_well_formed_whatever_the_names(tmp_path, record_property):
    """Input: `check --junit` on a suite whose instance is named with control characters (XML
    1.0 cannot carry them: the report was not well-formed)."""
    name = "evil\x00\x01" + ESCAPES
    inst = write_instance(tmp_path / "suite", "evil", "ring4", "allgather", "4 MB",
                          extra=f"name = {json.dumps(name)}")
    junit, summary = tmp_path / "j.xml", tmp_path / "s.md"
    proc = invoke(["check", "--synth", "builtin:tacos", "--suite", inst.parent, "--jobs", "1", "--junit", junit,
                   "--summary", summary])
    assert proc.returncode in (0, 1) and not _raw(proc.stdout)
    case = ET.parse(junit).getroot().find("testsuite/testcase")
    assert case.get("name") == "evil\\x00\\x01" + SHOWN
    assert not _raw(summary.read_text()) and "\x00" not in summary.read_text()
    record_property("tried", "check --junit/--summary with an instance named with control characters")
    record_property("message", case.get("name"))


PRINTS = """import os, sys
from optcoll.producers.registry import get_synthesizer
def run(instance):
    print("progress: 50 %")
    os.write(1, b"written to descriptor 1\\n")
    sys.stdout.flush()
    return get_synthesizer("tacos")(instance, 0)
"""


@pytest.mark.parametrize("kind", ["py", "cmd"])
def test_check_json_stays_json_when_a_synthesizer_prints(kind, tmp_path, record_property):
    """Input: a synthesizer that prints to stdout (Python print, a raw write to descriptor 1, a
    command's own output): `check --json`, in a real process, is still one JSON document."""
    module = tmp_path / "noisy.py"
    module.write_text(PRINTS)
    script = tmp_path / "noisy_cmd.py"
    script.write_text("import sys\nprint('cmd says hi')\nsys.exit(3)\n")
    synth = f"py:{module}:run" if kind == "py" else f"cmd:{shlex.quote(sys.executable)} {script} {{out}}"
    proc = run_cli(["check", "--synth", synth, "--suite", QUICK / "ring8-allgather-c1.toml", "--jobs", "1",
                    "--json"], timeout=120)
    report = json.loads(proc.stdout)
    assert proc.returncode in (0, 1) and report["instances"], proc.stderr
    record_property("tried", f"check --json with a {kind}: synthesizer printing to stdout")
