"""A verified schedule seen as MSCCL++ sees a machine: GPU-to-GPU puts and NVLS reductions.

MSCCL++ names GPUs only. A chunk that leaves GPU u and reaches GPU v through switches alone (an
NVSwitch, a NIC's rail leaf and the spine) is one ``put`` from u to v along that route, which must
be the route the importer runs it on (``routes.py``); a GPU that relays is two puts. A chunk that
several GPUs reduce into a switch that reduces and multicasts, and whose sum leaves it for GPUs,
is one NVLS reduction (``glres``: every member's value into the switch, the sum multicast back to
every member). What MSCCL++ cannot say is refused in one line naming the transfer.

Values are followed as the verifier follows them (``optcoll/verify/events.py``): starts in
(start, id) order, every arrival at or before a start delivered first, in (arrival, id) order; a
plain switch forwards each arrival once, first in first out, a multicast or reducing switch
keeps the latest value of a chunk. Every value a GPU holds is a *version* (the precondition, a
put's arrival, an NVLS sum); versions never change, so each gets its own buffer slot.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np

from optcoll.collectives.collective import Collective
from optcoll.errors import InputError
from optcoll.interop.mscclpp.routes import Routes
from optcoll.machines.machine import Machine
from optcoll.schedules.schedule import REDUCE, Schedule


@dataclass(eq=False)
class Version:
    """A value of ``chunk`` at GPU ``gpu`` (collective index): made by ``maker`` ("pre", a
    ``Put`` or an ``Nvls``) at ``time``; ``mask``: the GPUs it sums (combining collectives)."""

    gpu: int
    chunk: int
    mask: int
    maker: object
    time: float
    slot: tuple[str, int] | None = None
    final: bool = False  # the version the output must hold


@dataclass(eq=False)
class Put:
    """GPU ``u`` writes version ``src`` into GPU ``v`` along ``route`` (link ids): ``op`` copy or
    reduce (the receiver adds it to what it holds); ``made``: the version it makes at v."""

    id: int  # the schedule's id of its last hop
    chunk: int
    u: int
    v: int
    src: Version
    start: float
    arrive: float
    op: int
    route: tuple[int, ...]
    port: bool  # crosses a NIC (a port channel), else load/store (a memory channel)
    first: int = -1  # the schedule's id of its first hop
    made: Version | None = None
    covered: bool = False  # an NVLS multicast already writes it: not written again


@dataclass(eq=False)
class Nvls:
    """Every member's value of ``chunk`` reduced in ``switch``; the sum goes to ``issuer`` first."""

    id: int
    chunk: int
    switch: int
    members: list[int] = field(default_factory=list)  # collective GPU indices, in arrival order
    sources: list[Version] = field(default_factory=list)
    start: float = np.inf
    issuer: int | None = None
    sent: bool = False
    made: dict[int, Version] = field(default_factory=dict)  # member -> its version of the sum

    @property
    def mask(self) -> int:
        out = 0
        for s in self.sources:
            out |= s.mask
        return out


@dataclass
class View:
    puts: list[Put]
    nvls: list[Nvls]
    versions: dict[tuple[int, int], list[Version]]  # (gpu, chunk) -> versions in time order
    multicast: int  # extra puts: a switch sent one arrival on several links


@dataclass
class _Carry:
    """What a transfer carries: a GPU's version on its way (the links so far), or an NVLS sum."""

    version: Version | None
    start: float
    links: tuple[int, ...]
    nvls: Nvls | None = None
    first: int = -1


def nodes_of(machine: Machine) -> list[int]:
    """The node (server) of every NPU: the parts left once each NPU's links slower than its
    fastest are dropped (the NICs; as NCCL's topology model reads rail fabrics). One part on a
    machine whose links are all alike."""
    keep = np.ones(machine.num_links, dtype=bool)
    for v in range(machine.num_npus):
        links = [int(e) for e in (*machine.out_links[v], *machine.in_links[v])]
        fastest = max(float(machine.link_bandwidth[e]) for e in links) if links else 0.0
        for e in links:
            keep[e] &= float(machine.link_bandwidth[e]) >= fastest
    parent = list(range(machine.num_nodes))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for e in np.flatnonzero(keep).tolist():
        parent[find(int(machine.link_src[e]))] = find(int(machine.link_dst[e]))
    roots: dict[int, int] = {}
    return [roots.setdefault(find(v), len(roots)) for v in range(machine.num_npus)]


