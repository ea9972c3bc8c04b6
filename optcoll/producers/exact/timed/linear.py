"""The exact-solver toolkit under its earlier name (``optcoll.producers.exact.toolkit``), for
callers written against it: the linear model, ``solve``, ``export`` and the solver versions."""
from optcoll.producers.exact.toolkit import (INF, SOLVERS, LinearModel, Progress, SolveResult, export, run_cpsat,
                                             solve, solver_version)

__all__ = ["INF", "SOLVERS", "LinearModel", "Progress", "SolveResult", "export", "run_cpsat", "solve",
           "solver_version"]
