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
    assert data["scope"] == "C ≤ 6, every S" and "C > 6 were not searched" in data["stopped"]


def test_pareto_of_an_allreduce_is_reducescatter_then_allgather(run):
    code, out, _ = run("pareto", QUICK / "dgx1-allreduce-c1.toml", "--max-chunks", "2")
    assert code == 0 and "within ReduceScatter then AllGather (the front below): R/C >= 7/3" in out
    assert "4  6  2  3" in out and "front complete for ReduceScatter then AllGather, each phase C ≤ 2, every S: reducescatter: " in out


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


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_sccl_whole_buffer_allreduce_is_posed_and_solved_from_the_cli(run, tmp_path):
    """Every rank holds and needs every chunk (a combining custom collective): least steps with one
    round per step, from the command line (its cost objective is refused in one line)."""
    path = _write(tmp_path, "wb.toml", '[instance]\nmachine = "ring4"\ncollective = "custom"\n'
                  '[custom]\npre = [[0,1,2,3],[0,1,2,3],[0,1,2,3],[0,1,2,3]]\n'
                  'post = [[0,1,2,3],[0,1,2,3],[0,1,2,3],[0,1,2,3]]\nchunk_size = "1 MiB"\ncombining = true\n')
    code, text, _ = run("solve", path, "--model", "step", "--least-steps", "--no-progress", "--json")
    data = json.loads(text)
    assert code == 0 and data["status"] == "optimal" and (data["steps"], data["rounds"]) == (3, 3)
    code, _, err = run("solve", path, "--model", "step", "--no-progress")
    assert code == 2 and err.count("\n") == 1 and "--least-steps" in err
    code, _, err = run("solve", path, "--least-steps", "--no-progress")
    assert code == 2 and "step model" in err


@pytest.mark.parametrize("body, words", [
    ('[instance]\nmachine = "ring4"\ncollective = "allreduce"\nsize = "1 MiB"\nranks = [2]\n',
     "instance: an allreduce over one rank (2) reduces nothing"),
    ('[instance]\nmachine = "ring4"\ncollective = "allreduce"\nsize = "1 MiB"\n[model]\nreduce_cost = "-1 ns/B"\n',
     "model.reduce_cost: time '-1 ns' must be non-negative"),
    ('[instance]\nmachine = "ring4"\ncollective = "allreduce"\nsize = "1 MiB"\n[model]\ncombining = "sum"\n',
     "model.combining: unknown combining 'sum'; use copy-or-reduce or reduce-only"),
])
def test_bad_allreduce_input_is_one_line_and_exit_2(run, tmp_path, body, words):
    path = _write(tmp_path, "bad.toml", body)
    for command in (("bound",), ("solve", "--no-progress"), ("synth",)):
        code, _, err = run(*command, path)
        assert code == 2 and err.count("\n") == 1 and words in err and "Traceback" not in err


def test_bound_prints_assumptions_and_what_the_machine_rules_out(run, tmp_path):
    """In-network reduction: the no-INC bounds are not applied (and said so); a non-combining
    collective on that machine leaves the capability unused, with a note (not an error)."""
    reduce = _write(tmp_path, "ar.toml", '[instance]\nmachine = "star4_sharp"\ncollective = "allreduce"\nsize = "1 GiB"\n')
    code, out, _ = run("bound", reduce)
    assert code == 0 and "allreduce-cut" in out and "allreduce-volume " not in out
    assert "not applied: allreduce-volume, allreduce-transfers and their egress forms" in out
    gather = _write(tmp_path, "ag.toml", '[instance]\nmachine = "star4_sharp"\ncollective = "allgather"\nsize = "1 GiB"\n')
    code, out, _ = run("bound", gather)
    assert code == 0 and "capability goes unused" in out
    code, out, _ = run("bound", REPO / "instances" / "standard" / "ring8-allreduce-c1.toml", "--json")
    rows = {row["name"]: row for row in json.loads(out)}
    assert rows["allreduce-transfers"]["assumptions"] == ["no in-network reduction (switches do not combine)"]


@pytest.mark.parametrize("solver,rounds,status", [
    ("cpsat", "7", "optimal"), ("cpsat", "6", "infeasible"), ("z3", "6", "infeasible"),
    # z3 takes about 20 s CPU to find it (its SAT path is in tests/producers/exact/step/test_api.py)
    pytest.param("z3", "7", "optimal", marks=pytest.mark.slow)])
def test_sccl_feasibility_question_with_steps_rounds_and_chunks(run, solver, rounds, status):
    """SCCL's `solve instance DGX1 Allgather --steps 3 --rounds 7 --chunks 6`: feasible, and
    7 rounds are needed (7/6 is the rounds bound)."""
    limit = ["--work-limit", "120"] if solver == "cpsat" else ["--time-limit", "300"]  # z3 has no work count
    code, text, _ = run("solve", QUICK / "dgx1-allgather-c2.toml", "--model", "step", "--solver", solver,
                        "--steps", "3", "--rounds", rounds, "--chunks", "6", *limit, "--no-progress", "--json")
    data = json.loads(text)
    assert code == 0 and data["status"] == status
    if status == "optimal":
        assert (data["steps"], data["rounds"]) == (3, 7)


