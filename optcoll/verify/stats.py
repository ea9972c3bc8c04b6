"""Per-link and per-node statistics of the well-formed transfers, in seconds and bytes."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from optcoll.verify.problem import Problem
from optcoll.verify.result import LinkStats, RankStats


@dataclass(frozen=True, eq=False)
class Statistics:
    starts: np.ndarray  # seconds per schedule row (NaN when malformed)
    arrivals: np.ndarray
    makespan: float
    links: tuple[LinkStats, ...]
    ranks: tuple[RankStats, ...]
    redundant: int


def _per_row(p: Problem, values: np.ndarray) -> np.ndarray:
    """Per-transfer values by schedule row, NaN for a malformed row; read-only.

    When every row is well formed they are ``values`` themselves: no copy of a column that a
    33.5 M-transfer schedule would pay 268 MB for.
    """
    if p.ids.size == len(p.schedule):  # ids is then 0..rows-1
        out = values.view()
    else:
        out = np.full(len(p.schedule), np.nan)
        out[p.ids] = values
    out.flags.writeable = False
    return out


def statistics(p: Problem) -> Statistics:
    m, b = p.machine, p.collective.chunk_bytes
    start_s, arrive_s = np.asarray(p.seconds(p.start), float), np.asarray(p.seconds(p.arrive), float)
    starts, arrivals = _per_row(p, start_s), _per_row(p, arrive_s)
    makespan = float(arrive_s.max(initial=0.0))

    L, V = m.num_links, m.num_nodes
    # Busy time: the occupancy (timed) or the bandwidth share b/B (step model has no occupancy).
    busy_each = (b / m.link_bandwidth[p.link] if p.step_model
                 else np.asarray(p.occ_end - p.start, dtype=float))
    count = np.bincount(p.link, minlength=L)
    busy = np.bincount(p.link, weights=busy_each, minlength=L)
    util = busy / makespan if makespan > 0 else np.zeros(L)
    size = None if p.collective.equal_chunks else p.collective.chunk_sizes[p.chunk]
    moved = count * b if size is None else np.bincount(p.link, weights=size, minlength=L)
    links = tuple(LinkStats(e, int(m.link_src[e]), int(m.link_dst[e]), int(count[e]),
                            float(moved[e]), float(busy[e]), float(util[e]))
                  for e in range(L))

    sent = np.bincount(p.src, minlength=V)
    received = np.bincount(p.dst, minlength=V)
    sent_bytes = sent * b if size is None else np.bincount(p.src, weights=size, minlength=V)
    received_bytes = received * b if size is None else np.bincount(p.dst, weights=size, minlength=V)
    first, last = np.full(V, np.inf), np.full(V, -np.inf)
    for nodes in (p.src, p.dst):
        np.minimum.at(first, nodes, start_s)
        np.maximum.at(last, nodes, arrive_s)
    ranks = tuple(RankStats(v, m.label(v), float(sent_bytes[v]), float(received_bytes[v]), int(sent[v]),
                            int(received[v]), float(first[v]) if np.isfinite(first[v]) else None,
                            float(last[v]) if np.isfinite(last[v]) else None)
                  for v in range(V))
    return Statistics(starts, arrivals, makespan, links, ranks, _redundant(p))


def _redundant(p: Problem) -> int:
    """Deliveries to an NPU of a chunk it already held (non-combining collectives only)."""
    if p.collective.combining:
        return 0
    to_npu = p.dst < p.machine.num_npus
    width = p.num_nodes
    keys = p.chunk[to_npu]  # a fresh array, so the key is built and sorted in place
    keys *= width
    keys += p.dst[to_npu]
    keys.sort()
    distinct = keys[np.concatenate([[True], keys[1:] != keys[:-1]])] if keys.size else keys
    pre_c, pre_v = p.collective.pre.pairs()
    fresh = np.count_nonzero(~np.isin(distinct, pre_c * width + pre_v))
    return int(keys.size - fresh)
