"""The latency (diameter) bound: no chunk outruns its shortest store-and-forward path."""
from __future__ import annotations

import math

import numpy as np

from optcoll.bounds.bound import Bound
from optcoll.bounds.paths import pair_distances, path_hops
from optcoll.collectives.collective import Collective
from optcoll.instances.instance import TimeModel
from optcoll.machines.machine import Machine
from optcoll.units import format_time


def latency_bound(machine: Machine, collective: Collective, model: TimeModel) -> Bound:
    """max over needed (chunk c, destination d) of the τ-weighted distance to d from c's nearest
    holder — or, for a combining collective, from c's farthest contributor (d needs them all).

    Valid in both occupancy modes: delivery over a link always takes the model's copy delay
    (α + b/B) after the start, and a chunk can only start on the next hop once it has arrived.
    Switch hops count like any hop.
    """
    chunk, dest = collective.needs
    if chunk.size == 0:
        return Bound("latency", 0.0, "nothing needs to move: every destination already holds its chunks")
    tau = model.link_timing(machine, collective.chunk_bytes).delay
    found = pair_distances(machine, collective.pre, chunk, dest, tau, collective.combining)
    i = int(np.argmax(found.value))
    c, d, h = int(chunk[i]), int(dest[i]), int(found.source[i])
    value = float(found.value[i])
    if not math.isfinite(value):
        who = "a contributor" if collective.combining else "any holder"
        return Bound("latency", math.inf, f"{machine.label(d)} needs chunk {c} but cannot be "
                     f"reached from {who} ({machine.label(h)}): no valid schedule exists")
    hops = path_hops(machine, tau, h, d)
    role = ("its farthest contributor" if collective.combining else "its nearest holder")
    return Bound("latency", value, f"chunk {c} needed at {machine.label(d)}: {role} "
                 f"{machine.label(h)} is {hops} hop(s) away, {format_time(value)} of α + b/B per hop")
