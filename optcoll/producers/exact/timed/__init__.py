"""Exact solvers in the timed model (DESIGN.md sections 5-6): a time-expanded encoding for
CP-SAT and MIP solvers, horizon search with proofs, and inversion for reductions."""
from optcoll.producers.exact.timed.solve import ExportInfo, export_timed_model, solve_timed

__all__ = ["ExportInfo", "export_timed_model", "solve_timed"]
