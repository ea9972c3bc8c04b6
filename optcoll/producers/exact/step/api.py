"""Entry points of the step-model solvers: ``solve_step`` and ``pareto_front``.

Statuses and bounds refer to the question asked (DESIGN.md section 6): with ``objective="cost"``
the least step cost S·α + R·b/B_min over every S and R (within ``steps``/``rounds`` when given);
with ``objective="steps"`` SCCL's least steps with one round per step. ``lower_bound`` is in
seconds of step cost, proven for that question.
"""
from __future__ import annotations

import math
import time
from dataclasses import replace
from typing import Any

from optcoll.bounds.demand import allreduce_set
from optcoll.collectives.builtins import split_allreduce
from optcoll.collectives.collective import Collective
from optcoll.errors import InputError
from optcoll.instances.instance import Instance, check_chunk_copies
from optcoll.machines.machine import Machine
from optcoll.producers.base import NotApplicable
from optcoll.producers.exact.allreduce.steps import least_steps
from optcoll.producers.exact.memory import checked_limit
from optcoll.results.outcome import SolverOutcome
from optcoll.producers.exact.step.backends import MIP_SOLVERS, Backend, LinearBackend, Settings
from optcoll.producers.exact.step.bounds import RoundsBound, problem_rounds_bound
from optcoll.producers.exact.step.chunking import rechunk
from optcoll.producers.exact.step.inversion import Plan, concatenated, plan
from optcoll.producers.exact.step.pareto import Front, frontier, sum_fronts
from optcoll.producers.exact.step.search import Found, Progress, Search
from optcoll.producers.exact.step.smt import Z3Backend
from optcoll.producers.exact.step.solution import StepSolution
from optcoll.verify.stepmodel import check_options

SOLVERS = ("cpsat", *MIP_SOLVERS, "z3")
OBJECTIVES = ("cost", "steps")


def backend_for(solver: str) -> Backend:
    if solver not in SOLVERS:
        raise InputError(f"unknown solver {solver!r} for the step model; use one of {', '.join(SOLVERS)}",
                         field="solver")
    return Z3Backend() if solver == "z3" else LinearBackend(solver)


