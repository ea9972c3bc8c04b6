"""Benchmark of the exact solvers: wall time to a proven optimum on the instances issue 3 names,
and per topology family a ladder of growing instances climbed until one is not proven in time.

Figures, not tests: every result comes through ``optcoll.producers.run`` (the shared verifier) and
the row says whether the optimum was proven within the limit, and how: a proof is only as strong
as what closed it, so a rung whose greedy start already met an analytic bound is labelled so.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import resource
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from multiprocessing.connection import Connection

from optcoll.text.table import percent
from optcoll.collectives.builtins import make_collective
from optcoll.errors import InputError
from optcoll.instances.budget import Budget
from optcoll.instances.instance import Instance, TimeModel
from optcoll.machines import generators as G
from optcoll.machines.catalog import load_machine
from optcoll.machines.machine import Machine
from optcoll.bench.greedy import BANDWIDTH, LATENCY
from optcoll.bench.file import Section, write_bench_report
from optcoll.producers import run
from optcoll.sweeps.pool import BENCH_GRACE
from optcoll.results.record import Result
from optcoll.units import format_time

GIB = 2.0**30
#: What a benchmark section may be limited to: the fixed list (timed instances and the DGX-1
#: Pareto front), the size ladders, the step model's questions (bench/step.py), or the direct
#: AllReduce model.
PARTS = ("fixed", "ladder", "step", "allreduce", "coarse")  # coarse: only when asked for (--only)
THREADS, SEED = 2, 0
#: Seconds per question of the direct AllReduce section (its instances take seconds to a minute).
DIRECT_LIMIT = 300.0


@dataclass(frozen=True)
class BenchCase:
    name: str
    machine: str
    chunks: int


#: Issue 3's benchmark list (timed model, AllGather of 1 GiB).
TIMED_CASES = [
    *(BenchCase(f"dgx1 C={c}", "dgx1", c) for c in range(1, 7)),
    BenchCase("torus4x4 C=1", "torus4x4", 1), BenchCase("torus4x4 C=2", "torus4x4", 2),
    BenchCase("hypercube 2^4 C=1", "hypercube4", 1), BenchCase("hypercube 2^4 C=2", "hypercube4", 2),
    BenchCase("hypercube 2^5 C=1", "hypercube5", 1), BenchCase("hetmesh5x5 C=1", "hetmesh5x5", 1),
    BenchCase("dgx2 (16-GPU NVSwitch) C=1", "dgx2", 1), BenchCase("torus8x8 C=1", "torus8x8", 1),
    BenchCase("hypercube 2^6 C=1", "hypercube6", 1),
]


def _allgather(name: str, machine: Machine, chunks: int, time_limit: float, kind: str = "timed") -> Instance:
    collective = make_collective("allgather", range(machine.num_npus), GIB, chunks)
    return Instance(name, machine, collective, TimeModel(kind=kind), Budget(time_limit, THREADS, SEED))


def _instance(case: BenchCase, time_limit: float, kind: str = "timed") -> Instance:
    machine = load_machine(case.machine) if case.machine != "hypercube5" else G.hypercube(5, BANDWIDTH, LATENCY)
    return _allgather(case.name, machine, case.chunks, time_limit, kind)


def bench_timed(time_limit: float = 600.0, solver: str = "cpsat",
                cases: list[BenchCase] = TIMED_CASES) -> list[list[str]]:
    rows = []
    for case in cases:
        inst = _instance(case, time_limit)
        result = run.exact(inst, solver=solver).result
        rows.append([case.name, inst.machine.num_npus, result.status, format_time(result.time or 0),
                     format_time(result.lower_bound or 0), f"{result.wall_time:.2f}",
                     result.params.get("formulation", "")])
    return rows


def bench_pareto(solvers: tuple[str, ...] = ("cpsat", "z3"), time_limit: float = 120.0,
                 max_chunks: int = 6) -> list[list[str]]:
    """The DGX-1 AllGather step-model front per solver: wall time and the points found."""
    from optcoll.producers.exact.step import pareto_front

    rows = []
    inst = _instance(BenchCase("dgx1 pareto", "dgx1", 1), time_limit, kind="step")
    for solver in solvers:
        t0 = time.perf_counter()
        front = pareto_front(inst, max_chunks, solver=solver, time_limit=time_limit, threads=THREADS)
        wall = time.perf_counter() - t0
        found = ", ".join(f"(S={p.steps}, R={p.rounds}, C={p.chunks}{'' if p.proven else ', unproven'})"
                          for p in front.points)
        ended = "" if front.complete else f"; stopped by {front.stopped}"
        rows.append([solver, f"{wall:.2f}", (found or "none") + ended, time_limit])
    return rows


# -- size ladders ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rung:
    """One instance of a ladder: AllGather of 1 GiB on ``machine()`` with ``chunks`` per rank.
    The machine is built only when the rung is climbed."""

    label: str
    machine: Callable[[], Machine]
    chunks: int = 1


@dataclass(frozen=True)
class Ladder:
    family: str
    title: str
    rungs: tuple[Rung, ...]


def _square(name: str, generator: Callable[..., Machine], side: int, bandwidth=BANDWIDTH) -> Rung:
    return Rung(f"{name}{side}x{side}", partial(generator, [side, side], bandwidth, LATENCY))


#: Heterogeneous mesh links as in models/hetmesh5x5.toml (TACOS's Mesh2D_Hetero): x slower than y.
HET_BANDWIDTHS = [50 * GIB, 75 * GIB]

#: Links are TACOS's defaults (50 GiB/s, 0.5 µs, as in the greedy benchmark) except the switch,
#: which has DGX-2's (150 GB/s per GPU, 0.5 µs per hop). Rungs stop at 1024 NPUs, the greedy
#: benchmark's scale; a family whose every rung is proven says so. Families whose proofs need
#: the solver come first, those the greedy start usually settles after.
LADDERS: tuple[Ladder, ...] = (
    Ladder("dgx1-chunks", "DGX-1, chunk ladder (C chunks per rank)",
           tuple(Rung("dgx1", G.dgx1, c) for c in (*range(1, 11), 12, 16, 24, 32, 48, 64))),
    Ladder("nvswitch", "n GPUs on one NVSwitch-style switch node (DGX-2 links)",
           tuple(Rung(f"nvswitch{n}", partial(G.nvswitch, n)) for n in (8, 16, 32, 64, 128, 256, 512))),
    Ladder("dgxh100-rail", "DGX H100 servers on rail-optimized leaves (the catalog's dgxh100-rail-Nx8 models)",
           tuple(Rung(f"dgxh100-rail-{n}x8", partial(load_machine, f"dgxh100-rail-{n}x8")) for n in (2, 4, 16, 64))),
    Ladder("hetmesh2d", "heterogeneous 2D mesh k×k (x links 50 GiB/s, y links 75 GiB/s, like hetmesh5x5)",
           tuple(_square("hetmesh", G.mesh, k, HET_BANDWIDTHS) for k in (3, 4, 5, 6, 8, 10, 12, 16, 24, 32))),
    Ladder("torus2d", "2D torus k×k", tuple(_square("torus", G.torus, k) for k in (4, 6, 8, 12, 16, 24, 32))),
    Ladder("mesh2d", "2D mesh k×k", tuple(_square("mesh", G.mesh, k) for k in (4, 6, 8, 12, 16, 24, 32))),
    Ladder("hypercube", "binary hypercube 2^d",
           tuple(Rung(f"hypercube{d}", partial(G.hypercube, d, BANDWIDTH, LATENCY)) for d in range(3, 11))),
    Ladder("torus3d", "3D torus k×k×k",
           tuple(Rung(f"torus{k}x{k}x{k}", partial(G.torus, [k, k, k], BANDWIDTH, LATENCY)) for k in (3, 4, 6, 8, 10))),
    Ladder("ring", "bidirectional ring of n NPUs",
           tuple(Rung(f"ring{n}", partial(G.ring, n, BANDWIDTH, LATENCY)) for n in (2**p for p in range(3, 11)))),
)

#: How a rung's optimum was proven, weakest evidence first.
START_MET_BOUND = "start schedule met the bound"
SOLVER_MET_BOUND = "solver's schedule met the bound"
SOLVER_CLOSED = "solver's search raised the bound"


@dataclass(frozen=True)
class RungRun:
    """One climbed rung. ``proof`` is set only when the optimum was proven within the limit."""

    family: str
    rung: str
    npus: int | None
    chunks: int
    status: str  # a Result status, or "failed" when the rung raised
    time: float | None
    lower_bound: float | None
    wall: float  # the solver's wall seconds (model building included, verification not)
    cpu: float  # this process's CPU seconds over the solve, all threads
    proof: str | None
    detail: str  # formulation and bound source, or what stopped the rung
    notes: tuple[str, ...] = ()

    @property
    def proven(self) -> bool:
        return self.proof is not None

    @property
    def gap(self) -> float | None:
        """time / bound − 1; a verified time never lies below its bound beyond float noise."""
        if self.time is None or not self.lower_bound:
            return None
        return max(0.0, self.time / self.lower_bound - 1.0)

    def describe(self) -> str:
        return f"{self.rung} C={self.chunks} ({self.npus if self.npus is not None else '?'} NPUs)"


def proof_path(result: Result) -> str:
    """Which evidence made ``result`` optimal: the solver's formulation is "none" when its greedy
    start already met the analytic bound, and its ``bound_from`` says whether the final bound
    came from its search or from analytic reasoning (possibly rounded up to an exact grid)."""
    if str(result.params.get("formulation", "")).startswith("none"):
        return START_MET_BOUND
    return SOLVER_CLOSED if result.params.get("bound_from") == "search" else SOLVER_MET_BOUND


def judge(family: str, rung: Rung, npus: int, result: Result, wall: float, cpu: float,
          time_limit: float) -> RungRun:
    """The rung's row: proven only when the verified result is optimal within ``time_limit``."""
    formulation = result.params.get("formulation", "?")
    ran = "" if formulation.startswith("none") else f"{formulation}; "
    proof, detail = None, f"{ran}bound: {result.lower_bound_source}"
    if result.params.get("interrupted"):
        detail = f"interrupted after {wall:.0f} s ({formulation})"
    elif result.status == "optimal" and wall > time_limit:
        detail = f"proven only after {wall:.0f} s, past the {time_limit:g} s limit ({formulation})"
    elif result.status == "optimal":
        proof = proof_path(result)
    elif result.params.get("refused"):
        detail = f"no proof in {wall:.0f} s; {formulation}: {result.params['refused'][0]}"
    else:  # the time limit, or a phase that gave up early: the wall time tells which
        detail = f"no proof in {wall:.0f} s (limit {time_limit:g} s; {formulation})"
    return RungRun(family, rung.label, npus, rung.chunks, result.status, result.time, result.lower_bound,
                   wall, cpu, proof, detail, result.notes)


