"""One translation per backend, one way to run it: CP-SAT, and HiGHS and SCIP through MathOpt.

``solve`` hands a ``LinearModel`` to a backend and returns a ``SolveResult`` in the model's own
terms (status as the solver proved it, values, objective, dual bound). Shared by every exact
formulation, so the rules are stated once:

* limits: every call takes the job's ``Clock`` (``optcoll.instances.clock``) whole: the time and
  CP-SAT work it has left, its budget's threads and seed; ``run_cpsat`` and ``_solve_mathopt`` are
  the only places they become solver parameters, and the clock learns back the work spent and
  whether Ctrl-C came (no solver object is built anywhere else);
* Ctrl-C: the call stops cleanly and returns the best solution found so far (``interrupt.py``);
* hints: a complete assignment in ``model.hint`` is passed to every backend (MathOpt takes it
  for HiGHS too; OR-Tools' older pywraplp crashed inside HiGHS when given one);
* ``interleave``: with one thread, CP-SAT runs its portfolio of strategies interleaved on it.
  Model-specific tuning, asked for by the step model where a question lets R exceed S (it then
  finds DGX-1's (S=3, R=7, C=6) schedule in about a second instead of about 25; one round per
  step is faster without, step/backends.py); the timed model does not (its symmetric
  restriction of a hypercube4 AlltoAll is solved in 7 s without, not in 60 s with it);
* one version string per solver, e.g. "OR-Tools 9.15.6755 CP-SAT".
"""
from __future__ import annotations

import datetime
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from optcoll.errors import InputError
from optcoll.instances.clock import Clock
from optcoll.producers.exact.toolkit.interrupt import filtered_stderr, run_interruptibly
from optcoll.producers.exact.toolkit.model import INF, LinearModel

SOLVERS = ("cpsat", "scip", "highs")
#: Harmless lines OR-Tools' SCIP wrapper prints when an interrupter is attached (upstream noise).
SCIP_NOISE = ("SCIPcatchEvent does not support variable or row change events", "gscip_event_handler.cc")
_NAMES = {"cpsat": "CP-SAT", "scip": "SCIP (MathOpt)", "highs": "HiGHS (MathOpt)"}


@dataclass(frozen=True)
class SolveResult:
    """status: optimal | feasible | infeasible | unknown (as the solver proved it)."""

    status: str
    values: np.ndarray | None
    objective: float | None
    bound: float | None
    wall: float
    interrupted: bool  # stopped by Ctrl-C (not by the time limit)
    solver: str
    version: str
    work: float = 0.0  # CP-SAT deterministic time spent (0 for the other backends)


#: A backend's raw news, in the model's own objective units: (objective of a new solution or
#: None, proven bound or None), told as they come; each formulation turns it into a
#: ``results.outcome.Progress`` sample.
ObjectiveProgress = Callable[[float | None, float | None], None]


def solver_version(solver: str) -> str:
    """The one version string of a backend, recorded with every result."""
    if solver == "z3":
        import z3

        return f"z3 {z3.get_version_string()}"
    import ortools

    return f"OR-Tools {ortools.__version__} {_NAMES[solver]}"


def check_solver(solver: str, work_limit: float | None = None, choices: tuple[str, ...] = SOLVERS) -> None:
    if solver not in choices:
        raise InputError(f"unknown solver {solver!r}; use one of {', '.join(choices)}", field="solver")
    if work_limit is not None and solver != "cpsat":
        raise InputError(f"a work limit counts CP-SAT's deterministic time; {solver} has none "
                         "(use a time limit)", field="work_limit")


def solve(model: LinearModel, solver: str, clock: Clock, *, progress: ObjectiveProgress | None = None,
          interleave: bool = False) -> SolveResult:
    """One solver call on ``model`` within the time and the CP-SAT work ``clock`` has left
    (module docstring); translating the model for the backend counts against that time. The
    clock learns the work spent and a Ctrl-C."""
    check_solver(solver, clock.budget.work_limit)
    if solver == "cpsat":
        return run_cpsat(cpsat_model(model), clock, progress=progress, has_objective=bool(model.objective),
                         interleave=interleave)
    return settled(clock, _solve_mathopt(model, solver, clock, progress))


def settled(clock: Clock, result: SolveResult) -> SolveResult:
    """Books a finished call on the clock: its work, and its interrupt."""
    clock.spend_work(result.work)
    if result.interrupted:
        clock.interrupt()
    return result


