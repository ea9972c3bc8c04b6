"""Speed of ``optcoll expect`` over its default 24 sizes (1 KiB–8 GiB), issue 32's targets: the
8-GPU dgxh100 in ≤ 10 s of CPU, a 128-GPU cluster (dgxh100-rail-16x8) in ≤ 60 s, per collective.

Each case is the command itself in a fresh interpreter (``isolate.run_child``), so its CPU time
(the child's own, from the kernel) includes start-up, numba's cached kernels and the physical
bound, as a user's run does. The load average is written beside it: other jobs on the machine
slow the same run down by up to half.
"""
from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence

from optcoll.bench.file import Section
from optcoll.bench.isolate import ROOT, run_child
from optcoll.machines.catalog import load_machine

#: CPU seconds issue 32 allows, by the machine's GPU count.
TARGETS = ((8, 10.0), (128, 60.0))
SIZES = "1KiB:8GiB"


def target(npus: int | None) -> float | None:
    return None if npus is None else next((seconds for n, seconds in TARGETS if npus <= n), None)


def run_case(machine: str, kind: str, timeout: float = 1800.0) -> dict:
    """One ``optcoll expect MACHINE --collective KIND --json`` in its own process: its CPU, wall,
    peak memory, the load around it, and the rows it printed (or the error)."""
    load = os.getloadavg()[0]
    child = run_child(["-m", "optcoll", "expect", machine, "--collective", kind, "--sizes", SIZES, "--json"],
                      timeout=timeout, cwd=ROOT)
    out = {"machine": machine, "collective": kind, "npus": None, "cpu_s": child.cpu, "wall_s": child.wall,
           "peak_bytes": child.peak_bytes, "load_start": load, "load_end": os.getloadavg()[0]}
    if child.code == 0 and not child.timed_out:
        out["npus"] = load_machine(machine).num_npus
    if child.code != 0 or child.timed_out:
        out["error"] = "timed out" if child.timed_out else child.last_error_line()
    else:
        out["sizes"] = len(json.loads(child.stdout))
    return out


def section(rows: Sequence[dict]) -> Section:
    from optcoll.units import format_size

    body = []
    for r in rows:
        goal = target(r["npus"])
        body.append([r["machine"], "-" if r["npus"] is None else r["npus"], r["collective"], r.get("sizes", r.get("error", "")),
                     f"{r['cpu_s']:.1f}", "-" if goal is None else f"{goal:g}", f"{r['wall_s']:.1f}",
                     format_size(r["peak_bytes"]), f"{r['load_start']:.1f} -> {r['load_end']:.1f}"])
    return ("optcoll expect: CPU over the default sizes",
            ["machine", "GPUs", "collective", "sizes", "CPU (s)", "target (s)", "wall (s)", "peak memory",
             "1-min load"], body,
            f"`optcoll expect MACHINE --collective KIND --sizes {SIZES} --json`, each in its own process "
            "(start-up and numba's cached kernels included). Targets of issue 32: 10 s for an 8-GPU machine, "
            "60 s for a 128-GPU cluster. The load average is the machine's (other jobs share its cores).")


def run_bench(machines: Sequence[str], kinds: Sequence[str], say: Callable[[str], None]) -> list[dict]:
    rows = []
    for machine in machines:
        for kind in kinds:
            rows.append(run_case(machine, kind))
            say(json.dumps(rows[-1]))
    return rows
