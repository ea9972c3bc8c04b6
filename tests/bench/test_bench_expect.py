"""``optcoll bench expect`` runs the command in its own process and writes its figures (no timed
assertion): a row per machine and collective, with the target of the machine's size."""
from click.testing import CliRunner

from optcoll.bench import expect
from optcoll.cli.main import cli


def test_a_case_runs_the_command_and_counts_its_rows():
    row = expect.run_case("dgx1", "allgather")
    assert "error" not in row and row["sizes"] == 24 and row["npus"] == 8
    assert row["cpu_s"] > 0 and row["peak_bytes"] > 0


def test_a_failing_case_is_a_row_with_its_error():
    row = expect.run_case("no-such-machine", "allgather")
    assert "no-such-machine" in row["error"] and "sizes" not in row


def test_targets_follow_the_issue():
    assert expect.target(8) == 10.0 and expect.target(128) == 60.0 and expect.target(512) is None


def test_the_command_writes_the_report(tmp_path):
    out = tmp_path / "bench-expect.md"
    result = CliRunner().invoke(cli, ["bench", "expect", "--machines", "dgx1", "--collectives", "allgather",
                                      "-o", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert "| dgx1 | 8 | allgather | 24 |" in text and "target (s)" in text