# -- CP-SAT ------------------------------------------------------------------------------------------
#: CP-SAT's integer range (as ``cp_model`` defines it, platform independent).
INT_MIN, INT_MAX = -(2**63), 2**63 - 1


def cpsat_model(model: LinearModel, *, named: bool = False):
    """The linear model as a CP-SAT model proto of linear constraints (its presolve finds the
    at-most-ones); also what .pbtxt and .pb exports write (``named``: with variable names).
    Built on ``cp_model_helper``, not ``cp_model``, which imports pandas (~0.3 s per command)."""
    from ortools.sat.python import cp_model_helper as cmh

    proto = cmh.CpModelProto()
    lb, ub = model.bounds()
    for lo, hi in zip(lb.astype(np.int64).tolist(), ub.astype(np.int64).tolist()):
        proto.variables.add().domain.extend([lo, hi])
    if named:
        for var, name in zip(proto.variables, model.names()):
            var.name = name
    indptr, indices, data, rlo, rhi = model.compressed_rows()
    indptr, indices, data = indptr.tolist(), indices.tolist(), data.astype(np.int64).tolist()
    low = [INT_MIN if v == -INF else int(v) for v in rlo.tolist()]
    high = [INT_MAX if v == INF else int(v) for v in rhi.tolist()]
    for r in range(len(low)):
        lin = proto.constraints.add().linear
        lin.vars.extend(indices[indptr[r]:indptr[r + 1]])
        lin.coeffs.extend(data[indptr[r]:indptr[r + 1]])
        lin.domain.extend([low[r], high[r]])
    if model.objective:
        keys = sorted(model.objective)
        proto.objective.vars.extend(keys)
        proto.objective.coeffs.extend(int(model.objective[k]) for k in keys)
    if model.hint:
        keys = sorted(model.hint)
        proto.solution_hint.vars.extend(keys)
        proto.solution_hint.values.extend(int(model.hint[k]) for k in keys)
    return proto


def cpsat_solve(wrapper, proto):
    """The moment CP-SAT starts solving a built model (fault-injection tests patch it here)."""
    return wrapper.solve(proto)


def run_cpsat(cp, clock: Clock, *, progress: ObjectiveProgress | None = None, has_objective: bool,
              interleave: bool = False, tuning: dict[str, int] | None = None) -> SolveResult:
    """Solves a CP-SAT model (a proto from ``cpsat_model``, or a ``cp_model.CpModel`` built
    directly, as the continuous timed model is) within ``clock``'s time and work left, with its
    budget's threads and seed; values by proto variable index. ``tuning``: further CP-SAT
    parameters by name (a model that measured them better). The one place a clock's limits
    become a solver's parameters; the clock learns the work spent and a Ctrl-C."""
    from ortools.sat.python import cp_model_helper as cmh

    proto = getattr(cp, "proto", cp)
    budget, work_limit = clock.budget, clock.work_left()
    params = cmh.SatParameters()
    for name, value in (tuning or {}).items():
        setattr(params, name, value)
    params.max_time_in_seconds = max(clock.left(), 0.01)
    if work_limit is not None:
        params.max_deterministic_time = max(work_limit, 1e-6)
    params.num_workers = max(1, budget.threads)
    params.interleave_search = interleave and budget.threads <= 1
    params.random_seed = budget.seed
    params.catch_sigint_signal = False
    wrapper = cmh.SolveWrapper()
    wrapper.set_parameters(params)

    class Listener(cmh.SolutionCallback):
        def OnSolutionCallback(self) -> None:
            progress(self.ObjectiveValue() if has_objective else None,
                     self.BestObjectiveBound() if has_objective else None)

    listener = Listener() if progress is not None else None
    if listener is not None:
        wrapper.add_solution_callback(listener)
        if has_objective:
            wrapper.add_best_bound_callback(lambda bound: progress(None, bound))
    outcome: dict[str, object] = {}
    start = time.perf_counter()
    interrupted = run_interruptibly(lambda: outcome.__setitem__("response", cpsat_solve(wrapper, proto)),
                                    wrapper.stop_search)
    wall = time.perf_counter() - start
    if listener is not None:
        wrapper.clear_solution_callback(listener)
    version = solver_version("cpsat")
    if "response" not in outcome:
        return settled(clock, SolveResult("unknown", None, None, None, wall, interrupted, "cpsat", version))
    response = outcome["response"]
    status = response.status
    if status == cmh.CpSolverStatus.MODEL_INVALID:
        raise RuntimeError(f"CP-SAT rejected the model: {cmh.CpSatHelper.validate_model(proto)}")
    found = status in (cmh.CpSolverStatus.OPTIMAL, cmh.CpSolverStatus.FEASIBLE)
    name = {cmh.CpSolverStatus.OPTIMAL: "optimal", cmh.CpSolverStatus.FEASIBLE: "feasible",
            cmh.CpSolverStatus.INFEASIBLE: "infeasible"}.get(status, "unknown")
    values = np.array(response.solution, dtype=np.int64) if found else None
    return settled(clock, SolveResult(
        name, values, response.objective_value if found and has_objective else None,
        response.best_objective_bound if has_objective and status != cmh.CpSolverStatus.INFEASIBLE else None,
        wall, interrupted, "cpsat", version, float(response.deterministic_time)))


