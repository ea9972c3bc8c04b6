"""Exact max-flow on bandwidths: integer scaling plus Dinic's algorithm (interpreted on small
networks, scipy's compiled one beyond, ``FlowNetwork``).

scipy's ``maximum_flow`` needs integer capacities and works in int32 (an int64 matrix silently
yields 0), so every capacity and every flow value must stay below 2^31. Bandwidths are floats,
i.e. dyadic rationals: ``scale_bandwidths`` turns them into exact integer multiples of one unit
(the gcd), which is exact for the usual "50 GiB/s" or "25 GB/s" links. When that does not fit the
budget it rounds every bandwidth UP to a coarser unit and says so: a faster network can only lower
a lower bound, so bounds computed on it stay valid (just not necessarily tight).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from optcoll.machines.machine import Machine

INT32_MAX = 2**31 - 1


@dataclass(frozen=True, eq=False)
class ScaledBandwidths:
    """Per-link integers with ``bandwidth_e <= ints_e · unit`` (equality when ``exact``)."""

    ints: np.ndarray  # int64, one per link
    unit: Fraction  # bytes/second per integer step
    exact: bool
    #: Largest relative rounding, max_e (ints_e·unit − B_e) / B_e: anything maximised over the
    #: rounded bandwidths is within a factor (1 + tolerance) of the exact optimum.
    tolerance: float = 0.0

    def to_bandwidth(self, value: int) -> float:
        return float(value * self.unit)


def scale_bandwidths(bandwidths: np.ndarray, budget: int = INT32_MAX) -> ScaledBandwidths:
    """Integers for ``bandwidths`` whose sum is at most ``budget``.

    Exact when the bandwidths' common unit (gcd of their exact binary fractions) allows it;
    otherwise each is rounded up to a multiple of a coarser unit. Raises ``OverflowError`` when
    not even one unit per link fits.
    """
    values, inverse = np.unique(np.asarray(bandwidths, dtype=float), return_inverse=True)
    count = np.bincount(inverse, minlength=values.size)
    if values.size == 0:
        return ScaledBandwidths(np.zeros(0, dtype=np.int64), Fraction(1), True)
    fractions = [Fraction(float(v)) for v in values]
    denominator = math.lcm(*(f.denominator for f in fractions))
    numerators = [int(f * denominator) for f in fractions]
    step = math.gcd(*numerators)
    ints = [n // step for n in numerators]
    if sum(i * int(c) for i, c in zip(ints, count)) <= budget:
        return ScaledBandwidths(np.array(ints, dtype=np.int64)[inverse], Fraction(step, denominator), True)
    links = int(count.sum())
    if budget <= links:
        raise OverflowError(f"{links} links cannot share an integer budget of {budget}")
    total = sum(f * int(c) for f, c in zip(fractions, count))
    unit = total / (budget - links)  # Σ ceil(B/unit) <= Σ B/unit + links = budget
    ints = [math.ceil(f / unit) for f in fractions]
    tolerance = max(float((i * unit - f) / f) for i, f in zip(ints, fractions))
    return ScaledBandwidths(np.array(ints, dtype=np.int64)[inverse], unit, False, tolerance)


@dataclass(frozen=True, eq=False)
class MaxFlow:
    """One maximum flow: its value and the source side of the minimum cut it proves (the nodes
    the residual graph still reaches from the source: the same set for every maximum flow)."""

    flow_value: int
    side: np.ndarray


#: Edge scans the interpreted Dinic may spend in one network before the network hands over to
#: scipy's compiled one: about 0.1 s (14 million scans a second here), less than importing
#: scipy's graph routines costs (0.2-0.3 s). A torus 8×8 AllGather's ratio cut takes 0.72 million
#: (0.05 s; scipy 0.025 s once loaded); a 16×16 one would take 20 million (1.4 s; scipy 0.13 s).
PYTHON_SCANS = 1_500_000


class FlowNetwork:
    """A directed graph with integer capacities (parallel edges summed) for repeated max-flows.

    Small questions (a torus 8×8 AllGather's ratio cut: 64 max-flows on 320 edges) run an
    interpreted Dinic, so a small command need not load scipy; once that has scanned
    ``PYTHON_SCANS`` edges the rest go to scipy's compiled Dinic. Both give the same value and,
    the minimal minimum cut being unique, the same side (tests/bounds/test_bounds_flow.py)."""

    def __init__(self, num_nodes: int, src: np.ndarray, dst: np.ndarray, capacity: np.ndarray):
        capacity = np.asarray(capacity, dtype=np.int64)
        key = np.asarray(src, dtype=np.int64) * num_nodes + np.asarray(dst, dtype=np.int64)
        key, at = np.unique(key, return_inverse=True)
        summed = np.bincount(at.reshape(-1), weights=capacity, minlength=key.size) if key.size else np.zeros(0)
        if summed.size and summed.max() > INT32_MAX:
            raise OverflowError("an edge capacity exceeds int32; cap it at the flow's upper bound")
        keep = summed > 0
        self.num_nodes = num_nodes
        self.src, self.dst = key[keep] // num_nodes, key[keep] % num_nodes
        self.capacity = summed[keep].astype(np.int64)
        self.out_capacity = np.bincount(self.src, weights=self.capacity, minlength=num_nodes).astype(np.int64)
        self.in_capacity = np.bincount(self.dst, weights=self.capacity, minlength=num_nodes).astype(np.int64)
        self.runs = 0
        self.scans = 0
        # edge 2i: src[i] -> dst[i] with capacity[i]; edge 2i + 1 its residual twin
        self._head = np.stack([self.dst, self.src], axis=1).reshape(-1).tolist()
        self._cap = np.stack([self.capacity, np.zeros_like(self.capacity)], axis=1).reshape(-1).tolist()
        tails = np.stack([self.src, self.dst], axis=1).reshape(-1)
        order = np.argsort(tails, kind="stable")
        bounds = np.searchsorted(tails[order], np.arange(num_nodes + 1))
        self._out = [order[bounds[v]:bounds[v + 1]].tolist() for v in range(num_nodes)]
        self._matrix = None

    def solve(self, source: int, sink: int) -> MaxFlow:
        """A maximum flow from ``source`` to ``sink`` and its minimum cut."""
        if min(self.out_capacity[source], self.in_capacity[sink]) > INT32_MAX:
            raise OverflowError(f"a flow from {source} to {sink} could exceed int32")
        self.runs += 1
        if self.scans < PYTHON_SCANS:
            return self._dinic(int(source), int(sink))
        return self._compiled(int(source), int(sink))

    def _dinic(self, s: int, t: int) -> MaxFlow:
        """Dinic's algorithm, interpreted: breadth-first levels, then blocking flows along
        strictly rising levels (a current arc per node); the last search's reach is the side."""
        head, out, cap, n = self._head, self._out, list(self._cap), self.num_nodes
        total, scans = 0, 0
        while True:
            level = [-1] * n
            level[s] = 0
            queue = [s]
            for u in queue:
                edges, up = out[u], level[u] + 1
                scans += len(edges)
                for e in edges:
                    v = head[e]
                    if cap[e] and level[v] < 0:
                        level[v] = up
                        queue.append(v)
            if level[t] < 0:
                break
            arc = [0] * n
            path: list[int] = []
            u = s
            while True:
                if u == t:
                    pushed = min(cap[e] for e in path)
                    for e in path:
                        cap[e] -= pushed
                        cap[e ^ 1] += pushed
                    total += pushed
                    path.clear()
                    u = s
                    continue
                edges, i, up = out[u], arc[u], level[u] + 1
                m = len(edges)
                while i < m:
                    e = edges[i]
                    if cap[e] and level[head[e]] == up:
                        break
                    i += 1
                scans += i - arc[u] + 1
                arc[u] = i
                if i < m:
                    path.append(e)
                    u = head[e]
                elif u == s:
                    break
                else:  # a dead end: back up and skip the arc that led here
                    level[u] = -1
                    u = head[path.pop() ^ 1]
                    arc[u] += 1
        self.scans += scans
        return MaxFlow(total, np.array([lv >= 0 for lv in level], dtype=bool))

    def _compiled(self, s: int, t: int) -> MaxFlow:
        from scipy.sparse import csr_array  # a large question: scipy's compiled max-flow
        from scipy.sparse.csgraph import breadth_first_order, maximum_flow

        if self._matrix is None:
            self._matrix = csr_array((self.capacity.astype(np.int32), (self.src, self.dst)),
                                     shape=(self.num_nodes, self.num_nodes))
        result = maximum_flow(self._matrix, s, t, method="dinic")
        residual = csr_array(self._matrix - result.flow)  # antisymmetric flow: reverse edges get +flow
        residual.data[residual.data < 0] = 0
        residual.eliminate_zeros()
        side = np.zeros(self.num_nodes, dtype=bool)
        side[breadth_first_order(residual, s, directed=True, return_predecessors=False)] = True
        return MaxFlow(int(result.flow_value), side)

    def max_flow(self, source: int, sink: int) -> int:
        return self.solve(source, sink).flow_value

    def min_cut(self, source: int, sink: int) -> tuple[int, np.ndarray]:
        """The max-flow value and the source side of a minimum cut."""
        result = self.solve(source, sink)
        return result.flow_value, result.side


@dataclass(frozen=True, eq=False)
class BandwidthFlows:
    """Max-flow values in B/s between one node and several others, with one witness cut each."""

    values: np.ndarray  # B/s, one per target (exact when ``exact``, else rounded up)
    sides: np.ndarray  # bool (targets × nodes): the source side of a minimum cut
    exact: bool


def bandwidth_flows(machine: Machine, source: int, targets: np.ndarray, *,
                    reverse: bool = False) -> BandwidthFlows:
    """maxflow(source → t) in B/s over link bandwidths for every t in ``targets``.

    With ``reverse`` the flows run t → source (computed on the reversed graph); ``sides`` then
    holds, per target, the minimum cut's side containing ``source`` on the reversed graph, i.e.
    the set whose *incoming* bandwidth in the machine is the bottleneck.
    """
    scaled = scale_bandwidths(machine.link_bandwidth)
    src, dst = (machine.link_dst, machine.link_src) if reverse else (machine.link_src, machine.link_dst)
    network = FlowNetwork(machine.num_nodes, src, dst, scaled.ints)
    targets = np.asarray(targets, dtype=np.int64)
    values = np.zeros(targets.size)
    sides = np.zeros((targets.size, machine.num_nodes), dtype=bool)
    for i, t in enumerate(targets.tolist()):
        value, sides[i] = network.min_cut(source, t)
        values[i] = scaled.to_bandwidth(value)
    return BandwidthFlows(values, sides, scaled.exact)
