"""Ingress with release times (docs/model.md §6, per-rank ingress bound): the one implementation of
"the late chunks still have to come in over the node's in-links".

For a threshold ρ, if at least k of the chunks a node needs cannot arrive before ρ, they arrive
over its in-links (or its receive ports) at instants no earlier than ρ, one occupancy (or one
port window) apart on each, so the node is not done before the k-th earliest of those instants.
Which chunks are late is the caller's argument: per chunk from shortest delivery times (the timed
solver's ``reach``), or by counting the entries into a node group (``entry``). Units are the
caller's (seconds, or integer epochs of a grid): the formulas are the same.
"""
from __future__ import annotations

import numpy as np

#: Counts round *up* by this fraction of a period, so float error can only lower the bound.
SLACK = 1e-9
#: Rows × links² cells one bisection holds at once (memory stays in tens of MB).
ROW_CELLS = 4_000_000


def kth_arrivals(k: np.ndarray, first: np.ndarray, period: np.ndarray) -> np.ndarray:
    """Per row i: the least T with Σ_l #{j ≥ 0 : first[i, l] + j·period[l] ≤ T} ≥ k[i].

    ``first`` is (rows, links); a row with k ≤ 0 gives −inf (nothing is late), a link with no
    positive period (only on a rounded-down grid) delivers any number at its first instant, and
    a row no link serves gives inf. Exact: the answer is an arrival instant, found by an integer
    bisection on j per (row, link), not a float search on T.
    """
    k = np.asarray(k, dtype=np.int64)
    first = np.asarray(first, dtype=float).reshape(k.size, -1)
    period = np.asarray(period, dtype=float)
    out = np.full(k.size, np.inf)
    out[k <= 0] = -np.inf
    live = (k > 0) & np.isfinite(first).any(axis=1) if first.shape[1] else np.zeros(k.size, dtype=bool)
    unlimited = period <= 0
    if unlimited.any():
        out[live] = np.min(np.where(unlimited[None, :], first[live], np.inf), axis=1)
    links = np.flatnonzero(~unlimited)
    batch = max(1, ROW_CELLS // max(1, links.size) ** 2)
    for part in np.array_split(np.flatnonzero(live), max(1, -(-int(live.sum()) // batch))):
        if part.size and links.size:
            out[part] = np.minimum(out[part], _bisect(k[part], first[np.ix_(part, links)], period[links]))
    return out


def _bisect(need: np.ndarray, f: np.ndarray, p: np.ndarray) -> np.ndarray:
    """``kth_arrivals`` on rows that need something and links with a positive period."""
    finite = np.isfinite(f)

    def delivered(t: np.ndarray) -> np.ndarray:  # (rows, links) instants -> (rows, links) counts
        j = np.floor((t[:, :, None] - f[:, None, :]) / p[None, None, :] + SLACK) + 1
        j = np.where(finite[:, None, :], np.maximum(j, 0), 0)
        return j.sum(axis=2)

    lo = np.zeros(f.shape, dtype=np.int64)
    hi = np.where(finite, need[:, None] - 1, 0)  # one link alone delivers k by its (k-1)-th
    while np.any(lo < hi):
        mid = (lo + hi) // 2
        enough = delivered(f + mid * p) >= need[:, None]
        hi = np.where(enough, mid, hi)
        lo = np.where(enough, lo, mid + 1)
    reached = delivered(f + lo * p) >= need[:, None]
    return np.where(finite & reached, f + lo * p, np.inf).min(axis=1)


def late_ingress(thresholds: np.ndarray, late: np.ndarray, ready: np.ndarray, delay: np.ndarray,
                 busy: np.ndarray) -> tuple[float, int]:
    """max over thresholds ρ_i of the late[i]-th earliest arrival over in-links l that start no
    earlier than max(ready[i, l], ρ_i − delay[l]) (``ready``: the first moment l's sender can
    hold one of the late chunks; a vector applies to every row), one ``busy[l]`` apart.

    Returns (bound, index of the threshold that gives it; −1 when none does).
    """
    thresholds = np.asarray(thresholds, dtype=float)
    if thresholds.size == 0 or delay.size == 0:
        return (np.inf, 0) if thresholds.size and np.max(late) > 0 else (0.0, -1)
    ready = np.broadcast_to(np.asarray(ready, dtype=float), (thresholds.size, delay.size))
    start = np.maximum(ready, thresholds[:, None] - delay[None, :])
    times = kth_arrivals(late, start + delay[None, :], busy)
    i = int(np.argmax(times))
    return (float(times[i]), i) if times[i] > 0 else (0.0, -1)


def per_chunk_rows(release: np.ndarray, sender_earliest: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The thresholds of the per-chunk argument: every distinct ``release`` (the earliest each
    needed chunk can arrive), how many chunks are that late or later, and per in-link the first
    moment its sender can hold one of them (``sender_earliest``: chunks × in-links)."""
    order = np.argsort(-np.asarray(release, dtype=float), kind="stable")
    latest_first = release[order]
    ready = np.minimum.accumulate(sender_earliest[order], axis=0) if order.size else sender_earliest
    ends = np.flatnonzero(np.r_[latest_first[1:] != latest_first[:-1], True])
    return latest_first[ends], ends + 1, ready[ends]
