"""Benchmark of the step model as SCCL's users ask it (issues 18 and 35): whole commands side by side.

Each row runs one ``optcoll`` command in a child process and reports that child's CPU time and
peak memory (``os.wait4``), so imports count as a user feels them; the answers come from the
command's ``--json`` output, which is verified before it is printed. z3 and CP-SAT answers are
compared here too. SCCL's AllReduce rows are asked under both combining rules
(docs/model.md §5.4). The one-port rows (SCCL's HubAndSpoke) and the flow-floor rows run in this
process, each least-steps answer of the former cross-checked against the timed model with one
send and one receive port. Figures, not tests: nothing here asserts a time.
"""
from __future__ import annotations

import compileall
import json
import os
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from optcoll.bench.file import Section
from optcoll.bench.isolate import ChildRun, run_child

#: The instances the commands read, written to a scratch folder (machines from the catalog, and
#: SCCL's generic topologies as ``generic_machine`` writes them).
INSTANCES = {
    "dgx1": '[instance]\nmachine = "dgx1"\ncollective = "allgather"\nsize = "1 GiB"\n',
    "torus8x8": '[instance]\nmachine = "torus8x8"\ncollective = "allgather"\nsize = "1 GiB"\n',
    "torus32x32": '[instance]\nmachine = "torus-32x32.toml"\ncollective = "allgather"\nsize = "1 GiB"\n',
}
#: SCCL's generic topologies and sizes whose AllReduce rows are asked under both combining rules.
SCCL_TOPOLOGIES, SCCL_SIZES = ("Ring", "Line", "Star"), (4, 5, 6, 7, 8)
#: SCCL's synthetic links: every link alike, so only hop counts and steps matter.
_LINK = 'bandwidth = { value = "1 GB/s", per = "direction", source = "sccl" }\nlatency = { value = "1 us", source = "sccl" }\n'
_SOURCE = ('[sources.sccl]\ntitle = "SCCL\'s generic topologies (msccl-tools msccl/topologies/generic.py): '
           'links alike, the numbers only set the units"\n')


def generic_machine(topology: str, n: int) -> str:
    """SCCL's Ring, Line (bidirectional) or Star (NPU 0 linked both ways to every other NPU) as a
    machine file."""
    name = f"{topology.lower()}{n}"
    if topology == "Star":
        links = "".join(f"[[links]]\nsrc = 0\ndst = {v}\n{_LINK}bidirectional = true\n" for v in range(1, n))
        return f'{_SOURCE}[machine]\nname = "{name}"\nnpus = {n}\n{links}'
    return f'{_SOURCE}[machine]\nname = "{name}"\n[topology]\nkind = "{topology.lower()}"\nn = {n}\n{_LINK}'


def generic_instance(topology: str, n: int, collective: str) -> str:
    """SCCL's question with one chunk per rank: ``allreduce`` is SCCL's whole-buffer AllReduce
    (every rank holds and needs the one chunk), step model."""
    machine = f'machine = "{topology.lower()}{n}.toml"'
    if collective == "allreduce":
        ranks = list(range(n))
        body = (f'collective = "custom"\n[custom]\npre = [{ranks}]\npost = [{ranks}]\nchunk_size = "1 kB"\n'
                'combining = true\n')
    else:
        body = f'collective = "{collective}"\nsize = "{n} kB"\n'
    return f'[instance]\n{machine}\n{body}[model]\nkind = "step"\n'


def write_questions(scratch: Path) -> dict[str, str]:
    """Every instance file of the commands, in ``scratch``: name -> path."""
    torus = ('[machine]\nname = "torus32x32"\n[topology]\nkind = "torus2d"\ndims = [32, 32]\n'
             'bandwidth = { value = "50 GiB/s", per = "direction", source = "tacos" }\n'
             'latency = { value = "0.5 us", source = "tacos" }\n[sources.tacos]\ntitle = "TACOS\'s synthetic links"\n')
    files = {"torus-32x32.toml": torus, **{f"{k}.toml": v for k, v in INSTANCES.items()}}
    for topology in SCCL_TOPOLOGIES:
        for n in sorted({*SCCL_SIZES, 7, 8}):
            files[f"{topology.lower()}{n}.toml"] = generic_machine(topology, n)
            for collective in ("allreduce", "alltoall"):
                files[f"{topology.lower()}{n}-{collective}.toml"] = generic_instance(topology, n, collective)
    paths = {}
    for name, text in files.items():
        (scratch / name).write_text(text, encoding="utf-8")
        paths[name.removesuffix(".toml")] = str(scratch / name)
    return paths


