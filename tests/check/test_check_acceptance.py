"""Issue acceptance: deliberately broken synthesizers are each reported precisely while the others
still run, the exit code is 1 and the JUnit file records every failure; a correct synthesizer
passes within its threshold and fails a tighter one with the gap in the report."""
import json
import re
import xml.etree.ElementTree as ET

import pytest

from chaos import behave, stored
from check_helpers import CMD_CHAOS, PY_CHAOS
from optcoll.schedules.jsonfile import schedule_from_dict
from optcoll.instances.suite import find_suite
from optcoll.truth import load_truth
from optcoll.units import format_time
from optcoll.verify import verify

RING, RS = "ring8-allgather-c1", "dgx1-reducescatter-c1"
BROKEN = {"good": RING, "causality": RING, "overlap": RING, "missing": RING, "double": RS,
          "raises": RING, "hangs": RING, "malformed": RING, "crash": RING}
#: instance -> (status, JUnit element, JUnit type)
EXPECTED = {
    "causality": ("invalid", "failure", "causality"),
    "overlap": ("invalid", "failure", "link-overlap"),
    "missing": ("invalid", "failure", "postcondition"),
    "double": ("invalid", "failure", "double-count"),
    "raises": ("error", "error", "error"),
    "hangs": ("timeout", "error", "timeout"),
    "malformed": ("malformed", "failure", "malformed"),
    "crash": ("crash", "error", "crash"),
}
#: what each way in says about the failures that depend on it
SAYS = {
    "py": {"raises": "the synthesizer raised RuntimeError: chaos: deliberate failure in mode 'raises'",
           "hangs": "no schedule within the time limit of 2 s (stopped after",
           "malformed": "the synthesizer returned a dict, not an optcoll Schedule",
           "crash": "the synthesizer's worker process died (exit code -9)"},
    "cmd": {"raises": "the command exited with code 1: RuntimeError: chaos: deliberate failure in "
                      "mode 'raises'",
            "hangs": "no schedule within the time limit of 2 s (the command was killed after",
            "malformed": "not valid JSON",
            "crash": "the command was killed by SIGKILL"},
}


def _spec(suite, name):
    return find_suite(str(suite)).spec(name)


def _verified(suite, name):
    """The shared verifier's own verdict on what the chaos synthesizer makes for ``name``."""
    spec = _spec(suite, name)
    inst = spec.instance
    schedule = schedule_from_dict(behave(name.partition("-")[0], stored(spec.path)), inst.machine)
    return verify(inst.machine, inst.collective, schedule, inst.model)


@pytest.mark.parametrize("way", ["py", "cmd"])
def test_broken_synthesizers_are_each_reported_precisely_and_the_others_still_run(
        way, make_suite, run_cli, tmp_path):
    suite = make_suite(BROKEN)
    junit, summary = tmp_path / "out" / "junit.xml", tmp_path / "out" / "summary.md"
    code, out, err = run_cli("--synth", PY_CHAOS if way == "py" else CMD_CHAOS, "--suite", suite,
                             "--time-limit", "2", "--jobs", "2", "--junit", junit, "--summary", summary,
                             "--json")
    assert code == 1, err
    report = json.loads(out)
    by = {o["instance"]: o for o in report["instances"]}
    assert sorted(by) == sorted(BROKEN)
    assert report["passed"] is False
    assert report["counts"] == {"pass": 1, "invalid": 4, "timeout": 1, "error": 1, "crash": 1,
                                "malformed": 1}
    # the good one still ran, verified, at the recorded optimum
    good = by["good"]
    assert good["status"] == "pass" and good["ratio"] == pytest.approx(1.0)
    assert good["time"] == pytest.approx(load_truth(_spec(suite, "good"))[0].best.value, rel=1e-12)
    for name, (status, _, kind) in EXPECTED.items():
        outcome = by[name]
        assert outcome["status"] == status, (name, outcome)
        assert outcome["failed"] is True
        if status == "invalid":
            # exactly the shared verifier's first violation, named by kind
            expected = _verified(suite, name).violation
            assert expected.kind == kind
            assert outcome["violation"]["kind"] == kind
            assert outcome["message"] == f"invalid schedule [{kind}]: {expected.message}"
        else:
            assert SAYS[way][name] in outcome["message"], outcome["message"]
    assert "sends chunk" in by["causality"]["message"] and "but only receives it" in by["causality"]["message"]
    assert "never holds chunk" in by["missing"]["message"]
    assert "counted twice" in by["double"]["message"]
    # the hang was stopped at its time limit (the message says "stopped after"), not before it,
    # and not at the pool's hard deadline (that message would say "exceeded its hard time limit")
    assert by["hangs"]["seconds"] >= 2.0

    root = ET.parse(junit).getroot()
    suite_el = root.find("testsuite")
    assert suite_el.get("tests") == "9" and suite_el.get("failures") == "5" and suite_el.get("errors") == "3"
    cases = {c.get("name"): c for c in suite_el.iter("testcase")}
    assert sorted(cases) == sorted(BROKEN)
    assert list(cases["good"]) == [cases["good"].find("system-out")]
    for name, (status, element, kind) in EXPECTED.items():
        found = cases[name].find(element)
        assert found is not None, name
        assert found.get("type") == kind
        assert found.get("message") == f"{name}: {by[name]['message']}"
        assert f"instance file: {by[name]['file']}" in found.text
    assert "Traceback" in cases["raises"].find("error").text  # the detail travels with it

    text = summary.read_text()
    assert text.startswith("## :x: optcoll check FAILED: 8 of 9 instances")
    assert "| good | pass |" in text
    for name in EXPECTED:
        assert f"- **{name}** ({EXPECTED[name][0]}):" in text