def run_rung(family: str, rung: Rung, time_limit: float, solver: str = "cpsat") -> RungRun:
    """Solves one rung; any exception (a memory guard refusing a model, a solver error) becomes
    a failed, unproven row instead of ending the benchmark."""
    wall0, cpu0, npus = time.perf_counter(), time.process_time(), None
    try:
        machine = rung.machine()
        npus = machine.num_npus
        inst = _allgather(f"{machine.name} C={rung.chunks}", machine, rung.chunks, time_limit)
        result = run.exact(inst, solver=solver).result
        cpu = time.process_time() - cpu0
    except Exception as error:  # noqa: BLE001 - a rung that cannot be solved ends its ladder only
        return RungRun(family, rung.label, npus, rung.chunks, "failed", None, None, time.perf_counter() - wall0,
                       time.process_time() - cpu0, None, f"{type(error).__name__}: {error}")
    return judge(family, rung, npus, result, result.wall_time, cpu, time_limit)


def _rung_in_child(conn: Connection, family: str, rung: Rung, time_limit: float, solver: str) -> None:
    conn.send(run_rung(family, rung, time_limit, solver))
    conn.close()


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_rung_isolated(family: str, rung: Rung, time_limit: float, solver: str = "cpsat",
                      grace: float | None = None) -> RungRun:
    """``run_rung`` in a child process, stopped ``grace`` seconds past the limit (default: the
    harnesses' ``BENCH_GRACE``).

    Why: the solver's limit cannot cut short a start schedule being made (greedy schedules
    retimed in pure Python take minutes on a thousand NPUs) or a model being built, and a model
    that outgrows memory gets the process killed; either way the rung is unproven and the
    benchmark goes on.
    """
    grace = BENCH_GRACE.after(time_limit) - time_limit if grace is None else grace
    ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_rung_in_child, args=(send, family, rung, time_limit, solver), daemon=True)
    wall0, cpu0 = time.perf_counter(), _children_cpu()
    child.start()
    send.close()
    try:
        if receive.poll(time_limit + grace):
            try:
                return receive.recv()
            except EOFError:
                child.join()
                why = f"its process died (exit code {child.exitcode}; -9 is a kill, e.g. out of memory)"
        else:
            why = (f"stopped {grace:g} s past the {time_limit:g} s limit: the solver had not returned "
                   "(start schedules, bounds or model building take longer than the limit)")
    finally:
        if child.is_alive():
            child.kill()
        child.join()
        receive.close()
    return RungRun(family, rung.label, _npus(rung), rung.chunks, "failed", None, None,
                   time.perf_counter() - wall0, _children_cpu() - cpu0, None, why)


