"""Orbit trees: a direct AllReduce whose chunks are images of C representatives under a symmetry
group of the machine (docs/model.md §5's copy and reduce semantics; issue 34).

Where a group G of automorphisms acts regularly on the N ranks (each rank the image of rank 0
under exactly one element: the translations of a torus, a ring or a hypercube) and every link
takes one time τ, chunk b·N + g (b < C) follows the image under g of representative b's plan. A
representative is reduced along an in-tree into rank 0 (each other rank sends its partial once,
after all its children's have arrived) and spread along an out-tree from it (each other rank
receives the sum once), one step of τ per hop: 2(N − 1) transfers, the least an AllReduce makes
(``bounds.allreduce``). The images of a transfer on link e use every link of e's orbit under G
once, so the chunks share the links exactly when no two representative transfers in one step lie
in one link orbit. CP-SAT chooses the trees and steps under that rule, from the least step count
that the orbits can carry (2(N − 1)·C transfers, one per orbit and step) upwards, each try ending
at a deterministic work limit.

On trn2 (a 4 x 4 torus, C = 2) the rule admits 15 steps: 960 transfers on 64 links, every link
busy in every step, which is what ``allreduce-transfers`` counts, so the schedule is optimal,
where ReduceScatter then AllGather needs 8 + 8 (each half leaves half the links idle one step).

A restriction (trees, one grid of steps, symmetric plans): its schedules are upper bounds only.
"""
from __future__ import annotations

import numpy as np

from optcoll.instances.budget import Budget
from optcoll.instances.clock import Clock
from optcoll.instances.instance import Instance
from optcoll.producers.base import NotApplicable
from optcoll.schedules.schedule import COPY, REDUCE, Schedule, from_arrays

#: Wall-clock seconds the search for the group may take (a torus of 256 NPUs needs well under one).
GROUP_SECONDS = 20.0
#: CP-SAT deterministic time per step count tried (trn2's 15 steps: about 1).
WORK_LIMIT = 5.0
#: Step counts tried above the least the link orbits allow.
EXTRA_STEPS = 1
#: Most (representative, rank, link, step) choices one model may hold.
MAX_CHOICES = 200_000


def _applies(instance: Instance) -> float:
    """τ, the one link time, or ``NotApplicable`` naming what is missing."""
    coll, machine, model = instance.collective, instance.machine, instance.model
    if coll.kind != "allreduce":
        raise NotApplicable(f"orbit-trees does not implement {coll.kind}; it is an AllReduce")
    if model.kind != "timed":
        raise NotApplicable(f"orbit-trees produces timed schedules; the instance asks for the {model.kind} model")
    if machine.num_nodes != machine.num_npus or len(coll.ranks) != machine.num_npus:
        raise NotApplicable("orbit-trees needs every NPU of the machine a rank, and no switches")
    if model.send_ports is not None or model.recv_ports is not None or model.reduce_cost:
        raise NotApplicable("orbit-trees assumes no port limits and no reduction cost")
    timing = model.link_timing(machine, coll.chunk_bytes)
    if np.ptp(timing.delay) > 1e-12 * float(timing.delay.max()):
        raise NotApplicable("orbit-trees needs links of one time")
    return float(timing.delay.max())