def test_a_correct_synthesizer_passes_within_the_threshold_and_fails_a_tighter_one(make_suite, run_cli):
    suite = make_suite({"slow-ring8": RING, "good-dgx1": "dgx1-allgather-c1"})
    slow = _verified(suite, "slow-ring8")
    optimum = load_truth(_spec(suite, "slow-ring8"))[0].best.value
    ratio = slow.time / optimum
    assert slow.valid and ratio == pytest.approx(7 / 4)  # 4 link times, delayed by 3 more

    code, out, err = run_cli("--synth", PY_CHAOS, "--suite", suite, "--max-gap", "1.8")
    assert code == 0, out + err
    assert re.search(rf"^slow-ring8 +pass +{re.escape(format_time(slow.time))} ", out, re.M)
    assert out.rstrip().splitlines()[-1].startswith("optcoll check PASSED (pass 2;")

    code, out, err = run_cli("--synth", PY_CHAOS, "--suite", suite, "--max-gap", "1.7")
    assert code == 1
    assert (f"slow-ring8: time {format_time(slow.time)} is {ratio:.4f}× the recorded optimum "
            f"{format_time(optimum)} (+{100 * (ratio - 1):.2f} %), over the threshold 1.7× "
            f"(--max-gap)") in out
    assert re.search(r"^good-dgx1 +pass ", out, re.M)
    assert out.rstrip().splitlines()[-1].startswith("optcoll check FAILED: 1 of 2 instances (pass 1, gap 1;")


def test_per_instance_thresholds_in_the_suite_win_over_the_command_line(make_suite, run_cli):
    toml = ("[check]\nmax_gap = 1.5\n\n"
            "[check.instances.slow-ring8]\nmax_gap = 2.0\n")
    suite = make_suite({"slow-ring8": RING, "slow-hypercube": "hypercube4-allgather-c1",
                        "good": RING}, toml)
    hyper = _verified(suite, "slow-hypercube").time / \
        load_truth(_spec(suite, "slow-hypercube"))[0].best.value
    assert hyper > 1.5  # so the suite's default must fail it

    code, out, _ = run_cli("--synth", PY_CHAOS, "--suite", suite, "--json")
    by = {o["instance"]: o for o in json.loads(out)["instances"]}
    assert code == 1
    assert (by["slow-ring8"]["status"], by["slow-ring8"]["threshold"]) == ("pass", 2.0)
    assert by["slow-ring8"]["threshold_source"] == "suite.toml [check.instances.slow-ring8]"
    assert (by["slow-hypercube"]["status"], by["slow-hypercube"]["threshold_source"]) == \
        ("gap", "suite.toml [check]")
    assert by["good"]["threshold"] == 1.5

    code, out, _ = run_cli("--synth", PY_CHAOS, "--suite", suite, "--json", "--max-gap", "1.01")
    by = {o["instance"]: o for o in json.loads(out)["instances"]}
    assert by["slow-ring8"]["status"] == "pass"  # its own entry still applies
    assert (by["good"]["threshold"], by["good"]["threshold_source"]) == (1.01, "--max-gap")