#: What a child process runs by default: the ``optcoll`` command.
OPTCOLL = "from optcoll.cli.main import main; main()"
#: The floors under every command, as the CLI loads them (one OpenBLAS thread, optcoll/cli):
#: what Python, numpy, click and CP-SAT's module cost before optcoll does anything.
_ONE_THREAD = "import os; os.environ.setdefault('OPENBLAS_NUM_THREADS', '1'); "
FLOORS = (("floor: python -c pass", "pass"),
          ("floor: import numpy", _ONE_THREAD + "import numpy"),
          ("floor: import numpy, click", _ONE_THREAD + "import numpy, click"),
          ("floor: import numpy, click and CP-SAT's module",
           _ONE_THREAD + "import numpy, click; from ortools.sat.python import cp_model_helper"))


def run_command(args: list[str], timeout: float, code: str = OPTCOLL) -> ChildRun:
    """``optcoll args`` (or Python ``code`` with ``args``) in a child process
    (``isolate.run_child``): exit code, its own CPU seconds, peak memory and stdout; killed after
    ``timeout`` seconds (its answer is then missing)."""
    return run_child(["-c", code, *args], timeout=timeout)


def _answer(measured: ChildRun) -> str:
    try:
        data = json.loads(measured.stdout)
    except json.JSONDecodeError:
        return f"no answer (exit {measured.code})"
    if "points" in data:
        points = ", ".join(f"({p['steps']},{p['rounds']},{p['chunks']})" for p in data["points"])
        return f"{points}{'' if data['complete'] else ' (incomplete: ' + data['stopped'] + ')'}"
    if data.get("steps"):
        return f"{data['status']}: S = {data['steps']}, R = {data['rounds']}"
    if data.get("status") == "infeasible" and "any S" in str(data.get("lower_bound_source")):
        return "infeasible at every S"
    if "run_times" in data:
        return f"{data['status']}: {data['time']:.6g} s"
    return str(data.get("status"))


