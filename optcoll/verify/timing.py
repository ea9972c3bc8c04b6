"""Checks that depend only on when transfers run, not on what they carry, vectorised.

Link overlap (timed), port limits (timed, and per round in the step model) and step capacity
(step model). Each returns the first
offending transfer in (start, transfer id) order as a ``Finding``. The message writers here scan
the columns for the transfers in the way, so both engines word a conflict identically.

Link overlap and port limits concern one link or one node at a time, so they run over ranges of
links or nodes holding at most ``batch`` transfers each: their sorts then need memory for a batch,
not for the whole schedule.
"""
from __future__ import annotations

import numpy as np

from optcoll.units import format_time
from optcoll.verify.problem import BATCH_TRANSFERS, Finding, Problem, ranges, within


def first_position(p: Problem, positions: np.ndarray) -> int | None:
    """The position among ``positions`` that comes first in (start, transfer id) order."""
    if positions.size == 0:
        return None
    return int(positions[np.lexsort((p.ids[positions], p.start[positions]))[0]])


def _before(p: Problem, mask: np.ndarray, j: int) -> np.ndarray:
    """Positions in ``mask`` that start before position j (ties by transfer id) and still run."""
    s, k = p.start[j], p.ids[j]
    earlier = (p.start < s) | ((p.start == s) & (p.ids < k))
    return np.flatnonzero(mask & earlier & (p.occ_end > s + p.eps))


# -- link overlap ------------------------------------------------------------------------------
def overlap_finding(p: Problem, j: int) -> Finding:
    blockers = _before(p, p.link == p.link[j], j)
    i = int(blockers[np.lexsort((p.ids[blockers], p.start[blockers]))[-1]])
    cost = "α + b/B" if p.model.occupancy == "link" else "b/B (serialization)"
    return p.finding("link-overlap", (
        f"{p.link_name(p.link[j])} is still busy with chunk {int(p.chunk[i])} (transfer "
        f"{int(p.ids[i])}, from {format_time(float(p.start[i]))} until {format_time(float(p.occ_end[i]))}) "
        f"when chunk {int(p.chunk[j])} starts on it {p.when(float(p.start[j]))} (transfer "
        f"{int(p.ids[j])}); a link carries one transfer at a time, each busy for {cost}"), j)


def link_overlap(p: Problem, batch: int = BATCH_TRANSFERS) -> Finding | None:
    """Only neighbours in start order can clash: if a transfer overlaps a later one, it overlaps
    the next one to start (that one starts no later), whatever the transfers' lengths."""
    clashes = [np.empty(0, dtype=np.int64)]
    for lo, hi in ranges(np.bincount(p.link, minlength=p.machine.num_links), batch):
        pos = within(p.link, lo, hi)
        order = pos[np.lexsort((p.ids[pos], p.start[pos], p.link[pos]))]
        link, start, end = p.link[order], p.start[order], p.occ_end[order]
        clashes.append(order[1:][(link[1:] == link[:-1]) & (end[:-1] > start[1:] + p.eps)])
    j = first_position(p, np.concatenate(clashes))
    return None if j is None else overlap_finding(p, j)


# -- port limits -------------------------------------------------------------------------------
_SIDES = {"send": ("src", "leaving", "send_ports", "send-ports"),
          "recv": ("dst", "entering", "recv_ports", "recv-ports")}


def ports_finding(p: Problem, j: int, side: str) -> Finding:
    column, direction, option, kind = _SIDES[side]
    nodes = getattr(p, column)
    v = int(nodes[j])
    busy = _before(p, nodes == v, j)
    busy = busy[np.lexsort((p.ids[busy], p.occ_end[busy]))]
    limit = getattr(p.model, option)
    shown = "; ".join(f"chunk {int(p.chunk[i])} on {p.link_name(p.link[i])} until "
                      f"{format_time(float(p.occ_end[i]))}" for i in busy[:3])
    more = f"; and {busy.size - 3} more" if busy.size > 3 else ""
    return p.finding(kind, (
        f"{p.node(v)} already has {busy.size} transfer(s) {direction} it in flight when "
        f"{p.transfer_text(j)} starts, but {option} = {limit}: {shown}{more}"), j, node=v)


def port_overflow(p: Problem, side: str, batch: int = BATCH_TRANSFERS) -> Finding | None:
    """Transfers in flight at each start, per NPU, by counting starts and releases.

    In flight at j = (earlier starts at the node, j included) − (releases at or before j's start,
    within tolerance). A release that early belongs to a transfer that started before j, because
    an occupancy lasts at least 2·eps. Switches have no port limit.
    """
    column, _, option, _ = _SIDES[side]
    limit = getattr(p.model, option)
    if limit is None:
        return None
    nodes = getattr(p, column)
    npus = p.machine.num_npus
    over = [np.empty(0, dtype=np.int64)]
    for lo, hi in ranges(np.bincount(nodes, minlength=npus)[:npus], batch):
        pos = within(nodes, lo, hi)
        over.append(pos[_in_flight(nodes[pos], p.start[pos], p.occ_end[pos], p.ids[pos], p.eps) > limit])
    j = first_position(p, np.concatenate(over))
    return None if j is None else ports_finding(p, j, side)


