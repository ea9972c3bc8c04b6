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


def test_sccls_generic_questions_are_written_as_loadable_instances(tmp_path):
    from optcoll.bench.step import write_questions
    from optcoll.instances.instancefile import load_instance

    paths = write_questions(tmp_path)
    star = load_instance(paths["star5-allreduce"])
    assert sorted(zip(star.machine.link_src.tolist(), star.machine.link_dst.tolist())) == \
        sorted([(0, v) for v in range(1, 5)] + [(v, 0) for v in range(1, 5)])
    assert star.collective.combining and star.collective.num_chunks == 1 and star.model.kind == "step"
    line = load_instance(paths["line8-alltoall"])
    assert line.machine.num_links == 14 and line.collective.kind == "alltoall"
    assert load_instance(paths["torus32x32"]).machine.num_npus == 1024


def test_combining_rows_print_both_answers_where_they_differ(monkeypatch):
    """Ring(4): SCCL's rules give the same 2 steps; Star(4): none at any S under them."""
    import optcoll.bench.step as bench

    monkeypatch.setattr(bench, "SCCL_TOPOLOGIES", ("Ring", "Star"))
    monkeypatch.setattr(bench, "SCCL_SIZES", (4,))
    rows = bench.combining_rows(60.0)
    assert [(r[0], r[1], r[3], r[5]) for r in rows] == [
        ("Ring(4)", "optimal: S = 2, R = 2", "optimal: S = 2, R = 2", "same"),
        ("Star(4)", "optimal: S = 2, R = 2", "infeasible at every S", "differ")]
