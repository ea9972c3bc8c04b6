"""The files CI reads: JUnit XML and Markdown stay well-formed whatever a synthesizer prints, and
the example GitHub Actions workflow's command runs as written."""
import os
import shlex
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import yaml

from check_helpers import PY_CHAOS

RING = "ring8-allgather-c1"
WORKFLOW = Path(__file__).resolve().parents[2] / "examples" / "ci" / "github-actions-optcoll-check.yml"


def test_reports_survive_whatever_a_failing_command_prints(make_suite, run_cli, tmp_path):
    noisy = tmp_path / "noisy.py"
    noisy.write_text("import sys\nsys.stderr.write('\\x1b[31mred\\x1b[0m a|b ]]> <&\\x00\\n')\n"
                     "sys.exit(2)\n")
    suite = make_suite({"good": RING})
    junit, summary = tmp_path / "j.xml", tmp_path / "s.md"
    code, out, _ = run_cli("--synth", f"cmd:{shlex.quote(sys.executable)} {noisy} {{out}}",
                           "--suite", suite, "--junit", junit, "--summary", summary)
    assert code == 1
    # The escape sequences are shown, not obeyed, in every output (terminal, JUnit, Markdown).
    shown = "good: the command exited with code 2: \\x1b[31mred\\x1b[0m a|b"
    assert shown in out and "\x1b" not in out
    error = ET.parse(junit).getroot().find("testsuite/testcase/error")
    assert error.get("type") == "error"
    assert error.get("message").startswith(shown)
    assert "a|b ]]> <&\\x00" in error.text
    text = summary.read_text()
    assert "- **good** (error): the command exited with code 2: \\x1b[31mred\\x1b[0m a\\|b" in text
    assert "  <details><summary>detail</summary>" in text


def test_the_example_workflow_command_runs_as_written(make_suite, run_cli, tmp_path, monkeypatch):
    steps = yaml.safe_load(WORKFLOW.read_text())["jobs"]["optcoll-check"]["steps"]
    (command,) = [s["run"] for s in steps if s.get("run", "").startswith("optcoll check")]
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
    monkeypatch.chdir(tmp_path)
    args = [os.path.expandvars(a) for a in shlex.split(command)][2:]
    # the user's synthesizer and suite stand in for the placeholders
    args[args.index("--synth") + 1] = PY_CHAOS
    args[args.index("--suite") + 1] = str(make_suite({"good": RING}))
    code, out, err = run_cli(*args)
    assert code == 0, out + err
    assert (tmp_path / "optcoll-check.xml").is_file()
    assert (tmp_path / "summary.md").read_text().startswith("## :white_check_mark: optcoll check PASSED")
