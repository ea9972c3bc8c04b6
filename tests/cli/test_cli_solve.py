import json
from fractions import Fraction

import pytest

from cli_paths import REPO

QUICK = REPO / "instances" / "quick"


def test_pareto_reproduces_the_dgx1_front(run):
    code, out, _ = run("pareto", QUICK / "dgx1-allgather-c1.toml", "--max-chunks", "6", "--json")
    data = json.loads(out)
    points = {(p["steps"], p["rounds"], p["chunks"]) for p in data["points"]}
    assert code == 0 and {(2, 3, 2), (3, 7, 6)} <= points
    assert Fraction(data["rounds_lower_bound"]) == Fraction(7, 6)
    assert data["complete"] and data["stopped"].startswith("bandwidth-optimal")


def test_pareto_of_an_allreduce_is_reducescatter_then_allgather(run):
    code, out, _ = run("pareto", QUICK / "dgx1-allreduce-c1.toml", "--max-chunks", "2")
    assert code == 0 and "within ReduceScatter then AllGather (the front below): R/C >= 7/3" in out
    assert "4  6  2  3" in out and "front complete: reducescatter: " in out


@pytest.mark.parametrize("solver", ["cpsat", "z3", "scip"])
def test_step_solvers_agree_and_write_what_they_prove(run, tmp_path, solver):
    out = tmp_path / "s.json"
    code, text, _ = run("solve", QUICK / "dgx1-allgather-c2.toml", "--model", "step", "--solver", solver,
                        "--out", out, "--no-progress", "--json")
    data = json.loads(text)
    assert code == 0 and data["status"] == "optimal" and (data["steps"], data["rounds"]) == (2, 3)
    code, text, _ = run("verify", QUICK / "dgx1-allgather-c2.toml", out, "--json")
    assert code == 0 and json.loads(text)["time"] == pytest.approx(data["time"])


def test_z3_refuses_the_timed_model(run):
    code, _, err = run("solve", QUICK / "ring8-allgather-c1.toml", "--solver", "z3", "--model", "timed")
    assert code == 2 and "step model only" in err


@pytest.mark.parametrize("solver", ["cpsat", "highs"])
def test_timed_solve_proves_the_dgx1_optimum_and_exports_the_mip(run, tmp_path, solver):
    mps = tmp_path / "model.mps"
    code, text, _ = run("solve", QUICK / "dgx1-allgather-c2.toml", "--solver", solver, "--no-progress",
                        "--export-model", mps, "--json")
    data = json.loads(text)
    tau = 0.5e-6 + 2**30 / 16 / 25e9  # one 64 MiB chunk on a 25 GB/s NVLink
    assert code == 0 and data["status"] == "optimal" and data["time"] == pytest.approx(3 * tau)
    assert mps.read_text().startswith(("NAME", "*"))


def test_exact_benchmark_rows_are_verified_results():
    from optcoll.bench.exact import BenchCase, bench_timed

    rows = bench_timed(30.0, cases=[BenchCase("dgx1 C=3", "dgx1", 3), BenchCase("torus4x4 C=1", "torus4x4", 1)])
    assert [row[2] for row in rows] == ["optimal", "optimal"]
    assert rows[0][3] == rows[0][4]  # time meets the proven bound
