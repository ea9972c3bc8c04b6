"""Every analytic lower bound for (machine, collective, time model), and the best of them.

Within a job's clock (``optcoll.instances.clock``) the bounds are computed in their fixed order
until the clock ends: each is valid alone, so the best of those computed is a bound, and setup
never takes the time the solver was given (a cooperative deadline; at least the first, the
latency bound, is always computed). The last few answers are kept, for the same machine object and
an equal collective and model (a solve asks for the same ones for its start, its parts and its
record); an answer a clock cut short is not kept.
"""
from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import replace

import numpy as np

from optcoll.bounds.allreduce import allreduce_bounds
from optcoll.bounds.bound import Bound
from optcoll.bounds.cutbounds import broadcast_maxflow_bound, cut_bound, split_cuts
from optcoll.bounds.demand import allreduce_set, check_fits
from optcoll.bounds.entry import entry_bound
from optcoll.bounds.latency import latency_bound
from optcoll.bounds.mcf import mcf_bound
from optcoll.bounds.nodes import egress_bound, ingress_bound
from optcoll.bounds.oneport import one_port_bound
from optcoll.bounds.volume import capacity_bound
from optcoll.collectives.builtins import split_allreduce
from optcoll.collectives.collective import Collective
from optcoll.instances.clock import Clock, OutOfTime, phase, running
from optcoll.instances.instance import TimeModel
from optcoll.machines.machine import Machine

#: How many recent answers ``lower_bounds`` keeps (a solve's whole collective and its two parts).
RECENT = 4
_recent: list[tuple[Machine, Collective, TimeModel, list[Bound]]] = []


def _timed_relaxation(model: TimeModel) -> TimeModel:
    """A step lasts max α + r_s·b/B_min and a link of bandwidth B_e = w_e·B_min carries at most
    w_e·r_s chunks in it; sent back to back under serialization occupancy they all arrive by
    α_e + r_s·b/B_min, inside the step. So every step schedule is a serialization-timed schedule
    no slower than its step cost, and the serialization bounds bound it too."""
    return replace(model, kind="timed", occupancy="serialization") if model.kind == "step" else model


def _allreduce_parts(machine: Machine, collective: Collective, model: TimeModel,
                     clock: Clock | None = None) -> Bound | None:
    """An AllReduce schedule is also a ReduceScatter schedule (same chunks, weaker postcondition)
    and contains an AllGather one (follow each rank's contribution to every chunk), so its time
    is at least the best bound of either part."""
    if collective.kind != "allreduce" or collective.num_ranks < 2:
        return None
    parts = [(part.kind, best_lower_bound(machine, part, model, clock)) for part in split_allreduce(collective)]
    kind, bound = max(parts, key=lambda item: item[1].value)
    return Bound("allreduce", bound.value, f"its {kind} part: {bound.name} bound, {bound.detail}",
                 bound.exact)


def _same(a: Collective, b: Collective) -> bool:
    """The same collective: one object, or equal in every field (an AllReduce's parts are made
    afresh by each caller of ``split_allreduce``)."""
    if a is b:
        return True
    plain = ("kind", "ranks", "chunk_bytes", "size_bytes", "chunks_per_rank", "combining", "root")
    return (all(getattr(a, f) == getattr(b, f) for f in plain) and a.chunk_sizes is None and b.chunk_sizes is None
            and all(np.array_equal(getattr(x, f), getattr(y, f)) for x, y in ((a.pre, b.pre), (a.post, b.post))
                    for f in ("indptr", "nodes")))


def lower_bounds(machine: Machine, collective: Collective, model: TimeModel = TimeModel(),
                 clock: Clock | None = None) -> list[Bound]:
    """Every bound that applies, in a fixed order (latency first), or those computed before
    ``clock`` ended (module docstring). Each is a time no valid schedule in ``model`` can beat;
    ``best_lower_bound`` picks the largest."""
    for seen in _recent:
        if seen[0] is machine and _same(seen[1], collective) and seen[2] == model:
            return list(seen[3])
    check_fits(machine, collective)
    timed = _timed_relaxation(model)
    members = allreduce_set(collective) if collective.needs[0].size else None
    with phase(clock, "the machine's cuts"):
        split = split_cuts(machine, members) if members is not None else None
    steps: list[tuple[str, Callable[[], Bound | list[Bound] | None]]] = [
        ("latency", lambda: latency_bound(machine, collective, timed)),
        ("ingress", lambda: ingress_bound(machine, collective, timed)),
        ("egress", lambda: egress_bound(machine, collective, timed)),
        ("entry", lambda: entry_bound(machine, collective, timed)),
        ("cut", lambda: cut_bound(machine, collective, split)),
        ("broadcast max-flow", lambda: broadcast_maxflow_bound(machine, collective)),
        ("capacity", lambda: capacity_bound(machine, collective, timed)),
        ("mcf", lambda: mcf_bound(machine, collective, timed)),
        ("one-port", lambda: one_port_bound(machine, collective, model)),
        ("allreduce parts", lambda: _allreduce_parts(machine, collective, model, clock)),
        ("allreduce", lambda: allreduce_bounds(machine, collective, timed, split))]
    found: list[Bound] = []
    for i, (name, step) in enumerate(steps):
        if i and clock is not None and clock.expired():
            return found  # cut short: not kept
        try:
            with running(clock) if clock is not None and i else nullcontext(), phase(clock, f"{name} bound"):
                made = step()
        except OutOfTime:  # a long bound checks the clock as it goes (the first is always made)
            return found
        found += made if isinstance(made, list) else [] if made is None else [made]
    _recent.insert(0, (machine, collective, model, found))
    del _recent[RECENT:]
    return list(found)


def best_lower_bound(machine: Machine, collective: Collective, model: TimeModel = TimeModel(),
                     clock: Clock | None = None) -> Bound:
    """The largest of ``lower_bounds`` (the first of equals, in their fixed order)."""
    bounds = lower_bounds(machine, collective, model, clock)
    return max(bounds, key=lambda bound: bound.value)
