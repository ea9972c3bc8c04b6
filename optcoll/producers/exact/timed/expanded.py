"""The time-expanded encoding (TE-CCL style) of a ``TimedProblem`` on a ``Grid`` with horizon K.

Variables (all 0/1 except the switch stocks):

* ``x[c, e, k]``: chunk c starts on link e at epoch k (it is delivered at k + delay[e]);
* ``have[c, v, k]``: copy node v holds c at epoch k. The chain have[k] = have[k-1] + arrivals(k)
  makes holdings monotone and allows one delivery per (chunk, node), which loses nothing: a
  second copy of a chunk a node already holds is never needed;
* ``stock[c, w, k]``: arrivals of c at plain switch w not yet forwarded (each is forwarded once,
  and all of them eventually, which again loses nothing);
* ``late[k]`` (only with a makespan objective): some delivery has not happened by epoch k, and
  ``makespan`` = floor + Σ late[k], the objective (no constant term, so exports read plainly).

Pruned away: x whose sender cannot hold c by k (shortest delivery path) or whose delivery could
not reach any node needing c by K, and state variables outside those windows. Rows: causality
(x ≤ have of the sender), link windows (at most ``capacity[e]`` transfers occupy link e per
epoch: one on a fine grid), port windows, demand (have[c, v, K] = 1), and optional lex-leader rows from symmetries.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from optcoll.producers.exact.memory import ModelSize
from optcoll.producers.exact.timed.grid import Grid
from optcoll.producers.exact.toolkit.model import INF, LinearModel
from optcoll.producers.exact.timed.listsched import Transfers
from optcoll.producers.exact.timed.problem import TimedProblem
from optcoll.producers.exact.timed.reach import Reach


@dataclass(frozen=True, eq=False)
class StateBlock:
    """Per (chunk, node) a window of epochs [first, first + length) of consecutive variables."""

    base: np.ndarray  # C × V, index of the variable at epoch ``first`` (-1: no variable)
    first: np.ndarray  # C × V
    length: np.ndarray  # C × V

    def index(self, c: np.ndarray, v: np.ndarray, k: np.ndarray) -> np.ndarray:
        """Variable indices, -1 outside the window."""
        base, first, length = self.base[c, v], self.first[c, v], self.length[c, v]
        inside = (base >= 0) & (k >= first) & (k < first + length)
        return np.where(inside, base + (k - first), -1)


@dataclass(frozen=True, eq=False)
class ExpandedModel:
    problem: TimedProblem
    grid: Grid
    horizon: int
    lower: int  # the makespan objective's floor (== horizon for a feasibility model)
    linear: LinearModel
    x_chunk: np.ndarray
    x_link: np.ndarray
    x_epoch: np.ndarray
    x_index: np.ndarray
    have: StateBlock
    stock: StateBlock
    late: np.ndarray  # indices of late[lower .. horizon-1]
    makespan: int  # index of the makespan variable (-1 in a feasibility model)

    @property
    def has_objective(self) -> bool:
        return self.makespan >= 0

    def decode(self, values: np.ndarray) -> Transfers:
        on = values[self.x_index] > 0.5
        return Transfers(self.x_chunk[on], self.x_link[on], self.x_epoch[on].astype(float))

    def assignment(self, transfers: Transfers) -> np.ndarray | None:
        """Full variable values of a schedule on this grid, or None if it does not fit the model."""
        p, g = self.problem, self.grid
        key = {(int(c), int(e), int(k)): i for c, e, k, i in
               zip(self.x_chunk.tolist(), self.x_link.tolist(), self.x_epoch.tolist(), self.x_index.tolist())}
        values = np.zeros(self.linear.num_vars, dtype=np.int64)
        arrivals: dict[tuple[int, int], list[int]] = {}
        departures: dict[tuple[int, int], list[int]] = {}
        for c, e, k in zip(transfers.chunk.tolist(), transfers.link.tolist(), transfers.start.tolist()):
            i = key.get((c, e, int(round(k))))
            if i is None:
                return None
            values[i] = 1
            arrivals.setdefault((c, int(p.dst[e])), []).append(int(round(k)) + int(g.delay[e]))
            departures.setdefault((c, int(p.src[e])), []).append(int(round(k)))
        for block, is_stock in ((self.have, False), (self.stock, True)):
            for c, v in zip(*np.nonzero(block.base >= 0)):
                first, length, base = int(block.first[c, v]), int(block.length[c, v]), int(block.base[c, v])
                ks = np.arange(first, first + length)
                arr = np.searchsorted(np.sort(arrivals.get((c, v), [])), ks, side="right")
                dep = np.searchsorted(np.sort(departures.get((c, v), [])), ks, side="right") if is_stock else 0
                values[base:base + length] = arr - dep
        if self.makespan >= 0:
            finish = max(int(round(transfers.makespan(g))) if len(transfers) else 0, self.lower)
            values[self.late] = (np.arange(self.lower, self.horizon) < finish).astype(np.int64)
            values[self.makespan] = finish
        lb, ub = self.linear.bounds()
        if np.any(values < lb) or np.any(values > ub):
            return None
        return values


def _ranges(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For inclusive ranges [lo_i, hi_i]: (owner i, value) of every member."""
    counts = np.maximum(hi - lo + 1, 0)
    owner = np.repeat(np.arange(lo.shape[0]), counts)
    offsets = np.arange(owner.shape[0]) - np.repeat(np.cumsum(counts) - counts, counts)
    return owner, lo[owner] + offsets