def command_rows(limit: float) -> list[list[str]]:
    """One row per command: what it asks, CPU s, peak MiB, wall s, the answer, agreement."""
    import optcoll

    # bytecode as an installed package has it (pip compiles on install): no command pays for
    # compiling optcoll's sources, which a PYTHONDONTWRITEBYTECODE environment would redo each time
    compileall.compile_dir(Path(optcoll.__file__).parent, quiet=1)
    with tempfile.TemporaryDirectory() as scratch:
        paths = write_questions(Path(scratch))
        dgx1, torus = paths["dgx1"], paths["torus8x8"]
        limit_text = f"{limit:g}"
        least = ["--model", "step", "--least-steps", "--time-limit", limit_text, "--no-progress", "--json"]
        questions = [
            ("optcoll --help", ["--help"], None),
            ("DGX-1 least steps (C = 1), CP-SAT",
             ["solve", dgx1, "--model", "step", "--least-steps", "--no-progress", "--json"], "least"),
            ("DGX-1 least steps (C = 1), z3",
             ["solve", dgx1, "--model", "step", "--least-steps", "--solver", "z3", "--no-progress", "--json"], "least"),
            ("DGX-1 front C ≤ 6, CP-SAT", ["pareto", dgx1, "--max-chunks", "6", "--time-limit", limit_text, "--json"],
             "front"),
            ("DGX-1 front C ≤ 6, z3",
             ["pareto", dgx1, "--max-chunks", "6", "--solver", "z3", "--time-limit", limit_text, "--json"], "front"),
            ("DGX-1 (S, R, C) = (3, 7, 6), CP-SAT",
             ["solve", dgx1, "--model", "step", "--steps", "3", "--rounds", "7", "--chunks", "6",
              "--time-limit", limit_text, "--no-progress", "--json"], "376"),
            ("DGX-1 (S, R, C) = (3, 7, 6), z3",
             ["solve", dgx1, "--model", "step", "--steps", "3", "--rounds", "7", "--chunks", "6", "--solver", "z3",
              "--time-limit", limit_text, "--no-progress", "--json"], "376"),
            ("torus 8×8 least steps (C = 1), CP-SAT",
             ["solve", torus, "--model", "step", "--least-steps", "--time-limit", limit_text, "--no-progress",
              "--json"], None),
            *((f"{name} AlltoAll least steps, CP-SAT", ["solve", paths[f"{key}-alltoall"], *least], None)
              for name, key in (("Line(7)", "line7"), ("Line(8)", "line8"), ("Ring(8)", "ring8"))),
            ("Ring(4) AllReduce least steps (SCCL's whole buffer), CP-SAT",
             ["solve", paths["ring4-allreduce"], *least], None),
            ("synth torus 8×8 AllGather (tacos, 1 run)", ["synth", paths["torus8x8"], "--json"], None),
            ("synth torus 32×32 AllGather (tacos, 1 run)", ["synth", paths["torus32x32"], "--json"], None),
        ]
        rows, answers = [], {}
        for what, code in FLOORS:
            measured = run_command([], timeout=60, code=code)
            rows.append([what, f"{measured.cpu:.2f}", f"{measured.peak_bytes / 2**20:.0f}", f"{measured.wall:.2f}",
                         "floor" if measured.code == 0 else f"exit {measured.code}", ""])
        for what, args, pair in questions:
            measured = run_command(args, timeout=limit * 2 + 60)
            answer = "help text" if args == ["--help"] else _answer(measured)
            agree = ""
            if pair is not None:
                if pair in answers:
                    agree = "yes" if answers[pair] == answer else f"NO (other: {answers[pair]})"
                answers[pair] = answer
            rows.append([what, f"{measured.cpu:.2f}", f"{measured.peak_bytes / 2**20:.0f}", f"{measured.wall:.2f}",
                         answer, agree])
    return rows


def combining_rows(limit: float) -> list[list[str]]:
    """SCCL's AllReduce rows (Ring, Line, Star, one chunk) as whole ``solve --least-steps``
    commands under each combining rule: answer and CPU side by side, and whether they differ."""
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        paths = write_questions(Path(scratch))
        for topology in SCCL_TOPOLOGIES:
            for n in SCCL_SIZES:
                path = paths[f"{topology.lower()}{n}-allreduce"]
                found = []
                for rule in ("copy-or-reduce", "reduce-only"):
                    measured = run_command(["solve", path, "--model", "step", "--least-steps", "--combining", rule,
                                            "--time-limit", f"{limit:g}", "--no-progress", "--json"],
                                           timeout=limit * 2 + 60)
                    found.append((_answer(measured), f"{measured.cpu:.2f}"))
                (default, cpu_default), (sccl, cpu_sccl) = found
                rows.append([f"{topology}({n})", default, cpu_default, sccl, cpu_sccl,
                             "differ" if default != sccl else "same"])
    return rows


def greedy_rows(sizes: tuple[int, ...] = (8, 16, 20, 32)) -> list[list[str]]:
    """The greedy's own time on torus AllGathers (synthesis only: no bounds, no verification),
    interpreted and compiled, the kernel loaded and run once beforehand; and the threshold the
    default path is chosen by."""
    from optcoll.collectives.builtins import make_collective
    from optcoll.instances.instance import Instance
    from optcoll.machines import generators as G
    from optcoll.producers import spread
    from optcoll.producers.greedy import kernel  # noqa: F401  (loaded here, so no row pays for it)
    from optcoll.producers.greedy.coverage import KERNEL_MIN_DELIVERIES, kernel_pays
    from optcoll.producers.greedy.engine import spread_greedy

    rows = []
    for k in (4, *sizes):  # torus 4×4 first: reads the kernel's cached machine code, not shown
        machine = G.torus([k, k], 50 * 2.0**30, 0.5e-6)
        inst = Instance(f"torus{k}x{k}", machine, make_collective("allgather", range(k * k), 2.0**30, 1))
        problem = spread.of_collective(inst)
        times = {}
        for compiled in (False, True):
            if not compiled and problem.needs[0].size > 100_000:
                times[compiled] = "(minutes: not run)"
                continue
            started = time.process_time()
            spread_greedy(problem, np.random.default_rng(0), compiled=compiled)
            times[compiled] = f"{time.process_time() - started:.3f}"
        rows.append([f"torus {k}×{k} AllGather", problem.needs[0].size, times[False], times[True],
                     "compiled" if kernel_pays(problem, None) else "interpreted",
                     KERNEL_MIN_DELIVERIES])
    return rows[1:]


