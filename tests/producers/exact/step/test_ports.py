"""Port limits in the step model (link groups, problem.py): SCCL's HubAndSpoke question, one send
and one receive per node per round, cross-checked against the timed model with one send and one
receive port, between CP-SAT and z3, and by the verifier."""
from __future__ import annotations

from dataclasses import replace

import pytest

from optcoll.instances.instance import TimeModel
from optcoll.machines import generators as G
from optcoll.producers.exact.step import pareto_front, solve_step
from optcoll.producers.exact.step.chunking import rechunk
from optcoll.producers.exact.timed.solve import solve_timed
from optcoll.verify import verify
from solver_checks import proof_budget
from step_helpers import BW, LAT, close, instance, verified

ONE_PORT = TimeModel(kind="step", send_ports=1, recv_ports=1)
KINDS = [("alltoall", None), ("scatter", 0), ("gather", 0)]
PROOF = proof_budget()


def hub_and_spoke(n: int, kind: str, root: int | None, model: TimeModel = ONE_PORT):
    return replace(instance(G.fully_connected(n, BW, LAT), kind, root=root), model=model)


@pytest.mark.parametrize("n", [4, 5, 8])
@pytest.mark.parametrize("kind,root", KINDS)
def test_one_port_least_steps_is_n_minus_one_in_both_encodings(n, kind, root):
    """Every node has n−1 chunks to send (AlltoAll, the Scatter root) or to receive (the Gather
    root) through one port: n−1 steps are needed, and a round-robin achieves them."""
    inst = hub_and_spoke(n, kind, root)
    for solver in ("cpsat", "z3"):
        out = solve_step(inst, objective="steps", solver=solver, budget=proof_budget(solver))
        assert out.status == "optimal" and out.params["S"] == n - 1, (solver, out.notes)
        assert close(verified(inst, out), (n - 1) * (LAT + 1e3 / BW))


@pytest.mark.parametrize("n", [4, 5, 8])
@pytest.mark.parametrize("kind,root", KINDS)
def test_one_port_step_optimum_equals_the_timed_optimum(n, kind, root):
    """With equal links and one round per step a step schedule is a timed schedule of time
    S·(α + b/B) (docs/model.md §5); with one send and one receive port the timed optimum is the same."""
    step = hub_and_spoke(n, kind, root)
    timed = replace(step, model=replace(ONE_PORT, kind="timed"))
    by_steps = solve_step(step, objective="steps", budget=PROOF)
    by_time = solve_timed(timed, budget=PROOF)
    assert by_steps.status == by_time.status == "optimal"
    assert close(verified(step, by_steps), verified(timed, by_time))


def test_ports_change_the_answer_and_the_verifier_enforces_them():
    """Without ports a fully connected AlltoAll takes one step; that schedule breaks send_ports."""
    free = hub_and_spoke(4, "alltoall", None, TimeModel(kind="step"))
    out = solve_step(free, objective="steps", budget=PROOF)
    assert out.params["S"] == 1
    check = verify(free.machine, free.collective, out.schedule, ONE_PORT)
    assert not check.valid and "send_ports = 1" in check.violation.message


def test_ports_bound_the_rounds_and_the_front():
    """The rounds bound counts a node's port, and the front never beats it."""
    inst = hub_and_spoke(4, "scatter", 0)
    front = pareto_front(inst, 2, budget=PROOF)
    assert front.complete and front.points
    assert all(p.rounds_per_chunk >= 3 for p in front.points)  # the root sends 3 chunks per C
    for p in front.points:
        check = verify(inst.machine, rechunk(inst.collective, p.chunks), p.schedule, inst.model)
        assert check.valid and close(check.time, p.cost), check.violation
