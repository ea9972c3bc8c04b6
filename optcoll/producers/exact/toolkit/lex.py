"""Lex-leader rows: "this vector of integer expressions is lexicographically no larger than that
one", the linear form of symmetry breaking shared by the timed and the step model.

Among solutions a symmetry maps onto each other, requiring x ≤_lex g(x) keeps the smallest, so
every orbit keeps its leader and proofs stay valid. With d_i = left_i − right_i in [−D, D] and
e_i = "the prefixes agree before position i" (e_0 = 1):

    d_i + D·e_i ≤ D                  (while equal so far, left_i ≤ right_i)
    e_{i+1} − (D+1)·e_i − d_i ≥ −D   (equal so far and equal here: still equal)

e is only ever forced upwards, so the leader stays feasible: set e_i = 1 up to its first strict
position and 0 after. For 0/1 variables (D = 1) these are the classic rows a − b + e_i ≤ 1 and
e_{i+1} ≥ 2·e_i − 1 + a − b.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from optcoll.producers.exact.toolkit.model import INF, LinearModel


@dataclass(frozen=True, eq=False)
class Affine:
    """m integer expressions Σ coef·var + const, as terms (position, variable, coefficient)."""

    position: np.ndarray
    var: np.ndarray
    coef: np.ndarray
    const: np.ndarray  # per position

    @staticmethod
    def of_vars(variables: np.ndarray) -> "Affine":
        m = variables.shape[0]
        return Affine(np.arange(m), np.asarray(variables, dtype=np.int64), np.ones(m), np.zeros(m))

    @staticmethod
    def of_terms(expressions: list[tuple[list[tuple[int, float]], float]]) -> "Affine":
        position, var, coef = [], [], []
        for i, (terms, _) in enumerate(expressions):
            for v, c in terms:
                position.append(i)
                var.append(v)
                coef.append(c)
        return Affine(np.array(position, dtype=np.int64), np.array(var, dtype=np.int64),
                      np.array(coef, dtype=float), np.array([c for _, c in expressions], dtype=float))

    def __len__(self) -> int:
        return int(self.const.shape[0])


def lex_leq(model: LinearModel, left: Affine, right: Affine, spread: float) -> None:
    """Rows making ``left`` ≤_lex ``right`` (module docstring); ``spread`` is D, a bound on
    |left_i − right_i|."""
    m = len(left)
    if m == 0:
        return
    e = model.add_vars(np.zeros(m), 1.0, "lexeq", ("i",), np.arange(m)[:, None])
    model.tighten(e[:1], lo=1.0)
    diff_pos = np.concatenate([left.position, right.position])
    diff_var = np.concatenate([left.var, right.var])
    diff_coef = np.concatenate([left.coef, -right.coef])
    const = left.const - right.const
    order = np.argsort(diff_pos, kind="stable")
    diff_pos, diff_var, diff_coef = diff_pos[order], diff_var[order], diff_coef[order]
    # d_i + D e_i <= D - const_i: per row its difference terms, then e_i
    rows, cols, vals = _per_row(m, [(diff_pos, diff_var, diff_coef), (np.arange(m), e, np.full(m, spread))])
    model.add_rows(rows, cols, vals, -INF, spread - const, m)
    if m > 1:
        # e_{i+1} - (D+1) e_i - d_i >= -D + const_i
        first = np.arange(m - 1)
        inner = diff_pos < m - 1
        rows, cols, vals = _per_row(m - 1, [(first, e[1:], np.ones(m - 1)),
                                            (first, e[:-1], np.full(m - 1, -(spread + 1))),
                                            (diff_pos[inner], diff_var[inner], -diff_coef[inner])])
        model.add_rows(rows, cols, vals, const[:-1] - spread, INF, m - 1)


def _per_row(count: int, parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]]
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Terms of ``parts`` ordered by row, then by part, then as given."""
    rows = np.concatenate([p[0] for p in parts])
    which = np.concatenate([np.full(p[0].shape[0], k) for k, p in enumerate(parts)])
    order = np.lexsort((which, rows))
    return rows[order], np.concatenate([p[1] for p in parts])[order], np.concatenate([p[2] for p in parts])[order]