def orbit_trees(instance: Instance) -> Schedule:
    """The orbit-tree AllReduce of the fewest steps found (module docstring), verified by the caller."""
    tau = _applies(instance)
    machine, coll = instance.machine, instance.collective
    n, reps = machine.num_npus, coll.chunks_per_rank
    if machine.num_links % n:
        raise NotApplicable("orbit-trees needs as many links out of every rank")
    # G acting regularly, its link orbits are num_links / N of N links each
    least = -(-2 * (n - 1) * reps * n // machine.num_links)
    if 2 * reps * machine.num_links * (least + EXTRA_STEPS) > MAX_CHOICES:
        raise NotApplicable(f"orbit-trees: a model of {least} steps or more would be too large")
    from optcoll.producers.exact.timed.symmetry import rank_group  # scipy's graphs: only where it applies

    elements = rank_group(instance, Clock(Budget(GROUP_SECONDS, threads=1, seed=0)))
    if len(elements) != n:
        raise NotApplicable(f"orbit-trees needs a symmetry group acting regularly on the ranks; found one of "
                            f"order {len(elements)} for {n} ranks")
    orbit = np.stack([g.link for g in elements]).min(axis=0)  # a link orbit named by its least link
    for steps in range(least, least + EXTRA_STEPS + 1):
        plan = _plan(instance, orbit, reps, steps)
        if plan is not None:
            return _expand(plan, elements, n, tau).with_meta(steps=steps)
    raise NotApplicable(f"orbit-trees found no plan of {least} to {least + EXTRA_STEPS} steps")


def _plan(instance: Instance, orbit: np.ndarray, reps: int,
          steps: int) -> list[tuple[int, int, int, int]] | None:
    """Representative transfers (rep, link, step, op) of ``steps`` steps, or None when CP-SAT
    finds none within ``WORK_LIMIT``."""
    from ortools.sat.python import cp_model

    from optcoll.producers.exact.toolkit import run_cpsat

    machine = instance.machine
    n = machine.num_npus
    src, dst = machine.link_src, machine.link_dst
    span = range(1, steps + 1)
    model = cp_model.CpModel()
    send, take, per_slot = {}, {}, {}
    for b in range(reps):
        done = model.NewIntVar(1, steps, "")  # the step rank 0's sum is complete after
        sent = {u: model.NewIntVar(1, steps, "") for u in range(1, n)}
        held = {v: model.NewIntVar(1, steps, "") for v in range(1, n)}
        for u in range(1, n):
            out = [int(e) for e in np.flatnonzero(src == u)]
            into = [int(e) for e in np.flatnonzero(dst == u)]
            for e in out:
                for s in span:
                    send[b, e, s] = var = model.NewBoolVar("")
                    per_slot.setdefault((int(orbit[e]), s), []).append(var)
                    model.Add(sent[u] == s).OnlyEnforceIf(var)
                    parent = int(dst[e])  # rank 0 sums after it; any other rank sends after it
                    model.Add(done >= s if parent == 0 else sent[parent] > s).OnlyEnforceIf(var)
            for e in into:
                for s in span:
                    take[b, e, s] = var = model.NewBoolVar("")
                    per_slot.setdefault((int(orbit[e]), s), []).append(var)
                    model.Add(held[u] == s).OnlyEnforceIf(var)
                    sender = int(src[e])
                    model.Add((done if sender == 0 else held[sender]) < s).OnlyEnforceIf(var)
            model.AddExactlyOne([send[b, e, s] for e in out for s in span])
            model.AddExactlyOne([take[b, e, s] for e in into for s in span])
    for group in per_slot.values():
        model.AddAtMostOne(group)
    budget = Budget(max(60.0, 20 * WORK_LIMIT), threads=1, seed=0, work_limit=WORK_LIMIT)
    res = run_cpsat(model, Clock(budget), has_objective=False)
    if res.interrupted:
        raise KeyboardInterrupt
    if res.values is None:
        return None
    chosen = [(b, e, s, REDUCE) for (b, e, s), var in send.items() if res.values[var.Index()]]
    return chosen + [(b, e, s, COPY) for (b, e, s), var in take.items() if res.values[var.Index()]]


def _expand(plan: list[tuple[int, int, int, int]], elements: list, n: int, tau: float) -> Schedule:
    """Chunk b·N + i: representative b's plan under the element that takes rank 0 to rank i."""
    by_rank = {int(g.node[0]): g for g in elements}
    rows = [(b * n + i, int(g.link[e]), (s - 1) * tau, op) for i, g in sorted(by_rank.items())
            for b, e, s, op in plan]
    chunk, link, start, op = (np.array(col) for col in zip(*rows))
    return from_arrays(chunk, link, start, op)
