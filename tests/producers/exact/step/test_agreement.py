"""The cross-check: CP-SAT, SCIP, HiGHS and z3 (two independent encodings, with and without symmetry
breaking) agree on the step-model optimum of small instances; every schedule verifies; every
optimum respects every lower bound and is no worse than TACOS where TACOS is synchronous."""
from __future__ import annotations

import pytest

from solver_checks import proof_budget
from step_helpers import STEP, agreement_instances, close, instance, verified

from optcoll.instances.clock import Clock
from optcoll.machines import generators as G

from optcoll.bounds import best_lower_bound
from optcoll.collectives.builtins import split_allreduce
from optcoll.instances.instance import Instance, TimeModel
from optcoll.producers.exact.step import solve_step
from optcoll.producers.exact.step.api import backend_for
from optcoll.producers.exact.step.bounds import problem_rounds_bound
from optcoll.producers.exact.step.greedy import greedy_solution
from optcoll.producers.exact.step.inversion import plan
from optcoll.producers.exact.step.search import LEX_PREFIX
from optcoll.producers.exact.step.solution import stretched
from optcoll.producers.exact.step.symmetry import automorphisms, lex_constraints
from optcoll.producers.registry import get_synthesizer
from optcoll.verify import verify

CASES = agreement_instances()
IDS = [inst.name for inst in CASES]
#: (solver, lex-leader symmetry breaking); z3 with symmetry breaking runs on the symmetric subset
BACKENDS = [("cpsat", False), ("cpsat", True), ("scip", False), ("highs", False), ("z3", False)]
SYMMETRIC = ("ring8-allgather", "uniring6-allgather", "hypercube3-allgather", "dgx1-allgather",
             "torus3x3-allgather", "switch4-allgather", "ring4-allgather-C2", "fc4-alltoall")


def test_the_suite_is_large_enough():
    assert len(CASES) >= 30
    assert len(set(IDS)) == len(IDS)


def _parts(inst: Instance):
    coll = inst.collective
    return split_allreduce(coll) if coll.kind == "allreduce" else [coll]


@pytest.mark.parametrize("inst", CASES, ids=IDS)
def test_backends_agree_on_least_rounds(inst):
    """Each backend proves R_min(S) by itself (lo = S, not the LP floor) at the latency bound and
    one step later; the answers are equal and at least the rounds bound."""
    for part in _parts(inst):
        chosen = plan(inst.machine, part)
        problem = chosen.problem
        floor = problem_rounds_bound(problem).rounds(part.chunks_per_rank)
        for steps in (problem.latency_bound, problem.latency_bound + 1):
            hi = stretched(problem, greedy_solution(problem), steps).total_rounds
            answers = {}
            symmetric = any(inst.name.startswith(prefix) for prefix in SYMMETRIC)
            for name, sym in BACKENDS + ([("z3", True)] if symmetric else []):
                lex = lex_constraints(problem, automorphisms(problem), LEX_PREFIX) if sym else []
                result = backend_for(name).minimise_rounds(problem, steps, steps, hi, hint=None,
                                                           lex=lex, clock=Clock(proof_budget(name)))
                assert result.status == "optimal", (name, sym, steps)
                solution = result.solution
                assert solution.steps == steps
                check = verify(inst.machine, part, chosen.schedule(solution), STEP)
                assert check.valid, (name, sym, check.violation)
                assert close(check.time, problem.cost(steps, solution.total_rounds))
                answers[name, sym] = solution.total_rounds
            assert len(set(answers.values())) == 1, answers
            assert answers["cpsat", False] >= max(steps, floor)


@pytest.mark.parametrize("inst", CASES, ids=IDS)
def test_solvers_agree_on_least_cost_and_least_steps(inst):
    costs, steps = {}, {}
    for solver in ("cpsat", "scip", "z3"):
        out = solve_step(inst, solver=solver, budget=proof_budget(solver))
        cost = verified(inst, out)
        if inst.collective.kind == "allreduce":
            assert out.status == "feasible" and out.params["family_optimal"]
        else:
            assert out.status == "optimal"
            assert close(cost, out.lower_bound)
        assert out.lower_bound <= cost * (1 + 1e-9)
        costs[solver] = cost
        if inst.collective.kind != "allreduce":
            least = solve_step(inst, solver=solver, objective="steps", budget=proof_budget(solver))
            verified(inst, least)
            assert least.status == "optimal"
            assert least.schedule.rounds == (1,) * least.schedule.num_steps
            steps[solver] = least.schedule.num_steps
    assert all(close(c, costs["cpsat"]) for c in costs.values()), costs
    assert len(set(steps.values())) <= 1, steps
    analytic = best_lower_bound(inst.machine, inst.collective, STEP)
    assert costs["cpsat"] >= analytic.value * (1 - 1e-9), analytic


def _synchronous(inst: Instance) -> bool:
    """Equal links: TACOS's timed schedule is then a step schedule with one round per step."""
    m = inst.machine
    return bool((m.link_bandwidth == m.link_bandwidth[0]).all()
                and (m.link_latency == m.link_latency[0]).all())


@pytest.mark.parametrize("inst", [i for i in CASES if _synchronous(i)],
                         ids=[i.name for i in CASES if _synchronous(i)])
def test_optimum_is_no_worse_than_tacos(inst):
    out = solve_step(inst, budget=proof_budget())
    timed = Instance(inst.name, inst.machine, inst.collective, TimeModel())
    tacos = get_synthesizer("tacos")
    best = min(verify(timed.machine, timed.collective, tacos(timed, seed), timed.model).time
               for seed in range(3))
    assert verified(inst, out) <= best * (1 + 1e-9)


def _front_points(inst: Instance, max_chunks: int, solver: str):
    from optcoll.producers.exact.step import pareto_front

    front = pareto_front(inst, max_chunks, solver=solver, budget=proof_budget(solver))
    assert front.complete, (solver, front.stopped)
    return [(p.steps, p.rounds, p.chunks, p.proven) for p in front.points]


@pytest.mark.parametrize("max_chunks", [4, pytest.param(6, marks=pytest.mark.slow)])
def test_z3_and_cpsat_agree_on_every_dgx1_pareto_point(max_chunks):
    """The DGX-1 AllGather front (SCCL's): (2, 3, 2), then (3, 5, 4) at C ≤ 4 or (3, 7, 6) at
    C ≤ 6, every point proven by both encodings."""
    inst = instance(G.dgx1())
    cpsat, z3 = _front_points(inst, max_chunks, "cpsat"), _front_points(inst, max_chunks, "z3")
    assert cpsat == z3
    assert [p[:3] for p in cpsat] == [(2, 3, 2), (3, 5, 4) if max_chunks == 4 else (3, 7, 6)]
    assert all(p[3] for p in cpsat)
