"""Small machines, closed-form schedules and a random valid-schedule generator for verifier tests.

Independent of the verifier: schedules here are built from first principles (ring algorithms,
list scheduling along random routing trees) so the verifier is checked against them, not itself.
"""
from __future__ import annotations

import dataclasses
import math
import random
from dataclasses import dataclass

import numpy as np

from optcoll.collectives.builtins import make_alltoallv, make_collective
from optcoll.collectives.collective import Collective
from optcoll.instances.instance import TimeModel
from optcoll.machines.generators import fully_connected
from optcoll.machines.machine import Machine, MachineBuilder
from optcoll.schedules.schedule import COPY, REDUCE, Schedule, ScheduleBuilder, from_arrays
from optcoll.verify.stepmodel import link_weights

BW = 1e9  # bytes / s
LAT = 1e-6  # s
CHUNK = 1000.0  # bytes per chunk in the hand-built tests
TAU = LAT + CHUNK / BW  # one chunk over one link: 2 us


def ring(n: int, *, bidirectional: bool = False, latency: float = LAT, bandwidth: float = BW) -> Machine:
    b = MachineBuilder(f"ring{n}", n)
    for i in range(n):
        b.add_link(i, (i + 1) % n, bandwidth=bandwidth, latency=latency)
    if bidirectional:
        for i in range(n):
            b.add_link((i + 1) % n, i, bandwidth=bandwidth, latency=latency)
    return b.build()


def full(n: int) -> Machine:
    return fully_connected(n, BW, LAT)


def star(n: int, *, multicast: bool = False, reduce: bool = False) -> Machine:
    """n NPUs around one switch ``sw`` (node n), a bidirectional cable each."""
    b = MachineBuilder(f"star{n}", n)
    sw = b.add_switch("sw", multicast=multicast, reduce=reduce)
    for v in range(n):
        b.add_link(v, sw, bandwidth=BW, latency=LAT, bidirectional=True)
    return b.build()


def collective(kind: str, n: int | list[int], root: int | None = None, c: int = 1) -> Collective:
    ranks = list(range(n)) if isinstance(n, int) else n
    if kind == "alltoallv":  # pairs of 1 to 3 chunk sizes by a fixed pattern, a few sending nothing
        k = len(ranks)
        sizes = np.array([[0 if i == j or (i + 2 * j) % 5 == 4 else 1 + (7 * i + 3 * j) % 3
                           for j in range(k)] for i in range(k)])
        return make_alltoallv(ranks, CHUNK * c * sizes, c)
    per = len(ranks) * c if kind not in ("broadcast", "reduce") else c
    return make_collective(kind, ranks, CHUNK * per, c, root)


def ring_allgather(machine: Machine, n: int, offset: float = 0.0, tau: float = TAU) -> Schedule:
    """Unidirectional ring: in step k node i forwards chunk i-k to i+1."""
    b = ScheduleBuilder(machine)
    for k in range(n - 1):
        for i in range(n):
            b.send((i - k) % n, i, (i + 1) % n, start=offset + k * tau)
    return b.build()


def ring_reducescatter(machine: Machine, n: int, tau: float = TAU) -> Schedule:
    """Unidirectional ring: in step k node i reduces its partial of chunk i-k-1 into i+1."""
    b = ScheduleBuilder(machine)
    for k in range(n - 1):
        for i in range(n):
            b.send((i - k - 1) % n, i, (i + 1) % n, start=k * tau, op="reduce")
    return b.build()