def _npus(rung: Rung) -> int | None:
    try:
        return rung.machine().num_npus
    except Exception:  # noqa: BLE001 - only a figure for the row
        return None


def _quiet(line: str) -> None:
    pass


def climb(ladder: Ladder, time_limit: float, solver: str = "cpsat", echo: Callable[[str], None] = _quiet,
          grace: float | None = None) -> list[RungRun]:
    """The ladder's rungs in order up to and including the first one not proven in time, each in
    its own process (``run_rung_isolated``)."""
    runs = []
    for rung in ladder.rungs:
        run = run_rung_isolated(ladder.family, rung, time_limit, solver, grace)
        echo(f"{ladder.family}: {run.describe()}: {run.status}, {run.wall:.2f} s wall, "
             f"{run.proof or run.detail}")
        runs.append(run)
        if not run.proven:
            break
    return runs


def select_ladders(families: Sequence[str] | None) -> list[Ladder]:
    """The named ladders in the benchmark's order (all when ``families`` is None)."""
    known = {ladder.family: ladder for ladder in LADDERS}
    if families is None:
        return list(LADDERS)
    unknown = [name for name in families if name not in known]
    if unknown or not families:
        raise InputError(f"unknown family {unknown[0]!r}; known: {', '.join(known)}" if unknown
                         else f"name at least one family; known: {', '.join(known)}", field="families")
    return [ladder for ladder in LADDERS if ladder.family in families]


