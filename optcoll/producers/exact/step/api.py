"""Entry points of the step-model solvers: ``solve_step`` and ``pareto_front``.

Statuses and bounds refer to the question asked (docs/model.md §6): with ``objective="cost"``
the least step cost S·α + R·b/B_min over every S and R (within ``steps``/``rounds`` when given);
with ``objective="steps"`` SCCL's least steps with one round per step; with ``objective="rounds"``
the least R, then the least S with it. ``lower_bound`` is in
seconds of step cost, proven for that question.
"""
from __future__ import annotations

from typing import Any

from optcoll.bounds.demand import allreduce_set
from optcoll.collectives.builtins import split_allreduce
from optcoll.collectives.collective import Collective
from optcoll.errors import InputError
from optcoll.instances.budget import Budget
from optcoll.instances.clock import Clock, clock_for
from optcoll.instances.instance import Instance, check_chunk_copies
from optcoll.producers.base import NotApplicable
from optcoll.producers.exact.step.backends import Backend, LinearBackend
from optcoll.producers.exact.step.bounds import RoundsBound, allreduce_rounds_bound, problem_rounds_bound
from optcoll.producers.exact.step.chunking import rechunk
from optcoll.producers.exact.step.inversion import Plan, plan
from optcoll.producers.exact.step.pareto import Front, chunk_scope, frontier, sum_fronts
from optcoll.producers.exact.step.search import Found, Progress, Search
from optcoll.producers.exact.step.solution import StepSolution
from optcoll.producers.exact.toolkit import SOLVERS as LINEAR_SOLVERS
from optcoll.producers.exact.toolkit import check_solver
from optcoll.producers.exact.toolkit.allreduce import compose_allreduce
from optcoll.results.outcome import SolverOutcome
from optcoll.verify.stepmodel import check_options

SOLVERS = (*LINEAR_SOLVERS, "z3")
OBJECTIVES = ("cost", "steps", "rounds")


def backend_for(solver: str, work_limit: float | None = None) -> Backend:
    check_solver(solver, work_limit, SOLVERS)
    if solver != "z3":
        return LinearBackend(solver)
    from optcoll.producers.exact.step.smt import Z3Backend  # z3 is loaded only when asked for

    return Z3Backend()


