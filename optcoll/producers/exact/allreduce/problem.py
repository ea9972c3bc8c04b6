"""The direct AllReduce problem in integer epochs: who keeps partial sums, which routes join them,
and what each route occupies (docs/model.md §3 and §5; issue 13).

Partial sums live at *stateful* nodes: NPUs, and switches that reduce or multicast (they keep
what arrives, docs/model.md §3). Plain switches keep nothing of their own: they forward each
arrival once, in order. Here a plain switch forwards every arrival at the instant it arrives, so a
transfer runs along a *route*: a stateful node, zero or more plain switches, a stateful node, each
hop starting as the previous one delivers. That is a restriction of the timed model (a plain
switch could also hold an arrival while its out-link is busy) and is recorded as such; machines
without plain switches have only one-hop routes and no restriction.

Time is cut into epochs. In the timed model an epoch is a quantum q of seconds: the exact common
unit of every link's delay and occupancy when there is a coarse one (then epochs are exact),
else the fastest link's delay, with every route's delay rounded up and every occupancy window
widened to whole epochs (then every schedule on the epochs is valid in true seconds, but a
horizon found infeasible proves nothing). In the step model (one round per step) an epoch is a
step: each hop takes one step, and a link of relative bandwidth w carries w chunks per step.

A route transfer started at epoch k delivers at k + ``delay``; its hop j holds one unit of its
link group over epochs [k + ``hop_lo[j]``, k + ``hop_hi[j]``). A link group is a set of parallel
links with identical timing (DGX-1's double NVLinks); its capacity is how many transfers it carries
at once.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from optcoll.bounds.demand import allreduce_set, need_counts_per_chunk
from optcoll.collectives.collective import Collective
from optcoll.graphs.shortest import relax
from optcoll.instances.clock import check_current
from optcoll.instances.instance import Instance
from optcoll.machines.machine import Machine
from optcoll.producers.base import NotApplicable
from optcoll.producers.exact.toolkit.epochs import MAX_EPOCHS_PER_LINK, TOLERANCE, exact_unit
from optcoll.verify.stepmodel import link_weights

#: Routes may pass at most this many plain switches.
MAX_PLAIN_HOPS = 3
CUT_THROUGH = "plain switches forward each arrival at the instant it arrives"


@dataclass(frozen=True, eq=False)
class DirectProblem:
    """An AllReduce-shaped collective on a machine, in epochs (module docstring)."""

    machine: Machine
    collective: Collective
    members: np.ndarray  # rank of each contributor index i = 0..N-1
    nodes: np.ndarray  # machine node id of each stateful node
    can_reduce: np.ndarray  # per stateful node: a reduce may be delivered to it
    credit: np.ndarray  # per stateful node: sends of a chunk at most its arrivals so far
    route_src: np.ndarray  # stateful node index per route
    route_dst: np.ndarray
    route_delay: np.ndarray  # epochs from start to delivery
    hop_route: np.ndarray  # per hop: its route
    hop_group: np.ndarray  # per hop: its link group
    hop_lo: np.ndarray  # per hop: first epoch held, relative to the route's start
    hop_hi: np.ndarray  # per hop: first epoch no longer held
    hop_offset: np.ndarray  # per hop: seconds (timed) or steps (step) from route start to hop start
    link_delay: np.ndarray  # per machine link: seconds (timed) or steps (step) from start to delivery
    group_links: tuple[tuple[int, ...], ...]
    group_capacity: np.ndarray  # transfers per epoch
    quantum: float  # seconds per epoch (timed); step model: seconds of one step, α + b/B_min
    rounding: str  # "exact", "up" or "steps"
    restrictions: tuple[str, ...]
    ports: tuple[int | None, int | None] = (None, None)  # (sends, receives) per NPU per epoch; None: any
    reduce_only: bool = False  # SCCL's combining rules: a copy never replaces a partial (TimeModel.combining)
    #: ``reach`` and ``togo``, computed once (seconds each on a 512-GPU cluster); not copied by ``replace``.
    _known: dict = field(default_factory=dict, init=False, repr=False)

    @property
    def num_chunks(self) -> int:
        return self.collective.num_chunks

    @property
    def num_members(self) -> int:
        return int(self.members.size)

    @property
    def num_nodes(self) -> int:
        return int(self.nodes.size)

    @property
    def num_routes(self) -> int:
        return int(self.route_src.size)

    @property
    def exact(self) -> bool:
        """Whether an epoch horizon found infeasible is a proof in the model solved."""
        return self.rounding in ("exact", "steps") and not self.restrictions

    def route_hops(self) -> list[range]:
        """Per route, its hops' indices: ``hop_route`` lists each route's hops together, in route
        order, so one pass cuts it (a search per route is quadratic: minutes for the 262,656
        routes of a 512-GPU rail cluster)."""
        ends = np.searchsorted(self.hop_route, np.arange(self.num_routes + 1)).tolist()
        return [range(a, b) for a, b in zip(ends[:-1], ends[1:])]

    def node_index(self) -> np.ndarray:
        """Per machine node: its stateful index, -1 for plain switches."""
        index = np.full(self.machine.num_nodes, -1, dtype=np.int64)
        index[self.nodes] = np.arange(self.num_nodes)
        return index

    def member_index(self) -> np.ndarray:
        """Per stateful node: its contributor index, -1 when it is not a rank."""
        index = np.full(self.machine.num_nodes, -1, dtype=np.int64)
        index[self.members] = np.arange(self.num_members)
        return index[self.nodes]

    def _least_routes(self, reverse: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(from, to, delay) per ordered pair of stateful nodes joined by a route, at its least
        delay, sorted by ``to`` (reversed routes when ``reverse``)."""
        n = self.num_nodes
        src, dst = (self.route_dst, self.route_src) if reverse else (self.route_src, self.route_dst)
        order = np.lexsort((self.route_delay, src, dst))
        key = dst[order] * n + src[order]
        least = order[np.r_[True, key[1:] != key[:-1]]] if order.size else order
        return src[least], dst[least], self.route_delay[least].astype(float)

    def _fewest_epochs(self, start: np.ndarray, reverse: bool = False) -> np.ndarray:
        """Per row of ``start`` (epochs already taken per stateful node, ``inf`` where the row's
        data is not): the fewest epochs before it can be at each node, over shortest route paths
        (``graphs.shortest.relax``: numpy alone, so that small solves start without scipy)."""
        src, dst, delay = self._least_routes(reverse)
        return relax(start.astype(float), src, dst, delay)

    def reach(self) -> np.ndarray:
        """(contributor, stateful node): the fewest epochs before the contributor's data can be
        at the node (``inf`` if never): shortest route paths (every route takes an epoch or more)."""
        if "reach" not in self._known:
            mine = self.member_index()
            start = np.full((self.num_members, self.num_nodes), np.inf)
            start[mine[mine >= 0], np.flatnonzero(mine >= 0)] = 0.0
            self._known["reach"] = self._fewest_epochs(start)
            self._known["reach"].flags.writeable = False
        return self._known["reach"]

    def togo(self) -> np.ndarray:
        """Per stateful node: the fewest epochs for its data to reach a rank (0 at ranks)."""
        if "togo" not in self._known:
            start = np.where(self.member_index() >= 0, 0.0, np.inf)[None, :]
            self._known["togo"] = self._fewest_epochs(start, reverse=True)[0]
            self._known["togo"].flags.writeable = False
        return self._known["togo"]


