"""When a cut's chunks cannot all cross once: the counting behind ``allreduce-cut-once``'s
"some chunk crosses twice" case (docs/model.md §6; ``bounds.allreduce`` states the whole bound).

A chunk that crosses a cut more than once usefully needs K + 1 crossings on the cut's links in
all, but not every crossing can play every part. Sort the useful crossings out of the near side
by what their content does on the far side, for a schedule that ends by T:

* a *spreading* crossing's content reaches a rank other than the first NPU it arrives at, so it
  starts by T − (the way to that NPU) − (the least hop from an NPU to another rank);
* a *direct* crossing only completes the NPU it reaches; it starts by T − (the way to a rank);
* a *full* crossing carries all s near contributions of its chunk; for s ≥ 2 its content needed a
  reduce delivery into an NPU first (no in-network reduction), so it starts no earlier than the
  first such delivery can land.

Without switches that multicast, a crossing's data reaches one NPU first and goes on only from
there. So each chunk either has a full spreading crossing (type 1), or at least two spreading
ones (type 2: no one of them carries everything, but together they can), or else every far rank
needs a direct crossing of it (type 3: at most one spreading crossing, and not a full one). Per
link, the crossings of each kind that fit by T are counted with the link's earliest start and
occupancy (a direct crossing placed before the first full one only uses time a full one could not;
anywhere else it takes a place a full one could have had). Summed over links (the largest sums
for a given number of direct crossings, each kind maximised on its own: a relaxation), T is
possible only if the K chunks can be typed with the crossings available and one chunk has two.
The least such T is a lower bound for the case; it is never below the plain K + 1 count.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from optcoll.bounds.nodes import SLACK

#: Most work (link options × direct-crossing counts) one feasibility test may take; above it the
#: case keeps the plain K + 1 count (the bound stays valid, only weaker).
COUNT_WORK_LIMIT = 2_000_000
#: Relative width at which the search for the least possible end stops (a float search; the answer
#: is the largest end shown impossible, so it never overstates the bound).
PRECISION = 1e-9


@dataclass(frozen=True)
class CrossingLinks:
    """A cut's crossing links in one direction, as the counting sees them (one entry per link)."""

    start: np.ndarray     # earliest start of a crossing (a rank's data reaches the tail)
    busy: np.ndarray      # occupancy: consecutive crossings start this far apart
    to_rank: np.ndarray   # from a crossing's start to its arrival at the nearest rank
    to_relay: np.ndarray  # from its start to the earliest its content can reach a second rank
    full_from: float      # earliest start of a crossing carrying every near contribution


def _fit(first: np.ndarray, last: np.ndarray, busy: np.ndarray) -> np.ndarray:
    """Per link, how many starts spaced ``busy`` apart fit in [first, last] (never undercounted)."""
    return np.where(last >= first - SLACK * busy, np.floor((last - first) / busy + SLACK) + 1, 0).astype(np.int64)


def _best_sums(options: list[np.ndarray], cap: int) -> np.ndarray:
    """Per total D of direct crossings (D ≥ ``cap`` pooled at ``cap``), the largest sum of one
    option per link, option d of a link meaning d direct crossings on it; then made a maximum over
    totals ≥ D."""
    best = np.full(cap + 1, -np.inf)
    best[0] = 0.0
    for values in options:
        merged = np.full(cap + 1, -np.inf)
        for d, value in enumerate(values.tolist()):
            if value < 0:
                continue
            if d >= cap:
                merged[cap] = max(merged[cap], best.max() + value)
                continue
            shifted = best[: cap + 1 - d] + value
            merged[d:] = np.maximum(merged[d:], shifted)
            merged[cap] = max(merged[cap], (best[cap + 1 - d:] + value).max(initial=-np.inf))
        best = merged
    return np.maximum.accumulate(best[::-1])[::-1]


def _possible(links: CrossingLinks, chunks: int, far_ranks: int, end: float) -> bool | None:
    """Whether the counting admits an end at ``end`` (module docstring); None when too costly."""
    direct_last = end - links.to_rank
    spread_last = end - links.to_relay
    total = _fit(links.start, direct_last, links.busy)
    spreading = _fit(links.start, spread_last, links.busy)
    full_first = np.maximum(links.full_from, links.start)
    early = np.where(full_first > links.start, np.floor((full_first - links.start) / links.busy + SLACK), 0)
    full_spread = _fit(full_first, spread_last, links.busy)
    full_any = _fit(full_first, direct_last, links.busy)
    cap = chunks * far_ranks
    if int((total + 1).sum()) * (cap + 1) > COUNT_WORK_LIMIT:
        return None
    full_options, spread_options = [], []
    for e in range(total.size):
        d = np.arange(total[e] + 1)
        full_options.append(np.maximum(np.minimum(full_spread[e], full_any[e] - np.maximum(d - early[e], 0)), 0))
        spread_options.append(np.maximum(np.minimum(spreading[e], total[e] - d), 0))
    full_best, spread_best = _best_sums(full_options, cap), _best_sums(spread_options, cap)
    for third in range(min(chunks, cap // far_ranks) + 1):
        for directs in ((0, 1) if third == 0 else (third * far_ranks,)):
            full, spread = full_best[directs], spread_best[directs]
            if not (np.isfinite(full) and np.isfinite(spread)):  # that many direct crossings do not fit
                continue
            first = min(full, chunks - third)
            second = chunks - third - first
            several = third + second > 0 or spread > chunks or directs > 0
            if first + 2 * second <= spread and several:
                return True
    return False


def several_crossings_end(links: CrossingLinks, chunks: int, far_ranks: int, low: float, high: float) -> float:
    """A lower bound on the end of any schedule in which some chunk crosses more than once, given
    ``low`` (the plain K + 1 count) and searched up to ``high`` (returned when nothing below is
    possible); ``low`` when the counting would cost too much."""
    if high <= low or _possible(links, chunks, far_ranks, high) is None:
        return low
    if not _possible(links, chunks, far_ranks, high):
        return high
    impossible, possible = low, high
    while possible - impossible > PRECISION * possible:
        mid = 0.5 * (impossible + possible)
        if _possible(links, chunks, far_ranks, mid):
            possible = mid
        else:
            impossible = mid
    return impossible
