"""Every exact formulation by name: what it applies to, what its answer proves, and how it runs.

One front door, interchangeable formulations behind it (networkx's ``maximum_flow(flow_func=…)``):
``run.exact`` solves an instance with the formulation named, or its model's default, through
``Formulation.solve``, and a test and a benchmark iterate over ``FORMULATIONS`` to hold each one
to its declaration. Some formulations are *phases* of another (``within``): they run inside it
where they apply and are listed for the reader, not called alone.

What a formulation proves is stated in the words of docs/model.md §6: an *optimum* is proven
for every schedule of the model named; a *bound* is a lower bound for every schedule of it; a
*restriction* proves nothing outside the schedules it allows (its answer is only an upper bound).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from optcoll.errors import InputError
from optcoll.instances.clock import Clock
from optcoll.instances.instance import Instance
from optcoll.producers.base import NotApplicable
from optcoll.results.outcome import SolverOutcome

#: (instance, clock, the question's options: solver, progress, quantum, steps, rounds, objective)
Solve = Callable[[Instance, Clock, dict[str, Any]], SolverOutcome]


@dataclass(frozen=True)
class Formulation:
    """One exact formulation (module docstring). ``applies`` says why it does not apply to an
    instance (None: it does); ``solve`` runs it alone (None: a phase ``within`` another)."""

    name: str
    model: str  # the time model it answers in: "timed" or "step"
    summary: str
    applies_to: str  # in words, what ``applies`` checks
    proves: str
    applies: Callable[[Instance], str | None]
    solve: Solve | None = None
    within: str | None = None
    module: str = ""  # where it is encoded


def _timed(instance: Instance) -> str | None:
    if instance.model.kind != "timed":
        return "it answers in the timed model (use the timed model)"
    if not instance.collective.equal_chunks:
        return (f"the exact timed model cuts time for equal chunks; {instance.collective.kind}'s chunks "
                "differ in size")
    if instance.model.combining != "copy-or-reduce":
        return (f"combining = {instance.model.combining!r} is solved in the step model only (the verifier "
                "checks it for any schedule)")
    return None


def _step(instance: Instance) -> str | None:
    return None if instance.model.kind == "step" else "it answers in the step model (use the step model)"


def _timed_allreduce(instance: Instance) -> str | None:
    if instance.collective.kind != "allreduce":
        return "it models AllReduce only"
    return _timed(instance)


def _step_allreduce(instance: Instance) -> str | None:
    from optcoll.bounds.demand import allreduce_set

    if allreduce_set(instance.collective) is None:
        return "it models AllReduce-shaped collectives only (every rank holds and needs every chunk)"
    return _step(instance)


def _one_switch(instance: Instance) -> str | None:
    return None if instance.collective.kind == "allreduce" else "it plans AllReduce on rail-joined nodes only"


def _solve_timed(formulation: str) -> Solve:
    def solve(instance: Instance, clock: Clock, options: dict[str, Any]) -> SolverOutcome:
        from optcoll.producers.exact.timed.solve import solve_timed

        _refuse_step_options(options)
        return solve_timed(instance, solver=options.get("solver", "cpsat"), clock=clock,
                           progress=options.get("progress"), quantum=options.get("quantum"),
                           formulation=formulation)
    return solve


def _refuse_step_options(options: dict[str, Any]) -> None:
    if options.get("solver") == "z3":
        raise InputError("z3 solves the step model only (use the step model)", field="solver")
    for name in ("steps", "rounds"):
        if options.get(name) is not None:
            raise InputError(f"{name} apply to the step model only (use the step model)", field=name)
    if options.get("objective", "cost") != "cost":
        raise InputError(f"objective {options['objective']!r} applies to the step model only", field="objective")


def _solve_step(instance: Instance, clock: Clock, options: dict[str, Any]) -> SolverOutcome:
    from optcoll.producers.exact.step import solve_step

    if options.get("quantum") is not None:
        raise InputError("a time quantum applies to the timed model only", field="quantum")
    return solve_step(instance, solver=options.get("solver", "cpsat"), clock=clock, progress=options.get("progress"),
                      steps=options.get("steps"), rounds=options.get("rounds"),
                      objective=options.get("objective", "cost"))


def _solve_least_steps(instance: Instance, clock: Clock, options: dict[str, Any]) -> SolverOutcome:
    return _solve_step(instance, clock, {**options, "objective": "steps"})


FORMULATIONS: tuple[Formulation, ...] = (
    Formulation(
        "timed", "timed", "the timed solver: start schedules, analytic bounds, then the time-expanded and "
        "continuous models as the grid allows (AllReduce: ReduceScatter then AllGather, then the direct model)",
        "every collective of equal chunks in the timed model",
        "an optimum of the timed model when its schedule meets the best bound proven; else that bound",
        _timed, _solve_timed("auto"), module="producers.exact.timed.solve"),
    Formulation(
        "time-expanded", "timed", "one variable per (chunk, link, epoch) on a grid of one quantum, horizon search",
        "every collective of equal chunks in the timed model (any solver: CP-SAT, HiGHS, SCIP)",
        "on an exact grid, an optimum of the timed model; on a rounded-up grid schedules only, on the "
        "rounded-down grid a bound",
        _timed, _solve_timed("expanded"), module="producers.exact.timed.expanded"),
    Formulation(
        "continuous", "timed", "exact start times in a fine unit as CP-SAT intervals",
        "collectives of equal chunks in the timed model whose link times share a unit of at most 10^6 "
        "per link (CP-SAT only)",
        "an optimum of the timed model (its unit is exact)",
        _timed, _solve_timed("continuous"), module="producers.exact.timed.continuous"),
    Formulation(
        "coarse", "timed", "epochs of several transfers on the fastest link, several transfers per link and epoch",
        "timed instances whose fine grid needs more than 64 epochs or more memory than allowed",
        "a restriction: schedules (upper bounds) only",
        _timed, within="time-expanded", module="producers.exact.timed.coarse"),
    Formulation(
        "direct-allreduce", "timed", "partial sums on stateful nodes, routes through plain switches, on epochs",
        "AllReduce in the timed model, after ReduceScatter then AllGather (CP-SAT only)",
        "a restriction (epochs, forwarding on arrival): schedules, and a bound of its own family; the "
        "timed model's bound comes from the pieces relaxation",
        _timed_allreduce, within="timed", module="producers.exact.allreduce.timed"),
    Formulation(
        "pieces", "timed", "every node keeps each piece it received and sends any disjoint union of them",
        "AllReduce in the timed model on exact epochs, no port limits, no reduction cost, plain switches only",
        "a bound of the timed model (infeasible one epoch below the direct model's family bound)",
        _timed_allreduce, within="direct-allreduce", module="producers.exact.allreduce.pieces"),
    Formulation(
        "step", "step", "SCCL's step model as an integer program (CP-SAT, HiGHS, SCIP) or an SMT formula (z3)",
        "every collective in the step model (AllReduce as ReduceScatter then AllGather)",
        "the least cost S·α + R·b/B_min (or the least steps or rounds asked for) of the step model; "
        "AllReduce: optimal within ReduceScatter then AllGather",
        _step, _solve_step, module="producers.exact.step.linear"),
    Formulation(
        "least-steps", "step", "the direct AllReduce model on a step grid, one round per step, S from the bound up",
        "AllReduce-shaped collectives in the step model (CP-SAT only)",
        "the least S with one round per step (SCCL's combining semantics); with plain switches a "
        "restriction (forwarding in the next step)",
        _step_allreduce, _solve_least_steps, module="producers.exact.allreduce.steps"),
    Formulation(
        "slot-plan", "timed", "a staircase of reductions and the broadcasts after it, in slots of one NVLink hop",
        "AllReduce on nodes of at most 8 GPUs joined by NIC rails (inside the rail-exchange synthesizer)",
        "a restriction: the least deadline of the slot model of one switch, used to build a schedule "
        "whose time the verifier decides",
        _one_switch, within="rail-exchange", module="producers.baselines.slotplan"),
)

BY_NAME: dict[str, Formulation] = {f.name: f for f in FORMULATIONS}
#: The formulation ``run.exact`` uses when none is named, per time model.
DEFAULT = {"timed": "timed", "step": "step"}


def choose(instance: Instance, name: str | None = None) -> Formulation:
    """The formulation ``name`` (default: the instance's model's), checked to run alone (else an
    ``InputError`` naming the field) and to apply to the instance (else ``NotApplicable``)."""
    asked, name = name, DEFAULT[instance.model.kind] if name is None else name
    formulation = BY_NAME.get(name)
    alone = [f.name for f in FORMULATIONS if f.solve is not None]
    if formulation is None:
        raise InputError(f"unknown formulation {name!r}; use one of {', '.join(alone)}", field="formulation")
    if formulation.solve is None:
        raise InputError(f"{name} runs within {formulation.within} only; use one of {', '.join(alone)}",
                         field="formulation")
    why = formulation.applies(instance)
    if why is not None:
        raise NotApplicable(why if asked is None else f"{name} does not apply: {why}")
    return formulation
