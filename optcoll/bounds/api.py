"""Every analytic lower bound for (machine, collective, time model), and the best of them."""
from __future__ import annotations

from dataclasses import replace

from optcoll.bounds.allreduce import allreduce_bounds
from optcoll.bounds.bound import Bound
from optcoll.bounds.cutbounds import broadcast_maxflow_bound, cut_bound, split_cuts
from optcoll.bounds.demand import allreduce_set, check_fits
from optcoll.bounds.latency import latency_bound
from optcoll.bounds.mcf import mcf_bound
from optcoll.bounds.nodes import egress_bound, ingress_bound
from optcoll.bounds.oneport import one_port_bound
from optcoll.bounds.volume import capacity_bound
from optcoll.collectives.builtins import split_allreduce
from optcoll.collectives.collective import Collective
from optcoll.instances.instance import TimeModel
from optcoll.machines.machine import Machine


def _timed_relaxation(model: TimeModel) -> TimeModel:
    """A step lasts max α + r_s·b/B_min and a link of bandwidth B_e = w_e·B_min carries at most
    w_e·r_s chunks in it; sent back to back under serialization occupancy they all arrive by
    α_e + r_s·b/B_min, inside the step. So every step schedule is a serialization-timed schedule
    no slower than its step cost, and the serialization bounds bound it too."""
    return replace(model, kind="timed", occupancy="serialization") if model.kind == "step" else model


def _allreduce_parts(machine: Machine, collective: Collective, model: TimeModel) -> Bound | None:
    """An AllReduce schedule is also a ReduceScatter schedule (same chunks, weaker postcondition)
    and contains an AllGather one (follow each rank's contribution to every chunk), so its time
    is at least the best bound of either part."""
    if collective.kind != "allreduce" or collective.num_ranks < 2:
        return None
    parts = [(part.kind, best_lower_bound(machine, part, model)) for part in split_allreduce(collective)]
    kind, bound = max(parts, key=lambda item: item[1].value)
    return Bound("allreduce", bound.value, f"its {kind} part: {bound.name} bound, {bound.detail}",
                 bound.exact)


def lower_bounds(machine: Machine, collective: Collective, model: TimeModel = TimeModel()) -> list[Bound]:
    """Every bound that applies, in a fixed order (latency first). Each is a time no valid schedule
    in ``model`` can beat; ``best_lower_bound`` picks the largest."""
    check_fits(machine, collective)
    timed = _timed_relaxation(model)
    members = allreduce_set(collective) if collective.needs[0].size else None
    split = split_cuts(machine, members) if members is not None else None
    found = [latency_bound(machine, collective, timed),
             ingress_bound(machine, collective, timed),
             egress_bound(machine, collective, timed),
             cut_bound(machine, collective, split),
             broadcast_maxflow_bound(machine, collective),
             capacity_bound(machine, collective, timed),
             mcf_bound(machine, collective, timed),
             one_port_bound(machine, collective, model),
             _allreduce_parts(machine, collective, model),
             *allreduce_bounds(machine, collective, timed, split)]
    return [bound for bound in found if bound is not None]


def best_lower_bound(machine: Machine, collective: Collective, model: TimeModel = TimeModel()) -> Bound:
    """The largest of ``lower_bounds`` (the first of equals, in their fixed order)."""
    bounds = lower_bounds(machine, collective, model)
    return max(bounds, key=lambda bound: bound.value)
