"""The synchronous step model (SCCL-style, docs/model.md §5): link weights, step costs, and the
conversion of a one-round-per-step schedule on equal links into a timed schedule.

Cost: step s lasts α + r_s·b/B_min with α the largest link latency (a synchronous step waits for
the slowest link) and B_min the smallest bandwidth; a link of bandwidth B carries w = B/B_min
chunks per round, so w must be a whole number for the model to apply.
"""
from __future__ import annotations

import numpy as np

from optcoll.collectives.collective import Collective
from optcoll.errors import InputError
from optcoll.instances.instance import STEP_WEIGHT_TOLERANCE, TimeModel
from optcoll.machines.machine import Machine
from optcoll.schedules.schedule import Schedule
from optcoll.verify.problem import Finding, PRIORITY
from optcoll.verify.result import Violation

def link_weights(machine: Machine) -> np.ndarray:
    """Relative bandwidth w_e = B_e / B_min of every link, as whole numbers (the time model's)."""
    return TimeModel(kind="step").step_timing(machine, 0.0).weight


def bad_rounds(schedule: Schedule) -> Finding | None:
    """Every step needs a positive whole number of rounds."""
    for s, r in enumerate(schedule.rounds or ()):
        if isinstance(r, bool) or not isinstance(r, (int, np.integer)) or r < 1:
            return Finding(-np.inf, -1, PRIORITY["step-rounds"], Violation(
                "step-rounds", f"rounds[{s}] (step {s + 1}) is {r!r}; every step needs a positive "
                f"whole number of rounds", 0.0, step=s + 1))
    return None


def step_starts(machine: Machine, collective: Collective, rounds: tuple[int, ...]) -> np.ndarray:
    """Seconds at which step s starts, for s = 1..S+1 (index 0 is t = 0; entry S+1 is the cost).

    Rounds below 1 (an invalid schedule) are counted as 1 so statistics stay defined.
    """
    timing = TimeModel(kind="step").step_timing(machine, collective.chunk_bytes)
    lengths = timing.cost(1.0, np.maximum(np.asarray(rounds, dtype=float), 1.0))
    return np.concatenate([[0.0, 0.0], np.cumsum(lengths)])


def check_options(model: TimeModel) -> None:
    """Serialization occupancy and reduction cost belong to the timed model (port limits apply
    to both: in the step model per round, see ``timing.step_ports``)."""
    for name, default in (("occupancy", "link"), ("reduce_cost", 0.0)):
        if getattr(model, name) != default:
            raise InputError(f"{name} = {getattr(model, name)!r} applies to timed schedules only; "
                             f"this schedule uses the step model (it has rounds)", field=f"model.{name}")


def step_to_timed(machine: Machine, collective: Collective, schedule: Schedule) -> Schedule:
    """The timed schedule of a step schedule on equal-bandwidth links with one round per step.

    Step s starts at (s-1)·τ with τ = max α + b/B; each link carries at most one chunk per step,
    so no two transfers overlap and every delivery lands by the end of its step.
    """
    if schedule.rounds is None:
        raise InputError("step_to_timed takes a step-model schedule (one with rounds)",
                         field="schedule.rounds")
    if any(r != 1 for r in schedule.rounds):
        raise InputError(f"step_to_timed needs one round per step, got rounds {list(schedule.rounds)}",
                         field="schedule.rounds")
    if machine.num_links and not np.allclose(machine.link_bandwidth, machine.link_bandwidth[0],
                                             rtol=STEP_WEIGHT_TOLERANCE, atol=0.0):
        raise InputError("step_to_timed needs every link to have the same bandwidth",
                         field="machine.links")
    tau = float(step_starts(machine, collective, (1,))[-1])
    start = (schedule.step.astype(float) - 1.0) * tau
    return Schedule(schedule.chunk.copy(), schedule.link.copy(), start, schedule.op.copy(),
                    schedule.step.copy(), None, {**schedule.meta, "converted_from": "step",
                                                 "step_time": tau}, schedule.via)