def solve_step(instance: Instance, *, solver: str = "cpsat", steps: int | None = None,
               rounds: int | None = None, objective: str = "cost", time_limit: float | None = None,
               threads: int | None = None, seed: int | None = None, symmetry: bool = False,
               progress: Progress | None = None, max_memory: int | None = None) -> SolverOutcome:
    """The optimal step-model schedule of the instance's collective at its C (module docstring).

    ``steps`` fixes S; ``rounds`` caps R. ``max_memory`` (bytes) caps each model's estimated
    memory (default: a share of the memory available, see memory.py); a model over it is not
    built and, as at the time limit, the search ends with what it has (a note says so). ``symmetry`` adds lex-leader symmetry breaking
    (symmetry.py): sound, but measured slower on the small instances (every solver finds
    solutions later and CP-SAT's presolve finds symmetries itself), hence off by default.
    ReduceScatter and Reduce are solved by inversion;
    AllReduce as ReduceScatter then AllGather: its status is "feasible" with the larger of the
    parts' proven bounds (each bounds any AllReduce) and ``params["family_optimal"]`` says whether
    it is optimal within that family. With ``objective="steps"`` an AllReduce (built in, or a custom
    collective where every rank holds and needs every chunk: SCCL's form) is solved directly with
    combining semantics (``allreduce.steps``).
    """
    backend = backend_for(solver)
    settings = _settings(instance, time_limit, threads, seed, max_memory)
    if objective not in OBJECTIVES:
        raise InputError(f"unknown objective {objective!r}; use one of {', '.join(OBJECTIVES)}",
                         field="objective")
    for name, value in (("steps", steps), ("rounds", rounds)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise InputError(f"must be a positive integer, got {value!r}", field=name)
    if objective == "steps" and rounds is not None:
        raise InputError("objective 'steps' fixes one round per step; leave rounds unset", field="rounds")
    check_options(instance.model)
    if allreduce_set(instance.collective) is not None:
        if objective == "steps":  # SCCL's combining semantics: partial sums, no phases
            return least_steps(instance, steps=steps, time_limit=settings.time_limit, threads=settings.threads,
                               seed=settings.seed, progress=progress, max_memory=settings.max_memory)
        if instance.collective.kind != "allreduce":
            raise NotApplicable("an AllReduce-shaped custom collective is solved directly for the least "
                                "steps with one round per step: use objective 'steps' (--objective steps)")
    started = time.perf_counter()
    params: dict[str, Any] = {"time_limit": settings.time_limit, "threads": settings.threads,
                              "seed": settings.seed, "objective": objective, "steps_limit": steps,
                              "rounds_limit": rounds, "symmetry": symmetry,
                              "C": instance.collective.chunks_per_rank}
    if instance.collective.kind == "allreduce":
        if steps is not None or rounds is not None:
            raise InputError("steps/rounds apply to one phase; solve the reducescatter and allgather "
                             "parts separately to limit them", field="steps")
        return _allreduce(instance, backend, settings, objective, symmetry, progress, started, params)
    chosen = plan(instance.machine, instance.collective)
    found = _search(chosen, backend, settings, objective, steps, rounds, symmetry, progress, started, params)
    schedule = None if found.solution is None else chosen.schedule(
        found.solution, producer="exact-step", solver=solver, objective=objective)
    return SolverOutcome(found.status, schedule, found.lower_bound, found.source, "step", solver,
                         backend.version(), time.perf_counter() - started, None, params,
                         tuple(found.trace), tuple(found.notes))


def _settings(instance: Instance, time_limit: float | None, threads: int | None,
              seed: int | None, max_memory: int | None) -> Settings:
    budget = instance.budget
    time_limit = budget.time_limit if time_limit is None else time_limit
    threads = budget.threads if threads is None else threads
    seed = budget.seed if seed is None else seed
    if isinstance(time_limit, bool) or not isinstance(time_limit, (int, float)) \
            or not (time_limit > 0 and math.isfinite(time_limit)):
        raise InputError(f"must be a positive number of seconds, got {time_limit!r}", field="time_limit")
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise InputError(f"must be a positive integer, got {threads!r}", field="threads")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise InputError(f"must be an integer, got {seed!r}", field="seed")
    return Settings(float(time_limit), threads, seed, checked_limit(max_memory))


def _search(chosen: Plan, backend: Backend, settings: Settings, objective: str, steps: int | None,
            rounds: int | None, symmetry: bool, progress: Progress | None, started: float,
            params: dict[str, Any]) -> Found:
    problem = chosen.problem
    params.update(inverted=chosen.inverted, latency_bound=problem.latency_bound)
    if problem.latency_bound == 0:  # every destination already holds its chunks
        return Found(StepSolution.from_rows((), ()), "optimal", 0.0, "nothing to send")
    search = Search(problem, backend, settings, symmetry=symmetry, progress=progress, started=started)
    found = search.least_steps(steps) if objective == "steps" else search.least_cost(steps, rounds)
    params.update(rounds_bound=str(search.bound.value), rounds_bound_source=search.bound.source,
                  questions=search.asked)
    if found.solution is not None:
        params.update(S=found.solution.steps, R=found.solution.total_rounds)
    return found


def _allreduce(instance: Instance, backend: Backend, settings: Settings, objective: str, symmetry: bool,
               progress: Progress | None, started: float, params: dict[str, Any]) -> SolverOutcome:
    parts = []
    for i, part in enumerate(split_allreduce(instance.collective)):
        left = settings.time_limit - (time.perf_counter() - started)
        share = replace(settings, time_limit=max(0.05, left / (2 - i)))
        chosen = plan(instance.machine, part)
        part_params: dict[str, Any] = {}
        found = _search(chosen, backend, share, objective, None, None, symmetry, progress,
                        time.perf_counter(), part_params)
        parts.append((chosen, found, part_params))
    (rs_plan, rs, rs_params), (ag_plan, ag, ag_params) = parts
    notes = [f"reducescatter: {n}" for n in rs.notes] + [f"allgather: {n}" for n in ag.notes]
    family_optimal = rs.status == ag.status == "optimal"
    params.update(family="reducescatter+allgather", family_optimal=family_optimal,
                  reducescatter=rs_params, allgather=ag_params,
                  family_lower_bound=None if None in (rs.lower_bound, ag.lower_bound)
                  else rs.lower_bound + ag.lower_bound)
    schedule = None
    if rs.solution is not None and ag.solution is not None:
        schedule = concatenated(rs_plan.schedule(rs.solution), ag_plan.schedule(ag.solution),
                                producer="exact-step", solver=backend.name, objective=objective)
        notes.append(("optimal" if family_optimal else "best found") + " within the family "
                     "ReduceScatter then AllGather; the bound is the larger part's")
    status = "feasible" if schedule is not None else "unknown"
    # An AllReduce schedule is a ReduceScatter schedule, and the transfers carrying rank i's own
    # contribution to chunk i form an AllGather schedule: either part's proven bound bounds it.
    named = [(found.lower_bound, f"{name} part: {found.source}")
             for name, found in (("reducescatter", rs), ("allgather", ag)) if found.lower_bound is not None]
    bound, source = max(named, key=lambda item: item[0]) if named else (None, "")
    trace = tuple(rs.trace) + tuple(ag.trace)
    return SolverOutcome(status, schedule, bound, source, "step", backend.name, backend.version(),
                         time.perf_counter() - started, None, params, trace, tuple(notes))


def pareto_front(instance: Instance, max_chunks: int, *, solver: str = "cpsat",
                 time_limit: float | None = None, threads: int | None = None, seed: int | None = None,
                 symmetry: bool = False, progress: Progress | None = None,
                 max_memory: int | None = None) -> Front:
    """The (S, R/C) front for C = 1..``max_chunks`` (pareto.py), each point with its schedule for
    the instance's collective cut into C pieces per base chunk. ``time_limit`` covers the whole
    front (points found before it stand, ``proven`` says which are settled, ``Front.stopped``
    why it ended); ``progress`` gets (wall seconds, best R/C so far, rounds bound R/C) as points
    are found; ``max_memory`` as in ``solve_step`` (a refused model ends the front there).
    AllReduce: the front of ReduceScatter then AllGather (``pareto.sum_fronts``), each phase's
    front computed in half the time."""
    started = time.perf_counter()
    backend = backend_for(solver)
    settings = _settings(instance, time_limit, threads, seed, max_memory)
    if isinstance(max_chunks, bool) or not isinstance(max_chunks, int) or max_chunks < 1:
        raise InputError(f"must be a positive integer, got {max_chunks!r}", field="max_chunks")
    try:
        check_chunk_copies(instance.collective.num_ranks, max_chunks)
    except InputError as exc:
        raise exc.located(field="max_chunks") from None
    check_options(instance.model)
    if instance.collective.kind != "allreduce":
        return _front(instance.machine, instance.collective, max_chunks, backend, settings, symmetry, progress,
                      started)[0]
    # ReduceScatter then AllGather: each phase's front in half the time left, then their sum.
    parts = []
    for i, part in enumerate(split_allreduce(instance.collective)):
        left = settings.time_limit - (time.perf_counter() - started)
        share = replace(settings, time_limit=max(0.05, left / (2 - i)))
        parts.append(_front(instance.machine, part, max_chunks, backend, share, symmetry, progress,
                            time.perf_counter()))
    (rs, rs_plan, rs_bound), (ag, ag_plan, ag_bound) = parts
    if rs_plan is None or ag_plan is None:
        return Front((), True, "nothing to send")
    return sum_fronts(rs, ag, ag_plan.problem.alpha, ag_plan.problem.beta, rs_bound.value + ag_bound.value)


def _front(machine: Machine, collective: Collective, max_chunks: int, backend: Backend, settings: Settings,
           symmetry: bool, progress: Progress | None, started: float
           ) -> tuple[Front, Plan | None, RoundsBound | None]:
    """A one-phase front, with the plan at C = 1 and the rounds bound (None: nothing to send);
    the time limit runs from ``started`` and covers setting up each C (``pareto.frontier``)."""
    first = plan(machine, rechunk(collective, 1))
    if first.problem.latency_bound == 0:
        return Front((), True, "nothing to send"), None, None
    bound = problem_rounds_bound(first.problem)

    def prepare(C: int) -> Plan:
        return first if C == 1 else plan(machine, rechunk(collective, C))
    front = frontier(prepare, max_chunks, bound, backend, settings, symmetry=symmetry, progress=progress,
                     started=started)
    return front, first, bound
