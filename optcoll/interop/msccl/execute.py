"""Running an MSCCL program in time, as the runtime would, as early as it can (ASAP).

Static structure (``Program``): steps flattened to ids, connections (sender GPU, receiver GPU,
channel) with their one sending and one receiving thread block, and the FIFO matching of the
k-th send with the k-th receive on each connection.

Dynamics (``run``): every thread block executes its steps in order. A step starts when its
block's previous step has finished, its dependency step has finished and, if it receives, the
matched send's data has arrived; a step that sends also waits for its wire (one FIFO per wire key:
the machine link the channel runs on). A send of ``cnt`` chunks puts them on the wire back to
back, ``occupancy`` apart; each is delivered ``delay`` after it starts (plus ``reduce_delay``
when the receiving step reduces). A step finishes when its sends have left the wire (so a block
may send its next chunk as soon as the link is free), a local reduction after ``reduce_delay``
per chunk, anything else at once. Whole chunks are stored and forwarded: a fused receive-send
forwards only after its receive has fully arrived, as in optcoll's timed model.

Nothing here looks at buffer contents; the importer replays values over the execution order, and
the validator uses unit times to find steps that can never run.

A wire may be a route through switches (``routes.py``): after its first link each chunk is stored
and forwarded hop by hop, each hop taking the earliest time at or after the chunk's arrival when
that link is free for its whole occupancy (links shared by several connections — a switch's port
to one GPU — keep a calendar of what they carry). The step itself finishes when its chunks have
left the first link, as on a direct link.
"""
from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from optcoll.interop.msccl.ir import RECVS, SENDS, Algo, Step, where_step

REDUCING_RECVS = frozenset({"rrs", "rrc", "rrcs"})
BROKEN = -2  # a dependency naming a step that does not exist: never satisfied


@dataclass(frozen=True)
class Hop:
    key: Hashable
    occupancy: float
    delay: float


@dataclass(frozen=True)
class Wire:
    """The first link a send takes (``key``: one FIFO per key), and for a route through switches
    the hops after it."""

    key: Hashable
    occupancy: float
    delay: float
    after: tuple[Hop, ...] = ()


class _Calendar:
    """Busy intervals of one link, sorted; ``book`` takes the earliest free slot."""

    def __init__(self) -> None:
        self.starts: list[float] = []
        self.ends: list[float] = []

    def book(self, t: float, length: float) -> float:
        i = bisect.bisect_right(self.starts, t)
        if i and self.ends[i - 1] > t:
            t = self.ends[i - 1]
        while i < len(self.starts) and self.starts[i] < t + length:
            t = max(t, self.ends[i])
            i += 1
        self.starts.insert(i, t)
        self.ends.insert(i, t + length)
        return t


class Program:
    """The static structure of an algorithm (built once, shared by validator and importer)."""

    def __init__(self, algo: Algo):
        self.algo = algo
        self.steps: list[Step] = []
        self.owner: list[int] = []  # step -> tb index
        self.tbs: list[tuple[int, int, int, int, int]] = []  # (gpu, tb id, send, recv, chan)
        self.first: list[int] = []  # tb index -> first step id
        self.tb_index: dict[tuple[int, int], int] = {}
        for g in algo.gpus:
            for t in g.tbs:
                k = len(self.tbs)
                self.tb_index.setdefault((g.id, t.id), k)
                self.tbs.append((g.id, t.id, t.send, t.recv, t.chan))
                self.first.append(len(self.steps))
                self.steps.extend(t.steps)
                self.owner.extend([k] * len(t.steps))
        self.first.append(len(self.steps))
        self.dep = [self._dep(i) for i in range(len(self.steps))]
        # Connections: (src gpu, dst gpu, chan) -> sending / receiving tb (first one; duplicates
        # are the validator's business).
        self.sender: dict[tuple[int, int, int], int] = {}
        self.receiver: dict[tuple[int, int, int], int] = {}
        for k, (g, _, send, recv, chan) in enumerate(self.tbs):
            if send >= 0:
                self.sender.setdefault((g, send, chan), k)
            if recv >= 0:
                self.receiver.setdefault((recv, g, chan), k)
        self.match = [-1] * len(self.steps)  # send step <-> recv step (a fused step: its receive's
        self.send_match = [-1] * len(self.steps)  # sender in match, its send's receiver here)
        for conn in sorted(set(self.sender) & set(self.receiver)):
            sends = [i for i in self.tb_steps(self.sender[conn]) if self.steps[i].type in SENDS]
            recvs = [i for i in self.tb_steps(self.receiver[conn]) if self.steps[i].type in RECVS]
            for s, r in zip(sends, recvs):
                self.send_match[s] = r
                self.match[r] = s

    def tb_steps(self, tb: int) -> range:
        return range(self.first[tb], self.first[tb + 1])

    def _dep(self, i: int) -> int:
        step = self.steps[i]
        if step.depid < 0:
            return -1
        g = self.tbs[self.owner[i]][0]
        tb = self.tb_index.get((g, step.depid))
        if tb is None or not 0 <= step.deps < self.first[tb + 1] - self.first[tb]:
            return BROKEN
        return self.first[tb] + step.deps

    def name(self, i: int) -> str:
        tb = self.owner[i]
        return f"{where_step(self.tbs[tb][0], self.tbs[tb][1], i - self.first[tb])} ({self.steps[i].type})"

    def gpu_of(self, i: int) -> int:
        return self.tbs[self.owner[i]][0]


