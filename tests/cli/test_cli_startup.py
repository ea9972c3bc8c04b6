"""What a command loads (issues 18 and 35: start-up cost). The step path needs neither the timed
solver's greedy start (numba), nor a graph library (networkx), nor scipy's LP (scipy.optimize:
the rounds bound's LP goes through OR-Tools), nor pandas (OR-Tools' cp_model module) nor z3 when
CP-SAT is asked; a question the heuristics settle loads no solver and no scipy at all; a small
synthesis runs the interpreted greedy (no numba) and bounds it without scipy (numpy shortest
paths, the interpreted max-flow); no ``solve`` loads the sweep runner (multiprocessing) to decide
whether to show progress; ``--help`` needs no numerical library at all.
Checked on ``sys.modules`` of a fresh interpreter after the command ran: behaviour, not wall
clock."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from cli_paths import REPO

DGX1 = REPO / "instances" / "quick" / "dgx1-allgather-c1.toml"
NOT_NEEDED = ("numba", "networkx", "scipy.optimize", "pandas", "z3", "matplotlib")
#: Runs the CLI's main in-process with argv[2:], then writes the loaded module names to argv[1].
CHILD = """
import json, sys
from optcoll.cli.main import main
report, sys.argv = sys.argv[1], ["optcoll", *sys.argv[2:]]
try:
    main()
finally:
    with open(report, "w") as out:
        json.dump(sorted(sys.modules), out)
"""


def loaded_by(tmp_path, *args: str) -> tuple[str, set[str]]:
    """The command's output and every module loaded once it ended."""
    report = tmp_path / "modules.json"
    proc = subprocess.run([sys.executable, "-c", CHILD, str(report), *args], cwd=REPO, capture_output=True,
                          text=True, timeout=300)  # cwd: "-c" imports the package found there first
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, set(json.loads(report.read_text()))


def heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == name or m.startswith(name + ".") for name in NOT_NEEDED))


@pytest.mark.parametrize("args", [
    ("solve", str(DGX1), "--model", "step", "--least-steps", "--no-progress", "--json"),
    ("solve", str(DGX1), "--model", "step", "--steps", "2", "--rounds", "3", "--chunks", "2", "--no-progress",
     "--json"),
], ids=["least-steps", "fixed-S-R-C"])
def test_a_dgx1_step_question_loads_nothing_it_does_not_use(tmp_path, args):
    output, modules = loaded_by(tmp_path, *args)
    answer = json.loads(output)
    assert answer["status"] == "optimal" and answer["steps"] == 2
    assert heavy(modules) == []
    assert "optcoll.producers.exact.timed.solve" not in modules  # the timed solver: not asked
    assert not any(m == "multiprocessing" or m.startswith(("optcoll.sweeps.runner", "optcoll.sweeps.cache"))
                   for m in modules)  # the progress switch only (optcoll.sweeps loads its names lazily)
    assert "tomli_w" not in modules  # writing TOML: not asked


def test_a_question_the_heuristics_settle_loads_no_solver_and_no_scipy(tmp_path):
    """DGX-1 AllGather least steps: the one-round-per-step heuristic meets the latency bound."""
    output, modules = loaded_by(tmp_path, "solve", str(DGX1), "--model", "step", "--least-steps", "--no-progress",
                                "--json")
    assert json.loads(output)["status"] == "optimal"
    assert not any(m == "scipy" or m.startswith(("scipy.", "ortools.sat", "ortools.math_opt")) for m in modules)


def test_a_small_allreduce_least_steps_loads_no_solver_and_no_scipy(tmp_path):
    """Ring(4) whole-buffer AllReduce: recursive doubling takes the hop bound's 2 steps, so no
    CP-SAT question is asked (nor the analytic bounds, scipy, needed)."""
    path = tmp_path / "ring4-ar.toml"
    path.write_text('[instance]\nmachine = "ring4"\ncollective = "custom"\n[custom]\npre = [[0, 1, 2, 3]]\n'
                    'post = [[0, 1, 2, 3]]\nchunk_size = "1 kB"\ncombining = true\n[model]\nkind = "step"\n')
    output, modules = loaded_by(tmp_path, "solve", str(path), "--least-steps", "--no-progress", "--json")
    answer = json.loads(output)
    assert answer["status"] == "optimal" and answer["steps"] == 2
    assert "ortools.sat.python.cp_model_helper" not in modules
    assert heavy(modules) == [] and "scipy" not in modules


def test_a_small_synthesis_runs_the_interpreted_greedy_and_bounds_it_without_scipy(tmp_path):
    """torus 8×8 AllGather: 4,032 deliveries, below the kernel's threshold: no numba; its bounds
    (latency, ingress, egress, the ratio cut's 64 max-flows) in numpy and Python: no scipy."""
    path = tmp_path / "torus8.toml"
    path.write_text('[instance]\nmachine = "torus8x8"\ncollective = "allgather"\nsize = "1 GiB"\n')
    output, modules = loaded_by(tmp_path, "synth", str(path), "--json")
    answer = json.loads(output)
    assert answer["status"] in ("heuristic", "optimal") and answer["lower_bound_source"] == "ingress"
    assert heavy(modules) == [] and "scipy" not in modules


def test_a_question_with_the_flow_floor_loads_no_scipy(tmp_path):
    """Ring(8) AlltoAll least steps: the flow LP is built (numpy triplets to OR-Tools' MathOpt)
    and raises the floor to the rebalanced trees' 8 steps, so no CP-SAT question is asked;
    scipy is never needed."""
    path = tmp_path / "ring8-a2a.toml"
    path.write_text('[instance]\nmachine = "ring8"\ncollective = "alltoall"\nsize = "8 MiB"\n[model]\nkind = "step"\n')
    output, modules = loaded_by(tmp_path, "solve", str(path), "--least-steps", "--no-progress", "--json")
    answer = json.loads(output)
    assert answer["status"] == "optimal" and answer["steps"] == 8
    assert "ortools.math_opt.core.python.solver" in modules and heavy(modules) == [] and "scipy" not in modules
    assert "ortools.sat.python.cp_model_helper" not in modules


def test_the_dgx1_front_loads_cpsat_without_pandas(tmp_path):
    output, modules = loaded_by(tmp_path, "pareto", str(DGX1), "--max-chunks", "6", "--json")
    answer = json.loads(output)
    assert [(p["steps"], p["rounds"], p["chunks"]) for p in answer["points"]] == [(2, 3, 2), (3, 7, 6)]
    assert "ortools.sat.python.cp_model_helper" in modules  # CP-SAT did answer the questions
    assert heavy(modules) == []


def test_help_loads_no_numerical_library(tmp_path):
    output, modules = loaded_by(tmp_path, "--help")
    assert "pareto" in output and "solve" in output
    assert sorted(m for m in modules if m.split(".")[0] in ("numpy", "scipy", "ortools", "z3")) == []


@pytest.mark.parametrize("given, expected", [(None, "1"), ("4", "4")])
def test_the_command_keeps_openblas_to_one_thread_unless_the_user_chose(given, expected):
    """OpenBLAS's busy-waiting thread per core cost a third of a small command's CPU; the CLI
    sets one thread before numpy loads, and a user's own OPENBLAS_NUM_THREADS wins."""
    import os

    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if given is not None:
        env["OPENBLAS_NUM_THREADS"] = given
    probe = "import os, sys; import optcoll.cli.main; assert 'numpy' not in sys.modules; " \
            "print(os.environ['OPENBLAS_NUM_THREADS'])"
    proc = subprocess.run([sys.executable, "-c", probe], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == expected
