"""The cut bound, maximised exactly (ForestColl) with Dinkelbach iterations over max-flows.

Cut rule: for a node set S, a chunk must cross from S to outside at least once when
  non-combining — every holder of it is in S and some node needing it is not;
  combining     — some contributor is in S and some node needing it is not,
so T >= b · #such chunks / B⁺(S) for every S (B⁺ = bandwidth of links leaving S; switches and
non-member NPUs may be in S). ``evaluate_cut`` applies the rule to any S.

For the weighted shape "maximise w(S) / B⁺(S) over S missing some sink" (AllGather, Broadcast,
Gather; Scatter, ReduceScatter and Reduce on the reversed graph) the maximum is found exactly:
given λ = p/q, a max-flow from a super source σ (σ→v capacity q·w_v, link capacity p·B_e) to a
sink d has a minimum cut of value min over S ∌ d of q·w(V∖S) + p·B⁺(S), so a flow below q·w(V)
exhibits an S with ratio > λ (read off the residual graph): a Dinkelbach step. λ rises to that
S's ratio at once and the scan over sinks goes on cyclically, so the work ends with one clean pass
over all sinks, which proves the last S maximal. All arithmetic is in integers (see ``flow``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from optcoll.bounds.bound import CutResult
from optcoll.bounds.flow import INT32_MAX, FlowNetwork, scale_bandwidths
from optcoll.collectives.collective import Collective
from optcoll.errors import InputError
from optcoll.machines.machine import Machine


@dataclass(frozen=True, eq=False)
class RatioCut:
    """The maximising S of a weighted ratio problem, with the work it took."""

    weight: int  # Σ_{v∈S} w_v
    inside: np.ndarray  # bool mask over nodes
    bandwidth_out: float  # B⁺(S) on the graph solved, from the true float bandwidths (B/s)
    exact: bool
    iterations: int
    max_flows: int
    #: When not exact (bandwidths rounded up to fit int32), the maximum is at most
    #: (1 + tolerance) times this S's ratio.
    tolerance: float = 0.0

    @property
    def ratio(self) -> float:
        if self.weight == 0:
            return 0.0
        return math.inf if self.bandwidth_out == 0 else self.weight / self.bandwidth_out


def _directed(machine: Machine, reverse: bool) -> tuple[np.ndarray, np.ndarray]:
    return (machine.link_dst, machine.link_src) if reverse else (machine.link_src, machine.link_dst)


def out_bandwidth(machine: Machine, inside: np.ndarray, reverse: bool = False) -> float:
    """B⁺(S): total bandwidth of links leaving S (entering S when ``reverse``)."""
    src, dst = _directed(machine, reverse)
    return float(machine.link_bandwidth[inside[src] & ~inside[dst]].sum())


def max_ratio_cut(machine: Machine, weights: np.ndarray, sinks: np.ndarray,
                  reverse: bool = False) -> RatioCut:
    """max over S with some sink outside S of w(S) / B⁺(S), exactly (see module docstring).

    Raises ``OverflowError`` when the weights are too large for int32 max-flows.
    """
    n = machine.num_nodes
    src, dst = _directed(machine, reverse)
    weights = np.asarray(weights, dtype=np.int64)
    sinks = np.asarray(sinks, dtype=np.int64)
    step = math.gcd(*weights.tolist()) or 1
    w = weights // step
    total_w = int(w.sum())
    if total_w == 0:
        return RatioCut(0, np.zeros(n, dtype=bool), 0.0, True, 0, 0)
    scaled = scale_bandwidths(machine.link_bandwidth, budget=INT32_MAX // total_w)
    bint = scaled.ints
    b_out = np.bincount(src, weights=bint, minlength=n).astype(np.int64)
    b_in = np.bincount(dst, weights=bint, minlength=n).astype(np.int64)

    def cut_of(mask: np.ndarray) -> tuple[int, int]:
        return int(w[mask].sum()), int(bint[mask[src] & ~mask[dst]].sum())

    # Start from the best single-node cut: one weighted node alone, or everything but one sink.
    alone = np.flatnonzero(w)
    if sinks.size == 1:
        alone = alone[alone != sinks[0]]
    nums = np.concatenate([w[alone], total_w - w[sinks]])
    dens = np.concatenate([b_out[alone], b_in[sinks]])
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(nums > 0, nums / dens, 0.0)
    best_mask, best = np.zeros(n, dtype=bool), (0, 1)
    if ratios.size and ratios.max() > 0:
        i = int(np.argmax(ratios))
        best_mask = (np.arange(n) == alone[i]) if i < alone.size else (np.arange(n) != sinks[i - alone.size])
        best = cut_of(best_mask)
    iterations, flows = 0, 0
    sigma, weighted = n, np.flatnonzero(w)
    order = sinks.tolist()
    clean, k = 0, 0  # sinks checked in a row since λ last rose; the scan is cyclic
    network = None
    while best[1] > 0 and clean < len(order):
        if network is None:
            iterations += 1
            lam = Fraction(best[0], best[1])
            p, q = lam.numerator, lam.denominator
            full = q * total_w  # the flow when no S beats λ; every capacity is capped at it
            network = FlowNetwork(n + 1, np.concatenate([src, np.full(weighted.size, sigma)]),
                                  np.concatenate([dst, weighted]),
                                  np.concatenate([np.minimum(p * bint, full), q * w[weighted]]))
        d = order[k % len(order)]
        k += 1
        result = network.solve(sigma, d)
        if result.flow_value >= full:
            clean += 1
            continue
        # A flow short of q·w(V) means some S ∌ d has q·w(S) − p·B⁺(S) > 0: a larger ratio.
        best_mask = result.side[:n]
        best = cut_of(best_mask)
        flows += network.runs
        network, clean = None, 0
    flows += network.runs if network is not None else 0
    return RatioCut(best[0] * step, best_mask, out_bandwidth(machine, best_mask, reverse),
                    scaled.exact, iterations, flows, scaled.tolerance)


def worst_cut(machine: Machine, ranks, reverse: bool = False) -> CutResult:
    """ForestColl's bottleneck cut for AllGather over ``ranks``: max |S ∩ ranks| / B⁺(S).

    With ``reverse`` the cut is taken on the reversed graph (the ReduceScatter bottleneck): the
    returned ``inside`` is S there, and ``bandwidth_out`` is the bandwidth *into* S in the machine.
    """
    given = [int(r) for r in ranks]
    members = np.unique(np.asarray(given, dtype=np.int64))
    if members.size < 2 or members.size != len(given):
        raise InputError("worst_cut needs at least two distinct ranks", field="ranks")
    if members.min() < 0 or members.max() >= machine.num_npus:
        raise InputError(f"ranks must be NPUs 0..{machine.num_npus - 1}", field="ranks")
    weights = np.zeros(machine.num_nodes, dtype=np.int64)
    weights[members] = 1
    cut = max_ratio_cut(machine, weights, members, reverse)
    return CutResult(cut.ratio, tuple(np.flatnonzero(cut.inside).tolist()), cut.bandwidth_out,
                     cut.exact, cut.iterations, cut.max_flows)


def evaluate_cut(machine: Machine, collective: Collective, inside: np.ndarray) -> tuple[int, float]:
    """(chunks that must leave S by the cut rule, B⁺(S)) for one node set S (a bool mask)."""
    inside = np.asarray(inside, dtype=bool)
    chunk, node = collective.needs
    outside_need = np.bincount(chunk[~inside[node]], minlength=collective.num_chunks) > 0
    held = inside[collective.pre.nodes].astype(np.int64)
    starts = collective.pre.indptr[:-1]
    if collective.combining:
        source_in = np.maximum.reduceat(held, starts) > 0
    else:
        source_in = np.minimum.reduceat(held, starts) > 0
    return int(np.count_nonzero(source_in & outside_need)), out_bandwidth(machine, inside)
