"""Per-node ingress and egress bounds: a node's links can only carry so many chunks by time T.

Link e can deliver its j-th chunk (j = 0, 1, ...) no earlier than a_e + j·o_e, where
a_e = α_e + s_e (s_e = b/B_e) is the first possible arrival and o_e the occupancy per transfer
(α_e + s_e by default, s_e with ``occupancy = "serialization"``). So a node that must receive k
chunks cannot be done before the k-th smallest element of the union of these progressions; the
same holds for the chunks a node must send, counted on its out-links (each must arrive somewhere
by the end). Port limits are ignored: fewer usable links only delay, so the bound stays valid.
"""
from __future__ import annotations

import math

import numpy as np

from optcoll.bounds.bound import Bound
from optcoll.bounds.demand import egress_counts, ingress_counts
from optcoll.collectives.collective import Collective
from optcoll.instances.instance import TimeModel
from optcoll.machines.machine import Machine
from optcoll.units import format_time

#: Counts round *up* by this fraction of a period, so float error can only lower the bound.
SLACK = 1e-9


def kth_arrival(k: int, first: np.ndarray, period: np.ndarray, count: np.ndarray) -> float:
    """Least T with Σ_g count_g · #{j >= 0 : first_g + j·period_g <= T} >= k.

    The answer is an arrival instant first_g + j·period_g, found exactly by an integer bisection
    on j per group of identical links (one vector step per halving), not a float search on T.
    """
    lo = np.zeros(first.size, dtype=np.int64)
    hi = -(-k // count) - 1  # that group alone delivers k chunks by its own (hi)-th arrival

    def delivered(t: np.ndarray) -> np.ndarray:
        j = np.floor((t[:, None] - first[None, :]) / period[None, :] + SLACK) + 1
        return (np.maximum(j, 0) * count[None, :]).sum(axis=1)

    while np.any(lo < hi):
        mid = (lo + hi) // 2
        enough = delivered(first + mid * period) >= k
        hi = np.where(enough, mid, hi)
        lo = np.where(enough, lo, mid + 1)
    return float(np.min(first + lo * period))


def _node_bound(machine: Machine, name: str, counts: np.ndarray, links: tuple[np.ndarray, ...],
                first: np.ndarray, period: np.ndarray, verb: str) -> Bound | None:
    cache: dict[tuple, float] = {}
    best, witness = -1.0, -1
    for v in np.flatnonzero(counts).tolist():
        k, ids = int(counts[v]), links[v]
        if ids.size == 0:
            best, witness = math.inf, v
            break
        rows, mult = np.unique(np.stack([first[ids], period[ids]], axis=1), axis=0, return_counts=True)
        key = (k, rows.tobytes(), mult.tobytes())
        if key not in cache:
            cache[key] = kth_arrival(k, rows[:, 0].copy(), rows[:, 1].copy(), mult)
        if cache[key] > best:
            best, witness = cache[key], v
    if witness < 0:
        return None
    k, ids, label = int(counts[witness]), links[witness], machine.label(witness)
    if ids.size == 0:
        return Bound(name, math.inf, f"{label} must {verb} {k} chunk(s) but has no such link")
    span = (f"{format_time(float(first[ids].min()))} for the first chunk, then one per "
            f"{format_time(float(period[ids].min()))}")
    direction = "in" if name == "ingress" else "out"
    return Bound(name, best, f"{label} must {verb} {k} chunk(s) over {ids.size} {direction}-link(s) "
                 f"(fastest: {span}); the last cannot arrive before {format_time(best)}")


def ingress_bound(machine: Machine, collective: Collective, model: TimeModel) -> Bound | None:
    """First arrival a_e and period o_e are the time model's copy delay and busy time."""
    timing = model.link_timing(machine, collective.chunk_bytes)
    return _node_bound(machine, "ingress", ingress_counts(collective, machine.num_nodes),
                       machine.in_links, timing.delay, timing.busy, "receive")


def egress_bound(machine: Machine, collective: Collective, model: TimeModel) -> Bound | None:
    timing = model.link_timing(machine, collective.chunk_bytes)
    return _node_bound(machine, "egress", egress_counts(collective, machine.num_nodes),
                       machine.out_links, timing.delay, timing.busy, "send")
