"""A figure, not a test: how the greedy synthesizers scale, and how far they land from the bound.

``run_bench`` synthesizes AllGather, AllReduce and AlltoAll (1 GiB, C = 1, 50 GiB/s and 0.5 µs links,
TACOS's defaults) on 2D meshes, 2D tori, binary hypercubes and 3D tori of each size, one case per
child process so every case's peak memory is its own (the kernel's high-water mark, reset when
synthesis starts and read right after it). Each schedule then goes through the shared verifier
(its wall time and peak memory measured the same way) and is compared with
``optcoll.bounds.best_lower_bound``; the report gives synthesis time, peak memory, the verified
time, the gap and, per family, the exponent k of a least-squares fit time ∝ N^k.

    optcoll bench greedy --npus 64,256,1024 --out reports/bench-greedy.md
"""
from __future__ import annotations

import json
import math
import os
import platform
import resource
import sys
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from optcoll.bench.isolate import call
from optcoll.fileio import write_text_atomic
from optcoll.machines import generators as g
from optcoll.machines.machine import Machine
from optcoll.text.document import Block, Heading, Paragraph, table, to_markdown

GIB = 2.0**30
BANDWIDTH, LATENCY, SIZE = 50 * GIB, 0.5e-6, GIB
FAMILIES = ("mesh2d", "torus2d", "hypercube", "torus3d")
#: What the report's columns mean (its first paragraph, after where and when it was measured).
ABOUT = ("Every case ran in its own process. Memory: the process's resident size "
         "when synthesis starts (Python, numpy, scipy, the machine and the collective) and its "
         "peak during synthesis (the kernel's high-water mark, reset at the start; it includes "
         "the resident start). Wall time is what a user waits on this shared machine; CPU time is "
         "the process's own. Times are the shared verifier's; the bound is "
         "`optcoll.bounds.best_lower_bound`; gap = time / bound − 1; steps = time / τ with "
         "τ = α + b/B of one chunk on one link. For AllReduce, 'RS+AG gap' compares with the sum of "
         "the ReduceScatter and AllGather bounds, the least any ReduceScatter-then-AllGather "
         "schedule (what the greedy builds) can take; the plain AllReduce bound max(T_RS, T_AG) "
         "is weaker. Load: the 1-minute load average when synthesis started and ended (2 cores "
         "shared with other jobs: above 2, wall time stretches, CPU time much less). CPU before: "
         "the same case's synthesis CPU time in the previous committed run. Warm-up: CPU time of "
         "the process's first greedy call (a 16-NPU instance), which loads the compiled kernels "
         "from numba's on-disk cache (or compiles them, about 10 s, when the cache is cold); the "
         "synthesis figures exclude it.")


@dataclass(frozen=True)
class GreedyCase:
    family: str
    npus: int
    collective: str
    algo: str


