"""Exact solvers in the SCCL-style step model (docs/model.md §5): a linear encoding for CP-SAT
and MIP solvers and an independent z3 encoding, least cost and least steps with proofs, the
(S, R/C) Pareto front, the multicast flow-LP rounds bound, and inversion for reductions."""
from optcoll.producers.exact.step.api import SOLVERS, pareto_front, solve_step
from optcoll.producers.exact.step.bounds import RoundsBound, rounds_lower_bound
from optcoll.producers.exact.step.export import StepExportInfo, export_step_model
from optcoll.producers.exact.step.pareto import Front, ParetoPoint

__all__ = ["SOLVERS", "Front", "ParetoPoint", "RoundsBound", "StepExportInfo", "export_step_model",
           "pareto_front", "rounds_lower_bound", "solve_step"]
