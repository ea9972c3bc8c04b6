"""Cut-family bounds as ``Bound`` records: the cut rule (exact where the shape allows, else the
best of a heuristic family), and the per-pair max-flow bound of rooted collectives."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from optcoll.bounds.bound import Bound, cut_sentence, describe_nodes, seconds
from optcoll.bounds.cuts import max_ratio_cut, out_bandwidth
from optcoll.bounds.demand import RatioProblem, allreduce_set, need_counts_per_chunk, ratio_problem
from optcoll.bounds.families import best_family_cut
from optcoll.bounds.flow import bandwidth_flows
from optcoll.collectives.collective import Collective
from optcoll.machines.machine import Machine
from optcoll.units import format_bandwidth, format_size


def _cut_name(collective: Collective) -> str:
    return "alltoall-cut" if collective.kind == "alltoall" else "cut"


@dataclass(frozen=True, eq=False)
class SplitCuts:
    """The minimum-bandwidth cuts separating one member of an AllReduce-shaped collective from
    each other one, both ways (max-flows from the first member): candidate witnesses for every
    cut bound that needs S to split the members."""

    sides: tuple[np.ndarray, ...]  # bool masks over nodes, S on the sending side
    exact: bool  # False when bandwidths were rounded for the integer max-flows


def split_cuts(machine: Machine, members: np.ndarray) -> SplitCuts:
    anchor, others = int(members[0]), members[1:]
    sides: list[np.ndarray] = []
    exact = True
    for reverse in (False, True):
        flows = bandwidth_flows(machine, anchor, others, reverse=reverse)
        exact &= flows.exact
        sides += [side if not reverse else ~side for side in flows.sides]
    return SplitCuts(tuple(sides), exact)


def _split_cut(machine: Machine, collective: Collective, split: SplitCuts) -> Bound:
    """AllReduce-shaped: every chunk must leave every S that splits the members, so the bound is
    K·b / min B⁺(S), the minimum found by max-flows from one member to each other, both ways."""
    name, b = _cut_name(collective), collective.chunk_bytes
    chunks = int(np.count_nonzero(need_counts_per_chunk(collective)))
    bandwidths = [out_bandwidth(machine, side) for side in split.sides]
    i = int(np.argmin(bandwidths))
    bandwidth, side = bandwidths[i], split.sides[i]
    return Bound(name, seconds(chunks * b, bandwidth),
                 cut_sentence(machine, np.flatnonzero(side), collective.ranks, chunks, b, bandwidth)
                 + " (every chunk's reduction must cross every cut that splits its ranks; S is a "
                 "minimum such cut)", split.exact)


def _ratio_cut(machine: Machine, collective: Collective, problem: RatioProblem) -> Bound:
    b = collective.chunk_bytes
    cut = max_ratio_cut(machine, problem.weights, problem.sinks, problem.reverse)
    text = cut_sentence(machine, np.flatnonzero(cut.inside), collective.ranks, cut.weight, b,
                        cut.bandwidth_out, problem.reverse)
    how = "maximal" if cut.exact else (f"maximal within a factor {1 + cut.tolerance:.6g} "
                                       "(bandwidths rounded up to fit int32 max-flows)")
    return Bound(_cut_name(collective), seconds(cut.weight * b, cut.bandwidth_out),
                 f"{text}; S is {how} ({problem.note}; {cut.iterations} Dinkelbach step(s), "
                 f"{cut.max_flows} max-flows)", cut.exact)


def cut_bound(machine: Machine, collective: Collective, split: SplitCuts | None = None) -> Bound | None:
    """b · max over S of (chunks that must leave S) / B⁺(S): exact when the collective is
    AllReduce-shaped or reduces to a weighted ratio problem, else the best of ``families``.
    ``split``: the AllReduce-shaped collective's ``split_cuts``, when the caller has them."""
    if collective.needs[0].size == 0:
        return None
    name, b = _cut_name(collective), collective.chunk_bytes
    members = allreduce_set(collective)
    if members is not None:
        return _split_cut(machine, collective, split or split_cuts(machine, members))
    problem = ratio_problem(collective, machine.num_nodes)
    if problem is not None:
        try:
            return _ratio_cut(machine, collective, problem)
        except OverflowError:  # too many chunks for int32 flows: fall back to the family
            pass
    found = best_family_cut(machine, collective)
    text = cut_sentence(machine, np.flatnonzero(found.inside), collective.ranks, found.chunks, b,
                        found.bandwidth_out)
    return Bound(name, seconds(found.chunks * b, found.bandwidth_out),
                 f"{text}; S is {found.how}, the best of a heuristic family of cuts", False)


def _rooted(collective: Collective) -> tuple[int, np.ndarray, bool] | None:
    """(root, chunks per other endpoint, root sends) when every needed chunk flows between one
    root and one other node: one holder r (Broadcast, Scatter) or one needer d (Gather, Reduce)."""
    _, need_node = collective.needs
    needy = np.flatnonzero(need_counts_per_chunk(collective))
    if needy.size == 0:
        return None
    n = int(max(collective.pre.nodes.max(), collective.post.nodes.max())) + 1
    pre_counts = collective.pre.counts()[needy]
    holder = collective.pre.nodes[collective.pre.indptr[needy]]
    if not collective.combining and np.all(pre_counts == 1) and np.all(holder == holder[0]):
        return int(holder[0]), np.bincount(need_node, minlength=n), True
    if np.all(need_counts_per_chunk(collective)[needy] == 1) and np.all(need_node == need_node[0]):
        root = int(need_node[0])
        chunk, node = collective.pre.pairs()
        if collective.combining:
            keep = np.isin(chunk, needy) & (node != root)
        elif np.all(pre_counts == 1):
            keep = np.isin(chunk, needy)
        else:
            return None
        return root, np.bincount(node[keep], minlength=n), False
    return None


def broadcast_maxflow_bound(machine: Machine, collective: Collective) -> Bound | None:
    """Rooted collectives: the chunks between the root r and node v need time volume / maxflow.

    T >= (bytes r sends to v) / maxflow(r → v) for every v (Edmonds: a broadcast's rate is the
    min over v of maxflow(r, v)); for Gather and Reduce the flows run v → root.
    """
    rooted = _rooted(collective)
    if rooted is None:
        return None
    root, volume, sends = rooted
    ends = np.flatnonzero(volume)
    flows = bandwidth_flows(machine, root, ends, reverse=not sends)
    # On the reversed graph the root's side is the complement of the cut in the machine.
    cuts = flows.sides if sends else ~flows.sides
    bandwidths = np.array([out_bandwidth(machine, cut) for cut in cuts])
    b = collective.chunk_bytes
    times = np.array([seconds(volume[v] * b, bw) for v, bw in zip(ends.tolist(), bandwidths.tolist())])
    i = int(np.argmax(times))
    v = int(ends[i])
    pair = (f"{machine.label(root)} → {machine.label(v)}" if sends
            else f"{machine.label(v)} → {machine.label(root)}")
    return Bound("broadcast-maxflow", float(times[i]),
                 f"{int(volume[v])} chunk(s) of {format_size(b)} must go {pair}, whose max-flow is "
                 f"{format_bandwidth(float(bandwidths[i]))} (minimum cut "
                 f"{describe_nodes(machine, np.flatnonzero(cuts[i]), collective.ranks)})", flows.exact)
