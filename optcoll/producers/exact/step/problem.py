"""The step-model problem (docs/model.md §5) in the form every step encoding shares.

Parallel links between one ordered pair are aggregated into one *edge* whose capacity per round is
the sum of their relative bandwidths w = B / B_min (which must be integers); schedules are mapped
back to concrete link ids only at the end. A node either *copies* (an NPU or a copy-capable switch:
it holds what it received and may send it on several links) or is a *plain* switch (each arrival is
forwarded at most once). Hop distances from a chunk's holders and to its destinations prune every
encoding the same way, which keeps the encodings comparable.

Port limits (``send_ports``/``recv_ports``, the timed model's options) become *link groups*: sets
of edges that share a capacity per round, as SCCL's switch constraints do (its HubAndSpoke is a
fully connected network where each node sends one chunk and receives one chunk per round). A
port sends one transfer at a time and a transfer holds it for its link's time b/B, so in one
round (b/B_min) a port carries w chunks over a link of relative bandwidth w: a group row is
Σ_e (L/w_e)·copies_e ≤ P·L·r_s with L the least common multiple of the group's link weights.
Like the timed model, port limits apply to NPUs only, never to switches.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from optcoll.collectives.collective import ChunkSets, Collective
from optcoll.errors import InputError
from optcoll.instances.instance import TimeModel
from optcoll.machines.machine import Machine

#: Distance meaning "unreachable" in integer distance arrays.
FAR = 1 << 30


@dataclass(frozen=True, eq=False)
class LinkGroup:
    """Edges sharing one capacity: Σ_e coef_e · (copies on e in step s) ≤ capacity · r_s."""

    name: str  # what the group is, for messages: "send port of gpu3"
    edges: np.ndarray
    coef: np.ndarray  # integer weight of one copy on each edge
    capacity: int  # per round


@dataclass(frozen=True, eq=False)
class StepProblem:
    """A non-combining collective on a machine, aggregated for the step encodings."""

    machine: Machine
    collective: Collective
    copies: np.ndarray  # bool per node: may hold and copy (NPUs, copy-capable switches)
    edge_src: np.ndarray
    edge_dst: np.ndarray
    edge_weight: np.ndarray  # chunks per round: Σ w of the edge's parallel links
    edge_links: tuple[tuple[int, ...], ...]
    link_weight: np.ndarray  # w = B / B_min per machine link
    alpha: float  # seconds per step: the largest link latency
    beta: float  # seconds per round: chunk bytes / B_min
    holders: tuple[frozenset[int], ...]  # per chunk, the nodes holding it at step 0
    needers: tuple[tuple[int, ...], ...]  # per chunk, the nodes that must receive it (sorted)
    dist_from: np.ndarray  # (chunks, nodes): hops from the nearest holder (FAR if unreachable)
    dist_to: np.ndarray  # (chunks, nodes): hops to the nearest needer (0 at a needer)
    send_ports: int | None = None  # per NPU: transfers leaving it at once (None: no limit)
    recv_ports: int | None = None  # per NPU: transfers entering it at once

    @cached_property
    def groups(self) -> tuple[LinkGroup, ...]:
        """The port limits as link groups (module docstring), one per NPU and limited side,
        only where the NPU's links could exceed the limit."""
        out = []
        for ports, ends, side in ((self.send_ports, self.edge_src, "send"), (self.recv_ports, self.edge_dst, "recv")):
            if ports is None:
                continue
            for v in range(self.machine.num_npus):
                edges = np.flatnonzero(ends == v)
                unit = self.edge_unit[edges]
                if sum(len(self.edge_links[e]) for e in edges) <= ports:
                    continue  # no more links than ports: the limit never binds
                lcm = math.lcm(*unit.tolist())
                out.append(LinkGroup(f"{side} port{'s' if ports > 1 else ''} of {self.machine.label(v)}",
                                     edges, lcm // unit, ports * lcm))
        return tuple(out)

    @cached_property
    def edge_unit(self) -> np.ndarray:
        """The relative bandwidth w of each edge's parallel links (port limits need them equal)."""
        unit = np.array([int(self.link_weight[links[0]]) for links in self.edge_links], dtype=np.int64)
        if self.send_ports is not None or self.recv_ports is not None:
            for e, links in enumerate(self.edge_links):
                if len({int(self.link_weight[l]) for l in links}) > 1:
                    raise InputError(
                        f"port limits in the step model need parallel links of equal bandwidth; "
                        f"{self.machine.label(int(self.edge_src[e]))}->{self.machine.label(int(self.edge_dst[e]))} "
                        "has links of different bandwidths", field="model.send_ports")
        return unit

    @property
    def num_chunks(self) -> int:
        return len(self.holders)

    @property
    def num_nodes(self) -> int:
        return int(self.copies.shape[0])

    @property
    def num_edges(self) -> int:
        return int(self.edge_src.shape[0])

    @cached_property
    def in_edges(self) -> tuple[tuple[int, ...], ...]:
        return tuple(tuple(np.flatnonzero(self.edge_dst == v).tolist()) for v in range(self.num_nodes))

    @cached_property
    def out_edges(self) -> tuple[tuple[int, ...], ...]:
        return tuple(tuple(np.flatnonzero(self.edge_src == v).tolist()) for v in range(self.num_nodes))

    @cached_property
    def latency_bound(self) -> int:
        """Least steps with unlimited rounds: the farthest (chunk, destination) from its holders."""
        return max((int(self.dist_from[c, list(d)].max()) for c, d in enumerate(self.needers) if d),
                   default=0)

    def cost(self, steps: int, rounds: int) -> float:
        """The step cost S·α + R·b/B_min in seconds, in the verifier's arithmetic."""
        return steps * self.alpha + rounds * self.beta

    def may_arrive(self, c: int, e: int, step: int, steps: int) -> bool:
        """Whether a copy of chunk c crossing edge e in ``step`` can be part of a lean schedule.

        Lean schedules lose nothing: the source must be able to hold c by step-1, a copying
        receiver must not start with c, and the copy must still reach a destination by ``steps``.
        """
        u, v = int(self.edge_src[e]), int(self.edge_dst[e])
        if self.copies[v] and v in self.holders[c]:
            return False
        return self.dist_from[c, u] <= step - 1 and step + self.dist_to[c, v] <= steps

    def arrival_steps(self, steps: int) -> np.ndarray:
        """Per (chunk, edge): how many steps pass ``may_arrive`` when there are ``steps`` steps
        (what the encodings' variables are counted from before building)."""
        first = self.dist_from[:, self.edge_src] + 1
        last = steps - self.dist_to[:, self.edge_dst]
        held = np.zeros((self.num_chunks, self.num_nodes), dtype=bool)
        for c, nodes in enumerate(self.holders):
            held[c, list(nodes)] = True
        useless = held[:, self.edge_dst] & self.copies[self.edge_dst][None, :]
        return np.where(useless, 0, np.clip(last - first + 1, 0, None))

    def with_collective(self, collective: Collective) -> "StepProblem":
        """The same machine (switch semantics, port limits) with another collective."""
        return _build(self.machine, collective, self.copies, self.send_ports, self.recv_ports)


def step_problem(machine: Machine, collective: Collective, *, copy_flag: str = "multicast",
                 send_ports: int | None = None, recv_ports: int | None = None) -> StepProblem:
    """The step problem of a non-combining collective.

    ``copy_flag`` names the switch attribute that lets a switch copy: ``"multicast"`` for a
    collective run as is, ``"reduce"`` for the dual of a combining collective (a switch that
    reduces in the original runs as one that copies in the time-reversed dual). ``send_ports``
    and ``recv_ports`` limit every NPU (module docstring).
    """
    if collective.combining:
        raise ValueError(f"{collective.kind} is combining; solve its dual (see inversion.py)")
    copies = np.array([not machine.is_switch(v) or bool(getattr(machine.switch(v), copy_flag))
                       for v in range(machine.num_nodes)], dtype=bool)
    return _build(machine, collective, copies, send_ports, recv_ports)


def _build(machine: Machine, collective: Collective, copies: np.ndarray, send_ports: int | None,
           recv_ports: int | None) -> StepProblem:
    if machine.num_links == 0:
        raise InputError(f"machine {machine.name!r} has no links", field="links")
    timing = TimeModel(kind="step").step_timing(machine, collective.chunk_bytes)
    link_weight = timing.weight
    pairs: dict[tuple[int, int], list[int]] = {}
    for e, (u, v) in enumerate(zip(machine.link_src.tolist(), machine.link_dst.tolist())):
        pairs.setdefault((u, v), []).append(e)
    order = sorted(pairs)
    edge_src = np.array([u for u, _ in order], dtype=np.int64)
    edge_dst = np.array([v for _, v in order], dtype=np.int64)
    edge_links = tuple(tuple(pairs[p]) for p in order)
    edge_weight = np.array([int(link_weight[list(ids)].sum()) for ids in edge_links], dtype=np.int64)

    holders = tuple(frozenset(collective.pre.of(c).tolist()) for c in range(collective.num_chunks))
    need_c, need_v = collective.needs
    needers_lists: list[list[int]] = [[] for _ in holders]
    for c, v in zip(need_c.tolist(), need_v.tolist()):
        needers_lists[c].append(v)
    needers = tuple(tuple(sorted(d)) for d in needers_lists)

    hops = machine.hop_counts()
    hops = np.where(np.isfinite(hops), hops, FAR).astype(np.int64)
    dist_from = _nearest(hops, collective.pre, rows=True)
    dist_to = _nearest(hops, ChunkSets.from_lists([list(d) for d in needers]), rows=False)
    for c, dests in enumerate(needers):
        far = [v for v in dests if dist_from[c, v] >= FAR]
        if far:
            raise InputError(f"chunk {c} cannot reach {machine.label(far[0])}: no path from its "
                             f"holders {sorted(machine.label(h) for h in holders[c])}",
                             field="collective")
    return StepProblem(machine, collective, copies, edge_src, edge_dst, edge_weight, edge_links,
                       link_weight, timing.alpha, timing.per_round, holders, needers, dist_from, dist_to,
                       send_ports, recv_ports)


def _nearest(hops: np.ndarray, sets: ChunkSets, *, rows: bool) -> np.ndarray:
    """Per chunk, the hop distance from (rows) or to (columns) the nearest node of its set."""
    out = np.full((sets.num_chunks, hops.shape[0]), FAR, dtype=np.int64)
    for c in range(sets.num_chunks):
        members = sets.of(c)
        if members.size:
            out[c] = (hops[members, :] if rows else hops[:, members].T).min(axis=0)
    return out