def solve_step(instance: Instance, *, solver: str = "cpsat", steps: int | None = None,
               rounds: int | None = None, objective: str = "cost", time_limit: float | None = None,
               threads: int | None = None, seed: int | None = None, symmetry: bool = False,
               progress: Progress | None = None, max_memory: int | None = None,
               budget: Budget | None = None, clock: Clock | None = None) -> SolverOutcome:
    """The optimal step-model schedule of the instance's collective at its C (module docstring).

    ``steps`` fixes S; ``rounds`` caps R. Limits: ``budget`` (default: the instance's), with
    ``time_limit``, ``threads``, ``seed`` and ``max_memory`` replacing its fields when given;
    ``max_memory`` (bytes) caps each model's estimated memory (default: a share of the memory
    available, see memory.py); a model over it is not built and, as at the time limit, the
    search ends with what it has (a note says so). ``symmetry`` adds lex-leader symmetry breaking
    (symmetry.py): sound, but measured slower on the small instances (every solver finds
    solutions later and CP-SAT's presolve finds symmetries itself), hence off by default.
    ReduceScatter and Reduce are solved by inversion; AllReduce as ReduceScatter then AllGather
    (``toolkit.allreduce``: its bound is the larger part's, ``params["family_optimal"]`` says
    whether it is optimal within that family). With ``objective="steps"`` an AllReduce (built in,
    or a custom collective where every rank holds and needs every chunk: SCCL's form) is solved
    directly with combining semantics (``allreduce.steps``). ``clock``: the job's running clock
    (``run.exact``), which then holds the limits (the keyword limits must be left unset).
    """
    clock = clock_for(budget or instance.budget, clock, time_limit=time_limit, threads=threads, seed=seed,
                      max_memory=max_memory)
    budget = clock.budget
    backend = backend_for(solver, budget.work_limit)
    if objective not in OBJECTIVES:
        raise InputError(f"unknown objective {objective!r}; use one of {', '.join(OBJECTIVES)}",
                         field="objective")
    for name, value in (("steps", steps), ("rounds", rounds)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise InputError(f"must be a positive integer, got {value!r}", field=name)
    if objective != "cost" and rounds is not None:
        raise InputError(f"objective {objective!r} chooses the rounds itself; leave rounds unset", field="rounds")
    check_options(instance.model)
    if allreduce_set(instance.collective) is not None:
        if objective == "steps":  # the direct model: partial sums, no phases, either combining rule
            # the direct AllReduce model (and the timed model's grids and bounds it uses) loads only here
            from optcoll.producers.exact.allreduce.steps import least_steps

            return least_steps(instance, steps=steps, clock=clock, progress=progress)
        if instance.collective.kind != "allreduce":
            raise NotApplicable("an AllReduce-shaped custom collective is solved directly for the least "
                                "steps with one round per step: use objective 'steps' (--least-steps)")
        _refuse_overwriting_family(instance)
    if instance.collective.kind == "allreduce" and (steps is not None or rounds is not None):
        raise InputError("steps/rounds apply to one phase; solve the reducescatter and allgather "
                         "parts separately to limit them", field="steps")

    def solve_one(inst: Instance, part_clock: Clock) -> SolverOutcome:
        params: dict[str, Any] = {**part_clock.limits(), "objective": objective, "steps_limit": steps,
                                  "rounds_limit": rounds, "symmetry": symmetry,
                                  "C": inst.collective.chunks_per_rank}
        chosen = plan(inst.machine, inst.collective, inst.model)
        found = _search(chosen, backend, part_clock, objective, steps, rounds, symmetry, progress, params)
        params.update(part_clock.work_params())
        schedule = None if found.solution is None else chosen.schedule(
            found.solution, producer="exact-step", solver=solver, objective=objective)
        return SolverOutcome(found.status, schedule, found.lower_bound, found.source, "step", solver,
                             backend.version(), part_clock.elapsed(), None, params,
                             tuple(found.trace), tuple(found.notes))

    if instance.collective.kind == "allreduce":
        timing = instance.model.step_timing(instance.machine, instance.collective.chunk_bytes)
        return compose_allreduce(instance, clock, solve_one,
                                 lambda s: timing.cost(s.num_steps, sum(s.rounds or ())))
    return solve_one(instance, clock)


def _refuse_overwriting_family(instance: Instance) -> None:
    """ReduceScatter then AllGather copies each full sum over the partials it contains, which
    reduce-only (SCCL's rules) forbids; only the direct model (least steps) obeys them."""
    if instance.model.combining == "reduce-only":
        raise NotApplicable("with combining = reduce-only (SCCL's rules) an AllReduce is solved by the direct "
                            "model only, for the least steps with one round per step (--least-steps): "
                            "ReduceScatter then AllGather overwrites partial sums in its AllGather")


def _search(chosen: Plan, backend: Backend, clock: Clock, objective: str, steps: int | None,
            rounds: int | None, symmetry: bool, progress: Progress | None, params: dict[str, Any]) -> Found:
    problem = chosen.problem
    params.update(inverted=chosen.inverted, latency_bound=problem.latency_bound)
    if problem.latency_bound == 0:  # every destination already holds its chunks
        return Found(StepSolution.from_rows((), ()), "optimal", 0.0, "nothing to send")
    search = Search(problem, backend, clock, symmetry=symmetry, progress=progress)
    found = (search.least_steps(steps) if objective == "steps" else search.least_rounds(steps)
             if objective == "rounds" else search.least_cost(steps, rounds))
    params.update(rounds_bound=str(search.bound.value), rounds_bound_source=search.bound.source,
                  flow_lp=str(search.bound.detail.get("flow LP")),
                  questions=search.asked, interrupted=clock.interrupted)
    if found.solution is not None:
        params.update(S=found.solution.steps, R=found.solution.total_rounds)
    return found


def pareto_front(instance: Instance, max_chunks: int, *, solver: str = "cpsat",
                 time_limit: float | None = None, threads: int | None = None, seed: int | None = None,
                 symmetry: bool = False, progress: Progress | None = None,
                 max_memory: int | None = None, budget: Budget | None = None,
                 question_limit: float | None = None) -> Front:
    """The (S, R/C) front for C = 1..``max_chunks`` (pareto.py), each point with its schedule for
    the instance's collective cut into C pieces per base chunk. ``time_limit`` covers the whole
    front and ``question_limit`` (seconds) each (S, C) question in it: points found before a
    limit stand, ``proven`` says which are settled, ``Front.stopped`` why the front ended; ``progress`` gets (wall seconds, best R/C so far, rounds bound R/C) as points
    are found; the limits as in ``solve_step`` (a refused model ends the front there).
    AllReduce: the front of ReduceScatter then AllGather (``pareto.sum_fronts``), each phase's
    front computed in half the time left (after Ctrl-C in the first, the second stops at once)."""
    budget = (budget or instance.budget).overridden(time_limit=time_limit, threads=threads, seed=seed,
                                                    max_memory=max_memory)
    backend = backend_for(solver, budget.work_limit)
    if isinstance(max_chunks, bool) or not isinstance(max_chunks, int) or max_chunks < 1:
        raise InputError(f"must be a positive integer, got {max_chunks!r}", field="max_chunks")
    if question_limit is not None and not question_limit > 0:
        raise InputError(f"must be a positive number of seconds, got {question_limit!r}", field="question_limit")
    try:
        check_chunk_copies(instance.collective.num_ranks, max_chunks)
    except InputError as exc:
        raise exc.located(field="max_chunks") from None
    check_options(instance.model)
    clock = Clock(budget)
    if instance.collective.kind == "allreduce":
        _refuse_overwriting_family(instance)
    if instance.collective.kind != "allreduce":
        return _front(instance, instance.collective, max_chunks, backend, clock, symmetry, progress,
                      question_limit)[0]
    parts = [_front(instance, part, max_chunks, backend, clock.part(1.0 / (2 - i)), symmetry, progress,
                    question_limit)
             for i, part in enumerate(split_allreduce(instance.collective))]
    (rs, rs_plan, rs_bound), (ag, ag_plan, ag_bound) = parts
    bound = allreduce_rounds_bound(rs_bound, ag_bound)
    if rs_plan is None or ag_plan is None:
        return Front((), True, "nothing to send", bound, chunk_scope(max_chunks))
    return sum_fronts(rs, ag, ag_plan.problem.alpha, ag_plan.problem.beta, bound)


def _front(instance: Instance, collective: Collective, max_chunks: int, backend: Backend, clock: Clock,
           symmetry: bool, progress: Progress | None,
           question_limit: float | None) -> tuple[Front, Plan | None, RoundsBound]:
    """A one-phase front of ``collective`` on the instance's machine and model, with the plan at
    C = 1 (None: nothing to send) and the rounds bound; the clock's limits cover setting up each
    C (``pareto.frontier``)."""
    machine, model = instance.machine, instance.model
    first = plan(machine, rechunk(collective, 1), model)
    bound = problem_rounds_bound(first.problem)
    if first.problem.latency_bound == 0:
        return Front((), True, "nothing to send", bound, chunk_scope(max_chunks)), None, bound

    def prepare(C: int) -> Plan:
        return first if C == 1 else plan(machine, rechunk(collective, C), model)
    front = frontier(prepare, max_chunks, bound, backend, clock, symmetry=symmetry, progress=progress,
                     question_limit=question_limit)
    return front, first, bound
