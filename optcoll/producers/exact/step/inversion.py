"""Which step problem solves a collective, and how its solution becomes the collective's schedule.

Non-combining collectives are solved as they are. ReduceScatter and Reduce (and combining custom
collectives) are solved through SCCL's inversion: their dual (pre and post swapped: AllGather,
Broadcast) on the reversed machine, run backwards — step s becomes S+1−s and every copy a
reduction into the receiver. A step schedule of the combining collective read backwards is a
schedule of the dual with the same steps and rounds, and a lean dual schedule (each node receives
a chunk once and only if it needs or forwards it) read backwards sends every contribution exactly
once, so both have the same optimum. In the dual a switch may copy iff it reduces in the original,
and port limits swap sides: a receive in the original is a send in the dual.
AllReduce is ReduceScatter then AllGather (``toolkit.allreduce``), steps concatenated.
"""
from __future__ import annotations

from dataclasses import dataclass

from optcoll.collectives.builtins import dual
from optcoll.collectives.collective import Collective
from optcoll.instances.instance import TimeModel
from optcoll.machines.machine import Machine
from optcoll.producers.base import NotApplicable
from optcoll.producers.exact.step.problem import StepProblem, step_problem
from optcoll.producers.exact.timed.problem import invertible
from optcoll.producers.exact.step.solution import StepSolution, to_schedule
from optcoll.schedules.schedule import Schedule


@dataclass(frozen=True)
class StepPlan:
    """The step problem solved for a (non-AllReduce) collective and the direction of its schedule."""

    problem: StepProblem
    inverted: bool

    def schedule(self, solution: StepSolution, **meta) -> Schedule:
        return to_schedule(self.problem, solution, reverse=self.inverted, **meta)


def plan(machine: Machine, collective: Collective, model: TimeModel | None = None) -> StepPlan:
    """The step problem of ``collective`` under ``model``'s port limits (none when None)."""
    send, recv = (None, None) if model is None else (model.send_ports, model.recv_ports)
    if collective.kind == "allreduce":
        raise ValueError("allreduce is solved as reducescatter then allgather")
    if not collective.combining:
        return StepPlan(step_problem(machine, collective, send_ports=send, recv_ports=recv), False)
    if not invertible(collective):
        raise NotApplicable(f"{collective.kind} has chunks with several destinations: only reductions "
                            "to one node per chunk invert into a dual collective (an AllReduce-shaped one "
                            "is solved directly for the least steps: --least-steps)")
    bad = [s.label for s in machine.switches if s.multicast and not s.reduce]
    if bad:
        raise NotApplicable(
            f"the step solver inverts {collective.kind} into its dual, which needs every switch to "
            f"either reduce or forward each arrival once; switch {bad[0]!r} multicasts without "
            f"reducing (it would overwrite one partial with the next)")
    return StepPlan(step_problem(machine.reversed(), dual(collective), copy_flag="reduce", send_ports=recv,
                             recv_ports=send), True)
