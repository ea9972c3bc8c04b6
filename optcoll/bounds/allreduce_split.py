"""The AllReduce cut bound split on how often chunks cross (DESIGN.md section 6, lower bounds of
the timed model; an extension of ``allreduce-cut`` in ``optcoll.bounds.allreduce``).

Assumptions: no in-network reduction and no switch multicast (a plain switch forwards each
arrival once); whole-chunk transfers, store and forward (the timed model); γ is ignored, which
only lowers the bound, so it holds with γ too. Port limits are ignored likewise.

Take a cut: node set A holding n_A ≥ 1 ranks, B the rest holding n_B ≥ 1 ranks, and the crossing
links A→B; K chunks, each contributed by every rank and needed by every rank. Take any valid
schedule finishing at T and drop every transfer that delivers after T and every arrival at a
plain switch it never forwards (the newest ones in its FIFO): it stays valid and finishes at T, so
every crossing delivers by T and, into a switch, goes on to an NPU (``way``: the least delay from
the crossing's head to an NPU). A's contributions to chunk c reach B only over a crossing, so each
chunk crosses at least once. Let X be the number of crossings.

* X ≥ K + 1: with each crossing link's j-th transfer no earlier than its first possible start +
  j·occupancy, T ≥ the (K+1)-th smallest arrival + way over the crossing links.
* X = K: each chunk crosses exactly once, so that crossing carries every A contribution of its
  chunk (none reached B otherwise). *Preparation*: those n_A contributions never left A before,
  so the value sent was formed by n_A − 1 reduce deliveries over links inside A into A's NPUs,
  all delivered before the crossing starts. Order the used crossing links by the start of their
  first transfer: the j-th first start needs the j·(n_A − 1) deliveries of j distinct chunks, so
  it is no earlier than R(j), the j·(n_A − 1)-th possible arrival over those links (only the K
  first used links matter: the K-th instant below takes at most one per link). The used link
  of rank j carries its i-th transfer from R(j) + i·o on (o, the least occupancy of a crossing
  link), each arriving at an NPU h at least D later (the least delay + way of a crossing link):
  the K-th of those instants bounds the last crossing's arrival at its h. *Tail*: that chunk's A
  contributions exist in B only at h, and a plain switch forwards each arrival once, so the other
  n_B − 1 ranks of B learn them by a broadcast from h in which every new holder gets one transfer
  sent by an NPU that already holds them. A holder's out-link ℓ sends every o_ℓ, reaching an NPU
  L_ℓ later (its delay + the way on); letting every holder send on all its out-links to a new NPU
  as early as possible counts at least as many holders at every instant as any real broadcast
  (on a plain switch fabric the holders grow like Fibonacci numbers), so the (n_B − 1)-th new
  holder of that process bounds the tail. Every holder gets the out-links of B's NPUs when they
  all have the same ones, else each its i-th least occupancy with the least L of any.

So T ≥ min(case X ≥ K + 1, case X = K), taken per cut of the ``allreduce-cut`` family.
"""
from __future__ import annotations

import heapq
import math

import numpy as np

from optcoll.bounds.nodes import kth_arrival
from optcoll.machines.machine import Machine
from optcoll.units import format_time


def kth_instant(count: int, first: np.ndarray, period: np.ndarray) -> float:
    """The ``count``-th smallest of first_e + j·period_e (j ≥ 0) over links e (inf if none)."""
    live = np.isfinite(first)
    if count <= 0:
        return 0.0
    if not live.any():
        return math.inf
    rows, mult = np.unique(np.stack([first[live], period[live]], axis=1), axis=0, return_counts=True)
    return kth_arrival(count, rows[:, 0].copy(), rows[:, 1].copy(), mult)


