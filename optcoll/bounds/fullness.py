"""When a side's full contents can exist, and when crossings waiting for them can land: two
counts behind ``allreduce-cut-once``'s "every chunk crosses once" case that hold with switches
that reduce or multicast (docs/model.md §6; ``bounds.allreduce`` states the whole bound;
issue 34).

*Sends out of the ranks* (``RankSends``). For q chunks to have their full near content (all s
contributions of the side) at NPUs, every near rank other than the one NPU where a chunk's content
is completed must have sent a transfer carrying its own contribution to that chunk, on one of its
out-links into the side (in this case the chunk crosses only once, so nothing goes out and comes
back). A reducing switch changes nothing: a rank's contribution still leaves the rank on a link.
So the q·s − q sends are shared by the s ranks, each rank counting at most q of them (one per
chunk), and a send's content reaches an NPU no earlier than the link's delay and the way from its
head to the nearest NPU after the send's slot: the j-th send on an out-link starts no earlier
than j occupancies. On a node of 8 GPUs around one NVSwitch this is about (7q/8 + 1) NVLink hops,
where counting reduce deliveries into combining nodes allows half as much.

*Crossings in release order* (``release_order_end``). The q-th crossing to start waits for q full
contents (``ready(q)``, non-decreasing). Giving every crossing link the least earliest start,
occupancy and way of any of them is a relaxation, and on identical links with one occupancy,
list scheduling in release order on the first free link minimises the last start (jobs of equal
length: any schedule can be re-matched to sorted releases, and the earliest free link is never a
worse choice), so its last start plus the way is a lower bound on the last arrival.
"""
from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class RankSends:
    """The near ranks' out-links into the side: per link its rank (0..s−1), the earliest instant
    its first send's content can be at an NPU, and its occupancy."""

    rank: np.ndarray
    first: np.ndarray
    busy: np.ndarray
    ranks: int  # s

    def ready(self, q: int) -> float:
        """No q full contents at NPUs before this (module docstring); 0 for one rank."""
        need = q * (self.ranks - 1)
        if need <= 0:
            return 0.0
        instants = []
        for g in range(self.ranks):
            mine = self.rank == g
            if not mine.any():
                continue
            first, busy = self.first[mine], self.busy[mine]
            slots = (first[:, None] + np.arange(q)[None, :] * busy[:, None]).ravel()
            instants.append(np.sort(slots)[:q])
        pool = np.concatenate(instants) if instants else np.zeros(0)
        if pool.size < need:
            return math.inf
        return float(np.partition(pool, need - 1)[need - 1])


def rank_sends(src: np.ndarray, dst: np.ndarray, delay: np.ndarray, busy: np.ndarray, to_npus: np.ndarray,
               near: np.ndarray, near_ranks: np.ndarray) -> RankSends:
    """``RankSends`` of the links from ``near_ranks`` to nodes of ``near`` (a node mask)."""
    index = np.full(near.size, -1, dtype=np.int64)
    index[near_ranks] = np.arange(near_ranks.size)
    own = np.flatnonzero((index[src] >= 0) & near[dst])
    return RankSends(index[src[own]], delay[own] + to_npus[dst[own]], busy[own], int(near_ranks.size))


def release_order_end(ready: Callable[[int], float], chunks: int, links: int, start: float, busy: float,
                      way: float) -> float:
    """The least last arrival of ``chunks`` crossings, the q-th to start no earlier than
    ``ready(q)``, on ``links`` identical links (earliest start ``start``, occupancy ``busy``, way
    to the arrival ``way``): list scheduling in release order (module docstring)."""
    if chunks <= 0 or links <= 0:
        return 0.0 if chunks <= 0 else math.inf
    free = [start] * min(links, chunks)
    heapq.heapify(free)
    last = start
    for q in range(1, chunks + 1):
        last = max(ready(q), heapq.heappop(free))
        heapq.heappush(free, last + busy)
    return last + way
