"""One integer linear model for every exact formulation (docs/model.md §6): the timed
time-expanded encoding and the step encoding write into it, every backend reads it.

min c·x s.t. row_lb ≤ A x ≤ row_ub, lb ≤ x ≤ ub, x integer. Encodings add variables and rows in
vectorised blocks (``add_vars``, ``add_rows``) or one at a time (``var``, ``row``); both land in
the same sparse arrays, in the order they were added, so CP-SAT, HiGHS, SCIP and the exported
files see the very same problem and their agreement is a real cross-check.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # scipy is loaded only by the callers that want a scipy matrix (~0.1 s per command)
    import scipy.sparse as sp

INF = float("inf")
#: (variable, coefficient) pairs of one row or objective.
Terms = Iterable[tuple[int, float]]


@dataclass
class _Pending:
    """Variables and rows added one at a time, kept as lists until the next block or assembly."""

    lb: list[float] = field(default_factory=list)
    ub: list[float] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    row: list[int] = field(default_factory=list)
    col: list[int] = field(default_factory=list)
    val: list[float] = field(default_factory=list)
    row_lb: list[float] = field(default_factory=list)
    row_ub: list[float] = field(default_factory=list)


@dataclass
class LinearModel:
    """min c·x s.t. row_lb ≤ A x ≤ row_ub, lb ≤ x ≤ ub, x integer (all variables are integral)."""

    lb: list[np.ndarray] = field(default_factory=list)
    ub: list[np.ndarray] = field(default_factory=list)
    #: Per variable block, for exports: (name prefix, field names, label array n × len(fields)),
    #: or a list of full names for variables added one at a time.
    blocks: list[tuple[str, tuple[str, ...], np.ndarray] | list[str]] = field(default_factory=list)
    rows: list[np.ndarray] = field(default_factory=list)
    cols: list[np.ndarray] = field(default_factory=list)
    vals: list[np.ndarray] = field(default_factory=list)
    row_lb: list[np.ndarray] = field(default_factory=list)
    row_ub: list[np.ndarray] = field(default_factory=list)
    objective: dict[int, float] = field(default_factory=dict)
    hint: dict[int, int] = field(default_factory=dict)
    num_vars: int = 0
    num_rows: int = 0
    #: Bound changes on single variables after their block was made: (indices, lb or None, ub or None).
    tightened: list[tuple[np.ndarray, float | None, float | None]] = field(default_factory=list)
    _pending: _Pending = field(default_factory=_Pending, repr=False)

    # -- one at a time ---------------------------------------------------------------------------
    def var(self, lb: float, ub: float, name: str) -> int:
        """One variable with bounds; returns its index."""
        p = self._pending
        p.lb.append(lb)
        p.ub.append(ub)
        p.names.append(name)
        self.num_vars += 1
        return self.num_vars - 1

    def row(self, terms: Terms, lo: float | None = None, hi: float | None = None) -> None:
        """One row lo ≤ Σ coef·var ≤ hi (None: unbounded on that side)."""
        p = self._pending
        local = len(p.row_lb)
        for v, c in terms:
            p.row.append(local)
            p.col.append(v)
            p.val.append(c)
        p.row_lb.append(-INF if lo is None else lo)
        p.row_ub.append(INF if hi is None else hi)

    def minimise(self, terms: Terms) -> None:
        """The objective Σ coef·var (replacing any earlier one)."""
        self.objective = {}
        for v, c in terms:
            self.objective[v] = self.objective.get(v, 0.0) + c

    # -- in blocks -------------------------------------------------------------------------------
    def add_vars(self, lb: np.ndarray, ub: np.ndarray, name: str, fields: tuple[str, ...],
                 labels: np.ndarray) -> np.ndarray:
        """A block of variables with bounds; returns their indices."""
        self._flush_vars()
        lb = np.asarray(lb, dtype=float)
        n = lb.shape[0]
        index = np.arange(self.num_vars, self.num_vars + n, dtype=np.int64)
        self._append_vars(lb, np.broadcast_to(np.asarray(ub, dtype=float), (n,)).copy(),
                          (name, fields, np.asarray(labels, dtype=np.int64).reshape(n, len(fields))))
        self.num_vars += n
        return index

    def tighten(self, index: np.ndarray, lo: float | None = None, hi: float | None = None) -> None:
        """Raise lower and/or lower upper bounds of some variables (fixing demand, ends of windows)."""
        self.tightened.append((np.asarray(index, dtype=np.int64), lo, hi))

    def add_rows(self, row: np.ndarray, col: np.ndarray, val: np.ndarray | float,
                 lo: np.ndarray | float, hi: np.ndarray | float, count: int) -> None:
        """``count`` rows; term t belongs to local row ``row[t]``."""
        self._flush_rows()
        if count == 0:
            return
        row = np.asarray(row, dtype=np.int64)
        self.rows.append(row + self.num_rows)
        self.cols.append(np.asarray(col, dtype=np.int64))
        self.vals.append(np.broadcast_to(np.asarray(val, dtype=float), row.shape).copy())
        self.row_lb.append(np.broadcast_to(np.asarray(lo, dtype=float), (count,)).copy())
        self.row_ub.append(np.broadcast_to(np.asarray(hi, dtype=float), (count,)).copy())
        self.num_rows += count

    def _append_vars(self, lb: np.ndarray, ub: np.ndarray, block) -> None:
        self.lb.append(lb)
        self.ub.append(ub)
        self.blocks.append(block)

    def _flush_vars(self) -> None:
        p = self._pending
        if p.lb:
            # num_vars already counts them: they were numbered when added
            self._append_vars(np.array(p.lb, dtype=float), np.array(p.ub, dtype=float), p.names)
            p.lb, p.ub, p.names = [], [], []

    def _flush_rows(self) -> None:
        p = self._pending
        if p.row_lb:
            count = len(p.row_lb)
            rows, cols, vals = (np.array(p.row, dtype=np.int64), np.array(p.col, dtype=np.int64),
                                np.array(p.val, dtype=float))
            lo, hi = np.array(p.row_lb, dtype=float), np.array(p.row_ub, dtype=float)
            p.row, p.col, p.val, p.row_lb, p.row_ub = [], [], [], [], []
            self.add_rows(rows, cols, vals, lo, hi, count)

    def _flush(self) -> None:
        self._flush_vars()
        self._flush_rows()

    # -- assembled arrays ------------------------------------------------------------------------
    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        self._flush()
        lb = np.concatenate(self.lb) if self.lb else np.zeros(0)
        ub = np.concatenate(self.ub) if self.ub else np.zeros(0)
        for index, lo, hi in self.tightened:
            if lo is not None:
                lb[index] = np.maximum(lb[index], lo)
            if hi is not None:
                ub[index] = np.minimum(ub[index], hi)
        return lb, ub

    def compressed_rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """A as (indptr, indices, data) in CSR form, columns sorted and duplicate terms summed
        (as scipy's ``sum_duplicates``), with the row bounds; numpy only."""
        self._flush()
        if not self.rows:
            return np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(0), np.zeros(0)
        rows, cols, vals = np.concatenate(self.rows), np.concatenate(self.cols), np.concatenate(self.vals)
        key = rows * max(self.num_vars, 1) + cols
        order = np.argsort(key, kind="stable")
        key, vals = key[order], vals[order]
        first = np.flatnonzero(np.concatenate([[True], key[1:] != key[:-1]])) if key.size else np.zeros(0, dtype=np.int64)
        data = np.add.reduceat(vals, first) if key.size else vals
        kept = key[first]
        row_of, indices = np.divmod(kept, max(self.num_vars, 1))
        indptr = np.concatenate([[0], np.cumsum(np.bincount(row_of, minlength=self.num_rows))]).astype(np.int64)
        return indptr, indices, data, np.concatenate(self.row_lb), np.concatenate(self.row_ub)

    def matrix(self) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
        import scipy.sparse as sp

        indptr, indices, data, rlo, rhi = self.compressed_rows()
        return sp.csr_matrix((data, indices, indptr), shape=(self.num_rows, self.num_vars)), rlo, rhi

    def objective_vector(self) -> np.ndarray:
        c = np.zeros(self.num_vars)
        for i, v in self.objective.items():
            c[i] += v
        return c

    def names(self) -> list[str]:
        self._flush()
        out: list[str] = []
        for block in self.blocks:
            if isinstance(block, list):
                out.extend(block)
                continue
            name, fields, labels = block
            out.extend(name + "".join(f"_{f}{v}" for f, v in zip(fields, row)) for row in labels.tolist())
        return out

    def quotient(self, classes: np.ndarray) -> "LinearModel":
        """The model with the variables of each class forced equal (merged into one variable).

        Rows that become identical are kept once; the hint keeps each class's first member.
        """
        k = int(classes.max(initial=-1)) + 1
        lb, ub = self.bounds()
        new_lb = np.full(k, -INF)
        new_ub = np.full(k, INF)
        np.maximum.at(new_lb, classes, lb)
        np.minimum.at(new_ub, classes, ub)
        first = np.full(k, -1, dtype=np.int64)
        first[classes[::-1]] = np.arange(classes.shape[0])[::-1]
        import scipy.sparse as sp

        a, rlo, rhi = self.matrix()
        merged = sp.csr_matrix((a.data, classes[a.indices], a.indptr), shape=(a.shape[0], k))
        merged.sum_duplicates()
        merged.eliminate_zeros()
        merged.sort_indices()
        keep = _distinct_rows(merged, rlo, rhi)
        merged = merged[keep]
        out = LinearModel()
        out.add_vars(new_lb, new_ub, "merged", ("first",), first[:, None])
        coo = merged.tocoo()
        out.add_rows(coo.row, coo.col, coo.data, rlo[keep], rhi[keep], merged.shape[0])
        objective = np.zeros(k)
        np.add.at(objective, classes, self.objective_vector())
        out.objective = {int(i): float(objective[i]) for i in np.flatnonzero(objective)}
        out.hint = {int(classes[i]): v for i, v in self.hint.items() if first[classes[i]] == i}
        return out

    def check(self, values: np.ndarray) -> bool:
        """Whether integral ``values`` satisfy every bound and row (solutions are checked with it)."""
        lb, ub = self.bounds()
        a, rlo, rhi = self.matrix()
        act = a @ values
        return bool(np.all(values >= lb) and np.all(values <= ub) and np.all(act >= rlo - 1e-9)
                    and np.all(act <= rhi + 1e-9))


def _distinct_rows(a: sp.csr_matrix, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Indices of the first of each group of identical rows (same terms, same bounds), in order.

    Rows are sorted by length, bounds and two independent hashes of their terms; neighbours that
    agree on all of them are compared term by term before one is dropped. (A hash collision can
    only keep a duplicate row, which changes nothing.)
    """
    n = a.shape[0]
    length = np.diff(a.indptr)
    owner = np.repeat(np.arange(n), length)
    value_bits = np.ascontiguousarray(a.data, dtype=np.float64).view(np.int64) | 1
    rng = np.random.default_rng(0)
    keys = []
    for _ in range(2):  # products and sums wrap modulo 2^64, as a hash may
        weight = rng.integers(1, 2**62, size=a.shape[1], dtype=np.int64)
        per_row = np.zeros(n, dtype=np.int64)
        np.add.at(per_row, owner, weight[a.indices] * value_bits)
        keys.append(per_row)
    order = np.lexsort((hi, lo, keys[1], keys[0], length))
    alike = np.ones(n - 1 if n else 0, dtype=bool)
    for column in (length, keys[0], keys[1], lo, hi):
        alike &= column[order][1:] == column[order][:-1]
    keep = np.ones(n, dtype=bool)
    for i in np.flatnonzero(alike).tolist():
        r, s = int(order[i]), int(order[i + 1])  # r < s: lexsort is stable
        span_r, span_s = slice(a.indptr[r], a.indptr[r + 1]), slice(a.indptr[s], a.indptr[s + 1])
        if np.array_equal(a.indices[span_r], a.indices[span_s]) and np.array_equal(a.data[span_r], a.data[span_s]):
            keep[s] = False
    return np.flatnonzero(keep)