def flow_floor_rows(limit: float) -> list[list[str]]:
    """SCCL's AllGather and AlltoAll least-steps questions on Ring, Line and Star of 4–8 nodes:
    whether the flow LP was built (only when a solver question was due), what it cost and what it
    raised the floor to, against the whole solve's CPU."""
    from optcoll.instances.budget import Budget
    from optcoll.instances.instancefile import load_instance
    from optcoll.producers.exact.step import solve_step
    from optcoll.producers.exact.step.bounds import flow_lp, problem_rounds_bound
    from optcoll.producers.exact.step.inversion import plan

    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        scratch_path = Path(scratch)
        write_questions(scratch_path)
        for topology in SCCL_TOPOLOGIES:
            for n in SCCL_SIZES:
                for collective in ("allgather", "alltoall"):
                    text = generic_instance(topology, n, collective)
                    path = scratch_path / f"q-{topology}{n}-{collective}.toml"
                    path.write_text(text, encoding="utf-8")
                    inst = load_instance(path)
                    problem = plan(inst.machine, inst.collective, inst.model).problem
                    counting = problem_rounds_bound(problem, with_lp=False).rounds(1)
                    started = time.process_time()
                    lp = flow_lp(problem)
                    lp_cpu = time.process_time() - started
                    started = time.process_time()
                    out = solve_step(inst, objective="steps", budget=Budget(limit, 1, 0))
                    cpu = time.process_time() - started
                    built = out.params.get("flow_lp") != "not asked for"
                    rows.append([f"{topology}({n}) {collective}", f"{out.status} S = {out.params.get('S', '-')}",
                                 max(counting, problem.latency_bound),
                                 "-" if lp is None else max(int(-(-lp // 1)), problem.latency_bound),
                                 "yes" if built else "no", f"{lp_cpu:.3f}", f"{cpu:.2f}",
                                 len(out.params["questions"])])
    return rows


def port_rows(limit: float, sizes: tuple[int, ...] = (4, 5, 6, 8)) -> list[list[str]]:
    """SCCL's HubAndSpoke: least steps with one send and one receive port per node per round on
    a fully connected machine, CP-SAT and z3, and the timed model with one port each way."""
    from optcoll.collectives.builtins import make_collective
    from optcoll.instances.budget import Budget
    from optcoll.instances.instance import Instance, TimeModel
    from optcoll.machines import generators as G
    from optcoll.producers import run

    one_port = TimeModel(kind="step", send_ports=1, recv_ports=1)
    rows = []
    for n in sizes:
        machine = G.fully_connected(n, 25e9, 1e-6)
        for kind, root in (("alltoall", None), ("scatter", 0), ("gather", 0)):
            size = 2**20 if root is not None else n * 2**20
            inst = Instance(f"fc{n}-{kind}", machine, make_collective(kind, range(n), size, 1, root=root),
                            one_port, Budget(limit, 2, 0))
            found = []
            for solver in ("cpsat", "z3"):
                started = time.process_time()
                result = run.exact(inst, solver=solver, objective="steps").result
                found.append((result, time.process_time() - started))
            (cp, cp_cpu), (z3r, z3_cpu) = found
            other = run.exact(replace(inst, model=replace(one_port, kind="timed"))).result
            same = other.time is not None and cp.time is not None and abs(other.time - cp.time) <= 1e-9 * cp.time
            timed = f"{other.status} {other.time or 0:.6g} s: {'equal' if same else 'DIFFERENT'}"
            rows.append([f"{kind} on {n} nodes", f"{cp.status} S = {cp.steps}", f"{cp_cpu:.2f}",
                         f"{z3r.status} S = {z3r.steps}", f"{z3_cpu:.2f}",
                         "yes" if (cp.steps, cp.status) == (z3r.steps, z3r.status) else "NO", timed])
    return rows


def step_sections(limit: float) -> list[Section]:
    load = f"Load average (1 min) at the start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (other jobs share them)."
    return [
        ("Step model: SCCL's questions as whole commands (issue 18)",
         ["question", "CPU (s)", "peak MiB", "wall (s)", "answer (S, R, C)", "z3 = CP-SAT"],
         command_rows(limit),
         f"Each command in its own process (CPU and peak memory of that process, imports included, from "
         f"compiled bytecode as after pip install); limit "
         f"{limit:g} s per command; the floor rows are the same child with only those imports, what "
         f"no command can go below. {load} Targets: --help ≤ 0.3 s; DGX-1 least steps ≤ 0.33 s (SCCL: 0.32–0.34 s); "
         "the DGX-1 front ≤ 1.5 s CPU with CP-SAT; (3, 7, 6) ≤ 20 s CPU with z3; torus 8×8 least steps ≤ 30 s CPU "
         "and ≤ 1 GiB; Line(7), Line(8), Ring(8) AlltoAll least steps proven, ≤ 1 s each (issue 35); Ring(4) "
         "AllReduce ≤ 0.35 s (SCCL: 0.21 s); synth torus 8×8 ≤ 0.5 s. The synth rows include the analytic "
         "bounds and the verification (the greedy's own time is in the greedy-kernel section)."),
        ("Step model: SCCL's AllReduce rows under both combining rules (issue 35)",
         ["SCCL question (AllReduce, C = 1)", "copy-or-reduce (default)", "CPU (s)", "reduce-only (SCCL's rules)",
          "CPU (s)", "answers"],
         combining_rows(limit),
         "Each answer a whole `optcoll solve --model step --least-steps --combining RULE` command. copy-or-reduce: "
         "a copy may write a partial sum over another (docs/model.md §5.4); reduce-only: SCCL's own rules, every "
         "arrival a disjoint reduction. \"infeasible at every S\": no schedule exists at any number of steps "
         "(proven at the ceiling horizon: every delivery adds a contribution its receiver lacked), which is why "
         "SCCL's own least-steps search gives no answer on these rows "
         "(tests/producers/exact/step/data/sccl_least_steps.csv). On every row SCCL answered, reduce-only gives "
         "SCCL's answer (tests/producers/exact/step/test_sccl_answers.py)."),
        ("Step model: when the flow LP floor is built (SCCL's AllGather and AlltoAll, least steps)",
         ["question", "answer", "counting floor S", "flow floor S", "LP built", "LP CPU (s)", "solve CPU (s)",
          "solver questions"],
         flow_floor_rows(limit),
         "In this process, one thread. The counting floor (ingress, egress, latency) costs milliseconds; the flow "
         "LP (here timed on its own, scipy already loaded) is built only when a solver question is about to be "
         "asked, i.e. when the one-round-per-step heuristics do not already meet the counting floor. Where it is "
         "above the counting floor, CP-SAT would otherwise have to refute every S in between itself (the AlltoAll "
         "of Line(7), Line(8) and Ring(8) were not proven in 60 s that way)."),
        ("Greedy kernel threshold: interpreted or compiled (tacos)",
         ["problem", "deliveries", "interpreted CPU (s)", "compiled CPU (s)", "default path", "threshold"],
         greedy_rows(),
         "The greedy alone (no bounds, no verification), in this process with numba loaded and the kernel's "
         "cached machine code read; a command pays about 0.5 s CPU for that once before the compiled path runs "
         "(producers/greedy/coverage.py), hence the threshold. Both paths "
         "give the same schedule (tests/producers/test_greedy_kernel.py); the default takes the compiled one "
         "from the threshold on."),
        ("Step model: one send and one receive port per node per round (SCCL's HubAndSpoke)",
         ["question", "CP-SAT", "CPU (s)", "z3", "CPU (s)", "agree", "timed model, one port each way"],
         port_rows(limit),
         "Fully connected, 25 GB/s links, α = 1 µs, 1 MiB per chunk. With equal links and one round per step "
         "a step schedule is a timed schedule of S·(α + b/B), so the timed one-port optimum must equal it."),
    ]