@dataclass(frozen=True, eq=False)
class ExecutionTrace:
    """When each step ran (NaN: never), in execution order, and what was left stuck."""

    order: tuple[int, ...]
    start: list[float]
    finish: list[float]
    #: Per receiving step: the delivery time of each of its chunks.
    arrivals: dict[int, list[float]]
    #: Per sending step: the wire its chunks took.
    wires: dict[int, Wire]
    #: Per sending step, per chunk: when it started on each link of its wire (first link first).
    hops: dict[int, list[tuple[float, ...]]]
    stuck: tuple[int, ...]  # the first unexecuted step of every unfinished tb


def run(program: Program, wire: Callable[[int, int, int], Wire], reduce_delay: float = 0.0) -> ExecutionTrace:
    """Executes the program ASAP; ties go to the lower (gpu, tb) so runs are deterministic."""
    steps, owner, tbs, first = program.steps, program.owner, program.tbs, program.first
    n = len(steps)
    start, finish = [math.nan] * n, [math.nan] * n
    arrivals: dict[int, list[float]] = {}
    wires: dict[int, Wire] = {}
    nxt = list(first[:-1])
    ready = [0.0] * len(tbs)
    free: dict[Hashable, float] = {}
    calendars: dict[Hashable, _Calendar] = {}
    hops: dict[int, list[tuple[float, ...]]] = {}
    waiting: dict[int, list[int]] = {}
    heap: list[tuple[float, int]] = []
    order: list[int] = []

    def wire_of(i: int) -> Wire:
        if i not in wires:
            g, _, send, _, chan = tbs[owner[i]]
            wires[i] = wire(g, send, chan)
        return wires[i]

    def consider(tb: int) -> None:
        i = nxt[tb]
        if i == first[tb + 1]:
            return
        t = ready[tb]
        d = program.dep[i]
        if d == BROKEN:
            return
        if d >= 0:
            if math.isnan(finish[d]):
                waiting.setdefault(d, []).append(tb)
                return
            t = max(t, finish[d])
        if steps[i].type in RECVS:
            if program.match[i] < 0:
                return
            if i not in arrivals:
                waiting.setdefault(-1 - i, []).append(tb)  # negative key: waiting for data
                return
            t = max(t, *arrivals[i])
        if steps[i].type in SENDS:
            t = max(t, free.get(wire_of(i).key, 0.0))
        heapq.heappush(heap, (t, tb))

    def wake(key: int) -> None:
        for tb in waiting.pop(key, ()):
            consider(tb)

    for tb in range(len(tbs)):
        consider(tb)
    while heap:
        t, tb = heapq.heappop(heap)
        i = nxt[tb]
        step = steps[i]
        end = t
        if step.type in SENDS:
            w = wire_of(i)
            if free.get(w.key, 0.0) > t:
                heapq.heappush(heap, (free[w.key], tb))
                continue
            count = max(step.cnt, 1)
            end = t + count * w.occupancy
            free[w.key] = end
            hops[i] = []
            landed = []
            for k in range(count):
                times = [t + k * w.occupancy]
                at = times[0] + w.delay
                for hop in w.after:
                    times.append(calendars.setdefault(hop.key, _Calendar()).book(at, hop.occupancy))
                    at = times[-1] + hop.delay
                hops[i].append(tuple(times))
                landed.append(at)
            r = program.send_match[i]
            if r >= 0:
                extra = reduce_delay if steps[r].type in REDUCING_RECVS else 0.0
                arrivals[r] = [at + extra for at in landed]
                wake(-1 - r)
        elif step.type == "re":
            end = t + reduce_delay * max(step.cnt, 1)
        start[i], finish[i] = t, end
        order.append(i)
        nxt[tb] += 1
        ready[tb] = end
        consider(tb)
        wake(i)
    stuck = tuple(nxt[tb] for tb in range(len(tbs)) if nxt[tb] < first[tb + 1])
    return ExecutionTrace(tuple(order), start, finish, arrivals, wires, hops, stuck)
