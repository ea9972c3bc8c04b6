"""The memory guard of the exact solvers (optcoll.producers.exact.memory): its estimate against
the peak memory really measured, the refusal (nothing built; like a time limit, the result is the
best schedule so far with its proven bound, and a note says what was refused) and the default.

Also the measuring tool of the calibration: ``python tests/hardening/test_memory_guard.py
FORMULATION INSTANCE BACKEND SCALE [THREADS]`` prints one JSON line (estimate and measured peak).
"""
from __future__ import annotations

import gc
import json
import re
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from fault_helpers import assert_one_line_error, invoke

ROOT = Path(__file__).resolve().parents[2]
#: Time each measured model is solved for (the calibration used 2 s of wall time). CP-SAT gets a
#: work limit instead (``SOLVE_WORK`` of its deterministic time): the search reaches the same
#: point, and its memory the same peak, however loaded the machine is (under load, 2 s of wall
#: time measured a hypercube5 model at 102 MB instead of 140 MB). It then always gets past
#: presolve, which CP-SAT does not count as work: its peak is then 0.85-1.12 of the estimate.
SOLVE_SECONDS = 2.0
SOLVE_WORK = 0.3
SAFETY_SECONDS = 120.0


def _limits(backend: str) -> dict[str, float | None]:
    return ({"time_limit": SAFETY_SECONDS, "work_limit": SOLVE_WORK} if backend == "cpsat"
            else {"time_limit": SOLVE_SECONDS, "work_limit": None})


def _status_bytes(key: str) -> int:
    text = Path("/proc/self/status").read_text(encoding="ascii")
    return int(re.search(rf"^{key}:\s+(\d+) kB", text, re.MULTILINE).group(1)) * 1024


def _prepared(formulation: str, path: str, backend: str, scale: float, threads: int):
    """(the model's ModelSize, a function that builds and solves it): everything that is not
    the model itself (problem, grids, start schedule) is made here, before measuring."""
    # The solver libraries are loaded before measuring, as the calibration did: their code is
    # the process's, not the model's.
    import ortools.math_opt.python.mathopt  # noqa: F401
    import ortools.sat.python.cp_model  # noqa: F401

    from optcoll.instances.instancefile import load_instance
    from optcoll.instances.budget import Budget
    from optcoll.instances.clock import Clock

    inst = load_instance(path)
    if formulation in ("time-expanded", "continuous"):
        from optcoll.producers.exact import toolkit
        from optcoll.producers.exact.timed import continuous, expanded
        from optcoll.producers.exact.timed import solve as timed
        from optcoll.producers.exact.timed.grid import choose_grids, fine_grid
        from optcoll.producers.exact.timed.reach import reach

        problem = timed._problem(inst)
        grid = choose_grids(problem, None)[0] if formulation == "time-expanded" else fine_grid(problem)
        start = timed.start_on_grid(inst, problem, grid, 0.0)
        horizon = max(1, int(round(start.makespan(grid) * scale)))
        if formulation == "continuous":
            def run() -> None:
                model = continuous.build(problem, grid, horizon, 0)
                continuous.solve(model, Clock(Budget(threads=threads, seed=0, **_limits("cpsat"))))
            return continuous.size(problem, grid, horizon), run
        r = reach(problem, grid.delay)
        floor = timed._grid_floor(problem, grid, None)[0]
        lower = min(floor, horizon - 1)

        def run() -> None:
            model = expanded.build(problem, grid, r, horizon, lower)
            toolkit.solve(model.linear, backend, Clock(Budget(threads=threads, seed=0, **_limits(backend))))
        return expanded.size(problem, grid, r, horizon, lower), run

    from optcoll.producers.exact.step import linear as step_linear
    from optcoll.producers.exact.step import smt
    from optcoll.producers.exact.step.api import backend_for
    from optcoll.producers.exact.step.greedy import greedy_solution
    from optcoll.producers.exact.step.inversion import plan
    from optcoll.producers.exact.step.solution import stretched

    problem = plan(inst.machine, inst.collective).problem
    greedy = greedy_solution(problem)
    steps = max(problem.latency_bound, int(round(greedy.steps * scale)))
    hint = stretched(problem, greedy, steps)
    budget = Budget(threads=threads, seed=0, **_limits(backend))

    def run() -> None:
        backend_for(backend).minimise_rounds(problem, steps, steps, hint.total_rounds, hint=hint, lex=[],
                                             clock=Clock(budget))
    counted = smt.size if formulation == "step-smt" else step_linear.size
    return counted(problem, steps), run


