"""The AllReduce report's plumbing (its figures are in reports/allreduce.md)."""
from __future__ import annotations

from optcoll.bench.allreduce import Case, _verdict, schedule_name, write_report
from optcoll.collectives.builtins import make_collective
from optcoll.machines import generators as G
from optcoll.schedules.jsonfile import load_schedule
from optcoll.verify import verify


def test_verdicts_need_a_bound_or_a_faster_schedule():
    assert _verdict(4.0, 4.0, 4.0, "allreduce-transfers")[0] == "yes: it meets the allreduce-transfers bound"
    assert _verdict(4.0, 3.0, 3.0, "cut") == ("no: a direct AllReduce (the direct model) is faster (optimal)",
                                              "25.00 %")
    # a synthesizer's schedule may itself be RS + AG: "no" needs the family's optimum proven
    assert _verdict(4.0, 3.0, 2.0, "cut", "ring", family_proven=False)[0].startswith("open: ring is faster")
    assert _verdict(4.0, 4.0, 3.0, "cut")[0].startswith("open: nothing faster found, 33.33 %")
    assert schedule_name(Case("dgx1 C=2", G.dgx1, "1 GiB", 2)) == "dgx1-C2.json.gz"


def test_ring4_row_and_its_faster_schedule(tmp_path):
    """On a 4-ring the direct AllReduce takes 3 link times, ReduceScatter + AllGather 4."""
    case = Case("ring4", lambda: G.ring(4, 1e9, 1e-6), "4 MB")
    out = tmp_path / "allreduce.md"
    text = write_report(str(out), 20.0, cases=(case,))
    assert "| ring4 | 4 | 1 | 4 MB |" in text and "no: a direct AllReduce (the direct model) is faster (optimal) | 25.00 %" in text
    machine = case.machine()
    schedule = load_schedule(tmp_path / "allreduce" / "ring4.json.gz", machine)
    result = verify(machine, make_collective("allreduce", range(4), 4e6, 1), schedule)
    assert result.valid and abs(result.time - 3 * (1e-6 + 1e6 / 1e9)) < 1e-12


def test_recorded_takes_the_best_of_the_suites_asking_the_same_question():
    """DGX-1 C = 2 is asked by the standard suite and by the machines suite."""
    from optcoll.bench.allreduce import CASES, _instance, recorded
    from optcoll.bundled import bundled_dir
    from optcoll.instances.instancefile import load_instance

    inst = _instance(next(case for case in CASES if case.label == "dgx1 C=2"), 10.0)
    times = {suite: load_instance(bundled_dir("instances") / suite / "dgx1-allreduce-c2.toml").results["time"]
             for suite in ("standard", "machines")}
    found = recorded(inst)  # one truth per question (issue 34): both suites record the optimum
    assert found is not None and found[2] in ("standard/dgx1-allreduce-c2", "machines/dgx1-allreduce-c2")
    assert found[0] == times["standard"] == times["machines"]


def test_star4_sharp_row_asks_the_family_although_the_in_switch_schedule_answers(tmp_path):
    """On a switch that reduces and multicasts the in-switch AllReduce meets the bound at once and
    the solver stops there; the report still solves ReduceScatter then AllGather for its question
    (4 + 4 link times against 4 + 1)."""
    from optcoll.bench.allreduce import CASES

    case = next(case for case in CASES if case.label == "star4_sharp")
    text = write_report(str(tmp_path / "allreduce.md"), 20.0, cases=(case,))
    row = next(line for line in text.splitlines() if line.startswith("| star4_sharp |"))
    assert "40.004 ms (optimal in family) | 25.0025 ms | 25.0025 ms" in row
    assert "no: a direct AllReduce (inswitch) is faster (optimal) | 37.50 %" in row
