"""One front door for the linear programs of the flow bounds: sparse arrays in, primal values and
row duals out, through OR-Tools MathOpt (GLOP simplex, PDLP first-order, HiGHS).

The model is written as a MathOpt ``ModelProto`` straight from numpy arrays (no Python object
per variable), so a million-variable flow LP is built in about a second. MathOpt is used for
every solver alike because it reports row duals with one sign convention for all three (OR-Tools
9.15's model_builder returns HiGHS row activities where the duals belong).

Nothing here is trusted for a bound: callers turn the duals into a certificate they check
themselves (``optcoll.bounds.mcf``), so a loose PDLP solution only makes a bound weaker.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from optcoll.errors import InputError

if TYPE_CHECKING:  # callers may pass numpy triplets and never load scipy (about 0.2 s per command)
    import scipy.sparse as sp

SOLVERS = ("auto", "glop", "pdlp", "highs")
#: ``auto`` takes GLOP (exact simplex) up to this many nonzeros and PDLP above (measured in
#: reports/bench-alltoall.md: GLOP's time grows much faster than PDLP's on flow LPs).
SIMPLEX_NONZEROS = 10_000
#: PDLP stops at this relative optimality gap (its duals then certify within about as much).
PDLP_TOLERANCE = 1e-7


@dataclass(frozen=True, eq=False)
class LpResult:
    """``x`` primal values, ``duals`` one per row (MathOpt's sign: a binding ≤ row of a
    minimisation has a non-positive dual), ``objective``; ``status`` "optimal" or the solver's
    termination reason in words."""

    status: str
    x: np.ndarray
    duals: np.ndarray
    objective: float
    solver: str
    seconds: float

    @property
    def solved(self) -> bool:
        return self.status == "optimal"


def choose_solver(solver: str, nonzeros: int) -> str:
    if solver not in SOLVERS:
        raise InputError(f"unknown LP solver {solver!r}; use one of {', '.join(SOLVERS)}",
                         field="lp_solver")
    if solver != "auto":
        return solver
    return "glop" if nonzeros <= SIMPLEX_NONZEROS else "pdlp"


@dataclass(frozen=True, eq=False)
class Triplets:
    """A constraint matrix as (row, col, data) triplets, no (row, col) twice, with its shape: the
    part of a scipy sparse matrix ``solve_lp`` reads (``nnz``, ``shape``, ``tocoo``), numpy only."""

    row: np.ndarray
    col: np.ndarray
    data: np.ndarray
    shape: tuple[int, int]

    @property
    def nnz(self) -> int:
        return int(self.data.size)

    def tocoo(self) -> "Triplets":
        return self


def solve_lp(cost: np.ndarray, matrix: "sp.csr_matrix | Triplets", row_lo: np.ndarray, row_hi: np.ndarray,
             lb: np.ndarray, ub: np.ndarray, *, solver: str = "auto", threads: int = 1,
             time_limit: float | None = None) -> LpResult:
    """min cost·x s.t. row_lo ≤ matrix·x ≤ row_hi, lb ≤ x ≤ ub (±inf for no bound)."""
    from ortools.math_opt import model_pb2, parameters_pb2
    from ortools.math_opt.core.python import solver as core

    name = choose_solver(solver, matrix.nnz)
    rows, cols = matrix.shape
    proto = model_pb2.ModelProto(name="optcoll_flow")
    proto.variables.ids.extend(range(cols))
    proto.variables.lower_bounds.extend(lb.tolist())
    proto.variables.upper_bounds.extend(ub.tolist())
    proto.variables.integers.extend([False] * cols)
    nonzero = np.flatnonzero(cost)
    proto.objective.linear_coefficients.ids.extend(nonzero.tolist())
    proto.objective.linear_coefficients.values.extend(cost[nonzero].tolist())
    proto.linear_constraints.ids.extend(range(rows))
    proto.linear_constraints.lower_bounds.extend(row_lo.tolist())
    proto.linear_constraints.upper_bounds.extend(row_hi.tolist())
    coo = matrix.tocoo()
    order = np.lexsort((coo.col, coo.row))  # MathOpt wants row-major order
    proto.linear_constraint_matrix.row_ids.extend(coo.row[order].tolist())
    proto.linear_constraint_matrix.column_ids.extend(coo.col[order].tolist())
    proto.linear_constraint_matrix.coefficients.extend(coo.data[order].tolist())
    params = parameters_pb2.SolveParametersProto()
    if name != "highs":  # HiGHS takes its thread count only from its own globals
        params.threads = threads
    if time_limit is not None:
        params.time_limit.FromNanoseconds(int(time_limit * 1e9))
    if name == "pdlp":
        criteria = params.pdlp.termination_criteria.simple_optimality_criteria
        criteria.eps_optimal_relative = PDLP_TOLERANCE
        criteria.eps_optimal_absolute = PDLP_TOLERANCE
    kind = {"glop": parameters_pb2.SOLVER_TYPE_GLOP, "pdlp": parameters_pb2.SOLVER_TYPE_PDLP,
            "highs": parameters_pb2.SOLVER_TYPE_HIGHS}[name]
    start = time.process_time()
    result = core.solve(proto, kind, parameters_pb2.SolverInitializerProto(), params,
                        _model_params(), None, _callbacks(), None, None)
    seconds = time.process_time() - start
    reason = result.termination.reason
    status = "optimal" if reason == _OPTIMAL else result.termination.detail or f"termination {reason}"
    x, duals = np.zeros(cols), np.zeros(rows)
    if result.solutions and result.solutions[0].HasField("primal_solution"):
        values = result.solutions[0].primal_solution.variable_values
        x[np.asarray(values.ids, dtype=np.int64)] = np.asarray(values.values, dtype=float)
    for solution in result.solutions:
        if solution.HasField("dual_solution"):
            values = solution.dual_solution.dual_values
            duals[np.asarray(values.ids, dtype=np.int64)] = np.asarray(values.values, dtype=float)
            break
    return LpResult(status, x, duals, float(cost @ x), name, seconds)


_OPTIMAL = 1  # TerminationReasonProto.TERMINATION_REASON_OPTIMAL


def _model_params():
    from ortools.math_opt import model_parameters_pb2

    return model_parameters_pb2.ModelSolveParametersProto()


def _callbacks():
    from ortools.math_opt import callback_pb2

    return callback_pb2.CallbackRegistrationProto()