def peak_model_bytes(formulation: str, path: str, backend: str, scale: float = 1.0,
                     threads: int = 1) -> dict:
    """Measured in this process (call it in a fresh one): the peak resident memory added by
    building and solving one model, next to the guard's estimate for it."""
    from optcoll.producers.exact.memory import estimate

    size, run = _prepared(formulation, path, backend, scale, threads)
    gc.collect()
    before = _status_bytes("VmRSS")
    Path("/proc/self/clear_refs").write_text("5", encoding="ascii")  # resets VmHWM to VmRSS
    started = time.perf_counter()
    run()
    peak = _status_bytes("VmHWM") - before
    return {"formulation": formulation, "instance": Path(path).stem, "backend": backend, "scale": scale,
            "threads": threads, "what": size.what, "variables": size.variables, "terms": size.terms,
            "measured": peak, "estimate": estimate(size, backend, threads),
            "seconds": round(time.perf_counter() - started, 2)}


def measure_in_child(formulation: str, path: str, backend: str, scale: float = 1.0, threads: int = 1) -> dict:
    proc = subprocess.run([sys.executable, __file__, formulation, str(path), backend, str(scale), str(threads)],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


#: The estimate must be within this factor of the measured peak (calibration: 0.70 .. 1.26).
FACTOR = 1.5
#: A model the solver must build (no start schedule meets the bound), small and quick. (ring4
#: AlltoAll served until the LP-guided start met its flow bound: no model is built there now.)
NEEDS_A_MODEL = ROOT / "instances" / "quick" / "torus4x4-allgather-c1.toml"
#: The step search settles the torus with its one-round-per-step heuristics alone; the ring
#: AlltoAll needs a model for both least cost and least steps.
# one the step heuristics do not settle (Ring(4) AlltoAll now meets its flow floor without a model)
STEP_NEEDS_A_MODEL = ROOT / "instances" / "quick" / "nvswitch8-broadcast-c4.toml"


def _with_a_work_limit(folder: Path) -> Path:
    """NEEDS_A_MODEL's question with a work limit in its budget (a sweep's settings have none),
    so the sweeps below end their solves at the same point under any load."""
    from sweep_helpers import write_instance

    return write_instance(folder, "torus4x4-allgather-c1", "torus4x4", "allgather", "256 MiB")


@pytest.mark.parametrize("formulation, instance, backend, scale", [
    ("time-expanded", "quick/torus4x4-allgather-c1", "cpsat", 1.0),
    ("time-expanded", "standard/hypercube5-allgather-c1", "cpsat", 2.0),
    ("step", "quick/mesh5x5-allgather-c1", "cpsat", 2.0),
])
def test_estimate_is_within_the_stated_factor_of_the_measured_peak(formulation, instance, backend, scale):
    """Built and solved (2 s) in a fresh process; peak RSS measured there (20 MB to 200 MB)."""
    got = measure_in_child(formulation, ROOT / "instances" / f"{instance}.toml", backend, scale)
    assert 1 / FACTOR <= got["estimate"] / got["measured"] <= FACTOR, got


def test_counts_match_the_built_models():
    """The guard's counts come from the builders' own windows: variables exactly, terms as an
    upper estimate within 2× (3× for the step model's small switch cases); time-expanded, the
    continuous model and the step model, several horizons and step counts."""
    from optcoll.instances.instancefile import load_instance
    from optcoll.producers.exact.step import linear as step_linear
    from optcoll.producers.exact.step.inversion import plan
    from optcoll.producers.exact.timed import continuous, expanded
    from optcoll.producers.exact.timed import solve as timed
    from optcoll.producers.exact.timed.grid import choose_grids, fine_grid
    from optcoll.producers.exact.timed.reach import reach

    for name in ("torus4x4-allgather-c1", "nvswitch8-broadcast-c4", "dgx1-allgather-c2"):
        inst = load_instance(ROOT / "instances" / "quick" / f"{name}.toml")
        problem = timed._problem(inst)
        grid = choose_grids(problem, None)[0]
        r = reach(problem, grid.delay)
        for horizon, lower in ((4, None), (8, 3), (13, 6)):
            model = expanded.build(problem, grid, r, horizon, lower)
            if model is None:
                continue
            size = expanded.size(problem, grid, r, horizon, lower)
            nnz = model.linear.matrix()[0].nnz
            assert size.variables == model.linear.num_vars and nnz <= size.terms <= 2 * nnz, (name, horizon)
        fine = fine_grid(problem)
        for horizon in (40, 90):
            built = continuous.build(problem, fine, horizon, 0)
            assert continuous.size(problem, fine, horizon).variables == len(built.cp.proto.variables)
        step = plan(inst.machine, inst.collective).problem
        for steps in (step.latency_bound, step.latency_bound + 2):
            enc = step_linear.encode(step, steps, steps, 4 * steps)
            size = step_linear.size(step, steps)
            terms = enc.model.matrix()[0].nnz
            assert size.variables == enc.model.num_vars and terms <= size.terms <= 3 * terms, (name, steps)


#: cluster2x8 AllGather, C = 2, over 15 of its 16 GPUs: no structured start applies (the
#: communicator leaves a GPU out), tacos+ starts at 10.04 ms, and the time-expanded models over
#: that horizon (84 and 77 epochs) would take about 384 and 349 MiB.
SUBSET_INSTANCE = """[instance]
machine = "cluster2x8"
collective = "allgather"
size = "1 GiB"
chunks_per_rank = 2
ranks = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]
"""


def subset_instance(tmp_path, budget: str = ""):
    path = tmp_path / "cluster2x8-15-allgather-c2.toml"
    path.write_text(SUBSET_INSTANCE + budget)
    return path


def test_cli_refuses_a_big_model_without_building_it_and_returns_the_start_bounded(monkeypatch, tmp_path):
    """With a 128 MiB limit (tacos+'s start needs 55 epochs) neither grid's model is built (only
    a coarse grid's, which fits); the best schedule comes back verified, bounded by the analytic
    bound, and the note says what was refused and what to do."""
    from optcoll.producers.exact.memory import estimate
    from optcoll.producers.exact.timed import continuous, expanded

    def never(*args, **kwargs):
        raise AssertionError("a refused model was built")

    build = expanded.build

    def only_fitting(problem, grid, r, horizon, lower=None):
        if estimate(expanded.size(problem, grid, r, horizon, lower), "cpsat", 1) > 128 * 2**20:
            never()
        return build(problem, grid, r, horizon, lower)

    monkeypatch.setattr(expanded, "build", only_fitting)
    monkeypatch.setattr(continuous, "build", never)
    # the coarse grid's search ends by a work limit, the same under any load
    out, inst = tmp_path / "s.json", subset_instance(tmp_path, '[budget]\ntime_limit = "10 min"\nwork_limit = 1\n')
    proc = invoke(["solve", inst, "--max-memory", "128 MiB", "--threads", "1",
                   "--no-progress", "--json", "--out", out])
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["status"] == "bounded" and result["time"] > result["lower_bound"] > 0
    assert result["lower_bound_source"].startswith("entry bound")
    refusals = [n for n in result["notes"] if n.startswith("memory limit: ")]
    assert len(refusals) == 2  # the rounded-up grid and the rounded-down one
    assert "the time-expanded model at 55 epochs would need about 210" in refusals[0]
    assert all("over the limit of 128 MiB (--max-memory); not built" in n and "--model step" in n for n in refusals)
    verify = invoke(["verify", inst, out, "--json"])
    assert verify.returncode == 0 and json.loads(verify.stdout)["time"] == result["time"]


def test_the_default_limit_is_a_share_of_memavailable(monkeypatch, tmp_path):
    """/proc/meminfo read without psutil: with 160 MiB available the 210 MiB model (tacos+'s
    start: 55 epochs) is refused by default (the limit is 80 % of it); without the file there is
    no default limit."""
    from optcoll.errors import InputError
    from optcoll.instances.instancefile import load_instance
    from optcoll.producers.exact import memory
    from optcoll.producers.exact.timed.solve import solve_timed
    from solver_checks import proof_budget

    real = memory.available()
    assert real is not None and real > 0 and memory.default_limit() <= real  # this machine's
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24684100 kB\nMemFree:         1000000 kB\n"
                       "MemAvailable:     163840 kB\nBuffers:          112520 kB\n")
    monkeypatch.setattr(memory, "MEMINFO", meminfo)
    assert memory.default_limit() == int(memory.DEFAULT_SHARE * 160 * 2**20)
    outcome = solve_timed(load_instance(subset_instance(tmp_path)), budget=proof_budget(work=1))  # feasible, not proven
    assert outcome.status == "feasible" and outcome.schedule is not None and outcome.params["refused"]
    assert all("over the limit of 128 MiB (80% of the memory available now)" in why
               for why in outcome.params["refused"])
    with pytest.raises(memory.ModelTooLarge) as refused:
        memory.require_fits(memory.ModelSize("step", "for S = 9 steps", 10**9, 10**10), "cpsat", 1, None)
    assert isinstance(refused.value, InputError)
    monkeypatch.setattr(memory, "MEMINFO", tmp_path / "absent")
    assert memory.default_limit() is None
    memory.require_fits(memory.ModelSize("step", "for S = 9 steps", 10**9, 10**10), "cpsat", 1, None)


