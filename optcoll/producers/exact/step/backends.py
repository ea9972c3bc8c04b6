"""Solvers behind one question: the least R in [lo, hi] for S steps, with a proof or a bound.

``LinearBackend`` solves the linear encoding (linear.py) with the toolkit's CP-SAT, HiGHS or SCIP
(``optcoll.producers.exact.toolkit``); ``Z3Backend`` (smt.py) answers the same question with the
SCCL-style SMT encoding. Every search (least steps, least cost, Pareto front) is written against
this interface, so the backends are interchangeable and comparable. A question gets the whole
time and work left on the search's ``Clock`` and tells it about a Ctrl-C.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

from optcoll.instances.clock import Clock
from optcoll.producers.exact.memory import require_fits
from optcoll.producers.exact.step.linear import encode, size
from optcoll.producers.exact.step.problem import StepProblem
from optcoll.producers.exact.step.solution import StepSolution, cleaned
from optcoll.producers.exact.step.symmetry import Entry
from optcoll.producers.exact.toolkit import SOLVERS as LINEAR_SOLVERS
from optcoll.producers.exact.toolkit import solve, solver_version


@dataclass(frozen=True)
class RoundsResult:
    """``optimal``: ``solution`` has the least R in [lo, hi]; ``feasible``: a solution, not proven
    least; ``infeasible``: none with R ≤ hi; ``unknown``: neither. ``bound``: no S-step solution
    has R < bound (hi + 1 when infeasible)."""

    status: str
    solution: StepSolution | None
    bound: int


class Backend(Protocol):
    name: str

    def version(self) -> str: ...

    def minimise_rounds(self, problem: StepProblem, steps: int, lo: int, hi: int, *,
                        hint: StepSolution | None, lex: list[list[tuple[Entry, Entry]]],
                        clock: Clock) -> RoundsResult: ...


class LinearBackend:
    """The linear encoding with one of the toolkit's solvers (``LINEAR_SOLVERS``)."""

    def __init__(self, name: str):
        if name not in LINEAR_SOLVERS:
            raise ValueError(f"unknown linear backend {name!r}")
        self.name = name

    def version(self) -> str:
        return solver_version(self.name)

    def minimise_rounds(self, problem: StepProblem, steps: int, lo: int, hi: int, *,
                        hint: StepSolution | None, lex: list[list[tuple[Entry, Entry]]],
                        clock: Clock) -> RoundsResult:
        if lo > hi:
            return RoundsResult("infeasible", None, hi + 1)
        require_fits(size(problem, steps), self.name, clock.budget.threads, clock.budget.max_memory)
        enc = encode(problem, steps, lo, hi, lex)
        if enc is None:
            return RoundsResult("infeasible", None, hi + 1)
        if hint is not None:
            enc.set_hint(problem, hint)
        # One worker runs one strategy (with more, CP-SAT runs its portfolio and this is moot).
        # Interleaving the portfolio on it pays where R may exceed S: DGX-1 (S, R, C) = (3, 7, 6)
        # in 1 s instead of 28 s (once not settled in 7 s), the DGX-1 front C <= 6 in 1.3 s
        # instead of 25 s. Where every step has one round (hi = S, SCCL's least steps) it only
        # slows the one strategy that answers (CPU s, interleaved vs not: Ring(8) AlltoAll 0.87
        # vs 0.67, Star(8) 0.41 vs 0.25, fully connected 6 one-port 1.69 vs 1.43, hypercube 3
        # 0.22 vs 0.13).
        res = solve(enc.model, self.name, clock, interleave=hi > steps)
        if res.status == "infeasible":
            return RoundsResult("infeasible", None, hi + 1)
        bound = max(lo, 0 if res.bound is None else math.ceil(res.bound - 1e-6))
        if res.values is None:
            return RoundsResult("unknown", None, bound)
        solution = cleaned(problem, enc.decode(res.values))
        if res.status == "optimal":
            bound = solution.total_rounds
        return RoundsResult("optimal" if solution.total_rounds <= bound else "feasible", solution, bound)
