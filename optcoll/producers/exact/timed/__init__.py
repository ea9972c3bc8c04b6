"""Exact solvers in the timed model (docs/model.md §5-§6): a time-expanded encoding for
CP-SAT and MIP solvers, horizon search with proofs, and inversion for reductions.

The entry points are ``solve.solve_timed`` and ``solve.export_timed_model``. This package module
imports nothing: the light modules (``grid``, ``problem``) are shared with the step model's
inversion, and importing one of them must not load the solver (the greedy synthesizers it starts
from, numba, OR-Tools). The solver builds on the direct AllReduce model (``exact.allreduce``),
never the other way round (pyproject's ``exact`` import contract).
"""