def test_small_instance_solves_under_the_default_limit():
    """The default limit lets ordinary models through: torus4x4 AllGather is solved to optimality."""
    from optcoll.instances.instancefile import load_instance
    from optcoll.producers.exact.step import solve_step
    from optcoll.producers.exact.timed.solve import solve_timed
    from solver_checks import proof_budget

    inst = load_instance(NEEDS_A_MODEL)
    timed = solve_timed(inst, budget=proof_budget())
    assert timed.status == "optimal" and "time-expanded" in timed.params["formulation"]
    assert solve_step(inst, budget=proof_budget()).status == "optimal"


def test_a_refused_model_is_a_bounded_result_and_the_sweep_goes_on(tmp_path):
    """In a sweep a refusal leaves the exact job bounded (its start schedule and the analytic
    bound), with the refusal in its notes; a larger limit is another job, which proves the optimum."""
    from optcoll.sweeps import ResultCache, run_sweep
    from optcoll.instances.suite import find_suite
    from optcoll.sweeps.plan import Settings, exact_job, synth_job

    spec = find_suite(str(_with_a_work_limit(tmp_path / "suite"))).specs[0]
    tight = Settings(threads=1, max_memory=2**20)
    jobs = [exact_job(spec, tight), synth_job(spec, "ring", 1, 0)]
    records, stats = run_sweep(jobs, ResultCache(tmp_path), workers=0, progress=False)
    refused = records[jobs[0].key]["result"]
    assert refused["status"] == "bounded" and refused["time"] > refused["lower_bound"] > 0
    assert refused["params"]["formulation"] == "none (every model over the memory limit)"
    assert any("over the limit of 1 MiB (--max-memory); not built" in n for n in refused["notes"])
    assert records[jobs[1].key]["status"] == "heuristic" and stats.failed == 0
    roomy = exact_job(spec, Settings(threads=1, max_memory=2**32))
    assert roomy.key != jobs[0].key and exact_job(spec, Settings(threads=1)).params.get(
        "max_memory") is None
    records, _ = run_sweep([roomy], ResultCache(tmp_path), workers=0, progress=False)
    assert records[roomy.key]["status"] == "optimal"


