"""Textbook one-port bounds on a fully connected uniform network (Chan et al., CCPE 2007).

Applies when send_ports = recv_ports = 1, occupancy is "link" (a transfer holds its link and
both ports for α + b/B, as the verifier counts ports) and the machine is exactly the ranks, every
ordered pair linked, all links with one α and one B. With L = ⌈log2 N⌉ and τ = α + b/B:
  AllGather, ReduceScatter, Gather, Scatter  >= Lα + (N−1)/N·M/B
  Broadcast, Reduce                          >= Lα + M/B
  AllReduce                                  >= Lα + 2(N−1)/N·M/B
Why they hold in the chunked timed model: a rank receives (AllGather, Gather root) or sends
(Scatter root) (N−1)·C chunks one at a time, (N−1)Cτ >= Lα + (N−1)Cb/B as N−1 >= L; ReduceScatter
needs N−1 merges per chunk spread over N receive ports, the same count; AllReduce needs
2(N−1) transfers per chunk (one-way gossip) over N ports, 2(N−1)Cτ; a Broadcast root sends its
last chunk no earlier than (C−1)τ, after which its holders at most double per τ: (C−1+L)τ.
"""
from __future__ import annotations

import math

import numpy as np

from optcoll.bounds.bound import Bound
from optcoll.collectives.collective import Collective
from optcoll.instances.instance import TimeModel
from optcoll.machines.machine import Machine
from optcoll.units import format_time

_BANDWIDTH_FACTOR = {"allgather": "(N-1)/N", "reducescatter": "(N-1)/N", "gather": "(N-1)/N",
                     "scatter": "(N-1)/N", "broadcast": "1", "reduce": "1", "allreduce": "2(N-1)/N"}


def _uniform_full_mesh(machine: Machine, collective: Collective) -> bool:
    n = collective.num_ranks
    if machine.num_nodes != n or sorted(collective.ranks) != list(range(n)) or n < 2:
        return False
    if np.ptp(machine.link_latency) != 0 or np.ptp(machine.link_bandwidth) != 0:
        return False
    linked = np.zeros((n, n), dtype=bool)
    linked[machine.link_src, machine.link_dst] = True
    return bool(linked[~np.eye(n, dtype=bool)].all())


def one_port_bound(machine: Machine, collective: Collective, model: TimeModel) -> Bound | None:
    if (model.send_ports, model.recv_ports) != (1, 1) or model.occupancy != "link" \
            or model.kind != "timed" or collective.kind not in _BANDWIDTH_FACTOR \
            or not _uniform_full_mesh(machine, collective):
        return None
    n, m = collective.num_ranks, collective.size_bytes
    alpha, bandwidth = float(machine.link_latency[0]), float(machine.link_bandwidth[0])
    steps = math.ceil(math.log2(n))
    factor = {"(N-1)/N": (n - 1) / n, "1": 1.0, "2(N-1)/N": 2 * (n - 1) / n}[_BANDWIDTH_FACTOR[collective.kind]]
    value = steps * alpha + factor * m / bandwidth
    return Bound("one-port", value, f"one-port fully connected uniform network of N = {n}: "
                 f"⌈log2 N⌉α + {_BANDWIDTH_FACTOR[collective.kind]}·M/B = {steps}·"
                 f"{format_time(alpha)} + {factor:.6g}·{m:g} B / {bandwidth:g} B/s (Chan et al. 2007)",
                 assumptions=("one send and one receive port per NPU", "uniform fully connected network"))
