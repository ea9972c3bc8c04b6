"""The vectorised engine: non-combining collectives whose switches (if any send) multicast.

Why it finds the same first violation as the event engine. In these collectives a value never
changes and every buffer-holding node keeps what it gets, so "v holds c at t" is just
``H[c, v] <= t + eps`` with H the earliest delivery (0 for a precondition holder). H is computed
from *all* transfers, including ones that are themselves invalid. That cannot change the verdict:
let j be the first violation in (start, transfer id) order as the event engine defines it. A
delivery that counts at or before j's start comes from a transfer that started at least 2·eps
earlier (every link time exceeds 2·eps), hence from a transfer before j, hence a valid one the
event engine applied too. So for every transfer up to j both engines see the same holdings, and
j is also the first transfer the vectorised checks flag. Link overlap and port limits do not
depend on values at all, and by the same argument the counts of earlier transfers agree up to
j. Priorities between kinds on one transfer are the same table in both engines.
"""
from __future__ import annotations

import numpy as np

from optcoll.schedules.schedule import REDUCE
from optcoll.verify import findings
from optcoll.verify.problem import BATCH_TRANSFERS, Finding, Outcome, Problem, earliest
from optcoll.verify.timing import first_position, link_overlap, port_overflow


def applies(p: Problem) -> bool:
    """Non-combining, and every switch that sends anything may send a held chunk many times."""
    if p.collective.combining:
        return False
    sends = np.bincount(p.src, minlength=p.num_nodes)[p.machine.num_npus:]
    return all(s.multicast for s, n in zip(p.machine.switches, sends.tolist()) if n)


class Holdings:
    """Earliest engine time each (chunk, node) is held: 0 at t = 0 for ``pre``, else first delivery."""

    def __init__(self, p: Problem):
        self.width = p.num_nodes
        pre_c, pre_v = p.collective.pre.pairs()
        keys = np.concatenate([pre_c * self.width + pre_v, p.chunk * self.width + p.dst])
        times = np.concatenate([np.zeros(pre_c.size), p.arrive])
        order = np.lexsort((times, keys))
        keys, times = keys[order], times[order]
        first = np.ones(keys.size, dtype=bool)
        first[1:] = keys[1:] != keys[:-1]
        # A sentinel past every key keeps lookups in range.
        self.keys = np.append(keys[first], np.iinfo(np.int64).max)
        self.times = np.append(times[first], np.inf)

    def at(self, chunks: np.ndarray, nodes: np.ndarray) -> np.ndarray:
        query = chunks * self.width + nodes
        pos = np.minimum(np.searchsorted(self.keys, query), self.keys.size - 1)
        return np.where(self.keys[pos] == query, self.times[pos], np.inf)


def run(p: Problem, batch: int = BATCH_TRANSFERS) -> Outcome:
    held = Holdings(p)
    candidates: list[Finding | None] = []
    j = first_position(p, np.flatnonzero(p.op == REDUCE))
    candidates.append(None if j is None else findings.op_not_allowed(p, j))
    j = first_position(p, np.flatnonzero(held.at(p.chunk, p.src) > p.start + p.eps))
    candidates.append(None if j is None else findings.causality(p, j))
    if not p.step_model:
        candidates += [link_overlap(p, batch), port_overflow(p, "send", batch),
                       port_overflow(p, "recv", batch)]
    first = earliest(*candidates)
    if first is not None:
        return Outcome(first, np.inf)
    post_c, post_v = p.collective.post.pairs()
    since = held.at(post_c, post_v)
    missing = np.isinf(since)
    if missing.any():
        return Outcome(findings.unmet(p, post_c[missing], post_v[missing], None), np.inf)
    return Outcome(None, float(since.max(initial=0.0)))
