"""The exact AllReduce where training runs (issue 34): the machines-suite AllReduce instances that
were not proven optimal, and the 512-GPU rail cluster, each solved by ``optcoll.producers.run``
(the producers' start, ReduceScatter then AllGather, the direct model where it fits) in a child
process of its own, so its CPU time and peak memory are its own.

Figures, not tests: every time is verified; the row names the producer of the answer, the bound
that stops the proof and the gap.
"""
from __future__ import annotations

import multiprocessing as mp
import resource
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection

from optcoll.bench.file import Section
from optcoll.bundled import bundled_dir
from optcoll.collectives.builtins import make_collective
from optcoll.instances.budget import Budget
from optcoll.instances.instance import Instance, TimeModel
from optcoll.instances.instancefile import load_instance
from optcoll.machines.catalog import load_machine
from optcoll.sweeps.pool import BENCH_GRACE
from optcoll.text.table import percent
from optcoll.units import format_time

THREADS, SEED = 1, 0
#: The machines-suite AllReduce instances issue 34 names (file stems), then the 512-GPU cluster.
SUITE_CASES = ("dgxh100-rail-2x8-allreduce-c1", "dgxh100-rail-4x8-allreduce-c1", "dgxh100-rail-16x8-allreduce-c1",
               "hetero-dgxa100-dgxh100-rail-2x8-allreduce-c1", "dgx2-allreduce-c1", "trn2-allreduce-c2",
               "tpuv4-cube-allreduce-c1", "tpuv5p-cube-allreduce-c1", "perlmutter-allreduce-c1",
               "dgx1-allreduce-c2")
LARGE = "dgxh100-rail-64x8"
#: Address space of each case's process (issue 34's budget: 8 GiB per instance).
MEMORY_CAP = 8 * 2**30


@dataclass(frozen=True)
class Row:
    label: str
    npus: int | None
    chunks: int | None
    status: str
    time: float | None
    producer: str
    bound: float | None
    bound_name: str
    wall: float
    cpu: float
    peak_mib: float

    def cells(self) -> list:
        gap = percent(self.time / self.bound - 1) if self.time and self.bound else "-"
        return [self.label, self.npus or "-", self.chunks or "-", self.status,
                format_time(self.time) if self.time else "-", self.producer,
                format_time(self.bound) if self.bound else "-", self.bound_name, gap, f"{self.wall:.0f}",
                f"{self.cpu:.0f}", f"{self.peak_mib:.0f}"]


def _instance(label: str, time_limit: float) -> Instance:
    if label == LARGE:
        machine = load_machine(LARGE)
        collective = make_collective("allreduce", range(machine.num_npus), 2.0**30, 1)
        return Instance(f"{LARGE}-allreduce-c1", machine, collective, TimeModel(), Budget(time_limit, THREADS, SEED))
    inst = load_instance(bundled_dir("instances") / "machines" / f"{label}.toml")
    return Instance(inst.name, inst.machine, inst.collective, inst.model, Budget(time_limit, THREADS, SEED))


def solve_case(label: str, time_limit: float) -> Row:
    """One case in this process: the exact solve, its verified answer and who made it."""
    from optcoll.producers import run

    began = time.perf_counter()
    inst = _instance(label, time_limit)
    produced = run.exact(inst)
    result = produced.result
    start = result.params.get("start") or {}
    made = str(produced.schedule.meta.get("producer", "?")) if produced.schedule is not None else "-"
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return Row(label, inst.machine.num_npus, inst.collective.chunks_per_rank, result.status, result.time,
               made if made != "optcoll-timed" or not start else f"{made} (start: {start.get('producer')})",
               result.lower_bound, result.lower_bound_source.split(" bound")[0].split(":")[0],
               time.perf_counter() - began, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024)


def _child(conn: Connection, label: str, time_limit: float) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))  # a case over it fails, the machine does not
    conn.send(solve_case(label, time_limit))
    conn.close()


def run_isolated(label: str, time_limit: float) -> Row:
    """``solve_case`` in a child process, stopped ``BENCH_GRACE`` past the limit."""
    ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_child, args=(send, label, time_limit), daemon=True)
    began = time.perf_counter()
    child.start()
    send.close()
    why = ""
    try:
        if receive.poll(BENCH_GRACE.after(time_limit)):
            try:
                return receive.recv()
            except EOFError:
                child.join()
                why = f"died (exit {child.exitcode})"
        else:
            why = "stopped past the limit"
    finally:
        if child.is_alive():
            child.kill()
        child.join()
        receive.close()
    return Row(label, None, None, f"failed: {why}", None, "-", None, "-", time.perf_counter() - began, 0.0, 0.0)


def clusters_section(time_limit: float, echo=lambda line: None) -> Section:
    rows = []
    for label in (*SUITE_CASES, LARGE):
        row = run_isolated(label, time_limit)
        echo(" | ".join(map(str, row.cells())))
        rows.append(row.cells())
    return ("Exact AllReduce on the machines of issue 34",
            ["instance", "NPUs", "C", "status", "best (verified)", "made by", "lower bound", "bound", "gap",
             "wall (s)", "CPU (s)", "peak RSS (MiB)"], rows,
            f"`optcoll.producers.run.exact` with {time_limit:g} s and {THREADS} thread per instance, each in a child "
            f"process of at most {MEMORY_CAP / 2**30:g} GiB (CPU and peak memory are that process's own); \"made by\" is the producer of the verified "
            "answer (optcoll-timed: the exact solver's own schedule; otherwise the producers' start it returned). "
            f"{LARGE}: AllReduce of 1 GiB at C = 1 (512 GPUs), not a suite instance.")