def _seconds(value: float) -> str:
    return f"{value:.2f}"


def ladder_section(ladder: Ladder, runs: list[RungRun], time_limit: float) -> Section:
    """A report section: every climbed rung, then what the family's largest proven rungs and its
    first unproven one were (with the solver's notes on the latter: what ran, how big, how far)."""
    headers = ["rung", "NPUs", "C", "status", "time", "lower bound", "gap", "wall (s)", "CPU (s)",
               "proven by / stopped by"]
    rows = [[r.rung, r.npus if r.npus is not None else "?", r.chunks, r.status,
             format_time(r.time) if r.time is not None else "–",
             format_time(r.lower_bound) if r.lower_bound is not None else "–", percent(r.gap),
             _seconds(r.wall), _seconds(r.cpu), r.proof or r.detail] for r in runs]
    proven = [r for r in runs if r.proven]
    solved = [r for r in proven if r.proof != START_MET_BOUND]
    raised = [r for r in solved if r.proof == SOLVER_CLOSED]
    lines = [f"Limit {time_limit:g} s per rung."]
    if proven:
        top = proven[-1]
        lines.append(f"**Largest proven: {top.describe()}** in {top.wall:.2f} s ({top.proof}; {top.detail}).")
        if not solved:
            lines.append("No proven rung needed the solver's search to close the gap.")
        else:
            lines.append(f"Largest the solver had to close (its greedy start was above the bound): "
                         f"{solved[-1].describe()} in {solved[-1].wall:.2f} s; "
                         + (f"largest whose bound its search raised: {raised[-1].describe()} in "
                            f"{raised[-1].wall:.2f} s." if raised else
                            "every bound it met was analytic (none came from its search)."))
    else:
        lines.append("**No rung proven.**")
    stop = runs[-1] if runs and not runs[-1].proven else None
    if stop is None and runs:
        lines.append(f"Every rung proven: the ladder ends at {runs[-1].describe()}, so the family's limit "
                     "lies beyond it.")
    elif stop is not None:
        figures = (f"best {format_time(stop.time)}, bound {format_time(stop.lower_bound)}, gap {percent(stop.gap)}"
                   if stop.time is not None and stop.lower_bound is not None else "no schedule")
        lines.append(f"**First unproven: {stop.describe()}**: {stop.status} ({figures}); {stop.detail}.")
        if stop.notes:
            lines.append("Solver notes on it: " + "; ".join(stop.notes) + ".")
    return f"Ladder: {ladder.title}", headers, rows, " ".join(lines)


