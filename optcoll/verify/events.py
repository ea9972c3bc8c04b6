"""The event engine: any collective, any switch; the reference the vectorised engine is tested against.

Starts are taken in (start, transfer id) order; before a start at t every delivery at or before
t (within tolerance) is applied, so a chunk arriving at exactly t can be forwarded at t.
Deliveries themselves are ordered by (arrival, transfer id).

Values. For a combining collective a value is the set of contributors it sums, a Python int
used as a bitset over node ids; every precondition holder starts with {itself}. A copy delivers
the sender's value at the start of the transfer and replaces the receiver's; a reduce adds it to
the receiver's and must not overlap it (double count). With ``model.combining = "reduce-only"``
(SCCL's rules) a copy may not replace a partial a node already holds (overwrite). For a
non-combining collective every value is the chunk itself (the int 1). Node roles:

* buffer (NPUs, members or not; multicast switches; reduction switches with multicast) keeps
  one value per chunk and may send it any number of times;
* plain switch forwards each arrival once (docs/model.md, "Switches: forwarding simultaneous
  arrivals"): a send that names its arrival (``via``) takes that one; the others take the oldest
  arrivals no send names, resolved together with every such send of the chunk at the same
  instant, and must find one value there (``ambiguous-forward`` otherwise), so the verdict never
  depends on the order the transfers are listed in;
* reduction switch without multicast keeps a buffer but may send a chunk only as many times as
  it has received it.

Timed problems also check link occupancy and port limits here, independently of ``timing.py``,
so the two implementations check each other in the tests.

Large problems run in batches. Values of different chunks never meet: causality, switch FIFOs
and credits, contributions, ambiguous arrivals and the postcondition are all per chunk, and only
link occupancy and port limits couple chunks. So above ``batch`` transfers (plus pre/post
pairs) the chunks are simulated in consecutive ranges, each on its own columns and dropped after,
and occupancy and ports are checked once by ``timing.py`` over the whole problem. Each range
meets its events in the global order restricted to its chunks, so the first violation overall is
the one among theirs (and timing's) that one run over all chunks would meet first
(``_met_before``): the verdict and its words are the same, only memory changes.
"""
from __future__ import annotations

import heapq
import math
from typing import NamedTuple

import numpy as np

from optcoll.collectives.collective import ChunkSets
from optcoll.machines.machine import Switch
from optcoll.schedules.schedule import COPY, REDUCE
from optcoll.verify import findings
from optcoll.verify.problem import BATCH_TRANSFERS, Finding, Outcome, Problem, ranges, within
from optcoll.verify.timing import link_overlap, overlap_finding, port_overflow, ports_finding

BUFFER, FIFO, CREDIT = 0, 1, 2


def _role(switch: Switch) -> int:
    if switch.multicast:
        return BUFFER
    return CREDIT if switch.reduce else FIFO


def _pairs(sets: ChunkSets, lo: int, hi: int) -> list[tuple[int, int]]:
    """(chunk, node) memberships of chunks lo..hi-1, by chunk."""
    counts = np.diff(sets.indptr[lo:hi + 1])
    nodes = sets.nodes[int(sets.indptr[lo]):int(sets.indptr[hi])]
    return list(zip(np.repeat(np.arange(lo, hi), counts).tolist(), nodes.tolist()))


class _State:
    """Who holds what for chunks lo..hi-1, per key = chunk · num_nodes + node."""

    def __init__(self, p: Problem, lo: int, hi: int):
        m, width = p.machine, p.num_nodes
        self.width = width
        self.combining = p.collective.combining
        self.reduce_only = self.combining and p.model.combining == "reduce-only"
        self.role = [BUFFER] * m.num_npus + [_role(s) for s in m.switches]
        self.reduce_ok = [True] * m.num_npus + [s.reduce for s in m.switches]
        self.full = dict.fromkeys(range(lo, hi), 0)
        self.value: dict[int, int] = {}
        for c, v in _pairs(p.collective.pre, lo, hi):
            mine = 1 << v if self.combining else 1
            self.value[c * width + v] = mine
            self.full[c] |= mine
        self.fifo: dict[int, list[tuple[float, int]]] = {}  # key -> (arrival, value), oldest first
        self.credit: dict[int, int] = {}
        self.last: dict[int, tuple[float, int, int, int]] = {}  # key -> (arrival, op, value, pos)
        self.post = _pairs(p.collective.post, lo, hi)
        self.since: dict[int, float | None] = {
            c * width + v: 0.0 if self.value.get(c * width + v) == self.full[c] else None
            for c, v in self.post}


class _Part(NamedTuple):
    """What one range of chunks comes to: its first violation, else its postcondition."""

    finding: Finding | None
    failing: list[tuple[int, int]]  # (chunk, node) pairs the postcondition misses
    first_has: list[int] | None  # contributions the first failing pair holds (None: nothing, or not combining)
    time: float  # when the postcondition holds for these chunks


