"""The GPU-only view of a verified schedule: what each GPU sends to which GPU through switches.

Runtimes (MSCCL, MSCCL++) name GPUs only: a chunk that leaves GPU u and reaches GPU v through
switches alone (an NVSwitch; a NIC's rail leaf and the spine) is one send from u to v along that
route, and a GPU that relays makes two sends. This module follows each chunk as the verifier
does (``optcoll/verify/events.py``): starts in (start, id) order, every arrival at or before a
start (within ``eps``) delivered first, in (arrival, id) order; a plain switch forwards each
arrival once (the one a send names by ``via``, else first in first out); a GPU, a multicast
switch and a reducing switch send the latest value they hold. So every transfer has a
*source*: the arrival whose value it sends on (-1: the sender's own value from the
precondition), and every transfer landing on a GPU is the last hop of one ``PeerSend``, found by
walking the sources back through switches to the GPU it left. A walk stops early at a switch
whose latest arrival was a reduction into it: that send carries the switch's sum (NVLS), which a
runtime either has an op for (MSCCL++'s ``glres``) or refuses (MSCCL). The exporters
(``msccl/routes.py``, ``mscclpp/gpuview.py``) add what their runtime makes of it: channels per
route, or puts and versions of values.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from optcoll.collectives.collective import Collective
from optcoll.errors import InputError
from optcoll.machines.machine import Machine
from optcoll.schedules.schedule import REDUCE, Schedule


@dataclass(frozen=True)
class PeerSend:
    """A chunk's way to GPU ``dst`` through switches only: ``hops`` (transfer ids, first hop
    first) over ``route`` (their links) from node ``src`` (a GPU, or the switch whose sum it
    carries, see ``from_sum``), leaving at ``start`` (its first hop's) and landing at ``arrive``
    (its last hop's), ``op`` the last hop's (a reduce adds to what ``dst`` holds)."""

    hops: tuple[int, ...]
    route: tuple[int, ...]
    chunk: int
    src: int
    dst: int
    start: float
    arrive: float
    op: int
    from_sum: bool  # src is a switch that reduced the chunk: the send carries its sum

    @property
    def id(self) -> int:
        """The schedule's id of the last hop (one send per transfer landing on a GPU)."""
        return self.hops[-1]

    @property
    def first(self) -> int:
        return self.hops[0]


@dataclass(frozen=True)
class GpuView:
    """``sources``: per transfer, the arrival whose value it sends (-1: the sender's precondition
    value); ``sends``: one per transfer landing on a GPU, in transfer id order."""

    sources: tuple[int, ...]
    sends: tuple[PeerSend, ...]


def extra_sends(firsts: list[int]) -> int:
    """Sends beyond one per first hop: a switch that multicasts one arrival to k GPUs becomes k
    sends in a runtime without multicast, each crossing the first hop again (k - 1 extra)."""
    return len(firsts) - len(set(firsts))


def describe(machine: Machine, schedule: Schedule, j: int) -> str:
    """Transfer ``j`` in words, for a refusal that names it."""
    e = int(schedule.link[j])
    return (f"transfer {j} (chunk {int(schedule.chunk[j])} on link {e} {machine.label(int(machine.link_src[e]))}->"
            f"{machine.label(int(machine.link_dst[e]))} at {float(schedule.start[j]) * 1e6:.6g} us)")


def follow(machine: Machine, collective: Collective, schedule: Schedule, arrivals: np.ndarray, eps: float,
           runtime: str) -> GpuView:
    """The schedule in the GPU-only view (module docstring). ``arrivals``: the verifier's, per
    transfer; ``eps``: its tolerance; ``runtime`` names the target in the refusal of a transfer
    through an NPU outside the collective (a runtime has its ranks only)."""
    ranks = set(collective.ranks)
    src, dst = machine.link_src[schedule.link].tolist(), machine.link_dst[schedule.link].tolist()
    for j in range(len(schedule)):
        for node in (src[j], dst[j]):
            if not machine.is_switch(node) and node not in ranks:
                raise InputError(f"{describe(machine, schedule, j)} goes through NPU {machine.label(node)!r}, which "
                                 f"is not a rank of the collective; {runtime} has only ranks, so this schedule "
                                 "cannot be exported", field="schedule")
    sources = _sources(machine, schedule, arrivals, src, dst, eps)
    chunk, start, op, link = (schedule.chunk.tolist(), schedule.start.tolist(), schedule.op.tolist(),
                              schedule.link.tolist())
    sends = []
    for j in range(len(schedule)):
        if machine.is_switch(dst[j]):
            continue
        hops, from_sum = [j], False
        while machine.is_switch(src[hops[-1]]):
            came = sources[hops[-1]]
            if op[came] == REDUCE:
                from_sum = True
                break
            hops.append(came)
        hops.reverse()
        first = hops[0]
        sends.append(PeerSend(tuple(hops), tuple(link[h] for h in hops), chunk[j], src[first], dst[j], start[first],
                              float(arrivals[j]), op[j], from_sum))
    return GpuView(tuple(sources), tuple(sends))


def _sources(machine: Machine, schedule: Schedule, arrivals: np.ndarray, src: list[int], dst: list[int],
             eps: float) -> list[int]:
    """For every transfer the arrival it sends on, in the verifier's event order."""
    n = len(schedule)
    chunk, start = schedule.chunk.tolist(), schedule.start.tolist()
    arrive = [float(a) for a in arrivals]

    def fifo(node: int) -> bool:
        return machine.is_switch(node) and not (machine.switch(node).multicast or machine.switch(node).reduce)

    via = schedule.named().tolist()
    named = {r for r in via if r >= 0}  # arrivals a send names: no unnamed send takes them
    queued: dict[tuple[int, int], deque[int]] = {}
    latest: dict[tuple[int, int], int] = {}
    out = [-1] * n
    by_arrival = sorted(range(n), key=lambda j: (arrive[j], j))
    k = 0
    for j in np.lexsort((np.arange(n), np.asarray(start, dtype=float))).tolist():
        while k < n and arrive[by_arrival[k]] <= start[j] + eps:
            i = by_arrival[k]
            if fifo(dst[i]):
                if i not in named:
                    queued.setdefault((dst[i], chunk[i]), deque()).append(i)
            else:
                latest[(dst[i], chunk[i])] = i
            k += 1
        key = (src[j], chunk[j])
        if fifo(src[j]) and via[j] >= 0:
            out[j] = via[j]
        elif fifo(src[j]):
            held = queued.get(key)
            assert held, f"switch {machine.label(src[j])} sends chunk {chunk[j]} it never received"
            out[j] = held.popleft()
        else:
            out[j] = latest.get(key, -1)
            assert out[j] >= 0 or not machine.is_switch(src[j]), \
                f"switch {machine.label(src[j])} sends chunk {chunk[j]} it never received"
    return out
