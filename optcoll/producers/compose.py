"""From spread producers to every collective: inversion for reductions, concatenation for AllReduce.

A combining collective asks every destination of a chunk to end with the reduction of all its
contributors. optcoll builds it in two phases, for every producer alike:

1. *reduce to a home*: each chunk's contributions are reduced into one home node. This is the
   time reversal of a spread problem on the reversed machine (SCCL's inversion): the home
   spreads the chunk to every contributor there; a transfer on reversed link (v,u) over
   [t, t+d) becomes a REDUCE on the original link (u,v) over [T−t−d, T−t), T the dual's makespan.
   Because every node of the dual receives a chunk at most once (both the greedy and the list
   scheduler guarantee it), each contribution is counted exactly once; relays that received a
   chunk the dual never used are pruned first, or they would send an empty partial.
2. *copy from the home*: the home's full reduction is copied to the other destinations, a
   forward spread problem, concatenated after phase 1 (AllReduce = ReduceScatter + AllGather
   when each chunk's home is its owner, reduce + broadcast when it is a tree root).

Each phase gets a fresh random generator from the same seed, so an AllReduce with seed s is the
ReduceScatter with seed s followed by the AllGather with seed s. With ``mirror`` (the greedy
synthesizers, as upstream TACOS reports AllReduce = 2 × AllGather), phase 2 is instead phase 1's
spread solution renamed onto the twin links whenever the two spread problems are mirror images
(``spread.mirror_links``: symmetric links and ports, no reduction cost), which halves the work.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from optcoll.collectives.collective import ChunkSets, Collective
from optcoll.instances.instance import Instance
from optcoll.producers import spread
from optcoll.producers.forwarding import forwarded_by
from optcoll.producers.spread import COPY, FIFO, SpreadProblem
from optcoll.schedules.schedule import COPY as OP_COPY
from optcoll.schedules.schedule import REDUCE, Schedule, from_arrays

#: A spread producer: solves one spread problem with the given random generator.
Spreader = Callable[[SpreadProblem, np.random.Generator], Schedule]
#: Chooses each chunk's home for a combining collective (one node id per chunk).
Homes = Callable[[Collective], np.ndarray]


def default_homes(collective: Collective) -> np.ndarray:
    """Each chunk's home: its single destination; for AllReduce its owner (chunk i·C+j → rank i),
    which makes phase 1 a ReduceScatter and phase 2 an AllGather; otherwise its first destination."""
    if collective.kind == "allreduce":
        ranks = np.asarray(collective.ranks, dtype=np.int64)
        return ranks[np.arange(collective.num_chunks) // collective.chunks_per_rank]
    return collective.post.nodes[collective.post.indptr[:-1]]


def synthesize(instance: Instance, spreader: Spreader, seed: int, homes: Homes | None = None,
               mirror: bool = False) -> Schedule:
    """A schedule for the instance's collective from a spread producer (module docstring)."""
    coll = instance.collective
    if not coll.combining:
        return spreader(spread.forward(instance, coll.pre, coll.post), np.random.default_rng(seed))
    home = np.asarray((homes or default_homes)(coll), dtype=np.int64)
    at_home = ChunkSets(np.arange(coll.num_chunks + 1, dtype=np.int64), home)
    dual = spread.dual(instance, at_home, coll.pre)
    gathered = prune_unused(spreader(dual, np.random.default_rng(seed)), dual)
    reduction = time_reverse(gathered, dual, instance)
    rest = spread.forward(instance, at_home, coll.post)
    if rest.needs[0].size == 0:
        return reduction
    twins = spread.mirror_links(dual, rest) if mirror else None
    if twins is not None:
        copies = replace(gathered, link=twins[gathered.link])
    else:
        # A fresh generator of the same seed: the AllGather with seed s (module docstring).
        copies = spreader(rest, np.random.default_rng(seed))
    return Schedule.concat(reduction, copies, makespan(reduction, instance))


def arrivals(schedule: Schedule, problem: SpreadProblem) -> np.ndarray:
    return schedule.start + problem.delay[schedule.link]