def run(p: Problem, batch: int = BATCH_TRANSFERS) -> Outcome:
    """One pass over all chunks, or (above ``batch``) one per range of chunks plus ``timing``."""
    pre, post = p.collective.pre, p.collective.post
    weights = np.bincount(p.chunk, minlength=pre.num_chunks) + pre.counts() + post.counts()
    spans = ranges(weights, batch)
    if len(spans) <= 1:
        parts, shared = [_simulate(p, 0, pre.num_chunks, check_timing=True)], []
    else:
        parts = [_simulate(p.restrict(within(p.chunk, lo, hi)), lo, hi, check_timing=False)
                 for lo, hi in spans]
        shared = [] if p.step_model else [link_overlap(p, batch), port_overflow(p, "send", batch),
                                          port_overflow(p, "recv", batch)]
    first = None
    for found in [part.finding for part in parts] + shared:
        if found is not None and (first is None or _met_before(found, first, p.eps)):
            first = found
    if first is not None:
        return Outcome(first, math.inf)
    failing = [pair for part in parts for pair in part.failing]
    if failing:
        first_has = next(part.first_has for part in parts if part.failing)
        chunks, nodes = (np.array(col, dtype=np.int64) for col in zip(*failing))
        return Outcome(findings.unmet(p, chunks, nodes, first_has), math.inf)
    return Outcome(None, max((part.time for part in parts), default=0.0))


#: Violations met when a transfer is delivered; every other engine violation is met at a start.
_ON_DELIVERY = frozenset({"double-count", "ambiguous-arrival", "overwrite"})


def _met_before(a: Finding, b: Finding, eps: float) -> bool:
    """Whether the engine meets a before b: starts in (start, id) order, each after every delivery
    up to its start + eps, deliveries in (arrival, id) order; checks on one start by priority."""
    a_delivery, b_delivery = a.violation.kind in _ON_DELIVERY, b.violation.kind in _ON_DELIVERY
    if a_delivery == b_delivery:
        return (a.time, a.transfer, a.priority) < (b.time, b.transfer, b.priority)
    return a.time <= b.time + eps if a_delivery else not b.time <= a.time + eps


