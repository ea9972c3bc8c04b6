"""The exact-solver toolkit shared by the timed and the step model (docs/model.md §6).

* ``LinearModel`` (model.py): one integer linear model every linear encoding writes into;
* ``solve`` and ``run_cpsat`` (backends.py): one translation per backend — CP-SAT, and HiGHS
  and SCIP through MathOpt — with one handling of time and work limits, hints and Ctrl-C
  (interrupt.py), and one version string per solver (``solver_version``);
* ``export`` (export.py): the model as .mps, .lp, .pbtxt or .pb;
* ``cpsat_model.CpModel``: a CP-SAT model written constraint by constraint (the direct AllReduce
  models) without ``cp_model``'s pandas import, imported by its users where they build;
* ``lex_leq`` (lex.py): lex-leader symmetry-breaking rows;
* ``ColouredGraph`` and ``ChunkRoles`` (symmetry.py): one automorphism finder;
* ``compose_allreduce`` (allreduce.py): AllReduce as ReduceScatter then AllGather, one
  documented semantics of its bound and status.
"""
from optcoll.producers.exact.toolkit.backends import (SOLVERS, Progress, SolveResult, check_solver, run_cpsat,
                                                      solve, solver_version)
from optcoll.producers.exact.toolkit.export import export
from optcoll.producers.exact.toolkit.model import INF, LinearModel

__all__ = ["INF", "SOLVERS", "LinearModel", "Progress", "SolveResult", "check_solver", "export",
           "run_cpsat", "solve", "solver_version"]