def _candidates(problem: TimedProblem, grid: Grid, r: Reach, horizon: int) -> tuple[np.ndarray, ...]:
    """(chunk, link, epoch) of every transfer that survives reachability pruning."""
    held = problem.holds_at_start()
    src, dst = problem.src, problem.dst
    lo, hi, ok = r.windows(problem, grid.delay, horizon)
    cs, es = np.nonzero(ok)
    owner, ks = _ranges(lo[cs, es].astype(np.int64), hi[cs, es].astype(np.int64))
    xc, xe, xk = cs[owner], es[owner], ks
    # Senders must be able to hold the chunk: drop transfers from nodes nothing can deliver to,
    # until stable (dropping one can empty another node's inflow).
    while True:
        arriving = np.zeros(held.shape, dtype=bool)
        arriving[xc, dst[xe]] = True
        keep = held[xc, src[xe]] | arriving[xc, src[xe]]
        if keep.all():
            return xc, xe, xk
        xc, xe, xk = xc[keep], xe[keep], xk[keep]


def _state_block(lm: LinearModel, name: str, mask: np.ndarray, first: np.ndarray, last: np.ndarray,
                 ub: float) -> StateBlock:
    cs, vs = np.nonzero(mask)
    f, l_ = first[cs, vs].astype(np.int64), last[cs, vs].astype(np.int64)
    length = np.maximum(l_ - f + 1, 0)
    base = np.full(mask.shape, -1, dtype=np.int64)
    firsts = np.zeros(mask.shape, dtype=np.int64)
    lengths = np.zeros(mask.shape, dtype=np.int64)
    owner, ks = _ranges(f, l_)
    idx = lm.add_vars(np.zeros(owner.shape[0]), ub, name, ("c", "v", "k"),
                      np.stack([cs[owner], vs[owner], ks], axis=1))
    starts = np.cumsum(length) - length
    base[cs, vs] = np.where(length > 0, idx[0] + starts if idx.size else -1, -1)
    firsts[cs, vs], lengths[cs, vs] = f, length
    return StateBlock(base, firsts, lengths)


