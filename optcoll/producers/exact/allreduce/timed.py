"""The direct AllReduce model as a phase of the exact timed solver: after ReduceScatter then
AllGather, look for a faster AllReduce among direct schedules (issue 13).

When the machine has a fixed-point-free symmetry group it first asks whether a symmetric schedule
meets the proven bound (small models, and where the bound is tight the answer is an optimum: DGX-1
with two chunks per GPU), then minimises the makespan over every schedule of the model, hinted
with the best schedule so far on every variable when it fits the epochs. A schedule it finds is
verified by the caller before it counts.

What its search proves is kept apart from the instance's bounds: the model allows only starts on
its epochs (and, with plain switches, forwarding on arrival), so "no schedule before epoch k" is a
statement about that family of schedules, recorded as ``params["direct"]["family_bound"]``,
never as a lower bound of the timed model (between two epochs a node may see some of the
arrivals of that epoch and not others, which the model does not represent).

When that family bound exceeds the instance's best lower bound, the pieces relaxation
(``pieces``), whose epochs lose nothing, is asked at one epoch less with the time left: if it
has no schedule there, the family bound is a lower bound of the timed model after all, and the
phase returns it with its witness (``DirectPhase.lower_bound``).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from optcoll.instances.clock import Clock, OutOfTime, running
from optcoll.instances.instance import Instance
from optcoll.producers.base import NotApplicable
from optcoll.producers.exact.allreduce.pieces import prove, relaxation_problem
from optcoll.producers.exact.allreduce.problem import DirectProblem, timed_problem
from optcoll.producers.exact.allreduce.solve import TooSlowToBuild, solve
from optcoll.producers.exact.allreduce.symmetric import orbit
from optcoll.producers.exact.allreduce.transfers import RouteTransfers, from_schedule, to_schedule
from optcoll.producers.exact.allreduce.encoding import least_size, size as encoding_size
from optcoll.producers.exact.memory import ModelSize, ModelTooLarge, require_fits
from optcoll.schedules.schedule import Schedule

#: Share of the direct phase's time the symmetric restriction may use first.
SYMMETRIC_SHARE = 0.3
#: Relative slack when reading a time as whole epochs.
TOLERANCE = 1e-9


@dataclass
class DirectPhase:
    """What the phase found: a schedule (None: nothing better than the start), notes, params."""

    schedule: Schedule | None = None
    notes: list[str] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)
    lower_bound: float | None = None  # seconds, proved for every timed schedule (pieces relaxation)
    lower_bound_source: str = ""


#: The link maps of a fixed-point-free group of the machine's automorphisms that keeps link
#: timings and the ranks, within a clock (found by the timed solver's symmetry search).
GroupFinder = Callable[[Clock], Sequence[np.ndarray]]


def direct_phase(instance: Instance, start: Schedule | None, start_time: float, bound: float, clock: Clock,
                 group: GroupFinder | None = None) -> DirectPhase:
    """Search direct AllReduce schedules faster than ``start`` (taking ``start_time`` seconds),
    down to the proven ``bound``, within ``clock`` (its work and a Ctrl-C are booked on it).
    ``group`` finds the symmetry the symmetric restriction uses (None: no restriction)."""
    phase = DirectPhase()
    if clock.expired():
        phase.notes.append(f"direct AllReduce model: not run: {_stopped(clock)}")
        phase.params["refused"] = f"{_stopped(clock)} before it ran"  # the record names what stopped the proof
        return phase
    try:
        with running(clock), clock.phase("direct model: set-up"):
            problem = timed_problem(instance)
    except NotApplicable as why:
        phase.notes.append(f"direct AllReduce model: not applicable ({why})")
        return phase
    except OutOfTime:
        return _not_built(phase, clock)
    except KeyboardInterrupt:
        clock.interrupt()
        return _not_built(phase, clock)
    q = problem.quantum
    horizon = math.ceil(start_time / q * (1 - TOLERANCE)) if math.isfinite(start_time) else None
    if horizon is None:
        phase.notes.append("direct AllReduce model: no start schedule to set its horizon")
        return phase
    floor = max(1, math.ceil(bound / q * (1 - TOLERANCE)))
    if clock.expired():  # setting the problem up took the time (a cooperative deadline)
        return _not_built(phase, clock)
    phase.params = {"quantum": q, "rounding": problem.rounding, "restrictions": list(problem.restrictions),
                    "horizon_epochs": horizon, "floor_epochs": floor}
    best: RouteTransfers | None = None
    try:
        with running(clock), clock.phase("direct model: size"):
            too_large = _whole_too_large(problem, horizon, clock)
        symmetric_clock = clock.part(SYMMETRIC_SHARE)
        found_group = None
        with clock.phase("direct model: symmetry"):
            if group is not None and horizon > floor and not clock.expired() and _quotient_may_fit(problem, floor, clock):
                found_group = orbit(problem, group(symmetric_clock))
        if found_group is not None:
            symmetric = (f"direct AllReduce model, symmetric under a group of {found_group.order} "
                         f"({len(found_group.representatives)} representative chunk(s)), at the bound's {floor} epochs")
            try:
                out, found = solve(problem, floor, floor, symmetric_clock, orbit=found_group)
            except TooSlowToBuild as slow:  # the unrestricted model may still fit the time left
                phase.notes.append(f"{symmetric}: {slow}")
            else:
                phase.notes.append(f"{symmetric}: {out.status} ({out.wall:.2f} s)")
                if found is not None:
                    best = found
                    phase.params["symmetric_epochs"] = found.makespan(problem)
        at_floor = best is not None and best.makespan(problem) <= floor
        if not at_floor and not clock.expired():
            if too_large is not None:  # refused before its hint is read: that takes minutes at 512 GPUs
                raise too_large
            with running(clock), clock.phase("direct model: the start as a hint"):
                hint = from_schedule(problem, start) if start is not None else None
            with clock.phase("direct model: search"):
                out, found = solve(problem, horizon, floor, clock, start=best if best is not None else hint)
            phase.notes.append(f"direct AllReduce model ({out.size.variables} variables, {out.size.terms} "
                               f"terms, hint {out.hinted}): {out.status} ({out.wall:.2f} s)")
            phase.params.update(status=out.status, variables=out.size.variables, terms=out.size.terms,
                                wall_time=out.wall, family_bound=None if out.bound is None else out.bound * q)
            if found is not None and (best is None or found.makespan(problem) < best.makespan(problem)):
                best = found
            if out.bound is not None and out.bound * q > bound * (1 + TOLERANCE) and not clock.interrupted:
                _prove_family_bound(instance, phase, out.bound * q, clock)
    except ModelTooLarge as refused:
        phase.notes.append(f"direct AllReduce model: memory limit: {refused.detail}")
        phase.params["refused"] = refused.detail
    except TooSlowToBuild as slow:
        phase.notes.append(f"direct AllReduce model: time limit: {slow}")
        phase.params["refused"] = str(slow)
    except OutOfTime:
        _not_built(phase, clock)
    except KeyboardInterrupt:
        clock.interrupt()
    if best is not None:
        phase.params["epochs"] = best.makespan(problem)
        phase.schedule = schedule_of(problem, best)
    return phase


def _not_built(phase: DirectPhase, clock: Clock) -> DirectPhase:
    """The clock ended (or Ctrl-C) while the model was set up: refused, with what stopped it."""
    phase.notes.append(f"direct AllReduce model: not built: {_stopped(clock)}")
    phase.params["refused"] = f"{_stopped(clock)} while it was set up"
    return phase


def _whole_too_large(problem: DirectProblem, horizon: int, clock: Clock) -> ModelTooLarge | None:
    """The refusal of the unrestricted model at ``horizon`` epochs when it cannot fit in memory
    (None: it may), known before its hint is read or a symmetry is searched for: from its least
    size first (no reach needed), then from its size."""
    try:
        for size in (least_size, encoding_size):
            require_fits(size(problem, horizon), "cpsat", clock.budget.threads, clock.budget.max_memory)
    except ModelTooLarge as refused:
        return refused
    return None


def _stopped(clock: Clock) -> str:
    return "interrupted" if clock.interrupted else f"{clock.limit_reached()} reached"


def _quotient_may_fit(problem: DirectProblem, floor: int, clock: Clock) -> bool:
    """Whether the symmetric model at ``floor`` epochs could fit in memory with the largest group
    there can be (one that moves every rank: order at most the rank count). Where it cannot, the
    group is not searched for (a search of minutes on a 128-GPU cluster)."""
    order = max(problem.num_members, 1)
    try:
        for size in (least_size, encoding_size):  # the least size first: no reach needed
            whole = size(problem, floor)
            require_fits(ModelSize(whole.formulation, whole.what, whole.variables // order, whole.terms // order),
                         "cpsat", clock.budget.threads, clock.budget.max_memory)
    except ModelTooLarge:
        return False
    return True


def _prove_family_bound(instance: Instance, phase: DirectPhase, family: float, clock: Clock) -> None:
    """Asks the pieces relaxation for a schedule done one epoch before ``family`` seconds; its
    infeasibility makes ``family`` a lower bound of the timed model (module docstring)."""
    if clock.left() <= 0.05:
        phase.notes.append("pieces relaxation: no time left to ask it")
        return
    try:
        problem = relaxation_problem(instance)
        horizon = math.ceil(family / problem.quantum * (1 - TOLERANCE)) - 1
        out = prove(problem, horizon, clock)
    except (NotApplicable, ModelTooLarge, TooSlowToBuild) as why:
        phase.notes.append(f"pieces relaxation: not asked ({why})")
        return
    phase.notes.append(f"pieces relaxation at {horizon} epochs ({out.size.variables} variables, {out.size.terms} "
                       f"terms): {out.status} ({out.wall:.2f} s)")
    phase.params["pieces"] = {"horizon_epochs": horizon, "status": out.status, "variables": out.size.variables,
                              "terms": out.size.terms, "wall_time": out.wall}
    if out.bound is not None:
        phase.lower_bound, phase.lower_bound_source = out.bound, out.witness()


def schedule_of(problem: DirectProblem, transfers: RouteTransfers) -> Schedule:
    return to_schedule(problem, transfers, producer="optcoll-timed", family="direct",
                       quantum=problem.quantum)
