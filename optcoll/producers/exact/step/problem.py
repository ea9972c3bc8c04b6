"""The step-model problem (DESIGN.md section 5) in the form every step encoding shares.

Parallel links between one ordered pair are aggregated into one *edge* whose capacity per round is
the sum of their relative bandwidths w = B / B_min (which must be integers); schedules are mapped
back to concrete link ids only at the end. A node either *copies* (an NPU or a copy-capable switch:
it holds what it received and may send it on several links) or is a *plain* switch (each arrival is
forwarded at most once). Hop distances from a chunk's holders and to its destinations prune every
encoding the same way, which keeps the encodings comparable.
"""
from __future__ import annotations

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
        """The same machine (and switch semantics) with another collective."""
        return _build(self.machine, collective, self.copies)


def step_problem(machine: Machine, collective: Collective, *, copy_flag: str = "multicast") -> StepProblem:
    """The step problem of a non-combining collective.

    ``copy_flag`` names the switch attribute that lets a switch copy: ``"multicast"`` for a
    collective run as is, ``"reduce"`` for the dual of a combining collective (a switch that
    reduces in the original runs as one that copies in the time-reversed dual).
    """
    if collective.combining:
        raise ValueError(f"{collective.kind} is combining; solve its dual (see inversion.py)")
    copies = np.array([not machine.is_switch(v) or bool(getattr(machine.switch(v), copy_flag))
                       for v in range(machine.num_nodes)], dtype=bool)
    return _build(machine, collective, copies)


def _build(machine: Machine, collective: Collective, copies: np.ndarray) -> StepProblem:
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
                       link_weight, timing.alpha, timing.per_round, holders, needers, dist_from, dist_to)


def _nearest(hops: np.ndarray, sets: ChunkSets, *, rows: bool) -> np.ndarray:
    """Per chunk, the hop distance from (rows) or to (columns) the nearest node of its set."""
    out = np.full((sets.num_chunks, hops.shape[0]), FAR, dtype=np.int64)
    for c in range(sets.num_chunks):
        members = sets.of(c)
        if members.size:
            out[c] = (hops[members, :] if rows else hops[:, members].T).min(axis=0)
    return out
