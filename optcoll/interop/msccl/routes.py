"""MSCCL connections on a switched machine: routes through switches, in the GPU-only view.

MSCCL-IR names peers only: a thread block sends to GPU v on channel c. On a machine where two
GPUs share no link, the data crosses switches (an NVSwitch; a NIC's rail leaf and the spine), so
the view optcoll exports and imports in is:

* a connection u→v is a *route*: a path of links from u to v whose interior nodes are all
  switches. A pair with direct links uses those only (one route per parallel link); a pair
  without has every switch-only simple path, shortest first, then by link ids. Channel c runs on
  route ``c mod R`` (as it runs on lane ``c mod k`` of k parallel links);
* its time is the switched path's time on the same machine: a chunk is stored and forwarded hop
  by hop (α + b/B each), and every link stays shared with every other connection crossing it —
  the GPU's port into its switch, the switch's port to the receiver, a NIC, a rail. Two transfers
  that queued for one switch port in a schedule therefore still queue for it after export, and
  the re-imported XML is verified on the original machine, with its own verifier, at that
  machine's time.

What the view cannot hold is refused or stated: MSCCL has no in-switch reduction (a schedule
that reduces into a switch is refused), and no multicast — a switch forwarding one arrival on
several links becomes one send per branch, each crossing the sender's port again
(``Collapsed.multicast`` counts the extra sends; issued as the schedule orders them they queue
for the receivers' ports, and ``branches.py`` orders them so that they do not). The
sends themselves, each transfer landing on a GPU followed back through switches to the GPU it
left, are ``optcoll.interop.gpuview``'s, shared with the MSCCL++ exporter.
"""
from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np

from optcoll.collectives.collective import Collective
from optcoll.errors import InputError
from optcoll.interop.gpuview import describe, extra_sends, follow
from optcoll.interop.msccl.plan import Xfer
from optcoll.machines.machine import Machine, Switch
from optcoll.schedules.schedule import REDUCE, Schedule

#: Routes kept per GPU pair (switch-only simple paths); a fabric with more is refused.
MAX_ROUTES = 256

Route = tuple[int, ...]  # link ids, first hop first


def routing_view(machine: Machine) -> Machine:
    """The machine whose switches only route: no multicast, no reduction, each arrival forwarded
    once, first in first out — what an MSCCL send through a switch asks of it. An imported
    schedule is verified here: the same links and times, and a multicast switch's rule (it keeps
    the latest value of a chunk) would pair two connections' partial sums of one chunk wrongly."""
    if not any(s.multicast or s.reduce for s in machine.switches):
        return machine
    return dataclasses.replace(machine, switches=tuple(Switch(s.label) for s in machine.switches))


class Routes:
    """The routes between GPU pairs of one machine, computed on demand."""

    def __init__(self, machine: Machine):
        self.machine = machine
        self._cache: dict[tuple[int, int], tuple[Route, ...]] = {}

    def between(self, u: int, v: int) -> tuple[Route, ...]:
        """Every route u→v (module docstring); () when v cannot be reached that way."""
        key = (u, v)
        if key not in self._cache:
            direct = self.machine.links_between(u, v)
            self._cache[key] = tuple((e,) for e in direct) if direct else self._through_switches(u, v)
        return self._cache[key]

    @cached_property
    def _out(self) -> list[list[tuple[int, int]]]:
        m = self.machine
        out: list[list[tuple[int, int]]] = [[] for _ in range(m.num_nodes)]
        for e, (a, b) in enumerate(zip(m.link_src.tolist(), m.link_dst.tolist())):
            out[a].append((e, b))
        return out

    def _through_switches(self, u: int, v: int) -> tuple[Route, ...]:
        m, found = self.machine, []
        path: list[int] = []
        seen = {u}

        def walk(node: int) -> None:
            for e, nxt in self._out[node]:
                if nxt == v:
                    found.append((*path, e))
                    if len(found) > MAX_ROUTES:
                        raise InputError(f"more than {MAX_ROUTES} switch routes from {m.label(u)} to "
                                         f"{m.label(v)}: too many to number as MSCCL channels",
                                         field="machine")
                elif m.is_switch(nxt) and nxt not in seen:
                    seen.add(nxt)
                    path.append(e)
                    walk(nxt)
                    path.pop()
                    seen.discard(nxt)

        walk(u)
        return tuple(sorted(found, key=lambda r: (len(r), r)))


