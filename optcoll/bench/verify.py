"""Benchmark: verify a ~1M-transfer AllGather on a 32×32 2D torus (the acceptance figure is ≤ 5 s).

The schedule is dimension-ordered: a unidirectional ring along x gathers each row, then a
unidirectional ring along y passes whole rows on, n chunks back to back per step. With n = n_side
it has n²·(n²−1) transfers and takes exactly (n²−1)·τ, which the benchmark checks.

Run: ``optcoll bench core --side N``.
"""
from __future__ import annotations

import resource
import time
import tracemalloc
from typing import Any

import numpy as np

from optcoll.collectives.builtins import make_collective
from optcoll.machines.generators import torus
from optcoll.machines.machine import Machine
from optcoll.schedules.schedule import Schedule, from_arrays
from optcoll.verify.verifier import verify

BANDWIDTH = 50 * 2.0**30  # 50 GiB/s per link and direction
LATENCY = 0.5e-6
SIZE = 2.0**30  # 1 GiB AllGather output


def direction_links(machine: Machine, n: int) -> np.ndarray:
    """links[v, d]: the link leaving node v = y·n + x towards +x (d = 0) and +y (d = 1)."""
    v = np.arange(n * n)
    x, y = v % n, v // n
    ahead = ((y * n + (x + 1) % n), (((y + 1) % n) * n + x))
    return np.array([[machine.links_between(int(u), int(w))[0] for w in (ahead[0][u], ahead[1][u])]
                     for u in v.tolist()], dtype=np.int64)


def dimension_ordered_allgather(machine: Machine, n: int, tau: float) -> Schedule:
    links = direction_links(machine, n)
    v = np.arange(n * n)
    x, y = v % n, v // n
    k = np.arange(n - 1)[:, None]
    # Ring along x: in step k node (x, y) forwards the chunk that started at (x−k, y).
    x_chunk = (y * n + (x - k) % n).ravel()
    x_link = np.broadcast_to(links[:, 0], (n - 1, n * n)).ravel()
    x_start = np.broadcast_to(k * tau, (n - 1, n * n)).ravel()
    # Ring along y: in step k node (x, y) forwards row y−k, chunk by chunk (j = 0..n−1).
    kk, j, vv = np.meshgrid(np.arange(n - 1), np.arange(n), v, indexing="ij")
    y_chunk = (((vv // n - kk) % n) * n + j).ravel()
    y_link = links[vv, 1].ravel()
    y_start = ((n - 1) + kk * n + j).ravel() * tau
    return from_arrays(np.concatenate([x_chunk, y_chunk]), np.concatenate([x_link, y_link]),
                       np.concatenate([x_start, y_start]), producer="dimension-ordered rings")


def bench_verify(n_side: int = 32, trace_memory: bool = True) -> dict[str, Any]:
    """Builds the instance, times ``verify`` once, and (optionally) once more under tracemalloc."""
    t0 = time.perf_counter()
    machine = torus([n_side, n_side], BANDWIDTH, LATENCY)
    npus = n_side * n_side
    coll = make_collective("allgather", range(npus), SIZE)
    tau = LATENCY + coll.chunk_bytes / BANDWIDTH
    schedule = dimension_ordered_allgather(machine, n_side, tau)
    build = time.perf_counter() - t0
    t0 = time.perf_counter()
    result = verify(machine, coll, schedule)
    seconds = time.perf_counter() - t0
    figures: dict[str, Any] = {
        "npus": npus, "links": machine.num_links, "transfers": len(schedule), "valid": result.valid,
        "path": result.path, "time": result.time, "expected_time": (npus - 1) * tau,
        "verify_seconds": seconds, "build_seconds": build,
        "max_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }
    if trace_memory:
        tracemalloc.start()
        verify(machine, coll, schedule)
        figures["verify_peak_traced_bytes"] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return figures