def members_of(collective: Collective) -> np.ndarray:
    """The ranks of an AllReduce-shaped collective, or NotApplicable."""
    members = allreduce_set(collective)
    if members is None or members.size < 2:
        raise NotApplicable(f"{collective.kind} is not an AllReduce (every chunk contributed by and "
                            "needed at the same two or more ranks)")
    if np.count_nonzero(need_counts_per_chunk(collective)) != collective.num_chunks:
        raise NotApplicable("every chunk must be needed")
    return members


def _stateful(machine: Machine, hop_by_hop: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(stateful node ids, can reduce, credit-limited) per docs/model.md §3's switch options;
    ``hop_by_hop``: plain switches too (neither reducing nor credit-limited), so that every route
    is one link group."""
    nodes, reduce, credit = [], [], []
    for v in range(machine.num_nodes):
        if not machine.is_switch(v):
            nodes.append(v), reduce.append(True), credit.append(False)
            continue
        s = machine.switch(v)
        if s.reduce or s.multicast or hop_by_hop:
            nodes.append(v), reduce.append(s.reduce), credit.append(s.reduce and not s.multicast)
    return np.array(nodes, dtype=np.int64), np.array(reduce, dtype=bool), np.array(credit, dtype=bool)


def _paths(machine: Machine, stateful: np.ndarray) -> list[list[int]]:
    """Every route as a list of links: from a stateful node through distinct plain switches (at
    most ``MAX_PLAIN_HOPS``) to another stateful node, each parallel link separately."""
    keeps = np.zeros(machine.num_nodes, dtype=bool)
    keeps[stateful] = True
    found: list[list[int]] = []

    def extend(path: list[int], seen: set[int]) -> None:
        v = int(machine.link_dst[path[-1]])
        if keeps[v]:
            if v != int(machine.link_src[path[0]]):
                if len(found) % 4096 == 0:
                    check_current()  # under a solver's clock: 262,656 routes on a 512-GPU cluster
                found.append(list(path))
            return
        if len(path) > MAX_PLAIN_HOPS:
            return
        for e in machine.out_links[v].tolist():
            w = int(machine.link_dst[e])
            if w not in seen:
                extend(path + [e], seen | {w})

    for u in stateful.tolist():
        for e in machine.out_links[u].tolist():
            extend([e], {u, int(machine.link_dst[e])})
    return found


def _build(machine: Machine, collective: Collective, members: np.ndarray, paths: list[list[int]],
           link_group: np.ndarray, capacity: np.ndarray, hop_delay: np.ndarray, hop_busy: np.ndarray,
           link_delay: np.ndarray, quantum: float, rounding: str, offsets_in_steps: bool,
           hop_by_hop: bool = False) -> DirectProblem:
    """Routes from paths: one per distinct sequence of link groups, in a fixed order."""
    nodes, reduce, credit = _stateful(machine, hop_by_hop)
    index = np.full(machine.num_nodes, -1, dtype=np.int64)
    index[nodes] = np.arange(nodes.size)
    unique: dict[tuple[int, ...], list[int]] = {}
    for path in paths:
        unique.setdefault(tuple(int(link_group[e]) for e in path), path)
    groups_of = sorted(unique)
    src, dst, delay = [], [], []
    hop_route, hop_group, hop_lo, hop_hi, hop_offset = [], [], [], [], []
    for r, key in enumerate(groups_of):
        if r % 4096 == 0:
            check_current()
        path = unique[key]
        src.append(index[machine.link_src[path[0]]])
        dst.append(index[machine.link_dst[path[-1]]])
        start, offset = 0.0, 0.0
        for e in path:
            lo, hi = start, start + hop_busy[e]
            if rounding == "up":
                lo, hi = math.floor(lo + TOLERANCE * max(lo, 1.0)), math.ceil(hi - TOLERANCE * max(hi, 1.0))
            hop_route.append(r), hop_group.append(int(link_group[e]))
            hop_lo.append(int(round(lo))), hop_hi.append(int(round(hi)))
            hop_offset.append(start if offsets_in_steps else float(offset))
            start += hop_delay[e]
            offset += link_delay[e]
        total = math.ceil(start - TOLERANCE * max(start, 1.0)) if rounding == "up" else int(round(start))
        delay.append(total)
    links: dict[int, list[int]] = {}
    for e, g in enumerate(link_group.tolist()):
        links.setdefault(g, []).append(e)
    restrictions = (CUT_THROUGH,) if nodes.size < machine.num_nodes else ()
    return DirectProblem(machine, collective, members, nodes, reduce, credit,
                         np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64),
                         np.array(delay, dtype=np.int64), np.array(hop_route, dtype=np.int64),
                         np.array(hop_group, dtype=np.int64), np.array(hop_lo, dtype=np.int64),
                         np.array(hop_hi, dtype=np.int64), np.array(hop_offset, dtype=float), link_delay,
                         tuple(tuple(links[g]) for g in range(len(links))), capacity, quantum, rounding,
                         restrictions)


def _groups(machine: Machine, keys: list[tuple]) -> np.ndarray:
    """A group id per link: links with the same (src, dst, key) share one, numbered in order."""
    ids: dict[tuple, int] = {}
    return np.array([ids.setdefault((int(u), int(v), key), len(ids))
                     for u, v, key in zip(machine.link_src, machine.link_dst, keys)], dtype=np.int64)


def timed_problem(instance: Instance, quantum: float | None = None, hop_by_hop: bool = False) -> DirectProblem:
    """The timed model in epochs (module docstring); ``quantum`` overrides the epoch length.
    ``hop_by_hop``: plain switches are nodes too, every route one link group (for a model that
    decides itself what a plain switch forwards: ``pieces``)."""
    machine, collective, model = instance.machine, instance.collective, instance.model
    members = members_of(collective)
    if model.kind != "timed":
        raise NotApplicable("the timed direct AllReduce model needs the timed model")
    if model.send_ports is not None or model.recv_ports is not None:
        raise NotApplicable("the direct AllReduce model does not model port limits")
    if model.reduce_cost:
        raise NotApplicable("the direct AllReduce model does not model a reduction cost")
    timing = model.link_timing(machine, collective.chunk_bytes)
    used = np.concatenate([timing.delay, timing.busy])
    rounding = "up"
    if quantum is None:
        unit = exact_unit(used, MAX_EPOCHS_PER_LINK)
        quantum, rounding = (unit, "exact") if unit is not None else (float(timing.delay.min()), "up")
    else:
        ratio = used / quantum
        if np.all(np.abs(ratio - np.round(ratio)) <= TOLERANCE * np.maximum(ratio, 1.0)):
            rounding = "exact"
    delay, busy = timing.delay / quantum, timing.busy / quantum
    if rounding == "exact":
        delay, busy = np.round(delay), np.round(busy)
    group = _groups(machine, list(zip(timing.delay.tolist(), timing.busy.tolist())))
    capacity = np.bincount(group).astype(np.int64)
    nodes, _, _ = _stateful(machine, hop_by_hop)
    return _build(machine, collective, members, _paths(machine, nodes), group, capacity, delay, busy,
                  timing.delay, float(quantum), rounding, False, hop_by_hop)


def step_problem(instance: Instance) -> DirectProblem:
    """The step model with one round per step: each hop one step, a link of relative bandwidth
    w carrying w chunks per step, each NPU sending and receiving at most its port limits per
    step (SCCL's HubAndSpoke); an epoch lasts α + b/B_min seconds of step cost."""
    machine, collective = instance.machine, instance.collective
    members = members_of(collective)
    weights = link_weights(machine)
    group = _groups(machine, [()] * machine.num_links)
    capacity = np.bincount(group, weights=weights).astype(np.int64)
    ones = np.ones(machine.num_links)
    step = float(machine.link_latency.max() + collective.chunk_bytes / machine.link_bandwidth.min())
    nodes, _, _ = _stateful(machine)
    problem = _build(machine, collective, members, _paths(machine, nodes), group, capacity, ones, ones,
                     ones, step, "steps", True)
    ports = (instance.model.send_ports, instance.model.recv_ports)
    if ports != (None, None) and problem.restrictions:
        raise NotApplicable("the direct AllReduce model takes port limits only on machines without plain "
                            "switches")
    return replace(problem, ports=ports, reduce_only=instance.model.combining == "reduce-only")
