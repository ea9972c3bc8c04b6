"""The step-model benchmark's plumbing: a child command's CPU, memory and answer, and the
one-port rows' cross-checks (the figures themselves are not asserted)."""
from __future__ import annotations

from pathlib import Path

from optcoll.bench.step import _answer, port_rows, run_command

DGX1 = Path(__file__).resolve().parents[2] / "instances" / "quick" / "dgx1-allgather-c2.toml"


def test_a_child_command_is_measured_and_its_answer_read():
    measured = run_command(["solve", str(DGX1), "--model", "step", "--least-steps", "--chunks", "1",
                            "--no-progress", "--json"], timeout=300)
    assert measured.code == 0 and measured.cpu > 0 and measured.peak_mib > 0
    assert _answer(measured) == "optimal: S = 2, R = 2"


def test_a_bad_command_has_no_answer():
    measured = run_command(["solve", str(DGX1), "--model", "step", "--steps", "0", "--json"], timeout=300)
    assert measured.code == 2 and _answer(measured) == "no answer (exit 2)"


def test_one_port_rows_agree_between_solvers_and_with_the_timed_model():
    rows = port_rows(60.0, sizes=(4,))
    assert [row[0] for row in rows] == ["alltoall on 4 nodes", "scatter on 4 nodes", "gather on 4 nodes"]
    for row in rows:
        assert row[1] == row[3] == "optimal S = 3" and row[5] == "yes" and row[6].endswith(": equal")