def _cube_dims(n: int) -> list[int]:
    """Three powers of two, as equal as possible, whose product is n (x largest)."""
    k = n.bit_length() - 1
    parts = [k // 3 + (1 if i < k % 3 else 0) for i in range(3)]
    return [1 << p for p in parts]


def machine_for(family: str, npus: int) -> Machine:
    """The family's machine with ``npus`` NPUs (a power of two; a square for the 2D families)."""
    if npus < 4 or npus & (npus - 1):
        raise ValueError(f"bench sizes must be powers of two ≥ 4, got {npus}")
    if family in ("mesh2d", "torus2d"):
        side = math.isqrt(npus)
        if side * side != npus:
            raise ValueError(f"{family} needs a square number of NPUs, got {npus}")
        return (g.mesh if family == "mesh2d" else g.torus)([side, side], BANDWIDTH, LATENCY)
    if family == "hypercube":
        return g.hypercube(npus.bit_length() - 1, BANDWIDTH, LATENCY)
    if family == "torus3d":
        return g.torus(_cube_dims(npus), BANDWIDTH, LATENCY)
    raise ValueError(f"unknown family {family!r}; known: {', '.join(FAMILIES)}")


def _max_rss() -> float:
    """Peak resident memory of this process so far, bytes (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024.0


def status_bytes(field: str) -> float | None:
    """A memory figure (VmRSS, VmHWM) from /proc/self/status, bytes; None off Linux."""
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith(field + ":"):
                    return float(line.split()[1]) * 1024.0
    except OSError:
        return None
    return None


def reset_peak() -> bool:
    """Restarts the kernel's peak-RSS count (VmHWM) so it measures synthesis alone."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as handle:
            handle.write("5")
        return True
    except OSError:
        return False


def measure(case: GreedyCase, bounds: bool = True) -> dict[str, Any]:
    """One case in this process: synthesis wall and CPU time and peak memory, then the verified
    time and the best lower bound. Meant to run in a fresh child process (``run_bench``)."""
    from optcoll.bounds import best_lower_bound
    from optcoll.collectives.builtins import make_collective
    from optcoll.instances.instance import Instance
    from optcoll.producers.registry import get_synthesizer
    from optcoll.verify import require_valid

    machine = machine_for(case.family, case.npus)
    coll = make_collective(case.collective, range(machine.num_npus), SIZE, 1)
    inst = Instance(f"{machine.name}-{case.collective}", machine, coll)
    synth = get_synthesizer(case.algo)
    # The first greedy call of a process loads the compiled kernels (numba's on-disk cache, or
    # compiles them when the cache is cold): a per-process cost like importing, measured apart.
    small = machine_for(case.family, 16)
    warm = time.process_time()
    synth(Instance("warm-up", small, make_collective(case.collective, range(16), SIZE, 1)), 0)
    warm = time.process_time() - warm
    load_start = os.getloadavg()[0]
    rss_before = _max_rss()
    rss_now = status_bytes("VmRSS")
    reset = reset_peak()
    wall, cpu = time.perf_counter(), time.process_time()
    schedule = synth(inst, 0)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    load_end = os.getloadavg()[0]
    rss_peak = _max_rss()
    synth_peak = status_bytes("VmHWM") if reset else None
    verify_start = status_bytes("VmRSS")
    verify_reset = reset_peak()
    verify_wall = time.perf_counter()
    try:
        verified: float | None = require_valid(machine, coll, schedule, inst.model).time
        unverified = None
    except MemoryError:
        verified, unverified = None, "the verifier ran out of memory (address-space cap)"
    verify_wall = time.perf_counter() - verify_wall
    verify_peak = status_bytes("VmHWM") if verify_reset else None
    out: dict[str, Any] = {
        **asdict(case), "machine": machine.name, "links": machine.num_links,
        "transfers": len(schedule), "synth_wall_s": wall, "synth_cpu_s": cpu,
        "warmup_cpu_s": warm, "load_start": load_start, "load_end": load_end,
        "rss_before_bytes": rss_before, "rss_peak_bytes": rss_peak, "rss_start_bytes": rss_now,
        "synth_peak_bytes": synth_peak, "time_s": verified,
        "link_time_s": float(inst.model.link_timing(machine, coll.chunk_bytes).delay[0]), "verify_wall_s": verify_wall,
        "verify_start_bytes": verify_start, "verify_peak_bytes": verify_peak, "unverified": unverified}
    if bounds:
        bound = best_lower_bound(machine, coll, inst.model)
        out.update(bound_s=bound.value, bound_name=bound.name)
        if case.collective == "allreduce":  # what any ReduceScatter + AllGather must take
            out["split_bound_s"] = sum(
                best_lower_bound(machine, make_collective(kind, range(machine.num_npus), SIZE, 1),
                                 inst.model).value for kind in ("reducescatter", "allgather"))
    return out


def measure_row(case: dict[str, Any]) -> dict[str, Any]:
    """``measure`` of a JSON case (its ``bounds`` flag beside the case's fields): the child's side."""
    return measure(GreedyCase(case["family"], case["npus"], case["collective"], case["algo"]), bounds=case["bounds"])


def _run_child(case: GreedyCase, bounds: bool, timeout: float | None, memory_cap: float) -> dict[str, Any]:
    row = call("optcoll.bench.greedy:measure_row", {**asdict(case), "bounds": bounds}, timeout=timeout,
               memory_cap=memory_cap)
    row.pop("bounds", None)
    return row


def _case_key(row: dict[str, Any]) -> tuple[str, int, str, str]:
    return row["family"], row["npus"], row["collective"], row["algo"]


def growth_exponent(npus: list[int], seconds: list[float]) -> float | None:
    """k in time ≈ a·N^k, least squares on logs; None with fewer than two usable sizes."""
    pairs = [(n, s) for n, s in zip(npus, seconds) if s and s > 0]
    if len(pairs) < 2:
        return None
    x, y = (np.log([p[i] for p in pairs]) for i in (0, 1))
    return float(np.polyfit(x, y, 1)[0])


def _percent(value: float) -> str:
    return f"{0.0 if abs(value) < 1e-9 else value:.2%}"


def _mib(value: float) -> str:
    return f"{value / 2**20:.0f}"


def _row(r: dict[str, Any], earlier: dict[tuple[str, int, str, str], dict[str, Any]]) -> list[str]:
    """One case's cells of the main table."""
    case = [r["family"], r["npus"], r["collective"], r["algo"]]
    if "error" in r:
        return case + [f"error: {r['error']}"] + [""] * 13
    old_row = earlier.get(_case_key(r))
    bound, split, time_s = r.get("bound_s"), r.get("split_bound_s"), r.get("time_s")
    return case + [
        r["transfers"], f"{r['synth_wall_s']:.2f}", f"{r['synth_cpu_s']:.2f}",
        f"{old_row['synth_cpu_s']:.2f}" if old_row else "–",
        f"{r['load_start']:.1f}–{r['load_end']:.1f}" if "load_start" in r else "–",
        f"{r['warmup_cpu_s']:.2f}" if "warmup_cpu_s" in r else "–",
        _mib(r.get("rss_start_bytes") or r["rss_before_bytes"]), _mib(r.get("synth_peak_bytes") or r["rss_peak_bytes"]),
        f"{time_s * 1e6:.1f}" if time_s else f"not verified: {r.get('unverified')}",
        f"{time_s / r['link_time_s']:.2f}" if time_s else "–",
        "–" if bound is None else f"{bound * 1e6:.1f}", r.get("bound_name", "–"),
        _percent(time_s / bound - 1) if bound and time_s else "–",
        _percent(time_s / split - 1) if split and time_s else "–"]


def _growth_rows(rows: list[dict[str, Any]]) -> list[list[str]]:
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in rows:
        if "error" not in r:
            groups.setdefault((r["family"], r["collective"], r["algo"]), []).append(r)
    out = []
    for (family, coll, algo), rs in groups.items():
        k = growth_exponent([r["npus"] for r in rs], [r["synth_cpu_s"] for r in rs])
        out.append([family, coll, algo, ", ".join(str(r["npus"]) for r in rs), "–" if k is None else f"{k:.2f}"])
    return out


def render(rows: list[dict[str, Any]], note: str = "",
           before: list[dict[str, Any]] | None = None) -> str:
    """The Markdown report; ``before``: the previous run's rows, for the "CPU before" column."""
    earlier = {_case_key(r): r for r in before or [] if "error" not in r}
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    blocks: list[Block] = [
        Heading("Greedy synthesizers: scale and gap to the lower bound", 1),
        Paragraph(f"Measured on {platform.machine()}, {_cpus()} cores (shared), Python "
                  f"{platform.python_version()}, {stamp}. Generated by `optcoll bench greedy`. " + ABOUT),
        Paragraph(f"Instances: AllGather, AllReduce and AlltoAll of M = 1 GiB, C = 1 chunk per rank, links "
                  f"{BANDWIDTH / GIB:g} GiB/s and {LATENCY * 1e6:g} µs, seed 0 (one run per case)."),
        *([Paragraph(note)] if note else []),
        table(["family", "NPUs", "collective", "algo", "transfers", "synth wall (s)", "synth CPU (s)",
               "CPU before (s)", "load", "warm-up CPU (s)", "RSS at start (MiB)", "peak RSS in synthesis (MiB)",
               "time (µs)", "steps", "bound (µs)", "bound", "gap", "RS+AG gap"],
              [_row(r, earlier) for r in rows])]
    verified = [r for r in rows if r.get("verify_peak_bytes") and r.get("time_s")]
    if verified:
        blocks += [
            Heading("The shared verifier on these schedules"),
            Paragraph("Wall time of `optcoll.verify.require_valid` on the synthesized schedule, and the "
                      "process's resident size when verification starts (the schedule, the machine and "
                      "the collective included) and its peak during verification (the kernel's "
                      "high-water mark, reset at the start)."),
            table(["family", "NPUs", "collective", "algo", "transfers", "verify wall (s)", "RSS at start (MiB)",
                   "peak RSS in verification (MiB)"],
                  [[r["family"], r["npus"], r["collective"], r["algo"], r["transfers"], f"{r['verify_wall_s']:.1f}",
                    _mib(r["verify_start_bytes"]) if r.get("verify_start_bytes") else "–",
                    _mib(r["verify_peak_bytes"])] for r in verified])]
    blocks += [Heading("Growth of synthesis time (CPU seconds ∝ N^k)"),
               table(["family", "collective", "algo", "sizes", "k"], _growth_rows(rows))]
    return to_markdown(blocks)


def _cpus() -> int:
    return os.cpu_count() or 1


def run_bench(sizes: tuple[int, ...] = (64, 256, 1024), families: tuple[str, ...] = FAMILIES,
              collectives: tuple[str, ...] = ("allgather", "allreduce", "alltoall"),
              algos: tuple[str, ...] = ("tacos", "tacos+"), out: str | None = "reports/bench-greedy.md",
              bounds: bool = True, note: str = "", timeout: float | None = 3600.0,
              extra_rows: list[dict[str, Any]] | None = None, memory_cap: float = 8 * GIB,
              before: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Runs every case (module docstring) and writes the report to ``out`` (atomically).

    ``extra_rows`` are earlier results (e.g. a separate 4096-NPU run) to include in the report; a
    case run again here replaces its earlier row. ``before``: the previous committed run's rows
    (by default read from the JSON-lines file beside ``out``), shown as "CPU before"; the new rows
    are written there. Each child's address space is capped at
    ``memory_cap`` bytes, so a case too big for this machine fails on its own instead of waking
    the kernel's OOM killer for everyone.
    """
    fresh = []
    for family in families:
        for coll in collectives:
            for algo in algos:
                for n in sizes:
                    row = _run_child(GreedyCase(family, n, coll, algo), bounds, timeout, memory_cap)
                    fresh.append(row)
                    print(json.dumps(row), file=sys.stderr, flush=True)  # progress
    rerun = {_case_key(r) for r in fresh}
    rows = [r for r in extra_rows or [] if _case_key(r) not in rerun] + fresh
    rows.sort(key=lambda r: (FAMILIES.index(r["family"]), r["collective"], r["algo"], r["npus"]))
    if out:
        results = Path(out).with_suffix(".jsonl")
        if before is None:
            before = read_rows(results) if results.exists() else []
        write_text_atomic(out, render(rows, note, before))
        write_text_atomic(results, "".join(json.dumps(r) + "\n" for r in rows))
    return rows


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a JSON-lines results file."""
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]