def _in_flight(node: np.ndarray, start: np.ndarray, end: np.ndarray, ids: np.ndarray, eps: float
               ) -> np.ndarray:
    """For each transfer, how many transfers of its node are in flight when it starts (itself included)."""
    m = node.size
    base = np.concatenate([[0], np.cumsum(np.bincount(node))])
    order = np.lexsort((ids, start, node))
    started = np.empty(m, dtype=np.int64)
    started[order] = np.arange(m) - base[node[order]] + 1
    # Releases and queries in one sort per node: a release equal to a query sorts first.
    values = np.concatenate([end, start + eps])
    is_query = np.concatenate([np.zeros(m, dtype=np.int8), np.ones(m, dtype=np.int8)])
    owner = np.concatenate([node, node])
    merged = np.lexsort((is_query, values, owner))
    releases = np.cumsum(is_query[merged] == 0)
    ended = np.empty(m, dtype=np.int64)
    query_at = merged[is_query[merged] == 1] - m
    ended[query_at] = releases[is_query[merged] == 1] - base[node[query_at]]
    return started - ended


# -- step capacity -----------------------------------------------------------------------------
def step_capacity(p: Problem, weight: np.ndarray, rounds: np.ndarray) -> Finding | None:
    """At most w_e·r_s transfers on link e in step s; the (cap+1)-th by transfer id is reported."""
    step = p.start.astype(np.int64)
    order = np.lexsort((p.ids, step, p.link))
    key = p.link[order] * (rounds.size + 1) + step[order]
    group_start = np.concatenate([[True], key[1:] != key[:-1]])
    first_of_group = np.maximum.accumulate(np.where(group_start, np.arange(order.size), 0))
    rank = np.arange(order.size) - first_of_group
    cap = weight[p.link[order]] * rounds[step[order] - 1]
    j = first_position(p, order[rank >= cap])
    if j is None:
        return None
    e, s = int(p.link[j]), int(step[j])
    count = int(np.count_nonzero((p.link == e) & (step == s)))
    return p.finding("step-capacity", (
        f"{p.link_name(e)} carries {count} transfers in step {s}, but its capacity is "
        f"{int(weight[e] * rounds[s - 1])} (relative bandwidth {int(weight[e])} × {int(rounds[s - 1])} "
        f"round(s)); chunk {int(p.chunk[j])} (transfer {int(p.ids[j])}) is one too many"), j)


def step_ports(p: Problem, weight: np.ndarray, rounds: np.ndarray, side: str) -> Finding | None:
    """Port limits per round (docs/model.md §5 with ``send_ports``/``recv_ports``): a port carries one
    transfer at a time and a transfer holds it for b/B_e = 1/w_e of a round, so the transfers of
    an NPU's side in step s need Σ 1/w_e ≤ P·r_s; counted in units of 1/lcm(w). Switches have no
    port limit. The first transfer (by id) that overflows is reported."""
    column, direction, option, kind = _SIDES[side]
    limit = getattr(p.model, option)
    if limit is None or p.start.size == 0:
        return None
    nodes = getattr(p, column)
    npu = nodes < p.machine.num_npus
    lcm = int(np.lcm.reduce(np.unique(weight).astype(np.int64))) if weight.size else 1
    step = p.start.astype(np.int64)
    order = np.flatnonzero(npu)[np.lexsort((p.ids[npu], step[npu], nodes[npu]))]
    key = nodes[order] * (rounds.size + 1) + step[order]
    cost = lcm // weight[p.link[order]]
    used = np.cumsum(cost)
    group_start = np.concatenate([[True], key[1:] != key[:-1]]) if order.size else np.zeros(0, dtype=bool)
    before = np.maximum.accumulate(np.where(group_start, used - cost, 0))
    j = first_position(p, order[used - before > limit * lcm * rounds[step[order] - 1]])
    if j is None:
        return None
    v, s = int(nodes[j]), int(step[j])
    mine = np.flatnonzero((nodes == v) & (step == s))
    return p.finding(kind, (
        f"{p.node(v)} has {mine.size} transfer(s) {direction} it in step {s}, but {option} = {limit} "
        f"allows {limit} at a time over {int(rounds[s - 1])} round(s) (a transfer on a link of relative "
        f"bandwidth w holds a port for 1/w of a round); {p.transfer_text(j)} is one too many"), j, node=v)
