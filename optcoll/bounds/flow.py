"""Exact max-flow on bandwidths: integer scaling plus scipy's compiled Dinic.

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
from scipy.sparse import csr_array
from scipy.sparse.csgraph import breadth_first_order, maximum_flow

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


class FlowNetwork:
    """A directed graph with integer capacities (parallel edges summed) for repeated max-flows."""

    def __init__(self, num_nodes: int, src: np.ndarray, dst: np.ndarray, capacity: np.ndarray):
        capacity = np.asarray(capacity, dtype=np.int64)
        matrix = csr_array((capacity, (np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64))),
                           shape=(num_nodes, num_nodes))
        matrix.sum_duplicates()
        if matrix.data.size and int(matrix.data.max()) > INT32_MAX:
            raise OverflowError("an edge capacity exceeds int32; cap it at the flow's upper bound")
        self.num_nodes = num_nodes
        self.matrix = csr_array((matrix.data.astype(np.int32), matrix.indices, matrix.indptr),
                                shape=matrix.shape)
        self.out_capacity = np.asarray(self.matrix.sum(axis=1), dtype=np.int64)
        self.in_capacity = np.asarray(self.matrix.sum(axis=0), dtype=np.int64)
        self.runs = 0

    def solve(self, source: int, sink: int):
        """scipy's ``MaximumFlowResult`` (``flow_value``, ``flow``); see ``source_side``."""
        if min(self.out_capacity[source], self.in_capacity[sink]) > INT32_MAX:
            raise OverflowError(f"a flow from {source} to {sink} could exceed int32")
        self.runs += 1
        return maximum_flow(self.matrix, int(source), int(sink), method="dinic")

    def source_side(self, result, source: int) -> np.ndarray:
        """Nodes the residual graph of a maximum flow still reaches from ``source`` (a boolean
        mask): the source side of a minimum cut."""
        residual = csr_array(self.matrix - result.flow)  # antisymmetric flow: reverse edges get +flow
        residual.data[residual.data < 0] = 0
        residual.eliminate_zeros()
        side = np.zeros(self.num_nodes, dtype=bool)
        side[breadth_first_order(residual, int(source), directed=True, return_predecessors=False)] = True
        return side

    def max_flow(self, source: int, sink: int) -> int:
        return int(self.solve(source, sink).flow_value)

    def min_cut(self, source: int, sink: int) -> tuple[int, np.ndarray]:
        """The max-flow value and the source side of a minimum cut."""
        result = self.solve(source, sink)
        return int(result.flow_value), self.source_side(result, source)


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
