"""A CP-SAT model builder for the encodings written constraint by constraint (the direct
AllReduce models), without ``ortools.sat.python.cp_model``: that module imports pandas, about
0.3 s of CPU in every command that solves a small AllReduce (measured: 0.27 s of the 0.93 s a
whole Ring(4) AllReduce least-steps command took).

It is OR-Tools' own C++ model base (``cp_model_helper.CpBaseModel``, which ``cp_model.CpModel``
extends too) with the few methods those encodings call, written the way ``cp_model`` writes them,
so the model proto is the one ``cp_model.CpModel`` builds; literals and linear expressions are
OR-Tools' C++ types either way.
"""
from __future__ import annotations

import numpy as np
from ortools.sat.python import cp_model_helper as cmh
from ortools.util.python.sorted_interval_list import Domain


class CpModel(cmh.CpBaseModel):
    """Boolean variables, linear and Boolean constraints, an integer objective and hints."""

    def __init__(self) -> None:
        super().__init__(None)

    @property
    def proto(self) -> cmh.CpModelProto:
        return self.model_proto

    def new_bool_var(self, name: str) -> cmh.IntVar:
        return cmh.IntVar(self.model_proto).with_name(name).with_domain(Domain(0, 1))

    def add(self, ct) -> cmh.Constraint:
        """A linear constraint, or a constant truth (True: nothing to hold; False: infeasible)."""
        if isinstance(ct, cmh.BoundedLinearExpression):
            return self._add_bounded_linear_expression(ct)
        if isinstance(ct, (bool, np.bool_)):
            return self.add_bool_or([True] if ct else [])
        raise TypeError(f"not a linear constraint: {type(ct).__name__}")

    def add_bool_or(self, literals) -> cmh.Constraint:
        return self._add_bool_argument_constraint(cmh.BoolArgumentConstraint.bool_or, literals)

    def add_implication(self, a, b) -> cmh.Constraint:
        return self._add_bool_argument_constraint(cmh.BoolArgumentConstraint.bool_and, [b]).only_enforce_if(a)

    def minimize(self, objective) -> None:
        flat = cmh.FlatIntExpr(objective)
        target = self.model_proto.objective
        target.vars.extend(var.index for var in flat.vars)
        target.coeffs.extend(flat.coeffs)
        target.offset = flat.offset
        target.scaling_factor = 1.0

    def add_hint(self, literal, value: bool | int) -> None:
        hint = self.model_proto.solution_hint
        if literal.index >= 0:
            hint.vars.append(literal.index)
            hint.values.append(int(value))
        else:  # a negated literal
            hint.vars.append(-literal.index - 1)
            hint.values.append(int(not value))
