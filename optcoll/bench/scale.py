"""Benchmark: the yardstick at the producers' scale, 4096-NPU 2D-torus AllReduce and AlltoAll.

Per case, in a process of its own (peak memory is per process; cases run one after another so
two never share the machine's memory): synthesis with tacos+ (CPU, wall, peak RSS), the schedule
stored in compact form (seconds, bytes) and read back, then the shared verifier on what was read
(CPU, wall, peak RSS, the engine that decided). An instance whose every schedule cannot fit is
refused up front (``producers.size``) and the report says the size it would need.

Run: ``optcoll bench core --scale`` (all cases), or one case:
``python -m optcoll.bench.scale allreduce 4096``.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from optcoll.bench.greedy import SIZE, reset_peak, status_bytes, machine_for

CASES = (("allreduce", 4096), ("alltoall", 4096))
ALGO = "tacos+"


def measure(collective: str, npus: int) -> dict[str, Any]:
    """One case in this process (meant to be a fresh one: ``run_case``)."""
    from optcoll.collectives.builtins import make_collective
    from optcoll.instances.instance import Instance
    from optcoll.producers.registry import get_synthesizer
    from optcoll.producers.size import TooLarge, require_fits, transfers_floor
    from optcoll.schedules.files import load_schedule, save_schedule
    from optcoll.verify import verify

    machine = machine_for("torus2d", npus)
    inst = Instance(f"{machine.name}-{collective}", machine, make_collective(collective, range(npus), SIZE, 1))
    out: dict[str, Any] = {"collective": collective, "npus": npus, "machine": machine.name, "algo": ALGO,
                           "floor_transfers": transfers_floor(inst)}
    try:
        require_fits(inst)
    except TooLarge as refused:
        return {**out, "refused": refused.one_line()}
    small = machine_for("torus2d", 16)  # loads (or compiles) the kernels: a per-process cost
    warm_inst = Instance("warm-up", small, make_collective(collective, range(16), SIZE, 1))
    from optcoll.verify.verifier import verify_with

    verify_with(small, warm_inst.collective, get_synthesizer(ALGO)(warm_inst, 0), inst.model, "compiled")
    reset_peak()
    wall, cpu = time.perf_counter(), time.process_time()
    schedule = get_synthesizer(ALGO)(inst, 0)
    out.update(transfers=len(schedule), synth_cpu_s=time.process_time() - cpu,
               synth_wall_s=time.perf_counter() - wall, synth_peak_bytes=status_bytes("VmHWM"))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "schedule.npz"
        wall = time.perf_counter()
        save_schedule(path, schedule, machine)
        out.update(save_s=time.perf_counter() - wall, file_bytes=path.stat().st_size)
        del schedule
        wall = time.perf_counter()
        schedule = load_schedule(path, machine)
        out["load_s"] = time.perf_counter() - wall
    reset_peak()
    out["verify_start_bytes"] = status_bytes("VmRSS")
    wall, cpu = time.perf_counter(), time.process_time()
    result = verify(machine, inst.collective, schedule, inst.model)
    out.update(verify_cpu_s=time.process_time() - cpu, verify_wall_s=time.perf_counter() - wall,
               verify_peak_bytes=status_bytes("VmHWM"), valid=result.valid, engine=result.path,
               time_s=result.time if result.valid else None,
               violation=None if result.valid else result.violation.message)
    return out


def run_case(collective: str, npus: int, timeout: float | None = None) -> dict[str, Any]:
    """``measure`` in a child process, which may read a schedule of any size back (the caps on
    input are raised for it: it reads only the file it wrote)."""
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p),
           "OPTCOLL_MAX_TRANSFERS": str(2**40), "OPTCOLL_MAX_INPUT_BYTES": str(2**40)}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "optcoll.bench.scale", collective, str(npus)],
                          capture_output=True, text=True, timeout=timeout, env=env)
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        return {"collective": collective, "npus": npus, "error": reason}
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "process_wall_s": time.perf_counter() - start,
            "load_average": os.getloadavg()[0]}


if __name__ == "__main__":
    print(json.dumps(measure(sys.argv[1], int(sys.argv[2]))))