def makespan(schedule: Schedule, instance: Instance) -> float:
    """The last delivery of a timed schedule under the instance's time model."""
    if len(schedule) == 0:
        return 0.0
    timing = instance.model.link_timing(instance.machine, instance.collective.chunk_bytes)
    duration = timing.delay[schedule.link] + np.where(schedule.op == REDUCE, timing.reduce_extra, 0.0)
    return float(np.max(schedule.start + duration))


def time_reverse(schedule: Schedule, problem: SpreadProblem, instance: Instance) -> Schedule:
    """The reduction whose time reversal ``schedule`` is (module docstring, phase 1).

    Receivers that can combine (NPUs, switches with in-network reduction) get REDUCE; other
    switches get COPY and hold one partial at a time, as the dual's node modes guaranteed; a plain
    switch's departures name the arrivals they forward (``forwarding``).
    """
    if len(schedule) == 0:
        return schedule
    end = arrivals(schedule, problem)
    horizon = float(end.max())
    machine = instance.machine
    can_reduce = np.array([True] * machine.num_npus + [s.reduce for s in machine.switches])
    receiver = machine.link_dst[schedule.link]
    op = np.where(can_reduce[receiver], REDUCE, OP_COPY).astype(np.uint8)
    order = np.argsort(horizon - end, kind="stable")
    dual = problem.machine
    via = forwarded_by(schedule.chunk, dual.link_src[schedule.link], dual.link_dst[schedule.link],
                       schedule.start, end, problem.mode == FIFO)
    reduction = from_arrays(schedule.chunk, schedule.link, horizon - end, op, via=via, **schedule.meta)
    return reduction.take(order)


def prune_unused(schedule: Schedule, problem: SpreadProblem) -> Schedule:
    """``schedule`` without deliveries to relays that never forward them usefully.

    A delivery to a destination is useful; one to a relay is useful when a useful send of the
    chunk leaves the relay at or after it (``COPY`` nodes), or when it is needed to feed one
    (``FIFO``/``EXCLUSIVE`` nodes: each useful send claims one earlier arrival). One sweep
    backwards in time decides everything, because a delivery's use always starts later.
    """
    if not problem.has_relays or len(schedule) == 0:
        return schedule
    width = problem.num_nodes
    src = problem.machine.link_src[schedule.link]
    dst = problem.machine.link_dst[schedule.link]
    chunk = schedule.chunk
    post_c, post_v = problem.post.pairs()
    pre_c, pre_v = problem.pre.pairs()
    wanted = np.isin(chunk * width + dst, post_c * width + post_v)
    if wanted.all():
        return schedule
    holder = np.isin(chunk * width + src, pre_c * width + pre_v)
    end = arrivals(schedule, problem)
    n = len(schedule)
    # Events: (time, kind, transfer); kind 1 = send, 0 = arrival, so at equal times the sweep
    # (descending) meets a send before the arrival that may feed it.
    times = np.concatenate([schedule.start, end])
    kinds = np.concatenate([np.ones(n, np.int8), np.zeros(n, np.int8)])
    ids = np.concatenate([np.arange(n), np.arange(n)])
    order = np.lexsort((kinds, times))[::-1]
    useful = wanted.copy()
    demand: dict[int, int] = {}
    fed: set[int] = set()
    mode = problem.mode.tolist()
    chunk_l, src_l, dst_l = chunk.tolist(), src.tolist(), dst.tolist()
    holder_l, kinds_l, ids_l = holder.tolist(), kinds[order].tolist(), ids[order].tolist()
    for kind, j in zip(kinds_l, ids_l):
        if kind == 1:
            if useful[j] and not holder_l[j]:
                key = chunk_l[j] * width + src_l[j]
                if mode[src_l[j]] == COPY:
                    fed.add(key)
                else:
                    demand[key] = demand.get(key, 0) + 1
        elif not useful[j]:
            v = dst_l[j]
            key = chunk_l[j] * width + v
            if mode[v] == COPY:
                useful[j] = key in fed
            elif demand.get(key, 0) > 0:
                demand[key] -= 1
                useful[j] = True
    if useful.all():
        return schedule
    keep = np.flatnonzero(useful)
    return from_arrays(schedule.chunk[keep], schedule.link[keep], schedule.start[keep],
                       schedule.op[keep], schedule.step[keep], schedule.rounds, **schedule.meta)