LADDER_INTRO: Section = (
    "Size ladders: the largest instance per family proven optimal within the limit",
    ["proof label", "meaning"],
    [[START_MET_BOUND, "a start schedule (tacos/tacos+, or one built from the machine's structure: the "
      "shift schedule of a switch, servers and rails stitched) already equals an analytic lower "
      "bound (latency, ingress, egress, entry, cut); no exact model was built"],
     [SOLVER_MET_BOUND, "an exact formulation ran and found a schedule equal to a bound known before "
      "its search (an analytic bound, possibly rounded up to an exact time grid)"],
     [SOLVER_CLOSED, "the solver's search proved the bound itself (a horizon infeasible, or CP-SAT's "
      "bound), above every analytic bound"]],
    "Each family below: AllGather of 1 GiB, C = 1 (unless a chunk ladder), CP-SAT with 2 threads, seed 0. "
    "Rungs are climbed smallest first until one is not proven optimal within the limit or raises (e.g. "
    "the memory guard refusing a model too big to build), and that family stops there. Wall is the "
    "solver's own (model building included, verification not); CPU is this process's CPU time over "
    "the same span. The greedy start and the bounds run on one thread, CP-SAT on two, so CPU/wall is "
    "at most 1 or 2 there; less means other jobs shared the 2 cores. Every time and status is the "
    "shared verifier's.",
)


def bench_ladders(ladders: Sequence[Ladder], time_limit: float, solver: str = "cpsat",
                  echo: Callable[[str], None] = _quiet) -> list[Section]:
    """The intro section and one section per ladder climbed."""
    return [LADDER_INTRO, *(ladder_section(ladder, climb(ladder, time_limit, solver, echo), time_limit)
                            for ladder in ladders)]


#: The coarse-grid row (issue #16): AllGather on a 256-port switch with the structured start (the
#: shift schedule) left out, so the solver starts from the greedies; the fine model (~100 GiB)
#: is refused at this memory limit and a coarse grid that fits it gives the schedules.
COARSE_NPUS, COARSE_MEMORY = 256, 4 * GIB


def coarse_section(time_limit: float) -> Section:
    from optcoll.producers.exact.timed.solve import solve_timed
    from optcoll.verify import verify

    machine = G.nvswitch(COARSE_NPUS)
    inst = _allgather(f"nvswitch{COARSE_NPUS} C=1", machine, 1, time_limit)
    load, cpu = os.getloadavg()[0], time.process_time()
    out = solve_timed(inst, threads=1, max_memory=int(COARSE_MEMORY), structured=False)
    cpu = time.process_time() - cpu
    made = verify(machine, inst.collective, out.schedule, inst.model)
    if not made.valid:
        raise AssertionError(f"the coarse run's schedule is invalid: {made.violation}")
    coarse = out.params.get("coarse")
    grid = "not used" if coarse is None else (
        f"q = {format_time(coarse['quantum'])}, capacity {coarse['capacity'][0]}..{coarse['capacity'][1]}, "
        f"{coarse['epochs']} epochs, {coarse['variables']} variables")
    row = [inst.name, COARSE_NPUS, out.status, format_time(made.time), format_time(out.lower_bound or 0),
           percent(made.time / out.lower_bound - 1 if out.lower_bound else None), grid,
           "; ".join(out.params.get("refused", [])) or "none", f"{out.wall_time:.2f}", f"{cpu:.1f}", f"{load:.2f}"]
    return (f"Coarse grid: AllGather of 1 GiB on a {COARSE_NPUS}-port switch from the greedies (CP-SAT, 1 thread)",
            ["instance", "NPUs", "status", "time", "lower bound", "gap", "coarse grid", "refused", "wall (s)",
             "CPU (s)", "load"], [row],
            f"Limit {time_limit:g} s, --max-memory {COARSE_MEMORY / GIB:g} GiB, the shift schedule left out "
            "(with it the first schedule meets the bound). A coarse grid proves nothing: the bound is analytic.")