def test_sccl_terms_are_printed(run):
    code, text, _ = run("solve", QUICK / "dgx1-allgather-c2.toml", "--model", "step", "--steps", "3",
                        "--rounds", "7", "--chunks", "6", "--no-progress")
    assert code == 0 and "S = 3 steps, R = 7 rounds, C = 6 chunks per rank, R/C = 7/6" in text
    assert "cost 3·α + 7·b/B_min with α = 500 ns" in text and "optimal: 6.26499 ms (verified)" in text


@pytest.mark.parametrize("flag,steps,rounds", [("--least-steps", 2, 2), ("--least-rounds", 3, 7)])
def test_least_steps_and_least_rounds(run, flag, steps, rounds):
    """DGX-1 AllGather: SCCL's least steps at C = 1 is 2 (one round each); the least rounds at
    C = 6 is 7 (the rounds bound 7/6), first reached with 3 steps."""
    chunks = "1" if flag == "--least-steps" else "6"
    code, text, _ = run("solve", QUICK / "dgx1-allgather-c2.toml", "--model", "step", flag,
                        "--chunks", chunks, "--no-progress", "--json")
    data = json.loads(text)
    assert code == 0 and data["status"] == "optimal" and (data["steps"], data["rounds"]) == (steps, rounds)


@pytest.mark.parametrize("args,message", [
    (["--steps", "0"], "--steps: 0 is not in the range x>=1"),
    (["--rounds", "-2"], "--rounds: -2 is not in the range x>=1"),
    (["--chunks", "0"], "--chunks 0: must be at least 1, got 0"),
    (["--steps", "3", "--rounds", "2"], "--rounds 2 < --steps 3: every step takes at least one round"),
    (["--least-steps", "--rounds", "3"], "--least-steps chooses the rounds"),
    (["--least-steps", "--least-rounds"], "ask different questions"),
    (["--chunks", "100000000"], "--chunks 100000000: 100000000 chunks per rank is too many"),
])
def test_bad_step_questions_are_one_line(run, args, message):
    code, out, err = run("solve", QUICK / "dgx1-allgather-c2.toml", "--model", "step", *args)
    assert code == 2 and out == "" and message in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("flag", ["--steps", "--rounds", "--chunks"])
def test_step_flags_with_the_timed_model_are_refused(run, flag):
    code, _, err = run("solve", QUICK / "dgx1-allgather-c2.toml", "--model", "timed", flag, "3")
    assert code == 2 and f"{flag} applies to the step model only" in err
    assert len(err.strip().splitlines()) == 1


def test_pareto_question_limit_is_checked_and_leaves_the_front_honest(run):
    code, _, err = run("pareto", QUICK / "dgx1-allgather-c1.toml", "--question-limit", "0")
    assert code == 2 and "--question-limit: must be a positive number of seconds" in err
    code, out, _ = run("pareto", QUICK / "dgx1-allgather-c1.toml", "--max-chunks", "6",
                       "--question-limit", "60", "--time-limit", "120", "--json")
    data = json.loads(out)
    assert code == 0 and data["complete"] and {(2, 3, 2), (3, 7, 6)} <= {
        (p["steps"], p["rounds"], p["chunks"]) for p in data["points"]}


def test_reduce_only_refuses_overwrites_in_solve_and_verify(run, tmp_path):
    """SCCL's rules (docs/model.md §5.4): the ring AllReduce's AllGather overwrites partial sums, so
    verify --combining reduce-only rejects it; solve refuses the family with one line; the timed
    solvers take copy-or-reduce only."""
    ring = _write(tmp_path, "ar.toml", '[instance]\nmachine = "ring4"\ncollective = "allreduce"\nsize = "1 MiB"\n')
    code, _, _ = run("synth", ring, "--algo", "ring", "-o", tmp_path / "ring.json")
    assert code == 0
    code, out, _ = run("verify", ring, tmp_path / "ring.json")
    assert code == 0 and out.startswith("valid")
    code, out, _ = run("verify", ring, tmp_path / "ring.json", "--combining", "reduce-only")
    assert code == 1 and out.startswith("INVALID [overwrite]")
    code, _, err = run("solve", ring, "--model", "step", "--combining", "reduce-only", "--no-progress")
    assert code == 2 and err.count("\n") == 1 and "--least-steps" in err
    code, _, err = run("pareto", ring, "--max-chunks", "2", "--combining", "reduce-only", "--no-progress")
    assert code == 2 and err.count("\n") == 1 and "--least-steps" in err
    code, _, err = run("solve", ring, "--combining", "reduce-only", "--no-progress")
    assert code == 2 and err.count("\n") == 1 and "step model only" in err


def test_work_limit_is_cpsat_only_and_checked_naming_the_flag(run):
    code, _, err = run("solve", QUICK / "dgx1-allgather-c2.toml", "--model", "step", "--solver", "z3", "--steps", "3",
                       "--rounds", "6", "--chunks", "6", "--work-limit", "60", "--no-progress")
    assert code == 2 and err.strip().splitlines() == [
        "optcoll: error: --work-limit: a work limit counts CP-SAT's deterministic time; z3 has none (use a time limit)"]
    code, _, err = run("solve", QUICK / "dgx1-allgather-c2.toml", "--work-limit", "0")
    assert code == 2 and "--work-limit: must be a positive number of seconds" in err
