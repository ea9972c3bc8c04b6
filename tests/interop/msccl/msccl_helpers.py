"""Schedules for the MSCCL tests, built from first principles (not by the exporter under test).

``greedy_spread`` is a small deterministic list scheduler for copy-only collectives on machines
where every NPU that relays a chunk also needs it (AllGather, Broadcast anywhere; AlltoAll,
Gather, Scatter on fully connected machines). Combining collectives are its time reversal on the
reversed machine (SCCL's inversion), and AllReduce is ReduceScatter followed by AllGather.
"""
from __future__ import annotations

import heapq

import numpy as np

from optcoll.collectives.builtins import make_collective
from optcoll.collectives.collective import Collective
from optcoll.instances.instance import TimeModel
from optcoll.machines.generators import fully_connected
from optcoll.machines.machine import Machine
from optcoll.schedules.schedule import REDUCE, Schedule, ScheduleBuilder, from_arrays

BW, LAT, CHUNK = 1e9, 1e-6, 1000.0
TAU = LAT + CHUNK / BW  # one chunk over one link


def collective(kind: str, n: int, c: int = 1, root: int | None = None) -> Collective:
    per = {"broadcast": c, "reduce": c}.get(kind, n * c)
    return make_collective(kind, range(n), CHUNK * per, c, root)


def full(n: int) -> Machine:
    return fully_connected(n, BW, LAT)


def greedy_spread(machine: Machine, coll: Collective, model: TimeModel = TimeModel()) -> Schedule:
    """Whenever a link is free it carries the lowest chunk its source holds and its destination
    still lacks and is not already receiving; links are served in id order."""
    b = coll.chunk_bytes
    serial = b / machine.link_bandwidth
    delay = machine.link_latency + serial
    busy = delay if model.occupancy == "link" else serial
    held = {(int(c), int(v)) for c, v in zip(*coll.pre.pairs())}
    want = {(int(c), int(v)) for c, v in zip(*coll.post.pairs())} - held
    coming: set[tuple[int, int]] = set()
    arrivals: list[tuple[float, int, int]] = []
    free = np.zeros(machine.num_links)
    rows: list[tuple[int, int, float]] = []
    t = 0.0
    chunks = range(coll.num_chunks)
    while True:
        while arrivals and arrivals[0][0] <= t + 1e-15:
            _, c, v = heapq.heappop(arrivals)
            held.add((c, v))
        if want <= held:
            break
        for e in range(machine.num_links):
            if free[e] > t + 1e-15:
                continue
            u, v = int(machine.link_src[e]), int(machine.link_dst[e])
            c = next((c for c in chunks if (c, u) in held and (c, v) in want
                      and (c, v) not in held and (c, v) not in coming), None)
            if c is None:
                continue
            coming.add((c, v))
            rows.append((c, e, t))
            free[e] = t + busy[e]
            heapq.heappush(arrivals, (t + delay[e], c, v))
        later = [a[0] for a in arrivals] + [f for f in free if f > t + 1e-15]
        assert later, "the greedy is stuck (a chunk needs a relay that does not want it)"
        t = min(later)
    chunk, link, start = (list(col) for col in zip(*rows))
    return from_arrays(chunk, link, start)


def reverse_into_reduction(machine: Machine, spread: Schedule, coll: Collective) -> Schedule:
    """The combining schedule whose time reversal is ``spread`` (made on ``machine.reversed()``)."""
    delay = machine.link_latency + coll.chunk_bytes / machine.link_bandwidth
    end = float(np.max(spread.start + delay[spread.link]))
    start = end - (spread.start + delay[spread.link])
    return from_arrays(spread.chunk, spread.link, start, np.full(len(spread), REDUCE, np.uint8))


def reduction(machine: Machine, kind: str, n: int, c: int = 1, root: int | None = None) -> Schedule:
    """ReduceScatter or Reduce on ``machine`` as the reversed AllGather / Broadcast."""
    dual = {"reducescatter": "allgather", "reduce": "broadcast"}[kind]
    rev = machine.reversed()
    return reverse_into_reduction(machine, greedy_spread(rev, collective(dual, n, c, root)),
                                  collective(kind, n, c, root))


def allreduce(machine: Machine, n: int, c: int = 1) -> Schedule:
    rs = reduction(machine, "reducescatter", n, c)
    ag = greedy_spread(machine, collective("allgather", n, c))
    delay = machine.link_latency + CHUNK / machine.link_bandwidth
    return Schedule.concat(rs, ag, float(np.max(rs.start + delay[rs.link])))


def ring_allgather(machine: Machine, n: int) -> Schedule:
    """Unidirectional ring: in step k rank i forwards chunk i-k to i+1."""
    b = ScheduleBuilder(machine)
    for k in range(n - 1):
        for i in range(n):
            b.send((i - k) % n, i, (i + 1) % n, start=k * TAU)
    return b.build()


def ring_allreduce(machine: Machine, n: int) -> Schedule:
    """Reduce-scatter around the ring (chunk c ends complete at rank c), then allgather."""
    b = ScheduleBuilder(machine)
    for k in range(n - 1):
        for i in range(n):
            b.send((i - 1 - k) % n, i, (i + 1) % n, start=k * TAU, op="reduce")
    for k in range(n - 1):
        for i in range(n):
            b.send((i - k) % n, i, (i + 1) % n, start=(n - 1 + k) * TAU)
    return b.build()

