"""Benchmark of the step model as SCCL's users ask it (issue 18): whole commands side by side.

Each row runs one ``optcoll`` command in a child process and reports that child's CPU time and
peak memory (``os.wait4``), so imports count as a user feels them; the answers come from the
command's ``--json`` output, which is verified before it is printed. z3 and CP-SAT answers are
compared here too. The one-port rows (SCCL's HubAndSpoke) run in this process, each least-steps
answer cross-checked against the timed model with one send and one receive port. Figures, not tests: nothing here asserts a time.
"""
from __future__ import annotations

import compileall
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

from optcoll.bench.file import Section

#: The instances the commands read, written to a scratch folder (machines from the catalog).
INSTANCES = {
    "dgx1": '[instance]\nmachine = "dgx1"\ncollective = "allgather"\nsize = "1 GiB"\n',
    "torus8x8": '[instance]\nmachine = "torus8x8"\ncollective = "allgather"\nsize = "1 GiB"\n',
}


@dataclass(frozen=True)
class Measured:
    code: int
    cpu: float
    peak_mib: float
    wall: float
    output: str


#: What a child process runs by default: the ``optcoll`` command.
OPTCOLL = "from optcoll.cli.main import main; main()"


def run_command(args: list[str], timeout: float, code: str = OPTCOLL) -> Measured:
    """``optcoll args`` (or Python ``code`` with ``args``) in a child process: exit code, CPU
    seconds, peak RSS and stdout; the child is killed after ``timeout`` seconds (its answer is
    then missing)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-c", code, *args],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    timer = threading.Timer(timeout, child.kill)
    timer.start()
    try:
        output = child.stdout.read()
        _, status, usage = os.wait4(child.pid, 0)  # this child's own CPU and peak memory
    finally:
        timer.cancel()
        child.stdout.close()
    child.returncode = os.waitstatus_to_exitcode(status)
    return Measured(child.returncode, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024,
                    time.perf_counter() - start, output)


def _answer(measured: Measured) -> str:
    try:
        data = json.loads(measured.output)
    except json.JSONDecodeError:
        return f"no answer (exit {measured.code})"
    if "points" in data:
        points = ", ".join(f"({p['steps']},{p['rounds']},{p['chunks']})" for p in data["points"])
        return f"{points}{'' if data['complete'] else ' (incomplete: ' + data['stopped'] + ')'}"
    if data.get("steps"):
        return f"{data['status']}: S = {data['steps']}, R = {data['rounds']}"
    return str(data.get("status"))


def command_rows(limit: float) -> list[list[str]]:
    """One row per command: what it asks, CPU s, peak MiB, wall s, the answer, agreement."""
    import optcoll

    # bytecode as an installed package has it (pip compiles on install): no command pays for
    # compiling optcoll's sources, which a PYTHONDONTWRITEBYTECODE environment would redo each time
    compileall.compile_dir(Path(optcoll.__file__).parent, quiet=1)
    with tempfile.TemporaryDirectory() as scratch:
        paths = {}
        for name, text in INSTANCES.items():
            paths[name] = Path(scratch) / f"{name}.toml"
            paths[name].write_text(text, encoding="utf-8")
        dgx1, torus = str(paths["dgx1"]), str(paths["torus8x8"])
        limit_text = f"{limit:g}"
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
        ]
        rows, answers = [], {}
        for what, args, pair in questions:
            measured = run_command(args, timeout=limit * 2 + 60)
            answer = "help text" if args == ["--help"] else _answer(measured)
            agree = ""
            if pair is not None:
                if pair in answers:
                    agree = "yes" if answers[pair] == answer else f"NO (other: {answers[pair]})"
                answers[pair] = answer
            rows.append([what, f"{measured.cpu:.2f}", f"{measured.peak_mib:.0f}", f"{measured.wall:.2f}",
                         answer, agree])
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
    return [
        ("Step model: SCCL's questions as whole commands (issue 18)",
         ["question", "CPU (s)", "peak MiB", "wall (s)", "answer (S, R, C)", "z3 = CP-SAT"],
         command_rows(limit),
         f"Each command in its own process (CPU and peak memory of that process, imports included, from "
         f"compiled bytecode as after pip install); limit "
         f"{limit:g} s per command. Targets: --help ≤ 0.3 s; a DGX-1 step question ≤ 0.6 s; the DGX-1 front "
         "≤ 1.5 s CPU with CP-SAT; (3, 7, 6) ≤ 20 s CPU with z3; torus 8×8 least steps ≤ 30 s CPU and ≤ 1 GiB."),
        ("Step model: one send and one receive port per node per round (SCCL's HubAndSpoke)",
         ["question", "CP-SAT", "CPU (s)", "z3", "CPU (s)", "agree", "timed model, one port each way"],
         port_rows(limit),
         "Fully connected, 25 GB/s links, α = 1 µs, 1 MiB per chunk. With equal links and one round per step "
         "a step schedule is a timed schedule of S·(α + b/B), so the timed one-port optimum must equal it."),
    ]