def _window_rows(lm: LinearModel, owner: np.ndarray, xs: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                 capacity: np.ndarray) -> None:
    """At most ``capacity[owner]`` of the x occupying each (owner, epoch); x occupies [lo, hi)."""
    span = np.maximum(hi - lo, 0)
    which = np.repeat(np.arange(xs.shape[0]), span)
    epoch = lo[which] + (np.arange(which.shape[0]) - np.repeat(np.cumsum(span) - span, span))
    key_owner = owner[which]
    if which.size == 0:
        return
    order = np.lexsort((epoch, key_owner))
    key_owner, epoch, which = key_owner[order], epoch[order], which[order]
    new = np.ones(which.shape[0], dtype=bool)
    new[1:] = (key_owner[1:] != key_owner[:-1]) | (epoch[1:] != epoch[:-1])
    group = np.cumsum(new) - 1
    sizes = np.bincount(group)
    limit = capacity[key_owner].astype(float)
    busy = sizes[group] > limit
    if not busy.any():
        return
    kept_groups, first, row = np.unique(group[busy], return_index=True, return_inverse=True)
    lm.add_rows(row, xs[which[busy]], 1.0, -INF, limit[busy][first], kept_groups.shape[0])


def _deliveries_after(problem: TimedProblem, grid: Grid, v: int, k: int, horizon: int) -> float:
    """Most deliveries node v can still get in epochs (k, horizon]: per in-link, starts in
    [k - delay + 1, horizon - delay], its capacity per occupancy; with a receive-port limit, port
    windows on each port are disjoint too."""
    links = np.flatnonzero(problem.dst == v)
    lo = np.maximum(0, k - grid.delay[links] + 1)
    hi = horizon - grid.delay[links]
    count = np.maximum(hi - lo + 1, 0)
    busy = grid.busy[links]
    if (busy[count > 0] <= 0).any():
        return np.inf
    used = count > 0
    cap = float(np.sum(grid.capacity[links][used] * np.ceil(count[used] / busy[used])))
    if problem.recv_ports is not None and problem.port_limited[v] and used.any():
        width = int((grid.port_hi[links] - grid.port_lo[links])[used].min())
        if width > 0:
            first = int((lo + grid.port_lo[links])[used].min())
            last = int((hi + grid.port_lo[links])[used].max())
            cap = min(cap, problem.recv_ports * ((last - first) // width + 1))
    return cap


def _ingress_rows(lm: LinearModel, problem: TimedProblem, grid: Grid, have: StateBlock, horizon: int) -> None:
    """Redundant rows from the ingress bound: a node needing n chunks must hold at least
    n − (deliveries it can still get after k) of them by epoch k. Implied by the capacity rows,
    but they tell the solver early that a tight horizon leaves no slack."""
    rows, cols, rhs = [], [], []
    for v in np.unique(problem.need_node):
        chunks = problem.need_chunk[problem.need_node == v]
        n = chunks.shape[0]
        for k in range(horizon):
            need = n - _deliveries_after(problem, grid, int(v), k, horizon)
            if need <= 0:
                continue
            state = have.index(chunks, np.full(n, v), np.full(n, k))
            state = state[state >= 0]
            rows.append(np.full(state.shape[0], len(rhs)))
            cols.append(state)
            rhs.append(need)
    if rhs:
        lm.add_rows(np.concatenate(rows), np.concatenate(cols), 1.0, np.array(rhs, dtype=float), INF, len(rhs))


def size(problem: TimedProblem, grid: Grid, r: Reach, horizon: int, lower: int | None = None) -> ModelSize:
    """What ``build`` would create, counted from the same windows without building it (an upper
    estimate: the sender pruning in ``_candidates`` only removes). Terms per transfer: its
    arrival in a chain row, causality (2) and one per epoch it occupies its link; per state
    variable: its chain row (2) and the ingress row; per needed delivery and objective epoch: 2."""
    K = int(horizon)
    lo, hi, ok = r.windows(problem, grid.delay, K)
    per_pair = np.zeros(ok.shape, dtype=np.int64)
    per_pair[ok] = hi[ok] - lo[ok] + 1
    transfers = int(per_pair.sum())
    occupancy = int((per_pair * grid.busy[None, :]).sum())
    cs, es = np.nonzero(ok)
    arriving = np.zeros(r.earliest.shape, dtype=bool)  # state windows, as in ``build``
    arriving[cs, problem.dst[es]] = True
    states = int(np.maximum(K - r.togo[arriving] - r.earliest[arriving] + 1, 0).sum())
    objective = max(0, K - (K if lower is None else int(lower)))  # late[k] epochs
    late = 2 * problem.need_chunk.shape[0] * objective
    return ModelSize("time-expanded", f"at {K} epochs", transfers + states + objective + (objective > 0),
                     3 * transfers + occupancy + 3 * states + late)


def build(problem: TimedProblem, grid: Grid, r: Reach, horizon: int, lower: int | None = None
          ) -> ExpandedModel | None:
    """The model for horizon K (epochs), minimising the makespan down to ``lower`` when given:
    candidate transfers, state windows, demand, chains, causality, link and port windows,
    ingress, then the makespan.

    None when some delivery cannot be made by K at all.
    """
    K = int(horizon)
    if problem.need_chunk.size and r.earliest[problem.need_chunk, problem.need_node].max() > K:
        return None
    lm = LinearModel()
    xc, xe, xk = _candidates(problem, grid, r, K)
    x = lm.add_vars(np.zeros(xc.shape[0]), 1.0, "x", ("c", "e", "k"), np.stack([xc, xe, xk], axis=1))
    dst, held, copy = problem.dst, problem.holds_at_start(), problem.copy

    # State windows: from the first possible arrival to the last useful moment.
    arriving = np.zeros(held.shape, dtype=bool)
    arriving[xc, dst[xe]] = True
    last = K - r.togo
    have = _state_block(lm, "have", arriving & copy[None, :], r.earliest, last, 1.0)
    indeg = np.bincount(dst, minlength=problem.num_nodes).astype(float)
    stock = _state_block(lm, "stock", arriving & ~copy[None, :], r.earliest, last,
                         float(indeg.max(initial=1)))

    # Demand: every needed (chunk, node) holds it at K.
    if problem.need_chunk.size:
        at_end = have.index(problem.need_chunk, problem.need_node, np.full(problem.need_chunk.shape, K))
        if (at_end < 0).any():
            return None
        lm.tighten(at_end, lo=1.0)

    for block, departures in ((have, False), (stock, True)):
        _chain_rows(lm, block, departures, problem, grid, xc, xe, xk, x)
    _causality_rows(lm, problem, have, xc, xe, xk, x)
    _resource_rows(lm, problem, grid, xe, xk, x)
    _ingress_rows(lm, problem, grid, have, K)
    floor = K if lower is None else int(lower)
    late, makespan = _makespan_rows(lm, problem, have, K, floor)
    return ExpandedModel(problem, grid, K, floor, lm, xc, xe, xk, x, have, stock, late, makespan)


def _chain_rows(lm: LinearModel, block, departures: bool, problem: TimedProblem, grid: Grid, xc: np.ndarray,
                xe: np.ndarray, xk: np.ndarray, x: np.ndarray) -> None:
    """Chains: state[k] - state[k-1] - arrivals(k) + departures(k) = 0 (``departures`` for
    stocks, which also forward every arrival by the end of their window)."""
    cs, vs = np.nonzero(block.base >= 0)
    if cs.size == 0:
        return
    owner, ks = _ranges(block.first[cs, vs], block.first[cs, vs] + block.length[cs, vs] - 1)
    cur = block.base[cs[owner], vs[owner]] + (ks - block.first[cs[owner], vs[owner]])
    rows_local = np.arange(cur.shape[0])
    row_of = np.full(lm.num_vars, -1, dtype=np.int64)
    row_of[cur] = rows_local
    prev_ok = ks > block.first[cs[owner], vs[owner]]
    arr_idx = block.index(xc, problem.dst[xe], xk + grid.delay[xe])
    terms_row = [rows_local, rows_local[prev_ok], row_of[arr_idx[arr_idx >= 0]]]
    terms_col = [cur, cur[prev_ok] - 1, x[arr_idx >= 0]]
    terms_val = [np.ones(cur.shape[0]), -np.ones(int(prev_ok.sum())), -np.ones(int((arr_idx >= 0).sum()))]
    if departures:
        dep_idx = block.index(xc, problem.src[xe], xk)
        terms_row.append(row_of[dep_idx[dep_idx >= 0]])
        terms_col.append(x[dep_idx >= 0])
        terms_val.append(np.ones(int((dep_idx >= 0).sum())))
        # Every arrival is forwarded by the end of the window.
        end = block.base[cs, vs] + block.length[cs, vs] - 1
        lm.tighten(end, hi=0.0)
    lm.add_rows(np.concatenate(terms_row), np.concatenate(terms_col), np.concatenate(terms_val),
                0.0, 0.0, cur.shape[0])


def _causality_rows(lm: LinearModel, problem: TimedProblem, have, xc: np.ndarray, xe: np.ndarray, xk: np.ndarray,
                    x: np.ndarray) -> None:
    """Causality at copy senders that did not start with the chunk: x <= have[sender, k]."""
    src = problem.src
    sender_state = have.index(xc, src[xe], xk)
    from_copy = ~problem.holds_at_start()[xc, src[xe]] & problem.copy[src[xe]]
    assert (sender_state[from_copy] >= 0).all()
    m = int(from_copy.sum())
    lm.add_rows(np.repeat(np.arange(m), 2), np.stack([x[from_copy], sender_state[from_copy]], axis=1).ravel(),
                np.tile([1.0, -1.0], m), -INF, 0.0, m)


def _resource_rows(lm: LinearModel, problem: TimedProblem, grid: Grid, xe: np.ndarray, xk: np.ndarray,
                   x: np.ndarray) -> None:
    """Link windows, then port windows."""
    _window_rows(lm, xe, x, xk, xk + grid.busy[xe], grid.capacity)
    for limit, side in ((problem.send_ports, problem.src), (problem.recv_ports, problem.dst)):
        if limit is None:
            continue
        node = side[xe]
        limited = problem.port_limited[node]
        _window_rows(lm, node[limited], x[limited], xk[limited] + grid.port_lo[xe[limited]],
                     xk[limited] + grid.port_hi[xe[limited]], np.full(problem.num_nodes, limit))


def _makespan_rows(lm: LinearModel, problem: TimedProblem, have, K: int, floor: int) -> tuple[np.ndarray, int]:
    """late[k] (k in floor..K-1) and the makespan = floor + Σ late, minimised; none when
    ``floor`` is K (a feasibility question). Returns (late variables, makespan variable or -1)."""
    late = np.zeros(0, dtype=np.int64)
    makespan = -1
    if floor >= K:
        return late, makespan
    ks = np.arange(floor, K)
    n = ks.shape[0]
    late = lm.add_vars(np.zeros(n), 1.0, "late", ("k",), ks[:, None])
    makespan = int(lm.add_vars(np.array([floor]), float(K), "makespan", (), np.zeros((1, 0)))[0])
    if n > 1:  # late[k+1] <= late[k]
        lm.add_rows(np.repeat(np.arange(n - 1), 2), np.stack([late[1:], late[:-1]], axis=1).ravel(),
                    np.tile([1.0, -1.0], n - 1), -INF, 0.0, n - 1)
    # have[c, v, k] + late[k] >= 1 for every needed (c, v); late[k] = 1 before c can be there.
    nc, nv = problem.need_chunk, problem.need_node
    owner = np.repeat(np.arange(nc.shape[0]), n)
    kk = np.tile(ks, nc.shape[0])
    state = have.index(nc[owner], nv[owner], kk)
    lm.tighten(late[np.unique(kk[state < 0] - floor)], lo=1.0)
    ok = state >= 0
    m = int(ok.sum())
    lm.add_rows(np.repeat(np.arange(m), 2), np.stack([late[kk[ok] - floor], state[ok]], axis=1).ravel(),
                1.0, 1.0, INF, m)
    # makespan - sum(late) = floor
    lm.add_rows(np.zeros(n + 1, dtype=np.int64), np.concatenate([[makespan], late]),
                np.concatenate([[1.0], -np.ones(n)]), float(floor), float(floor), 1)
    lm.objective = {makespan: 1.0}
    return late, makespan
