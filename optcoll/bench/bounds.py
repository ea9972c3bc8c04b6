"""A figure, not a test: how long the exact AllGather cut takes on an n×n torus."""
from __future__ import annotations

import time
from typing import Any

from optcoll.bounds.cuts import worst_cut
from optcoll.machines.generators import torus

GIB = 2.0**30


def bench_cut(n_side: int = 32, bandwidth: float = 50 * GIB, latency: float = 0.5e-6) -> dict[str, Any]:
    """Exact ForestColl cut of a uniform bidirectional n_side × n_side torus: wall time,
    Dinkelbach iterations, max-flows run, and the resulting 1 GiB AllGather bandwidth bound."""
    machine = torus([n_side, n_side], bandwidth, latency)
    start = time.perf_counter()
    cut = worst_cut(machine, list(machine.npus))
    elapsed = time.perf_counter() - start
    n = machine.num_npus
    return {"npus": n, "links": machine.num_links, "seconds": elapsed, "iterations": cut.iterations,
            "max_flows": cut.max_flows, "exact": cut.exact, "ratio": cut.ratio,
            "nodes_inside": len(cut.inside), "bandwidth_out": cut.bandwidth_out,
            "allgather_1GiB_bound_s": GIB / n * cut.ratio}
