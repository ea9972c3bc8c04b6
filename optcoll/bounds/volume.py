"""The total-capacity bound of unicast collectives (AlltoAll, Scatter, Gather, AllToNext).

When every needed chunk has one destination, no copy serves two destinations, so the transfers
of chunk c cover at least a whole path from a holder to its destination. Counting all of them:
  bytes:     Σ_pairs hops(h, d)·b  <=  Σ_e B_e · T        (link e moves at most B_e·T bytes)
  occupancy: Σ_pairs dist_occ(h, d) <=  #links · T        (link e is busy at most T)
where dist_occ weighs each hop by its occupancy (α + b/B, or b/B with serialization).
"""
from __future__ import annotations

import numpy as np

from optcoll.bounds.bound import Bound
from optcoll.bounds.demand import unicast_pairs
from optcoll.bounds.paths import pair_distances
from optcoll.collectives.collective import Collective
from optcoll.instances.instance import TimeModel
from optcoll.machines.machine import Machine
from optcoll.units import format_bandwidth, format_time, format_size


def capacity_bound(machine: Machine, collective: Collective, model: TimeModel) -> Bound | None:
    pairs = unicast_pairs(collective)
    if pairs is None or machine.num_links == 0:
        return None
    chunk, dest = pairs
    name = "alltoall-capacity" if collective.kind == "alltoall" else "capacity"
    hops = pair_distances(machine, collective.pre, chunk, dest, np.ones(machine.num_links), False,
                          unweighted=True).value
    occ = model.link_timing(machine, collective.chunk_bytes).busy
    busy = pair_distances(machine, collective.pre, chunk, dest, occ, False).value
    total_bw = float(machine.link_bandwidth.sum())
    by_bytes = float(hops.sum()) * collective.chunk_bytes / total_bw
    by_time = float(busy.sum()) / machine.num_links
    if by_bytes >= by_time:
        text = (f"{int(hops.sum())} chunk-hops of {format_size(collective.chunk_bytes)} (each chunk over a "
                f"shortest path) over {format_bandwidth(total_bw)} of total link bandwidth")
        return Bound(name, by_bytes, text)
    return Bound(name, by_time, f"{format_time(float(busy.sum()))} of link occupancy along "
                 f"shortest paths, shared by {machine.num_links} links")
