"""The step-model Pareto front over (S, R/C) for C = 1..max_chunks (SCCL's frontier).

For S from the latency bound up, the least R/C over every C: a point joins the front only if it
beats every smaller S. Each C is asked only for R/C strictly below the best so far (and at least
its rounds bound ⌈C·LB⌉ and S), so a C whose floor max(S, ⌈C·LB⌉)/C no longer beats the best is
dropped for good — floors only grow with S and the best only falls. Each S starts with one probe:
can the C of the lowest floor (the smallest such C) meet its floor exactly? If so no C can beat it
at this S or later and every C is dropped unasked (DGX-1 AllGather at S = 3: C = 6 meets the bound
7/6, so C = 3, 4 and 5 are no longer asked); if not, that C is asked from its floor + 1 at this S.
The search stops when the best R/C meets the rounds lower bound (bandwidth-optimal) or every C is
dropped; both always happen.

Every claim is scoped: the front covers every S but only C ≤ max_chunks (``Front.scope``). A
larger C can lie below it (mybox AllGather: the front for C ≤ 3 ends at (S, R/C) = (2, 4/3), and
C = 4 reaches 5/4 at S = 2), so "complete" and "proven" never speak of C beyond the range; only
"bandwidth-optimal" does, because the rounds lower bound holds for every C.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

from optcoll.instances.clock import Clock
from optcoll.producers.exact.memory import ModelTooLarge
from optcoll.producers.exact.step.backends import Backend
from optcoll.producers.exact.step.bounds import FAMILY, RoundsBound
from optcoll.producers.exact.step.chunking import refine
from optcoll.producers.exact.step.greedy import greedy_solution
from optcoll.producers.exact.step.inversion import Plan
from optcoll.producers.exact.step.search import LEX_PREFIX, Progress
from optcoll.producers.exact.step.solution import StepSolution, stretched
from optcoll.producers.exact.step.symmetry import automorphisms, lex_constraints
from optcoll.schedules.schedule import Schedule


@dataclass(frozen=True)
class ParetoPoint:
    """One frontier point (S, R, C) and its schedule for the collective cut into C pieces per chunk.

    ``cost`` is S·α + R·b/B_min in seconds for the instance's buffer (b = its chunk bytes at this
    C); ``formula`` writes it with b₁ = the chunk bytes at C = 1. ``proven``: no point with these
    S or fewer steps and a smaller R/C exists among the chunk counts of the front's ``scope``
    (every question up to here was answered with a proof). ``bandwidth_optimal``: R/C equals the
    rounds lower bound, which holds for every C.
    """

    steps: int
    rounds: int
    chunks: int
    rounds_per_chunk: Fraction
    cost: float
    formula: str
    proven: bool
    bandwidth_optimal: bool
    schedule: Schedule


@dataclass(frozen=True)
class Front:
    """The points found, in order of S, and why the search ended: ``complete`` when it reached
    the rounds lower bound or no C in ``scope`` could improve any more; otherwise ``stopped`` says
    what cut it short (the time limit, Ctrl-C, a model over the memory limit) and later points may
    exist. ``bound``: the rounds lower bound the front was searched against
    (``rounds_lower_bound``). ``scope``: the schedules the front searched, in words ("C ≤ 3,
    every S"); completeness and ``proven`` speak of these only."""

    points: tuple[ParetoPoint, ...]
    complete: bool
    stopped: str
    bound: RoundsBound
    scope: str


def chunk_scope(max_chunks: int) -> str:
    """The schedules a front for C = 1..max_chunks searched (module docstring)."""
    return f"C ≤ {max_chunks}, every S"


def frontier(prepare: Callable[[int], Plan], max_chunks: int, bound: RoundsBound, backend: Backend,
             clock: Clock, *, symmetry: bool, progress: Progress | None = None,
             question_limit: float | None = None) -> Front:
    """The front for C = 1..``max_chunks``, ``prepare(C)`` giving C's plan: the points found
    before any limit. The clock's limits cover each C's setup (plan, symmetry constraints,
    greedy start), made only when C is first asked. ``question_limit`` (seconds) caps each
    (S, C) question: one that reaches it leaves its best answer unproven and the front goes on."""

    def check_clock() -> None:
        if clock.left() <= 0:
            raise KeyboardInterrupt if clock.interrupted else TimeoutError

    chunks = range(1, max_chunks + 1)
    plans: dict[int, Plan] = {}
    lex: dict[int, list] = {}
    last: dict[int, StepSolution] = {}

    def ready(C: int) -> Plan:
        if C not in plans:
            check_clock()
            plans[C] = prepare(C)
            lex[C] = lex_constraints(plans[C].problem, automorphisms(plans[C].problem), LEX_PREFIX) \
                if symmetry else []
            last[C] = greedy_solution(plans[C].problem)
        return plans[C]

    active = set(chunks)
    best: Fraction | None = None
    settled = True
    points: list[ParetoPoint] = []
    S = 0
    at_s: tuple[Fraction, int, StepSolution] | None = None
    stopped = ""
    try:
        S = ready(1).problem.latency_bound
        while active and (best is None or best > bound.value):
            at_s = None
            raised = {}  # C -> least R it may still have at this S (its floor was refuted)
            probe = min(active, key=lambda C: (Fraction(max(S, bound.rounds(C)), C), C))
            floor = max(S, bound.rounds(probe))
            if best is None or Fraction(floor, probe) < best:
                problem = ready(probe).problem
                check_clock()
                result = backend.minimise_rounds(problem, S, floor, floor, hint=stretched(problem, last[probe], S),
                                                 lex=lex[probe], clock=clock.capped(question_limit))
                if result.solution is not None:
                    last[probe] = result.solution
                    at_s = (Fraction(result.solution.total_rounds, probe), probe, result.solution)
                elif result.status == "infeasible":
                    raised[probe] = floor + 1
            for C in chunks:
                if C not in active:
                    continue
                target = min((q for q in (best, at_s and at_s[0]) if q is not None), default=None)
                lo = max(S, bound.rounds(C))
                if target is not None and lo > math.ceil(target * C) - 1:
                    active.discard(C)  # decided without setting C up
                    continue
                problem = ready(C).problem
                hint = stretched(problem, last[C], S)
                hi = hint.total_rounds if target is None else math.ceil(target * C) - 1
                if lo > hi:  # hi is the greedy's R when there is no target, so never here then
                    active.discard(C)
                    continue
                lo = raised.get(C, lo)
                if lo > hi:  # the probe refuted the rest of C's range at this S only
                    continue
                check_clock()
                result = backend.minimise_rounds(problem, S, lo, hi, hint=hint, lex=lex[C],
                                                  clock=clock.capped(question_limit))
                settled &= result.status in ("optimal", "infeasible")
                if result.solution is not None:
                    last[C] = result.solution
                    q = Fraction(result.solution.total_rounds, C)
                    if at_s is None or q < at_s[0]:
                        at_s = (q, C, result.solution)
            if at_s is not None:
                q, C, solution = at_s
                points.append(_point(plans[C], solution, C, q, settled, bound))
                best, at_s = q, None
                if progress is not None:
                    progress(clock.root.elapsed(), float(q), float(bound.value))
            S += 1
    except TimeoutError:
        stopped = f"{clock.limit_reached()} at S = {S}" + \
            (f" (C = 1..{len(plans)} set up)" if len(plans) < max_chunks else "")
    except KeyboardInterrupt:
        clock.interrupt()
        stopped = f"interrupted at S = {S}"
    except ModelTooLarge as refused:
        stopped = f"the memory limit at S = {S}: {refused.detail}"
    if at_s is not None:  # the best of the C asked at S before the stop: a point, not proven
        q, C, solution = at_s
        points.append(_point(plans[C], solution, C, q, False, bound))
        best = q
    if not stopped and not settled:
        stopped = "a question ended without a proof at its question limit (later points unproven, better ones may exist)"
    return Front(tuple(points), not stopped, stopped or (
        f"bandwidth-optimal: R/C meets the rounds lower bound, which holds for every C (points with fewer "
        f"steps and C > {max_chunks} were not searched)" if best is not None and best <= bound.value
        else f"no C ≤ {max_chunks} lowers R/C further at any S (C > {max_chunks} was not searched)"),
        bound, chunk_scope(max_chunks))


def _point(plan: Plan, solution: StepSolution, C: int, q: Fraction, proven: bool,
           bound: RoundsBound) -> ParetoPoint:
    p = plan.problem
    S, R = solution.steps, solution.total_rounds
    schedule = plan.schedule(solution, producer="exact-step-pareto", chunks_per_rank=C)
    return ParetoPoint(S, R, C, q, p.cost(S, R), f"{S}·α + {R}/{C}·b₁/B_min", proven,
                       q <= bound.value, schedule)


def sum_fronts(first: Front, second: Front, alpha: float, beta: float, bound: RoundsBound) -> Front:
    """The front of ``first`` then ``second`` (AllReduce as ReduceScatter then AllGather).

    Each phase's least R/C is a non-increasing step function of its steps, so the two-phase least
    R/C at S steps is the least sum over splits S = S₁ + S₂ (a min-plus convolution), attained by a
    pair of front points; the pair's schedules are refined to C = lcm(C₁, C₂) and concatenated.
    A point is ``proven`` only when both fronts are complete and both points proven; ``bound`` is
    the AllReduce's (``allreduce_rounds_bound``): bandwidth-optimal compares with its family sum,
    the phases' rounds bounds added. ``alpha``/``beta``:
    seconds per step and per round at C = 1.
    """
    pairs = sorted(((a.steps + b.steps, a.rounds_per_chunk + b.rounds_per_chunk, math.lcm(a.chunks, b.chunks), a, b)
                    for a in first.points for b in second.points), key=lambda row: row[:3])
    complete = first.complete and second.complete
    family = bound.detail[FAMILY]
    points: list[ParetoPoint] = []
    for steps, q, chunks, a, b in pairs:
        if points and q >= points[-1].rounds_per_chunk:
            continue  # no better than a point with as few steps
        rounds = int(q * chunks)
        schedule = Schedule.concat(refine(a.schedule, chunks // a.chunks), refine(b.schedule, chunks // b.chunks)
                                   ).with_meta(producer="exact-step-pareto", chunks_per_rank=chunks,
                                               family="reducescatter+allgather")
        points.append(ParetoPoint(steps, rounds, chunks, q, steps * alpha + float(q) * beta,
                                  f"{steps}·α + {rounds}/{chunks}·b₁/B_min", complete and a.proven and b.proven,
                                  q <= family, schedule))
    stopped = "; ".join(f"{name}: {front.stopped}" for name, front in (("reducescatter", first), ("allgather", second)))
    return Front(tuple(points), complete, stopped, bound,
                 f"ReduceScatter then AllGather, each phase {first.scope}")