def _simulate(p: Problem, lo: int, hi: int, check_timing: bool) -> _Part:
    """Runs the transfers of ``p``, which must be all those of chunks lo..hi-1.

    ``check_timing``: also check link occupancy and port limits (timed), when ``p`` is everything.
    """
    st = _State(p, lo, hi)
    width, eps, combining = st.width, p.eps, st.combining
    value, fifo, credit, last, since = st.value, st.fifo, st.credit, st.last, st.since
    role, reduce_ok, full, reduce_only = st.role, st.reduce_ok, st.full, st.reduce_only
    chunk, src, dst, op = p.chunk.tolist(), p.src.tolist(), p.dst.tolist(), p.op.tolist()
    start, arrive = p.start.tolist(), p.arrive.tolist()
    timed = check_timing and not p.step_model
    link, occ = (p.link.tolist(), p.occ_end.tolist()) if timed else ([], [])
    busy = [-math.inf] * p.machine.num_links
    limits = {"send": p.model.send_ports, "recv": p.model.recv_ports}
    heaps = {side: [[] for _ in range(p.machine.num_npus)] for side, lim in limits.items() if lim}
    num_npus = p.machine.num_npus
    sent: dict[int, int] = {}
    ids = p.ids.tolist()
    via = p.via.tolist() if p.via is not None else [-1] * len(chunk)
    reserved = {r for r in via if r >= 0}  # arrivals some send names: no unnamed send takes them
    held: dict[int, int] = {}  # named arrivals delivered and not yet forwarded: row -> value
    forwarded: set[int] = set()
    assigned: dict[int, int] = {}  # unnamed sends resolved with an earlier one of their instant
    group = _instants(p, role, via)

    def deliver(i: int) -> Finding | None:
        c, v, o, a = chunk[i], dst[i], op[i], arrive[i]
        key, val = c * width + v, sent.pop(i)
        kind = role[v]
        if kind == FIFO:
            if ids[i] in reserved:
                held[ids[i]] = val
            else:
                fifo.setdefault(key, []).append((a, val))
            return None
        prev = last.get(key)
        if prev is not None and a <= prev[0] + eps and (prev[1] != o or (o == COPY and prev[2] != val)):
            return findings.ambiguous_arrival(p, i, prev[3])
        last[key] = (a, o, val, i)
        if o == COPY and reduce_only and value.get(key):
            return findings.overwrite(p, i, findings.bits(value[key]))
        if o == REDUCE:
            cur = value.get(key)
            if cur is not None:
                if cur & val:
                    return findings.double_count(p, i, findings.bits(cur & val))
                val |= cur
        value[key] = val
        if kind == CREDIT:
            credit[key] = credit.get(key, 0) + 1
        if key in since:
            if val != full[c]:
                since[key] = None
            elif since[key] is None:
                since[key] = a
        return None

    def launch(j: int) -> Finding | None:
        c, u, v, t = chunk[j], src[j], dst[j], start[j]
        if op[j] == REDUCE:
            if not combining:
                return findings.op_not_allowed(p, j)
            if not reduce_ok[v]:
                return findings.switch_reduce(p, j)
        key = c * width + u
        kind = role[u]
        if kind == FIFO:
            r = via[j]
            if r >= 0:
                if r not in held:
                    return findings.named_missing(p, j, r, r in forwarded)
                val = held.pop(r)
                forwarded.add(r)
            elif j in assigned:
                val = assigned.pop(j)
                if val is None:  # its instant had fewer unnamed arrivals than sends
                    return findings.switch_forward(p, j, multicast_free=False)
            else:
                together = group.get(j, (j,))  # in (start, id) order: j first
                queue = fifo.get(key, [])
                taken = min(len(queue), len(together))
                if not taken:
                    return findings.switch_forward(p, j, multicast_free=False)
                cut = queue[taken - 1][0]
                tied = taken
                while tied < len(queue) and queue[tied][0] <= cut + eps:
                    tied += 1
                values = {value for _, value in queue[:tied]}
                if len(values) > 1:
                    return findings.ambiguous_forward(p, j, together, sorted(values))
                val = queue[0][1]
                del queue[:taken]
                assigned.update((k, val if n < taken else None) for n, k in enumerate(together) if n)
        else:
            val = value.get(key)
            if val is None:
                return findings.causality(p, j)
            if kind == CREDIT:
                if not credit.get(key):
                    return findings.switch_forward(p, j, multicast_free=True)
                credit[key] -= 1
        if timed:
            e = link[j]
            if busy[e] > t + eps:
                return overlap_finding(p, j)
            busy[e] = max(busy[e], occ[j])
            for side, node in (("send", u), ("recv", v)):
                if side in heaps and node < num_npus:
                    heap = heaps[side][node]
                    while heap and heap[0] <= t + eps:
                        heapq.heappop(heap)
                    if len(heap) >= limits[side]:
                        return ports_finding(p, j, side)
                    heapq.heappush(heap, occ[j])
        sent[j] = val
        return None

    starts = np.lexsort((p.ids, p.start)).tolist()
    arrivals = np.lexsort((p.ids, p.arrive)).tolist()
    ptr, n = 0, len(arrivals)
    for j in starts:
        horizon = start[j] + eps
        while ptr < n and arrive[arrivals[ptr]] <= horizon:
            found = deliver(arrivals[ptr])
            if found:
                return _Part(found, [], None, math.inf)
            ptr += 1
        found = launch(j)
        if found:
            return _Part(found, [], None, math.inf)
    for i in arrivals[ptr:]:
        found = deliver(i)
        if found:
            return _Part(found, [], None, math.inf)
    return _postcondition(st)


def _instants(p: Problem, role: list[int], via: list[int]) -> dict[int, tuple[int, ...]]:
    """Sends of one chunk by one plain switch that name no arrival and start at one instant (each
    within the tolerance of the one before), for each such position when there are several."""
    fifo_sender = np.asarray(role, dtype=np.int8)[p.src] == FIFO
    pos = np.flatnonzero(fifo_sender & (np.asarray(via, dtype=np.int64) < 0))
    if pos.size < 2:
        return {}
    key = p.chunk[pos] * p.num_nodes + p.src[pos]
    pos = pos[np.lexsort((p.ids[pos], p.start[pos], key))]
    key, start = p.chunk[pos] * p.num_nodes + p.src[pos], p.start[pos]
    cut = np.flatnonzero((key[1:] != key[:-1]) | (start[1:] > start[:-1] + p.eps)) + 1
    bounds = np.concatenate([[0], cut, [pos.size]])
    out: dict[int, tuple[int, ...]] = {}
    for lo, hi in zip(*(b.tolist() for b in (bounds[:-1], bounds[1:]))):
        if hi - lo > 1:
            group = tuple(pos[lo:hi].tolist())
            out.update((k, group) for k in group)
    return out


def _postcondition(st: _State) -> _Part:
    failing = [(c, v) for c, v in st.post if st.value.get(c * st.width + v) != st.full[c]]
    held = st.value.get(failing[0][0] * st.width + failing[0][1]) if failing and st.combining else None
    return _Part(None, failing, None if held is None else findings.bits(held), max((t for t in st.since.values() if t is not None), default=0.0))