@pytest.mark.parametrize("text", ["8G", "0 B", "lots", "-1 GiB"])
def test_bad_max_memory_values_are_one_line_errors(text):
    """A --max-memory without a unit, zero, negative or unreadable: one line naming the option."""
    assert_one_line_error(invoke(["solve", NEEDS_A_MODEL, "--max-memory", text]), "max-memory")


if __name__ == "__main__":
    name, instance_path, solver_name, factor, *rest = sys.argv[1:]
    print(json.dumps(peak_model_bytes(name, instance_path, solver_name, float(factor), int(rest[0]) if rest else 1)))


def test_a_refused_step_model_ends_the_search_with_the_greedy_start():
    """The step search treats a refused question like the time limit: the greedy start, verified,
    with the bound proven so far, and a note naming the S whose model was refused."""
    from optcoll.instances.instancefile import load_instance
    from optcoll.producers.exact.step import solve_step
    from optcoll.verify import require_valid
    from solver_checks import proof_budget

    inst = load_instance(STEP_NEEDS_A_MODEL)
    for objective in ("cost", "steps"):
        outcome = solve_step(inst, objective=objective, max_memory=2**20, budget=proof_budget())
        assert outcome.status == "feasible" and outcome.schedule is not None, objective
        assert outcome.lower_bound is not None and outcome.lower_bound > 0
        require_valid(inst.machine, inst.collective, outcome.schedule, replace(inst.model, kind="step"))
        assert any(n.startswith("memory limit at S = ") and "not built" in n for n in outcome.notes)


def test_parallel_sweep_workers_split_the_default_share(monkeypatch, tmp_path):
    """With 30 MiB available, a lone process may build the model (estimated between 12 and 24 MiB:
    80 % = 24 MiB), but each of two sweep workers only 40 %: there it is refused, the job bounded."""
    from optcoll.producers.exact import memory
    from optcoll.sweeps import ResultCache, run_sweep
    from optcoll.instances.suite import find_suite
    from optcoll.sweeps.plan import Settings, exact_job, synth_job

    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24684100 kB\nMemAvailable:      30720 kB\n")
    monkeypatch.setattr(memory, "MEMINFO", meminfo)
    spec = find_suite(str(_with_a_work_limit(tmp_path / "suite"))).specs[0]
    jobs = [exact_job(spec, Settings(threads=1)), synth_job(spec, "ring", 1, 0)]
    alone, _ = run_sweep(jobs, ResultCache(tmp_path / "one"), workers=1, progress=False)
    assert alone[jobs[0].key]["result"]["status"] == "optimal"
    pair, _ = run_sweep(jobs, ResultCache(tmp_path / "two"), workers=2, progress=False)
    refused = pair[jobs[0].key]["result"]
    assert refused["status"] == "bounded"
    assert any("over the limit of 12 MiB (40% of the memory available now: 80% split among 2 workers)"
               in note for note in refused["notes"])
    assert memory.default_limit() == int(0.8 * 30 * 2**20)  # the driver itself keeps the whole share