@dataclass(frozen=True)
class Collapsed:
    """A schedule as GPU-to-GPU transfers: ``xfers`` (one per route a chunk took to a GPU; ids
    are the ids of their last hops), ``routes`` (the link ids of each, by xfer id) and how many
    sends multicast added (0 when no switch sent one arrival on several links)."""

    xfers: tuple[Xfer, ...]
    routes: dict[int, Route]
    multicast: int


def collapse(machine: Machine, collective: Collective, schedule: Schedule, arrivals: np.ndarray,
             busy: np.ndarray, eps: float, routes: Routes) -> Collapsed:
    """The schedule in the GPU-only view (``optcoll.interop.gpuview``), each send on the route
    MSCCL names by its channel. ``arrivals``: the verifier's, per transfer; ``busy``: per link,
    how long a transfer holds it; ``eps``: the verifier's tolerance. Raises ``InputError`` for
    what MSCCL-IR cannot express."""
    dst = machine.link_dst[schedule.link].tolist()
    for j, op in enumerate(schedule.op.tolist()):
        if machine.is_switch(dst[j]) and op == REDUCE:
            raise InputError(f"{describe(machine, schedule, j)} reduces into switch {machine.label(dst[j])!r}; "
                             "MSCCL has no in-switch reduction, so this schedule cannot be exported",
                             field="schedule")
    seen = follow(machine, collective, schedule, arrivals, eps, "MSCCL-IR XML")
    gpu = {npu: g for g, npu in enumerate(collective.ranks)}
    xfers, paths = [], {}
    for s in seen.sends:
        options = routes.between(s.src, s.dst)
        if s.route not in options:
            raise InputError(f"{describe(machine, schedule, s.id)} reaches {machine.label(s.dst)} from "
                             f"{machine.label(s.src)} over links {list(s.route)}, not one of the "
                             f"{len(options)} route(s) MSCCL connections between them run on (direct links "
                             "when there are any, else paths through switches only)", field="schedule")
        xfers.append(Xfer(s.id, s.chunk, gpu[s.src], gpu[s.dst], options.index(s.route), s.start, s.arrive,
                          s.start + float(busy[s.route[0]]), s.op, s.route[0]))
        paths[s.id] = s.route
    return Collapsed(tuple(xfers), paths, extra_sends([s.first for s in seen.sends]))


def connections(xfers: tuple[Xfer, ...], routes: Callable[[int, int], int], per_channel: int
                ) -> tuple[list[Xfer], dict[tuple[int, int], int]]:
    """Channels for the GPU-to-GPU transfers, and per GPU pair the stride between channels of one
    route (for ``threadblocks.assign`` to cut long connections on).

    A connection is a FIFO (the k-th send feeds the k-th receive), but through a switch a later
    transfer may arrive first; so the transfers of one route are split into chains whose
    arrivals keep their start order, each chain a connection of its own. Connection i of route r
    (of R between the pair) takes the lowest channel r + k·R (so the channel still names the
    route) that no other chain of the pair holds and on which its sender sends, and its receiver
    receives, on fewer than ``per_channel`` connections (a runtime's limit of thread blocks per
    channel and direction: 71 peers through one NVSwitch need three channels).
    """
    routes_of = {(x.u, x.v): routes(x.u, x.v) for x in xfers}
    groups: dict[tuple[int, int, int], list[Xfer]] = {}
    for x in sorted(xfers, key=lambda x: (x.start, x.id)):
        groups.setdefault((x.u, x.v, x.lane), []).append(x)
    sends: Counter[tuple[int, int]] = Counter()
    recvs: Counter[tuple[int, int]] = Counter()
    taken: set[tuple[int, int, int]] = set()
    out: list[Xfer] = []
    stride: dict[tuple[int, int], int] = {}
    for (u, v, r), xs in sorted(groups.items()):
        chains: list[list[Xfer]] = []
        for x in xs:
            chain = next((c for c in chains if (c[-1].arrive, c[-1].id) < (x.arrive, x.id)), None)
            if chain is None:
                chains.append([x])
            else:
                chain.append(x)
        count = routes_of[(u, v)]
        for chain in chains:
            lane = r
            while (u, v, lane) in taken or sends[(u, lane)] >= per_channel or recvs[(v, lane)] >= per_channel:
                lane += count
            taken.add((u, v, lane))
            sends[(u, lane)] += 1
            recvs[(v, lane)] += 1
            stride[(u, v)] = max(stride.get((u, v), count), (lane // count + 1) * count)
            out += [replace(x, lane=lane) for x in chain]
    return out, stride