def gpu_view(machine: Machine, collective: Collective, schedule: Schedule, arrivals: np.ndarray,
             eps: float) -> View:
    """The schedule as puts and NVLS reductions (module docstring); ``arrivals``: the verifier's."""
    ranks = list(collective.ranks)
    gpu = {npu: g for g, npu in enumerate(ranks)}
    node = nodes_of(machine)
    routes = Routes(machine)
    combining = collective.combining
    src, dst = machine.link_src[schedule.link].tolist(), machine.link_dst[schedule.link].tolist()
    chunk, start, op, link = (schedule.chunk.tolist(), schedule.start.tolist(), schedule.op.tolist(),
                              schedule.link.tolist())
    arrive = [float(a) for a in arrivals]

    def where(j: int) -> str:
        return (f"transfer {j} (chunk {chunk[j]} on {machine.label(src[j])}->{machine.label(dst[j])} at "
                f"{start[j] * 1e6:.6g} us)")

    for j in range(len(schedule)):
        for x in (src[j], dst[j]):
            if not machine.is_switch(x) and x not in gpu:
                raise InputError(f"{where(j)} goes through NPU {machine.label(x)}, which is not a GPU of the "
                                 "collective; an MSCCL++ plan has only its GPUs", field="schedule")
    versions: dict[tuple[int, int], list[Version]] = {}
    for c, v in zip(*(a.tolist() for a in collective.pre.pairs())):
        g = gpu[v]
        versions.setdefault((g, c), []).append(Version(g, c, (1 << g) if combining else 0, "pre", 0.0))
    fifo: dict[tuple[int, int], deque] = {}
    held: dict[tuple[int, int], _Carry] = {}
    carried: dict[int, _Carry] = {}
    puts: list[Put] = []
    nvls: list[Nvls] = []
    open_nvls: dict[tuple[int, int], Nvls] = {}

    def current(g: int, c: int, j: int) -> Version:
        vs = versions.get((g, c))
        if not vs:
            raise InputError(f"{where(j)}: GPU {ranks[g]} holds no chunk {c} (the schedule is not verified)",
                             field="schedule")
        return vs[-1]

    def deliver(j: int) -> None:
        item, b, c = carried.pop(j), dst[j], chunk[j]
        if machine.is_switch(b):
            sw = machine.switch(b)
            if op[j] == REDUCE:
                if item.version is None or len(item.links) != 1:
                    raise InputError(f"{where(j)} reduces a value that did not come straight from a GPU into "
                                     f"switch {machine.label(b)}; MSCCL++'s glres reduces the members' own "
                                     "buffers only", field="schedule")
                e = open_nvls.get((b, c))
                if e is None or e.sent:
                    if e is not None:
                        raise InputError(f"{where(j)} reduces into switch {machine.label(b)} after its sum of chunk "
                                         f"{c} was sent on; MSCCL++'s glres forms one sum per chunk", field="schedule")
                    e = open_nvls[(b, c)] = Nvls(len(nvls), c, b)
                    nvls.append(e)
                e.members.append(item.version.gpu)
                e.sources.append(item.version)
                e.start = min(e.start, item.start)
                held[(b, c)] = _Carry(None, e.start, (), e)
            elif sw.multicast or sw.reduce:
                held[(b, c)] = item
            else:
                fifo.setdefault((b, c), deque()).append(item)
            return
        g = gpu[b]
        if item.nvls is not None:
            e = item.nvls
            if op[j] == REDUCE:
                raise InputError(f"{where(j)} adds the sum reduced in switch {machine.label(src[j])} to what GPU "
                                 f"{machine.label(b)} holds; MSCCL++'s glres can only write that sum over it",
                                 field="schedule")
            if g not in e.members:
                raise InputError(f"{where(j)} sends the sum of chunk {c} to GPU {ranks[g]}, which did not "
                                 "contribute to it; glres writes the sum to its members only", field="schedule")
            e.issuer = g if e.issuer is None else e.issuer
            made = e.made.setdefault(g, Version(g, c, e.mask, e, arrive[j]))
            if versions[(g, c)][-1] is not made:
                versions[(g, c)].append(made)
            return
        u = item.version.gpu
        route = tuple(item.links)
        if route != tuple(routes.path(ranks[u], b)):
            raise InputError(f"{where(j)} reaches GPU {machine.label(b)} from {machine.label(ranks[u])} over links "
                             f"{list(route)}; MSCCL++ would take links {routes.path(ranks[u], b)} (the fewest hops "
                             "through switches)", field="schedule")
        have = versions.get((g, c), [])
        mask = item.version.mask | (have[-1].mask if op[j] == REDUCE and have else 0)
        p = Put(j, c, u, g, item.version, item.start, arrive[j], op[j], route, node[ranks[u]] != node[b], item.first)
        e = item.version.maker if isinstance(item.version.maker, Nvls) else None
        if e is not None and g in e.members and op[j] != REDUCE:
            p.covered = True  # the NVLS multicast writes the sum there already
            made = e.made.setdefault(g, Version(g, c, e.mask, e, arrive[j]))
            if not have or have[-1] is not made:
                versions.setdefault((g, c), []).append(made)
            p.made = made
        else:
            p.made = Version(g, c, mask, p, arrive[j])
            versions.setdefault((g, c), []).append(p.made)
        puts.append(p)

    order = np.lexsort((np.arange(len(schedule)), np.asarray(start))).tolist()
    by_arrival = sorted(range(len(schedule)), key=lambda j: (arrive[j], j))
    k = 0
    for j in order:
        while k < len(by_arrival) and arrive[by_arrival[k]] <= start[j] + eps:
            deliver(by_arrival[k])
            k += 1
        a, c = src[j], chunk[j]
        if machine.is_switch(a):
            sw = machine.switch(a)
            if sw.multicast or sw.reduce:
                item = held[(a, c)]
                if item.nvls is not None:
                    item.nvls.sent = True
            else:
                item = fifo[(a, c)].popleft()
            carried[j] = _Carry(item.version, item.start, item.links + (link[j],), item.nvls, item.first)
        else:
            carried[j] = _Carry(current(gpu[a], c, j), start[j], (link[j],), None, j)
    for j in by_arrival[k:]:
        deliver(j)
    for e in nvls:
        if e.issuer is None:
            raise InputError(f"the sum of chunk {e.chunk} reduced in switch {machine.label(e.switch)} never "
                             "leaves it", field="schedule")
    firsts = [p.first for p in puts if not p.covered]
    return View(puts, nvls, versions, len(firsts) - len(set(firsts)))