def check_part(only: str | None) -> None:
    if only is not None and only not in PARTS:
        raise InputError(f"unknown part {only!r}; use one of {', '.join(PARTS)}", field="only")


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min" if seconds >= 120 \
        else f"{seconds:.0f} s"


def expected_duration(time_limit: float, pareto_limit: float, only: str | None = None,
                      families: Sequence[str] | None = None) -> str | None:
    """What the run will take, said before it starts: its worst case (every timed instance and
    rung at its limit) and the usual floor (each family stops at the first rung not proven in
    time, so each costs at least one limit)."""
    check_part(only)
    if only == "coarse":
        return f"the {COARSE_NPUS}-port coarse-grid row: about {_hours(time_limit)} plus its greedy start"
    ladders = select_ladders(families) if only in (None, "ladder") else []
    fixed = (len(TIMED_CASES) * time_limit + 2 * pareto_limit) if only in (None, "fixed") else 0.0
    worst = fixed + sum(len(ladder.rungs) for ladder in ladders) * time_limit
    parts = ([f"{len(TIMED_CASES)} timed instances and the DGX-1 front"] if fixed else []) + \
        ([f"{len(ladders)} ladder families"] if ladders else [])
    if not parts:
        return None
    usual = f", usually more than {_hours(len(ladders) * time_limit)}" if ladders else ""
    return (f"{' and '.join(parts)}: up to {_hours(worst)} with --time-limit {time_limit:g} s{usual}; "
            "--time-limit, --only and --families shorten it")


def run_bench(out: str, time_limit: float, pareto_limit: float, echo: Callable[[str], None] = _quiet,
              only: str | None = None, families: Sequence[str] | None = None) -> str:
    """Writes the report. ``only`` (one of PARTS) measures that part alone and keeps the file's
    other sections as they were, so a slow part need not be rerun to refresh another."""
    check_part(only)
    ladders = select_ladders(families)  # checked before anything slow runs
    sections: list[Section] = []
    if only in (None, "fixed"):
        sections += [
            ("Timed model: AllGather of 1 GiB to a proven optimum (CP-SAT, 2 threads)",
             ["instance", "NPUs", "status", "time", "lower bound", "wall (s)", "formulation"],
             bench_timed(time_limit),
             f"Limit {time_limit:g} s per instance; targets: 64-NPU instances ≤ 600 s. \"optimal\" means the "
             "verified schedule meets a proven bound in the timed model."),
            ("Step model: the DGX-1 AllGather Pareto front, C ≤ 6", ["solver", "wall (s)", "front", "limit (s)"],
             bench_pareto(time_limit=pareto_limit),
             "Target: ≤ 10 s. z3 is the SMT encoding (as SCCL uses); CP-SAT is optcoll's default."),
        ]
    if only in (None, "step"):
        from optcoll.bench.step import step_sections

        sections += step_sections(pareto_limit)
    if only in (None, "ladder"):
        sections += bench_ladders(ladders, time_limit, echo=echo)
    if only in (None, "allreduce"):
        from optcoll.bench.allreduce import direct_section
        from optcoll.bench.clusters import clusters_section

        sections.append(direct_section(min(time_limit, DIRECT_LIMIT)))
        sections.append(clusters_section(min(time_limit, DIRECT_LIMIT), echo))
    if only == "coarse":
        sections.append(coarse_section(time_limit))
    return write_bench_report(out, "Exact-solver benchmarks", sections, keep_other_sections=only is not None)