# -- HiGHS and SCIP through MathOpt -------------------------------------------------------------------
def _mathopt_proto(model: LinearModel):
    from ortools.math_opt import model_pb2

    proto = model_pb2.ModelProto(name="optcoll")
    lb, ub = model.bounds()
    n = model.num_vars
    proto.variables.ids.extend(range(n))
    proto.variables.lower_bounds.extend(lb.tolist())
    proto.variables.upper_bounds.extend(ub.tolist())
    proto.variables.integers.extend([True] * n)
    a, rlo, rhi = model.matrix()
    coo = a.tocoo()
    order = np.lexsort((coo.col, coo.row))
    proto.linear_constraints.ids.extend(range(a.shape[0]))
    proto.linear_constraints.lower_bounds.extend(rlo.tolist())
    proto.linear_constraints.upper_bounds.extend(rhi.tolist())
    proto.linear_constraint_matrix.row_ids.extend(coo.row[order].tolist())
    proto.linear_constraint_matrix.column_ids.extend(coo.col[order].tolist())
    proto.linear_constraint_matrix.coefficients.extend(coo.data[order].tolist())
    keys = sorted(model.objective)
    proto.objective.linear_coefficients.ids.extend(keys)
    proto.objective.linear_coefficients.values.extend(float(model.objective[k]) for k in keys)
    return proto


def _solve_mathopt(model: LinearModel, solver: str, clock: Clock, progress: ObjectiveProgress | None) -> SolveResult:
    from ortools.math_opt.python import mathopt
    from ortools.util.python.solve_interrupter import SolveInterrupter

    mo = mathopt.Model.from_model_proto(_mathopt_proto(model))
    solver_type = {"scip": mathopt.SolverType.GSCIP, "highs": mathopt.SolverType.HIGHS}[solver]
    # HiGHS takes its thread count from globals and SCIP is sequential here: no threads argument.
    params = mathopt.SolveParameters(time_limit=datetime.timedelta(seconds=max(clock.left(), 0.01)),
                                     random_seed=clock.budget.seed)
    model_params = None
    if model.hint:
        variables = {mo.get_variable(k): float(v) for k, v in model.hint.items()}
        model_params = mathopt.ModelSolveParameters(solution_hints=[mathopt.SolutionHint(variables)])
    interrupter = SolveInterrupter()
    outcome: dict[str, object] = {}

    def work() -> None:
        outcome["result"] = mathopt.solve(mo, solver_type, params=params, model_params=model_params,
                                          interrupter=interrupter)

    start = time.perf_counter()
    with filtered_stderr(SCIP_NOISE if solver == "scip" else ()):
        interrupted = run_interruptibly(work, interrupter.interrupt)
    wall = time.perf_counter() - start
    version = solver_version(solver)
    result = outcome.get("result")
    if result is None:
        return SolveResult("unknown", None, None, None, wall, interrupted, solver, version)
    reason = result.termination.reason
    found = result.has_primal_feasible_solution()
    if reason == mathopt.TerminationReason.OPTIMAL:
        status = "optimal"
    elif reason == mathopt.TerminationReason.INFEASIBLE:
        status = "infeasible"
    else:
        status = "feasible" if found else "unknown"
    values = None
    if found:
        solution = result.variable_values()
        values = np.rint([solution[mo.get_variable(i)] for i in range(model.num_vars)]).astype(np.int64)
    bound = result.termination.objective_bounds.dual_bound
    has_objective = bool(model.objective)
    objective = result.objective_value() if found and has_objective else None
    bound = float(bound) if has_objective and np.isfinite(bound) else None
    if progress is not None:
        progress(objective, bound)
    return SolveResult(status, values, objective, bound, wall, interrupted, solver, version)
