"""How fast copies of chunks can spread without multicast: the upper envelope behind
``allreduce-cut-once``'s spread and reduction depth (docs/model.md §6; ``bounds.allreduce``).

A holder of a chunk makes a new holder only by sending a copy on one of its out-links, at most one
per occupancy of that link, and a plain switch forwards each arrival once, so every copy makes at
most one new holder, no earlier than the link's hop to the next NPU. The envelope lets every
holder send on every out-link of a dominating profile (per position, the least hop and occupancy
of any NPU's out-link in that position) from the instant it holds something, so no real spread
has more holders at any instant: the instant the envelope reaches a count is a lower bound.

Several chunks spreading over the same NPUs share their senders: an NPU sends one copy per link
occupancy whichever chunk it holds, so with ``senders`` NPUs only the first ``senders`` holdings
can add a sender (``spread_end``). A reduction into one NPU is such a spread run backwards (on the
reversed links), which bounds how soon any NPU can hold all of its side's contributions.
"""
from __future__ import annotations

import heapq
from functools import lru_cache

import numpy as np

from optcoll.machines.machine import Machine

Profile = tuple[tuple[float, float], ...]  # (hop to the next NPU, occupancy) per out-link position


@lru_cache(maxsize=1024)
def spread_end(arrivals: tuple[float, ...], holdings: int, links: Profile, senders: int) -> float:
    """The least instant by which ``holdings`` holdings can exist, starting from one holding per
    entry of ``arrivals`` (their instants), when each of the first ``senders`` holdings makes a
    sender that sends on every link of ``links`` once per occupancy, each copy one more holding
    after its hop (module docstring); inf when they cannot all be made."""
    # (instant, sender's start, link, send index); arrivals have no sender (link −1)
    pending = [(t, 0.0, -1, 0) for t in arrivals]
    heapq.heapify(pending)
    made, active = 0, 0
    while pending:
        instant, since, i, j = heapq.heappop(pending)
        made += 1
        if made >= holdings:
            return instant
        if i >= 0:
            hop, period = links[i]
            heapq.heappush(pending, (since + hop + (j + 1) * period, since, i, j + 1))
        if active < senders:
            active += 1
            for e, (hop_e, _) in enumerate(links):
                heapq.heappush(pending, (instant + hop_e, instant, e, 0))
    return np.inf


def spread_time(holders: int, links: Profile) -> float:
    """The least time by which one holder can have made ``holders`` − 1 others (one chunk)."""
    return 0.0 if holders <= 1 else spread_end((0.0,), holders, links, holders)


def spread_links(machine: Machine, npus: np.ndarray, hop: np.ndarray, busy: np.ndarray,
                 *, inward: bool = False) -> Profile:
    """The dominating profile of ``npus``' out-links (``inward``: in-links, for a spread run
    backwards) with per-link ``hop`` and ``busy``: the i-th by hop of each NPU, at the least such
    hop and occupancy over them (a GPU's NIC reaches another GPU far later than its NVLink does,
    and is counted so, not at the NVLink's hop)."""
    ends = machine.link_dst if inward else machine.link_src
    own = np.flatnonzero(np.isin(ends, npus))
    if not own.size:
        return ()
    order = own[np.lexsort((hop[own], ends[own]))]
    end = ends[order]
    group_start = np.flatnonzero(np.r_[True, end[1:] != end[:-1]])
    position = np.arange(order.size) - np.repeat(group_start, np.diff(np.r_[group_start, order.size]))
    width = int(position.max()) + 1
    least_hop, least_busy = np.full(width, np.inf), np.full(width, np.inf)
    np.minimum.at(least_hop, position, hop[order])
    np.minimum.at(least_busy, position, busy[order])
    return tuple(zip(least_hop.tolist(), least_busy.tolist()))