def bidirectional_ring_allgather(machine: Machine, n: int) -> Schedule:
    """Each chunk travels ⌈(n-1)/2⌉ hops clockwise and ⌊(n-1)/2⌋ counter-clockwise."""
    b = ScheduleBuilder(machine)
    for k in range(-(-(n - 1) // 2)):
        for i in range(n):
            b.send((i - k) % n, i, (i + 1) % n, start=k * TAU)
    for k in range((n - 1) // 2):
        for i in range(n):
            b.send((i + k) % n, i, (i - 1) % n, start=k * TAU)
    return b.build()


def replace(schedule: Schedule, **columns) -> Schedule:
    cols = {name: getattr(schedule, name).copy() for name in ("chunk", "link", "start", "op", "step")}
    cols["via"] = schedule.via
    cols.update({k: np.asarray(v) for k, v in columns.items()})
    return from_arrays(cols["chunk"], cols["link"], cols["start"], cols["op"], cols["step"],
                       schedule.rounds, cols["via"], **schedule.meta)


def subset(schedule: Schedule, keep: np.ndarray) -> Schedule:
    """The rows ``keep`` (a mask or rows, in that order); ``via`` renumbered with them, a name of
    a dropped row dropped too (that send then forwards unnamed)."""
    rows = np.flatnonzero(keep) if np.asarray(keep).dtype == bool else np.asarray(keep, dtype=np.int64)
    via = None
    if schedule.via is not None:
        new = np.full(len(schedule) + 1, -1, dtype=np.int64)  # last entry: "none named" stays -1
        new[rows] = np.arange(rows.size)
        via = new[schedule.via[rows]]
    return from_arrays(schedule.chunk[rows], schedule.link[rows], schedule.start[rows],
                       schedule.op[rows], schedule.step[rows], schedule.rounds, via)


# -- random machines and collectives ---------------------------------------------------------------
def random_machine(rng: random.Random, *, max_npus: int = 5, switches: str = "any",
                   equal_links: bool = False) -> Machine:
    """A strongly connected random machine: a ring backbone, random extra (parallel) links and
    up to two switches. ``switches``: "any", "multicast" (every switch multicasts), "reduce-multicast",
    "plain" (no switch multicasts or reduces) or "none". Bandwidths are 1 or 2 GB/s so step-model weights are whole numbers."""
    n = rng.randint(2, max_npus)
    b = MachineBuilder("random", n)

    def params() -> dict:
        if equal_links:
            return {"bandwidth": BW, "latency": LAT}
        return {"bandwidth": rng.choice([BW, 2 * BW]), "latency": rng.choice([0.0, 0.5 * LAT, LAT])}

    bidirectional = rng.random() < 0.5
    for i in range(n):
        b.add_link(i, (i + 1) % n, bidirectional=bidirectional, **params())
    for _ in range(rng.randint(0, n)):
        u, v = rng.sample(range(n), 2)
        b.add_link(u, v, count=rng.choice([1, 1, 2]), **params())
    count = 0 if switches == "none" else rng.randint(0, 2)
    for k in range(count):
        flags = {"any": (rng.random() < 0.5, rng.random() < 0.3), "multicast": (True, rng.random() < 0.3),
                 "reduce-multicast": (True, True), "plain": (False, False)}[switches]
        sw = b.add_switch(f"sw{k}", multicast=flags[0], reduce=flags[1])
        for v in rng.sample(range(n), rng.randint(2, n)):
            b.add_link(v, sw, bidirectional=True, **params())
    return b.build()


NON_COMBINING = ("allgather", "broadcast", "gather", "scatter", "alltoall")


def random_collective(rng: random.Random, machine: Machine, kinds=NON_COMBINING) -> Collective:
    ranks = sorted(rng.sample(range(machine.num_npus), rng.randint(2, machine.num_npus)))
    kind = rng.choice(kinds)
    root = rng.choice(ranks) if kind in ("broadcast", "gather", "scatter", "reduce") else None
    return collective(kind, ranks, root, rng.randint(1, 2))


def random_model(rng: random.Random) -> TimeModel:
    return TimeModel(occupancy=rng.choice(["link", "serialization"]),
                     send_ports=rng.choice([None, None, 1, 2]), recv_ports=rng.choice([None, None, 1, 2]))


# -- a random valid timed schedule: list scheduling along random routing trees ---------------------
@dataclass
class _Slots:
    """Per NPU port slots (free-from times); a transfer takes the slot that frees first."""

    limit: int | None
    free: dict

    def earliest(self, node: int, npus: int) -> float:
        if self.limit is None or node >= npus:
            return 0.0
        return min(self.free.setdefault(node, [0.0] * self.limit))

    def take(self, node: int, npus: int, until: float) -> None:
        if self.limit is None or node >= npus:
            return
        slots = self.free[node]
        slots[slots.index(min(slots))] = until


def _routing_tree(rng: random.Random, machine: Machine, sources: list[int], targets: set[int]
                  ) -> dict[int, int]:
    """A random arborescence from ``sources`` reaching ``targets``: node → incoming link id,
    pruned so every leaf is a target."""
    reached = set(sources)
    parent: dict[int, int] = {}
    while not targets <= reached:
        options = [e for u in sorted(reached) for e in machine.out_links[u].tolist()
                   if int(machine.link_dst[e]) not in reached]
        e = rng.choice(options)
        v = int(machine.link_dst[e])
        parent[v] = e
        reached.add(v)
    useful: set[int] = set()
    for t in targets - set(sources):
        v = t
        while v in parent and v not in useful:
            useful.add(v)
            v = int(machine.link_src[parent[v]])
    return {v: e for v, e in parent.items() if v in useful}


def random_schedule(rng: random.Random, machine: Machine, coll: Collective, model: TimeModel) -> Schedule:
    """A valid timed schedule for a non-combining collective (or its copies-only dual).

    Each chunk follows a random routing tree; a switch that cannot multicast gets one incoming copy
    per outgoing transfer, and a plain switch's send names the arrival it forwards (``via``). Transfers are list-scheduled: each starts after its copy arrived, its
    link is free and (with port limits) a port slot is free, plus an occasional random delay.
    """
    b = coll.chunk_bytes
    dur = (machine.link_latency + b / machine.link_bandwidth)
    occ = dur if model.occupancy == "link" else b / machine.link_bandwidth
    npus = machine.num_npus
    link_free = np.zeros(machine.num_links)
    send, recv = _Slots(model.send_ports, {}), _Slots(model.recv_ports, {})
    rows: list[tuple[int, int, float, int]] = []
    chunks = list(range(coll.num_chunks))
    rng.shuffle(chunks)
    for c in chunks:
        sources = coll.pre.of(c).tolist()
        targets = set(coll.post.of(c).tolist())
        parent = _routing_tree(rng, machine, sources, targets)
        children: dict[int, list[int]] = {}
        for v, e in parent.items():
            children.setdefault(int(machine.link_src[e]), []).append(v)

        def copies(v: int) -> int:
            """Incoming copies node v needs: 1, or one per send for a switch without multicast."""
            if v < npus or machine.switch(v).multicast:
                return 1
            return sum(copies(w) for w in children.get(v, []))

        # ready[v]: (arrival time, row) of v's copies (a buffer node keeps its first forever).
        ready: dict[int, list[tuple[float, int]]] = {s: [(0.0, -1)] for s in sources}
        frontier = list(sources)
        while frontier:
            u = frontier.pop(0)
            used = 0
            for w in children.get(u, []):
                e = parent[w]
                arrivals = []
                for _ in range(copies(w)):
                    plain = u >= npus and not (machine.switch(u).multicast or machine.switch(u).reduce)
                    if u < npus or machine.switch(u).multicast:
                        have, _ = ready[u][0]
                    else:
                        have, named = ready[u][used]
                        used += 1
                    start = max(have, link_free[e], send.earliest(u, npus), recv.earliest(w, npus))
                    if rng.random() < 0.2:
                        start += rng.choice([0.3, 1.0]) * dur[e]
                    link_free[e] = start + occ[e]
                    send.take(u, npus, start + occ[e])
                    recv.take(w, npus, start + occ[e])
                    arrivals.append((start + dur[e], len(rows)))
                    rows.append((c, e, start, named if plain else -1))
                ready[w] = sorted(arrivals)
                frontier.append(w)
    if not rows:
        return from_arrays([], [], [])
    chunk, link, start, via = zip(*rows)
    order = list(range(len(rows)))
    rng.shuffle(order)  # the verifier must not depend on row order
    return subset(from_arrays(chunk, link, start, via=via), np.array(order, dtype=np.int64))


def invert(machine: Machine, schedule: Schedule, chunk_bytes: float, horizon: float) -> Schedule:
    """SCCL inversion: a copies-only schedule on ``machine`` reversed in time with reduces, valid
    on ``machine.reversed()`` for the dual collective (AllGather → ReduceScatter). A send B out of
    a plain switch that forwarded arrival A becomes the arrival that the reversed A forwards; a
    partial goes into a switch that does not reduce as a copy (it passes on)."""
    dur = (machine.link_latency + chunk_bytes / machine.link_bandwidth)[schedule.link]
    via = np.full(len(schedule), -1, dtype=np.int64)
    named = np.flatnonzero(schedule.named() >= 0)
    via[schedule.named()[named]] = named
    into = machine.link_src[schedule.link]  # the reversed transfer's receiver
    passes = np.array([v >= machine.num_npus and not machine.switch(v).reduce for v in into.tolist()], dtype=bool)
    return from_arrays(schedule.chunk, schedule.link, horizon - (schedule.start + dur),
                       np.where(passes, COPY, REDUCE).astype(np.uint8), via=via)


def random_case(rng: random.Random, switches: str = "any"):
    """(machine, collective, model, valid timed schedule), drawn in that order from ``rng``."""
    machine = random_machine(rng, switches=switches)
    coll = random_collective(rng, machine)
    model = random_model(rng)
    return machine, coll, model, random_schedule(rng, machine, coll, model)


def random_step_schedule(rng: random.Random, machine: Machine, coll: Collective,
                         weights: np.ndarray, max_rounds: int = 2) -> Schedule:
    """A valid step schedule: each step, holders (as of the previous step) send to non-holders
    over links with spare capacity until every destination holds its chunks. Buffer nodes only
    relay; switches are not used (sending from them has extra rules)."""
    npus = machine.num_npus
    held = {(c, v) for c in range(coll.num_chunks) for v in coll.pre.of(c).tolist()}
    need = {(c, v) for c in range(coll.num_chunks) for v in coll.post.of(c).tolist()} - held
    rows, rounds = [], []
    links = [e for e in range(machine.num_links)
             if machine.link_src[e] < npus and machine.link_dst[e] < npus]
    while need:
        r = rng.randint(1, max_rounds)
        rounds.append(r)
        s = len(rounds)
        load = {e: 0 for e in links}
        new = set()
        for c, u in sorted(held):
            for e in rng.sample(links, len(links)):
                v = int(machine.link_dst[e])
                if int(machine.link_src[e]) != u or (c, v) in held or (c, v) in new:
                    continue
                if load[e] < weights[e] * r and rng.random() < 0.7:
                    load[e] += 1
                    new.add((c, v))
                    rows.append((c, e, s))
        held |= new
        need -= new
    if not rows:
        return from_arrays([], [], step=[], rounds=rounds)
    chunk, link, step = zip(*rows)
    return from_arrays(chunk, link, step=step, rounds=rounds)


def random_step_case(rng: random.Random):
    """(machine without switches, collective, valid step-model schedule), drawn in that order."""
    machine = random_machine(rng, switches="none")
    coll = random_collective(rng, machine)
    return machine, coll, random_step_schedule(rng, machine, coll, link_weights(machine))


# -- mutants: the edits a person (or a buggy producer) makes to a valid schedule --------------------
def _edit(schedule: Schedule, i: int, **values) -> Schedule:
    cols = {name: getattr(schedule, name).copy() for name in ("chunk", "link", "start", "op", "step")}
    for name, value in values.items():
        cols[name][i] = value
    return replace(schedule, **cols)


def mutants(rng: random.Random, machine: Machine, coll: Collective, s: Schedule, count: int):
    """``count`` single-edit mutants of ``s``, each (what was done, the mutant): a transfer
    deleted, started earlier or later, two transfers' links or starts swapped, a transfer (a
    reduce where there is one) listed twice, its op flipped, its chunk or link changed, or the
    same transfers listed in another order; a plain switch's send named to forward no arrival
    (``via``), or another one."""
    if not len(s):
        return
    tau = float(np.min(machine.link_latency + coll.chunk_bytes / machine.link_bandwidth))
    timed = s.rounds is None
    for _ in range(count):
        i, j = rng.randrange(len(s)), rng.randrange(len(s))
        kind = rng.choice(["delete", "earlier", "later", "swap-links", "swap-starts", "duplicate",
                           "flip-op", "other-chunk", "other-link", "relist", "unname", "rename"])
        if kind == "delete":
            yield kind, subset(s, np.arange(len(s)) != i)
        elif kind in ("earlier", "later") and timed:
            shift = rng.choice([0.25, 0.5, 1.0, 2.0]) * tau * (-1 if kind == "earlier" else 1)
            yield kind, _edit(s, i, start=max(0.0, float(s.start[i]) + shift))
        elif kind in ("earlier", "later"):
            yield kind, _edit(s, i, step=max(1, min(s.num_steps, int(s.step[i]) + (-1 if kind == "earlier" else 1))))
        elif kind == "swap-links":
            yield kind, _edit(_edit(s, i, link=int(s.link[j])), j, link=int(s.link[i]))
        elif kind == "swap-starts":
            yield kind, _edit(_edit(s, i, start=float(s.start[j]), step=int(s.step[j])), j,
                              start=float(s.start[i]), step=int(s.step[i]))
        elif kind == "duplicate":
            reduces = np.flatnonzero(s.op == REDUCE)
            k = int(rng.choice(reduces.tolist())) if reduces.size else i
            rows = np.append(np.arange(len(s)), k)
            yield kind, subset(s, rows)
        elif kind == "flip-op":
            yield kind, _edit(s, i, op=1 - int(s.op[i]))
        elif kind == "relist":
            yield kind, subset(s, np.array(rng.sample(range(len(s)), len(s)), dtype=np.int64))
        elif kind in ("unname", "rename"):
            via = s.named().copy()
            named = np.flatnonzero(via >= 0)
            if kind == "unname" and named.size:
                via[int(rng.choice(named.tolist()))] = -1
            else:
                via[i] = j
            yield kind, replace(s, via=via)
        elif kind == "other-chunk":
            yield kind, _edit(s, i, chunk=rng.randrange(coll.num_chunks))
        else:
            yield kind, _edit(s, i, link=rng.randrange(machine.num_links))


# -- the schedules recorded as ground truth -------------------------------------------------------
def stored_schedules(max_bytes: int | None = None):
    """(name, instance at its chosen C, path) of every schedule recorded in the built-in suites,
    those whose file holds at most ``max_bytes`` when given; in a stable order."""
    from optcoll.instances.suite import builtin_suite_names, find_suite
    from optcoll.producers.chunks import chosen
    from optcoll.truth.stored import load_truth

    for suite in builtin_suite_names():
        for spec in find_suite(suite).specs:
            truth, _ = load_truth(spec)
            if truth is None or truth.best is None or not truth.schedule:
                continue
            path = spec.path.parent / truth.schedule
            if max_bytes is not None and path.stat().st_size > max_bytes:
                continue
            yield f"{suite}/{spec.name}", chosen(spec.instance, truth.best.details.get("params", {})), path


def same_verdict(a, b, *, path: bool = True) -> bool:
    """Validity, time (and every arrival), and the violation down to its kind, transfer and
    words; and the engine that decided (unless ``path`` is False)."""
    if a.valid != b.valid or (path and a.path != b.path):
        return False
    if a.valid:
        return a.time == b.time and np.array_equal(a.arrivals, b.arrivals)
    va, vb = a.violation, b.violation
    both_nan = math.isnan(va.time) and math.isnan(vb.time)
    return (both_nan or va.time == vb.time) and dataclasses.replace(va, time=0) == dataclasses.replace(vb, time=0)


def combining_schedules(rng: random.Random, machine: Machine, ranks: list[int], c: int, model: TimeModel):
    """(ReduceScatter, a schedule of it, AllReduce, a schedule of it): the ReduceScatter an
    inverted random AllGather, the AllReduce it followed by a random AllGather. Valid, except that
    some of the plain switches' sends may name no arrival (``via``), which may be ambiguous."""
    from optcoll.verify.verifier import verify_with

    ag, rs, ar = (collective(kind, ranks, c=c) for kind in ("allgather", "reducescatter", "allreduce"))
    reverse = machine.reversed()
    forward = random_schedule(rng, reverse, ag, TimeModel(occupancy=model.occupancy, send_ports=model.recv_ports,
                                                          recv_ports=model.send_ports))
    horizon = verify_with(reverse, ag, forward, TimeModel(occupancy=model.occupancy), "events").time
    reduce_scatter = invert(reverse, forward, ag.chunk_bytes, horizon)
    done = verify_with(machine, rs, reduce_scatter, model, "events").time
    unnamed = rng.choice([0.0, 0.5, 1.0])  # the share of plain switches' sends left to the rule
    if reduce_scatter.via is not None and unnamed:  # valid, or an ambiguous forward
        keep = np.array([rng.random() >= unnamed for _ in range(len(reduce_scatter))])
        reduce_scatter = replace(reduce_scatter, via=np.where(keep, reduce_scatter.via, -1))
    gather = random_schedule(rng, machine, ag, model)
    return rs, reduce_scatter, ar, Schedule.concat(reduce_scatter, gather, done)
