"""The shift schedule of one switch (docs/model.md §6: a constructive schedule that meets the ingress
bound, so a proof needs no time-expanded model however many NPUs hang off the switch).

On a star, every NPU has one link up to the switch and one down from it. In round r = 1..N−1 NPU
i sends each of its C chunks up, and the switch sends it down to NPU (i + r) mod N: every uplink
and every downlink carries exactly one transfer per slot, so with equal links each downlink
delivers back to back from 2τ on and the last chunk lands at ((N−1)·C + 1)·τ, the per-node
ingress bound. The transfers carry their ideal starts; the caller retimes them on the machine.
"""
from __future__ import annotations

import numpy as np

from optcoll.producers.base import NotApplicable
from optcoll.producers.exact.timed.listsched import Transfers
from optcoll.producers.exact.timed.problem import TimedProblem


def star_links(problem: TimedProblem) -> tuple[np.ndarray, np.ndarray]:
    """(uplink, downlink) per NPU when the machine is one switch with one link each way to every
    NPU and nothing else."""
    m = problem.machine
    if len(m.switches) != 1 or m.num_links != 2 * m.num_npus:
        raise NotApplicable("not a single switch with one link each way per NPU")
    hub = m.num_npus
    up, down = np.full(m.num_npus, -1), np.full(m.num_npus, -1)
    for e, (u, v) in enumerate(zip(problem.src.tolist(), problem.dst.tolist())):
        if v == hub and u < hub and up[u] < 0:
            up[u] = e
        elif u == hub and v < hub and down[v] < 0:
            down[v] = e
    if (up < 0).any() or (down < 0).any():
        raise NotApplicable("not a single switch with one link each way per NPU")
    return up, down


def shift_transfers(problem: TimedProblem, holder: np.ndarray) -> Transfers:
    """The shift schedule (module docstring) of an AllGather-shaped problem on a star;
    ``holder`` gives each chunk's one holder."""
    up, down = star_links(problem)
    n = problem.machine.num_npus
    per_npu = problem.num_chunks // n
    chunks = np.argsort(holder, kind="stable").reshape(n, per_npu)  # NPU i's chunks, in id order
    rounds, npu, k = np.meshgrid(np.arange(1, n), np.arange(n), np.arange(per_npu), indexing="ij")
    rounds, npu, k = rounds.ravel(), npu.ravel(), k.ravel()
    slot = (rounds - 1) * per_npu + k
    chunk = chunks[npu, k]
    up_start = slot * problem.busy[up][npu]
    down_start = up_start + problem.delay[up][npu]
    return Transfers(np.concatenate([chunk, chunk]), np.concatenate([up[npu], down[(npu + rounds) % n]]),
                     np.concatenate([up_start, down_start]))
