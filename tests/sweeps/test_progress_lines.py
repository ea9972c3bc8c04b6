"""Progress without a terminal (issue 37, item 5): off a terminal a long command says where it is
in plain lines on stderr (at most one per ``LINE_INTERVAL``), ``--no-progress`` silences it, and a
command done sooner says nothing."""
from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from optcoll.cli.main import cli
from optcoll.sweeps import progress
from optcoll.sweeps.progress import BAR, LINES, Progress, progress_mode
SHIFT = str(Path(__file__).resolve().parents[2] / "examples" / "shift.toml")


def test_lines_off_a_terminal_bar_on_request_nothing_when_silenced(capsys, monkeypatch):
    assert progress_mode(None) == LINES and progress_mode(True) == BAR and progress_mode(False) is None
    monkeypatch.setattr(progress, "LINE_INTERVAL", 0.0)
    bar = Progress(3, 1, "report quick", None)
    bar.tick(["ring4-ag exact"])
    bar.advance("ring4-ag tacos", failed=True)
    bar.close()
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[0].startswith("report quick: 1/3 jobs after ") and lines[0].endswith("; running ring4-ag exact")
    assert lines[1].startswith("report quick: 2/3 jobs, 1 failed after ") and "left; last done ring4-ag tacos" in lines[1]
    silent = Progress(3, 0, "report quick", False)
    silent.tick(["x"])
    silent.advance("x", False)
    silent.close()
    assert capsys.readouterr().err == ""


def test_report_off_a_terminal_prints_progress_lines_unless_told_not_to(monkeypatch):
    monkeypatch.setattr(progress, "LINE_INTERVAL", 0.0)
    runner = CliRunner()
    args = ["report", SHIFT, "--jobs", "1", "--no-cache", "--runs", "1"]
    said = runner.invoke(cli, args, catch_exceptions=False)
    assert said.exit_code == 0 and "jobs after" in said.stderr, said.stderr
    quiet = runner.invoke(cli, args + ["--no-progress"], catch_exceptions=False)
    assert quiet.exit_code == 0 and "jobs after" not in quiet.stderr, quiet.stderr