def broadcast_tail(ports: list[tuple[float, float]], receivers: int) -> float:
    """When the ``receivers``-th new holder appears if every holder sends on each of ``ports``
    (occupancy, reach) as early as possible, each send making a new holder (module docstring)."""
    if receivers <= 0:
        return 0.0
    events = [(reach, i) for i, (_, reach) in enumerate(ports) if math.isfinite(reach)]
    heapq.heapify(events)
    for _ in range(receivers):
        if not events:
            return math.inf
        t, i = heapq.heappop(events)
        occupancy, reach = ports[i]
        heapq.heappush(events, (t + occupancy, i))
        for j, (_, r) in enumerate(ports):
            if math.isfinite(r):
                heapq.heappush(events, (t + r, j))
    return t


def _holder_ports(machine: Machine, side: np.ndarray, delay: np.ndarray, busy: np.ndarray,
                  way: np.ndarray) -> list[tuple[float, float]]:
    """Out-links every holder in ``side`` gets (module docstring): (occupancy, reach) pairs."""
    npus = np.flatnonzero(side[: machine.num_npus])
    inside = side[machine.link_src] & side[machine.link_dst]
    reach = delay + way[machine.link_dst]
    per_npu = [sorted(zip(busy[inside & (machine.link_src == v)].tolist(),
                          reach[inside & (machine.link_src == v)].tolist())) for v in npus]
    if all(p == per_npu[0] for p in per_npu):
        return per_npu[0]
    width = max(len(p) for p in per_npu)
    least = min((r for p in per_npu for _, r in p), default=math.inf)
    return [(min(sorted(o for o, _ in p)[i] for p in per_npu if len(p) > i), least) for i in range(width)]


def split_cut_value(machine: Machine, tail_side: np.ndarray, is_member: np.ndarray, k: int,
                    from_ranks: np.ndarray, to_npus: np.ndarray, delay: np.ndarray,
                    busy: np.ndarray, floor: float = -math.inf) -> tuple[float, str]:
    """The bound of the module docstring for crossings out of ``tail_side``, and both cases'
    figures. ``from_ranks``/``to_npus``: per node, the least delay from a rank / to an NPU
    (over the whole network, which only shortens the ways). When the case of a chunk crossing
    twice already gives at most ``floor`` that is returned alone (the bound cannot exceed it)."""
    cross = np.flatnonzero(tail_side[machine.link_src] & ~tail_side[machine.link_dst])
    if cross.size == 0:
        return math.inf, "no crossing link"
    tails, heads = machine.link_src[cross], machine.link_dst[cross]
    way = to_npus[heads]
    extra = kth_instant(k + 1, from_ranks[tails] + delay[cross] + way, busy[cross])
    if extra <= floor:
        return extra, ""
    n_a = int(np.count_nonzero(is_member & tail_side))
    n_b = int(np.count_nonzero(is_member & ~tail_side))
    npu = np.arange(machine.num_nodes) < machine.num_npus
    merge = np.flatnonzero(tail_side[machine.link_src] & tail_side[machine.link_dst] & npu[machine.link_dst])
    merge_first = from_ranks[machine.link_src[merge]] + delay[merge]
    start = float(from_ranks[tails].min())
    ready = np.array([max(start, kth_instant(j * (n_a - 1), merge_first, busy[merge]))
                      for j in range(1, min(cross.size, k) + 1)])
    least_way = float((delay[cross] + way).min())
    crossed = kth_instant(k, ready + least_way, np.full(ready.size, float(busy[cross].min())))
    ports = _holder_ports(machine, ~tail_side, delay, busy, to_npus)
    once = crossed + broadcast_tail(ports, n_b - 1)
    return min(extra, once), (
        f"if some chunk crosses twice, the {k + 1}-th crossing reaches an NPU no earlier than "
        f"{format_time(extra)}; if none does, each crossing carries its chunk's full partial of the "
        f"{n_a} rank(s) on the sending side, the last lands at one NPU no earlier than "
        f"{format_time(crossed)} and reaches the other {n_b - 1} rank(s) of its side by a "
        f"broadcast of at least {format_time(once - crossed)}")
