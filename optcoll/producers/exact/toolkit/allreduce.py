"""AllReduce from its two phases, for every exact model: ReduceScatter, then AllGather.

The exact models solve combining collectives with one destination per chunk by inversion, and
AllReduce (every rank a destination of every chunk) as the ReduceScatter and AllGather parts
(``split_allreduce``), each solved exactly, concatenated. What the result claims (docs/model.md
§6), in both the timed and the step model:

* **Lower bound**: every AllReduce schedule is a ReduceScatter schedule, and the transfers that
  carry rank i's own contribution to chunk i onward form an AllGather schedule, so either part's
  proven bound bounds every AllReduce schedule; the result's bound is the largest of the two and
  of any ``extra`` bound valid for every AllReduce (the timed model's analytic bounds).
* **Status**: "optimal" only when the schedule meets that bound (a proof for AllReduce itself);
  otherwise "feasible", with ``params["family_optimal"]`` saying whether both parts are optimal
  (optimal within the family ReduceScatter then AllGather) and ``params["family_lower_bound"]``
  the sum of the parts' bounds (a bound within that family only).
* **Time**: the first part gets half the time left, the second the rest. After Ctrl-C in the first
  part the second still makes its start schedule (the clock's interrupt ends its search at once),
  so the answer is a whole AllReduce with the bounds proven so far.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from optcoll.collectives.builtins import split_allreduce
from optcoll.instances.clock import Clock
from optcoll.instances.instance import Instance
from optcoll.results.outcome import SolverOutcome
from optcoll.schedules.schedule import Schedule

#: Relative slack when comparing a schedule's value with a bound (float noise only).
TOLERANCE = 1e-9
FAMILY = "reducescatter+allgather"


def compose_allreduce(instance: Instance, clock: Clock,
                      solve_part: Callable[[Instance, Clock], SolverOutcome],
                      value: Callable[[Schedule], float],
                      extra: tuple[float, str] | None = None) -> SolverOutcome:
    """The AllReduce of ``instance`` from ``solve_part`` on its two parts (module docstring).

    ``value``: a schedule's time (timed) or step cost (step) in the instance's model.
    """
    parts: list[SolverOutcome] = []
    for i, part in enumerate(split_allreduce(instance.collective)):
        sub = Instance(f"{instance.name}:{part.kind}", instance.machine, part, instance.model,
                       instance.budget, instance.source, instance.machine_ref)
        parts.append(solve_part(sub, clock.part(1.0 / (2 - i))))
    rs, ag = parts
    family_optimal = rs.status == ag.status == "optimal"
    notes = [f"reducescatter: {n}" for n in rs.notes] + [f"allgather: {n}" for n in ag.notes]
    schedule = None
    if rs.schedule is not None and ag.schedule is not None:
        offset = value(rs.schedule) if rs.model == "timed" else 0.0
        schedule = Schedule.concat(rs.schedule, ag.schedule, offset).with_meta(family=FAMILY)
        notes.append(("optimal" if family_optimal else "best found") + " within the family ReduceScatter "
                     "then AllGather; the bound holds for every AllReduce schedule")
    candidates = [(found.lower_bound, f"{name} part: {found.lower_bound_source}")
                  for name, found in (("reducescatter", rs), ("allgather", ag)) if found.lower_bound is not None]
    if extra is not None:
        candidates.append(extra)
    bound, source = max(candidates, key=lambda item: item[0]) if candidates else (None, "")
    status = "unknown"
    if schedule is not None:
        meets = bound is not None and value(schedule) <= bound * (1 + TOLERANCE)
        status = "optimal" if meets else "feasible"
    params: dict[str, Any] = {
        **ag.params, **clock.budget.to_params(), "family": FAMILY, "family_optimal": family_optimal,
        "family_lower_bound": None if None in (rs.lower_bound, ag.lower_bound) else rs.lower_bound + ag.lower_bound,
        "reducescatter": rs.params, "allgather": ag.params, "interrupted": clock.interrupted,
        **clock.work_params()}
    return SolverOutcome(status, schedule, bound, source, rs.model, rs.solver, rs.solver_version,
                         time.perf_counter() - clock.start, ag.quantum, params, rs.trace + ag.trace,
                         tuple(notes))
