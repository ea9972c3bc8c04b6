"""Solvers behind one question: the least R in [lo, hi] for S steps, with a proof or a bound.

``LinearBackend`` solves the linear encoding (linear.py) with CP-SAT or with a MIP solver through
pywraplp (SCIP, HiGHS); ``Z3Backend`` (smt.py) answers the same question with the SCCL-style SMT
encoding. Every search (least steps, least cost, Pareto front) is written against this interface,
so the backends are interchangeable and comparable.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import ortools
from ortools.linear_solver import pywraplp
from ortools.sat.python import cp_model

from optcoll.producers.exact.memory import require_fits
from optcoll.producers.exact.step.linear import StepEncoding, encode, size
from optcoll.producers.exact.step.problem import StepProblem
from optcoll.producers.exact.step.solution import StepSolution, cleaned
from optcoll.producers.exact.step.symmetry import Entry


@dataclass(frozen=True)
class RoundsResult:
    """``optimal``: ``solution`` has the least R in [lo, hi]; ``feasible``: a solution, not proven
    least; ``infeasible``: none with R ≤ hi; ``unknown``: neither. ``bound``: no S-step solution
    has R < bound (hi + 1 when infeasible)."""

    status: str
    solution: StepSolution | None
    bound: int


@dataclass(frozen=True)
class Settings:
    time_limit: float
    threads: int
    seed: int
    max_memory: int | None = None  # bytes one model may take (None: memory.DEFAULT_SHARE)


class Backend(Protocol):
    name: str

    def version(self) -> str: ...

    def minimise_rounds(self, problem: StepProblem, steps: int, lo: int, hi: int, *,
                        hint: StepSolution | None, lex: list[list[tuple[Entry, Entry]]],
                        settings: Settings) -> RoundsResult: ...


#: pywraplp solver ids of the MIP backends.
MIP_SOLVERS = {"scip": "SCIP", "highs": "HIGHS"}


class LinearBackend:
    """CP-SAT (``name = "cpsat"``) or a pywraplp MIP solver (``"scip"``, ``"highs"``)."""

    def __init__(self, name: str):
        if name != "cpsat" and name not in MIP_SOLVERS:
            raise ValueError(f"unknown linear backend {name!r}")
        self.name = name

    def version(self) -> str:
        if self.name == "cpsat":
            return f"OR-Tools CP-SAT {ortools.__version__}"
        solver = pywraplp.Solver.CreateSolver(MIP_SOLVERS[self.name])
        detail = solver.SolverVersion() if self.name == "scip" else "HiGHS"
        return f"{detail} via OR-Tools {ortools.__version__}"

    def minimise_rounds(self, problem: StepProblem, steps: int, lo: int, hi: int, *,
                        hint: StepSolution | None, lex: list[list[tuple[Entry, Entry]]],
                        settings: Settings) -> RoundsResult:
        if lo > hi:
            return RoundsResult("infeasible", None, hi + 1)
        require_fits(size(problem, steps), self.name, settings.threads, settings.max_memory)
        enc = encode(problem, steps, lo, hi, lex)
        if enc is None:
            return RoundsResult("infeasible", None, hi + 1)
        if hint is not None:
            enc.set_hint(problem, hint)
        solve = _solve_cpsat if self.name == "cpsat" else _solve_mip
        status, values, bound = solve(enc, self.name, settings)
        if status == "infeasible":
            return RoundsResult(status, None, hi + 1)
        bound = max(lo, bound)
        if values is None:
            return RoundsResult("unknown", None, bound)
        solution = cleaned(problem, enc.decode(values))
        if status == "optimal":
            bound = solution.total_rounds
        return RoundsResult("optimal" if solution.total_rounds <= bound else "feasible", solution, bound)


def build_cpsat(enc: StepEncoding) -> tuple[cp_model.CpModel, list[cp_model.IntVar]]:
    """The encoding as a CP-SAT model (also what ``.pbtxt`` exports write)."""
    m = enc.model
    model = cp_model.CpModel()
    xs = [model.NewIntVar(lb, ub, name) for lb, ub, name in zip(m.lb, m.ub, m.names)]
    for terms, lo, hi in m.rows:
        model.AddLinearConstraint(sum(c * xs[v] for v, c in terms),
                                  cp_model.INT_MIN if lo is None else lo,
                                  cp_model.INT_MAX if hi is None else hi)
    model.Minimize(sum(c * xs[v] for v, c in m.objective))
    for v, value in m.hint.items():
        model.AddHint(xs[v], value)
    return model, xs


def _solve_cpsat(enc: StepEncoding, _name: str, settings: Settings) -> tuple[str, list[int] | None, int]:
    model, xs = build_cpsat(enc)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(0.01, settings.time_limit)
    solver.parameters.num_workers = max(1, settings.threads)
    # One worker runs one strategy; interleaving the portfolio on it finds DGX-1 (S=3, R=7, C=6)
    # in about a second instead of about 25.
    solver.parameters.interleave_search = settings.threads <= 1
    solver.parameters.random_seed = settings.seed
    status = solver.Solve(model)
    bound = math.ceil(solver.BestObjectiveBound() - 1e-6)
    if status == cp_model.INFEASIBLE:
        return "infeasible", None, 0
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        values = [solver.Value(x) for x in xs]
        return ("optimal" if status == cp_model.OPTIMAL else "feasible"), values, bound
    if status == cp_model.MODEL_INVALID:
        raise RuntimeError(f"CP-SAT rejected the step model: {model.Validate()}")
    return "unknown", None, bound


def _solve_mip(enc: StepEncoding, name: str, settings: Settings) -> tuple[str, list[int] | None, int]:
    solver = build_mip(enc, name)
    solver.SetTimeLimit(int(max(0.01, settings.time_limit) * 1000))
    solver.SetNumThreads(max(1, settings.threads))
    status = solver.Solve()
    variables = solver.variables()
    if status == pywraplp.Solver.INFEASIBLE:
        return "infeasible", None, 0
    if status in (pywraplp.Solver.OPTIMAL, pywraplp.Solver.FEASIBLE):
        values = [round(x.solution_value()) for x in variables]
        bound = math.ceil(solver.Objective().BestBound() - 1e-6)
        return ("optimal" if status == pywraplp.Solver.OPTIMAL else "feasible"), values, bound
    return "unknown", None, 0


def build_mip(enc: StepEncoding, name: str) -> pywraplp.Solver:
    """The encoding as a pywraplp model (also what ``.lp``/``.mps`` exports write)."""
    m = enc.model
    solver = pywraplp.Solver.CreateSolver(MIP_SOLVERS[name])
    if solver is None:
        raise RuntimeError(f"OR-Tools was built without the {name} MIP solver")
    solver.SuppressOutput()
    inf = solver.infinity()
    xs = [solver.IntVar(lb, ub, n) for lb, ub, n in zip(m.lb, m.ub, m.names)]
    for terms, lo, hi in m.rows:
        row = solver.RowConstraint(-inf if lo is None else lo, inf if hi is None else hi, "")
        for v, c in terms:
            row.SetCoefficient(xs[v], row.GetCoefficient(xs[v]) + c)
    objective = solver.Objective()
    for v, c in m.objective:
        objective.SetCoefficient(xs[v], c)
    objective.SetMinimization()
    if name == "highs":
        # HiGHS prints a banner despite SuppressOutput; this silences it (the call reports False
        # but takes effect). No hint: OR-Tools 9.15 crashes inside HiGHS when given one.
        solver.SetSolverSpecificParametersAsString("output_flag=false")
    elif m.hint:
        solver.SetHint([xs[v] for v in m.hint], list(m.hint.values()))
    return solver
