"""Which server (NVLink island) each node is in, and the rotation order of sends, shared by the
compiled router (routes.py) and the interpreted tacos+ (plus.py); numpy only, so the interpreted
engine does not load numba.
"""
from __future__ import annotations

import numpy as np

from optcoll.machines.machine import Machine
from optcoll.producers.base import NotApplicable


def rotation_rounds(server: np.ndarray | None, holder: np.ndarray, dest: np.ndarray,
                    width: int, num_npus: int) -> np.ndarray:
    """The round in which ``holder`` sends to ``dest`` in rotation order: round k sends to the
    k-th node after the holder (modulo ``width``), so a switch's first wave reaches every
    downlink once. With servers (``server``: index per node, -1 for the network), rounds go by
    (position in the server, server): a chunk goes to the holder's rail peers one server after
    the other first, so every wave of a rail's NICs reaches each rail peer once."""
    rounds = (dest - holder) % width
    if server is None or np.any(server[holder] < 0) or np.any(server[dest] < 0):
        return rounds
    count = int(server.max()) + 1
    position = np.zeros(server.size, dtype=np.int64)
    members_of = np.flatnonzero(server[:num_npus] >= 0)
    for k in range(count):
        members = members_of[server[members_of] == k]
        position[members] = np.arange(members.size)
    size = int(position.max()) + 1
    return ((position[dest] - position[holder]) % size) * count + (server[dest] - server[holder]) % count


def server_of(machine: Machine) -> np.ndarray | None:
    """Server (NVLink island) index per node, -1 for the network; None without servers."""
    if machine.num_nodes == machine.num_npus:
        return None
    from optcoll.producers.exact.timed.stitch import servers  # scipy's graph routines: only with switches

    try:
        return servers(machine)
    except NotApplicable:
        return None
