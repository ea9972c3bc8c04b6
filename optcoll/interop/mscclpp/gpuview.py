"""A verified schedule seen as MSCCL++ sees a machine: GPU-to-GPU puts and NVLS reductions.

MSCCL++ names GPUs only. A chunk that leaves GPU u and reaches GPU v through switches alone (an
NVSwitch, a NIC's rail leaf and the spine) is one ``put`` from u to v along that route, which must
be the route the importer runs it on (``routes.py``); a GPU that relays is two puts. A chunk that
several GPUs reduce into a switch that reduces and multicasts, and whose sum leaves it for GPUs,
is one NVLS reduction (``glres``: every member's value into the switch, the sum multicast back to
every member). What MSCCL++ cannot say is refused in one line naming the transfer.

The sends and what each carries are ``optcoll.interop.gpuview``'s (shared with the MSCCL
exporter: values followed as the verifier follows them). Every value a GPU holds is a *version*
(the precondition, a put's arrival, an NVLS sum), made in (arrival, id) order; versions never
change, so each gets its own buffer slot.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from optcoll.collectives.collective import Collective
from optcoll.errors import InputError
from optcoll.interop.gpuview import describe, extra_sends, follow
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
    slot: tuple[str, int] | None = None  # where it is as plain data (None: nowhere)
    final: bool = False  # the version the output must hold
    packets: tuple[str, int] | None = None  # LL plans: the scratch slot its packets landed in


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
    landed: tuple[str, int] | None = None  # LL plans: the receiver's scratch slot its packets land in


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
    seen = follow(machine, collective, schedule, arrivals, eps, "an MSCCL++ plan")
    ranks = list(collective.ranks)
    gpu = {npu: g for g, npu in enumerate(ranks)}
    node = nodes_of(machine)
    routes = Routes(machine)
    src, dst = machine.link_src[schedule.link].tolist(), machine.link_dst[schedule.link].tolist()
    chunk, start, op = schedule.chunk.tolist(), schedule.start.tolist(), schedule.op.tolist()
    arrive = [float(a) for a in arrivals]
    sources = seen.sources

    def where(j: int) -> str:
        return describe(machine, schedule, j)

    versions: dict[tuple[int, int], list[Version]] = {}
    for c, v in zip(*(a.tolist() for a in collective.pre.pairs())):
        g = gpu[v]
        versions.setdefault((g, c), []).append(Version(g, c, (1 << g) if collective.combining else 0, "pre", 0.0))
    after: dict[int, Version] = {}  # a transfer landing on a GPU -> the GPU's version once it has

    def sent(j: int) -> Version:
        """The version transfer ``j`` takes from the GPU it leaves."""
        if sources[j] >= 0:
            return after[sources[j]]
        pre = versions.get((gpu[src[j]], chunk[j]))
        if not pre or pre[0].maker != "pre":
            raise InputError(f"{where(j)}: GPU {machine.label(src[j])} holds no chunk {chunk[j]} (the schedule is "
                             "not verified)", field="schedule")
        return pre[0]

    # an in-switch sum leaves its switch at the first start of a transfer that carries it
    leaves: dict[tuple[int, int], float] = {}
    for j, came in enumerate(sources):
        if machine.is_switch(src[j]) and came >= 0 and op[came] == REDUCE:
            leaves[(src[j], chunk[j])] = min(leaves.get((src[j], chunk[j]), np.inf), start[j])
    landing = {s.id: s for s in seen.sends}
    puts: list[Put] = []
    nvls: list[Nvls] = []
    groups: dict[tuple[int, int], Nvls] = {}
    for j in sorted(range(len(schedule)), key=lambda j: (arrive[j], j)):
        b, c = dst[j], chunk[j]
        if machine.is_switch(b):
            if op[j] != REDUCE:
                continue
            if machine.is_switch(src[j]):
                raise InputError(f"{where(j)} reduces a value that did not come straight from a GPU into "
                                 f"switch {machine.label(b)}; MSCCL++'s glres reduces the members' own "
                                 "buffers only", field="schedule")
            e = groups.get((b, c))
            if e is None:
                e = groups[(b, c)] = Nvls(len(nvls), c, b)
                nvls.append(e)
            elif arrive[j] > leaves.get((b, c), np.inf) + eps:
                raise InputError(f"{where(j)} reduces into switch {machine.label(b)} after its sum of chunk "
                                 f"{c} was sent on; MSCCL++'s glres forms one sum per chunk", field="schedule")
            version = sent(j)
            e.members.append(version.gpu)
            e.sources.append(version)
            e.start = min(e.start, start[j])
            continue
        s, g = landing[j], gpu[b]
        if s.from_sum:
            e = groups[(s.src, c)]
            if op[j] == REDUCE:
                raise InputError(f"{where(j)} adds the sum reduced in switch {machine.label(s.src)} to what GPU "
                                 f"{machine.label(b)} holds; MSCCL++'s glres can only write that sum over it",
                                 field="schedule")
            if g not in e.members:
                raise InputError(f"{where(j)} sends the sum of chunk {c} to GPU {ranks[g]}, which did not "
                                 "contribute to it; glres writes the sum to its members only", field="schedule")
            e.issuer = g if e.issuer is None else e.issuer
            made = e.made.setdefault(g, Version(g, c, e.mask, e, arrive[j]))
            if versions[(g, c)][-1] is not made:
                versions[(g, c)].append(made)
            after[j] = made
            continue
        version = sent(s.first)
        if s.route != tuple(routes.path(s.src, b)):
            raise InputError(f"{where(j)} reaches GPU {machine.label(b)} from {machine.label(s.src)} over links "
                             f"{list(s.route)}; MSCCL++ would take links {routes.path(s.src, b)} (the fewest hops "
                             "through switches)", field="schedule")
        have = versions.get((g, c), [])
        mask = version.mask | (have[-1].mask if op[j] == REDUCE and have else 0)
        p = Put(j, c, gpu[s.src], g, version, s.start, arrive[j], op[j], s.route, node[s.src] != node[b], s.first)
        e = version.maker if isinstance(version.maker, Nvls) else None
        if e is not None and g in e.members and op[j] != REDUCE:
            p.covered = True  # the NVLS multicast writes the sum there already
            made = e.made.setdefault(g, Version(g, c, e.mask, e, arrive[j]))
            if not have or have[-1] is not made:
                versions.setdefault((g, c), []).append(made)
            p.made = made
        else:
            p.made = Version(g, c, mask, p, arrive[j])
            versions.setdefault((g, c), []).append(p.made)
        after[j] = p.made
        puts.append(p)
    for e in nvls:
        if e.issuer is None:
            raise InputError(f"the sum of chunk {e.chunk} reduced in switch {machine.label(e.switch)} never "
                             "leaves it", field="schedule")
    return View(puts, nvls, versions, extra_sends([p.first for p in puts if not p.covered]))
