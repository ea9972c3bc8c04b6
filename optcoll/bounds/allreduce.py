"""AllReduce lower bounds (docs/model.md §6; FIELD-NOTES section 8): what every AllReduce
must move, counted on the links of the NPUs and across cuts, each with the assumptions it needs.

They apply to AllReduce-shaped collectives: a set X of N ≥ 2 ranks contributes to and needs each
of K chunks (the built-in AllReduce, and SCCL's whole-buffer form as a custom collective).

*Without in-network reduction* (no switch reduces), for each chunk take the NPU f where its full
sum is first formed. That sum is the disjoint union of N contributions, so its derivation holds
N − 1 reduce deliveries, each into an NPU (only NPUs combine). Every rank other than f must then
receive a delivery that makes it whole; none of those is one of the N − 1, whose results are
partial sums formed before f's (or at f). So the in-links of the NPUs carry at least 2(N − 1)
deliveries of each chunk:

* ``allreduce-volume``: T ≥ 2(N−1)·K·b / Σ B_e over links into NPUs (Patarasuk–Yuan 2009);
* ``allreduce-transfers``: the α-aware whole-chunk form: link e delivers its j-th chunk no earlier
  than a_e + j·o_e (a_e: the earliest a chunk can reach e's tail from a rank, plus e's delay;
  o_e: its occupancy), so T is at least the 2(N−1)·K-th of those instants over the NPU in-links.

*Without switch multicast either*, each of those deliveries has its own transfer on an NPU
out-link (a plain switch forwards each arrival once), which gives the egress forms on the links
out of NPUs, each transfer then still needing the way to the nearest NPU.

*Cuts* (valid with in-network reduction and multicast too): for a node set S splitting X, each
chunk's contributions inside S must cross to a rank outside and those outside must cross in, so
each direction carries K transfers, the j-th on link e finishing no earlier than a_e + j·o_e plus
the way from e's head to the nearest rank on the other side: ``allreduce-cut`` is the K-th of
those instants, maximised over a family of cuts (minimum cuts, single ranks, sweeps).

*Cuts crossed once* (no in-network reduction, no multicast): ``allreduce-cut-once`` splits on
the useful crossings of each chunk, those whose content reaches a rank's final value. Either some
chunk crosses twice, so K + 1 useful crossings share the crossing links (the cut form with K + 1;
where no switch reduces or multicasts, ``bounds.crossings`` sharpens it by what each crossing can
still do: reach a second rank, or carry all of its side's contributions); or every chunk crosses
exactly once. Then that crossing carries all s contributions of its side,
merged by s − 1 reduce deliveries into NPUs of that side (a merge fed from the far side would be a
second crossing), so the q-th crossing to start waits for q·(s − 1) such deliveries; and the other
side's ranks learn the chunk only through the one NPU the crossing reaches (a plain switch forwards
an arrival once, and a path back through the near side would cross again), which must spread it
to them without multicast (``bounds.spread``: holders can at most grow as if each one sent a copy
on every out-link once per occupancy, each landing at the next NPU that link reaches). No q contents
are full before q reductions into NPUs could end (the same envelope run backwards: q chunks
spreading from their roots over the near NPUs' in-links, sharing their senders), and where
the crossings are few enough every arrival gets such a floor, not only the last: the last L
chunks then spread over the same far NPUs, each sending one copy per link occupancy whichever
chunk it holds, so they share senders as well as links.

With switches that reduce or multicast (NVLS inside servers; issue 34) the once case still counts
what ``bounds.fullness`` shows: q full contents need every other near rank's own send of its
contribution (a reducing switch merges only what ranks sent it), and the crossings start in the
order their contents become full; where a crossing reaches its first NPU through switches that
neither reduce nor multicast, the other far ranks learn its content only from that NPU, one hop
later at least, and the several-crossings counting applies when crossings leave from NPUs.

*The last chunks into every far rank* (any switches on the far side). Where each crossing reaches
one NPU first through switches that neither reduce nor multicast, the content of the last L
crossings is on the far side only at the NPUs they reach first, at most L of them, from their
arrival floors on. So with more than L far ranks, some far rank is none of them and must take all
L chunks over its own in-links: one transfer per chunk (a multicasting switch still sends a copy
on each link, a reducing one merges partials of one chunk, never two chunks), the chunk's no
earlier than its arrival plus the least delay from any NPU to the link's tail, one occupancy
apart per link (``release.late_ingress``). The (L + 1)-th largest of those per-rank ends is a
bound: it takes the NVLS server's NVSwitch links into account, which the one hop above does not.

*Regions* (``allreduce-regions``): the same count one level up. Split the machine into disjoint
regions (here: the components of the links faster than a threshold, such as the servers of a
cluster) such that every node that can combine (NPUs, reducing switches) lies in one, and only
plain forwarding switches are outside; say n of them hold ranks. Take f, the site where a full sum
first appears in the derivation of some rank's final value, and contract that derivation along
every transfer that does not enter a region: each cluster lies in one region, every region with
ranks has one, so the n ≥ 2 clusters are joined by at least n − 1 transfers into regions. A region
with ranks other than f's that has just one cluster only ever receives that cluster's inputs, a
proper part of the sum (it is passed on to f), so it needs one more transfer in; a region with two
clusters already paid one extra. So each chunk enters regions at least 2(n − 1) times (in-network
reduction and multicast inside regions, and multicast outside, do not change this); every such
transfer carries data that reaches a rank, and without multicast outside the regions each one
leaves a region too (``allreduce-regions-egress``). With the regions the NPUs themselves this is
``allreduce-transfers``; with servers it sees what the NICs must carry.

*Regions entered exactly 2(n − 1) times* (``allreduce-regions-released``, where the egress form
applies). Either some chunk enters regions once more, and 2(n − 1)K + 1 transfers share the links
(the regions count with one more), or every chunk enters exactly 2(n − 1) times. Then each region
holds one cluster of the derivation, every region other than f's is entered once more, and nothing
else enters (a region without ranks, such as a reducing spine, is never entered, so sends nothing).
Take a transfer out of region X that starts before anything can enter X: it carries X's
contributions only. If it enters the derivation, it is X's cluster's edge towards f, which carries
the whole cluster, so all of X's contributions; otherwise it is the one more transfer into a region
Y, which must bring Y everything Y's cluster lacks: that always includes the contributions of f's
region, so X is f's region, and Y lacks only X's contributions, all of them (Y's subtree holds every
other region, so Y is the only such region). So X sends each chunk's full content out at most once
before anything enters it, and a full content is formed inside X by its ranks' own sends
(``fullness.RankSends``: no i full contents before ready(i)). The first transfer on each of X's
out-links thus starts no earlier than min(A_X, ready(i)) for the i-th earliest (A_X: the first instant
anything can enter X), and the 2(n − 1)K transfers out of regions are counted from there. On four
DGX H100 servers (C = 1) the eighth NIC of a server waits for 56 of the ranks' sends into the
NVSwitch, six NVLink hops after the first, which the plain count misses: 4.71 -> 5.31 ms.

Port limits are ignored (fewer usable links only delay), so every bound holds with them too.
"""
from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from optcoll.bounds.bound import Bound, describe_nodes
from optcoll.bounds.crossings import CrossingLinks, several_crossings_end
from optcoll.bounds.cutbounds import SplitCuts, split_cuts
from optcoll.bounds.demand import allreduce_set, need_counts_per_chunk
from optcoll.bounds.families import bandwidth_levels, orderings
from optcoll.bounds.fullness import RankSends, rank_sends, release_order_end
from optcoll.bounds.nodes import kth_arrival
from optcoll.bounds.release import late_ingress
from optcoll.bounds.spread import spread_end, spread_links, spread_time
from optcoll.collectives.collective import Collective
from optcoll.graphs.shortest import distances, nearest
from optcoll.instances.clock import check_current
from optcoll.instances.instance import TimeModel
from optcoll.machines.machine import Machine
from optcoll.units import format_bandwidth, format_size, format_time

NO_REDUCTION = "no in-network reduction (switches do not combine)"
NO_MULTICAST = "no switch multicast"
#: Sweep cuts evaluated in the α-aware form: the best by transfers per bandwidth, per ordering.
SWEEP_CUTS = 8
#: Up to this many nodes the cut form also takes the ranks farthest from each cut (all-pairs
#: distances, n² floats).
PAIR_MAX_NODES = 512
#: Crossing counts q at which ``allreduce-cut-once`` splits the crossings into those started by
#: the q-th and the rest (any subset of 1..K gives a valid bound; more only tighten it).
ONCE_SPLITS = 48
#: Most crossing links × chunks for which ``allreduce-cut-once`` bounds every arrival, not only the
#: last, and spreads the last chunks together (``spread.spread_end``); above it, the last alone.
ARRIVAL_CELLS = 20_000
#: Crossing counts q used for those arrivals, and numbers of last chunks spread together.
JOINT_SPLITS = 16
#: Most holdings one joint spread of the last chunks may count (a heap event each).
SPREAD_HOLDINGS = 4_096


def in_network_reduction(machine: Machine) -> bool:
    return any(s.reduce for s in machine.switches)


def switch_multicast(machine: Machine) -> bool:
    return any(s.multicast for s in machine.switches)


def _distances(machine: Machine, delay: np.ndarray, sources: np.ndarray, reverse: bool = False) -> np.ndarray:
    """Per node, the least total delay from (``reverse``: to) the nearest of ``sources``."""
    src, dst = (machine.link_dst, machine.link_src) if reverse else (machine.link_src, machine.link_dst)
    return nearest(machine.num_nodes, src, dst, delay, sources)


def not_applied(machine: Machine, collective: Collective) -> str:
    """Which AllReduce bounds this machine rules out and why, or that its in-network reduction
    goes unused ("" when neither)."""
    members = allreduce_set(collective)
    if members is None or members.size < 2:
        reducing = [s.label for s in machine.switches if s.reduce]
        if reducing and not collective.combining:
            return (f"nothing: switch {reducing[0]!r} reduces in the network, but {collective.kind} does not "
                    "combine, so that capability goes unused (it forwards like any switch)")
        return ""
    reducing = [s.label for s in machine.switches if s.reduce]
    if reducing:
        return (f"allreduce-volume, allreduce-transfers and their egress forms (they assume {NO_REDUCTION}; "
                f"switch {reducing[0]!r} reduces)")
    copying = [s.label for s in machine.switches if s.multicast]
    if copying:
        return (f"allreduce-volume-egress and allreduce-transfers-egress (they assume {NO_MULTICAST}; "
                f"switch {copying[0]!r} multicasts)")
    return ""


def _kth(count: int, first: np.ndarray, period: np.ndarray) -> float:
    """The ``count``-th smallest of first_e + j·period_e (j ≥ 0) over links e (inf if none)."""
    live = np.isfinite(first)
    if count <= 0:
        return 0.0
    if not live.any():
        return math.inf
    rows, mult = np.unique(np.stack([first[live], period[live]], axis=1), axis=0, return_counts=True)
    return kth_arrival(count, rows[:, 0].copy(), rows[:, 1].copy(), mult)


def allreduce_bounds(machine: Machine, collective: Collective, model: TimeModel,
                     split: SplitCuts | None = None) -> list[Bound]:
    """The bounds of the module docstring that apply to this machine (none when the collective
    is not AllReduce-shaped); ``split``: its ``cutbounds.split_cuts`` when the caller has them."""
    members = allreduce_set(collective)
    if members is None or members.size < 2:
        return []
    n, b = int(members.size), collective.chunk_bytes
    k = int(np.count_nonzero(need_counts_per_chunk(collective)))
    timing = model.link_timing(machine, b)
    from_ranks = _distances(machine, timing.delay, members)
    to_ranks = _distances(machine, timing.delay, members, reverse=True)
    cuts = _candidate_cuts(machine, members, split or split_cuts(machine, members))
    found = [_cut_bound(machine, members, k, b, cuts, from_ranks, to_ranks, timing.delay, timing.busy)]
    found += _region_bounds(machine, members, k, from_ranks, to_ranks, timing.delay, timing.busy)
    found.append(_once_bound(machine, members, k, cuts, from_ranks, to_ranks, timing.delay, timing.busy))
    if in_network_reduction(machine):
        return found
    npu = np.arange(machine.num_nodes) < machine.num_npus
    into, out_of = np.flatnonzero(npu[machine.link_dst]), np.flatnonzero(npu[machine.link_src])
    deliveries = 2 * (n - 1) * k
    why = (f"each of the {k} chunk(s) needs N − 1 = {n - 1} reduce deliveries into NPUs to form its "
           f"first full sum and one more delivery to each of the other {n - 1} ranks")
    found.append(Bound("allreduce-volume", deliveries * b / float(machine.link_bandwidth[into].sum()),
                       f"{deliveries} chunk deliveries of {format_size(b)} into NPUs over "
                       f"{format_bandwidth(float(machine.link_bandwidth[into].sum()))} of NPU "
                       f"in-links ({why})", assumptions=(NO_REDUCTION,)))
    first = from_ranks[machine.link_src[into]] + timing.delay[into]
    value = _kth(deliveries, first, timing.busy[into])
    found.append(Bound("allreduce-transfers", value,
                       f"{deliveries} chunk deliveries into NPUs over {into.size} NPU in-link(s), each "
                       f"link's j-th no earlier than its first possible arrival + j·occupancy: the last "
                       f"cannot arrive before {format_time(value)} ({why})", assumptions=(NO_REDUCTION,)))
    if switch_multicast(machine):
        return found
    to_npus = _distances(machine, timing.delay, np.flatnonzero(npu), reverse=True)
    volume = deliveries * b / float(machine.link_bandwidth[out_of].sum())
    last = from_ranks[machine.link_src[out_of]] + timing.delay[out_of] + to_npus[machine.link_dst[out_of]]
    value = _kth(deliveries, last, timing.busy[out_of])
    how = (f"{deliveries} chunk deliveries into NPUs, each sent on its own NPU out-link (plain "
           f"switches forward each arrival once; {why})")
    found.append(Bound("allreduce-volume-egress", volume, f"{how}, over "
                       f"{format_bandwidth(float(machine.link_bandwidth[out_of].sum()))} of NPU out-links",
                       assumptions=(NO_REDUCTION, NO_MULTICAST)))
    found.append(Bound("allreduce-transfers-egress", value, f"{how}; with each out-link's j-th transfer "
                       f"no earlier than its first possible start + j·occupancy and the way on to an "
                       f"NPU, the last cannot arrive before {format_time(value)}",
                       assumptions=(NO_REDUCTION, NO_MULTICAST)))
    return found


def _sweep_bandwidth(machine: Machine, order: np.ndarray) -> np.ndarray:
    """Per prefix size 1..n−1 of ``order``: the smaller of the bandwidths out of and into it."""
    n = machine.num_nodes
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)
    ps, pd = pos[machine.link_src], pos[machine.link_dst]
    found = []
    for forward in (ps < pd, ps > pd):  # u→v leaves prefix k iff pos[u] < k <= pos[v]; enters iff reversed
        lo, hi = np.minimum(ps, pd)[forward], np.maximum(ps, pd)[forward]
        diff = np.zeros(n + 1)
        np.add.at(diff, lo + 1, machine.link_bandwidth[forward])
        np.add.at(diff, hi + 1, -machine.link_bandwidth[forward])
        found.append(np.cumsum(diff)[1:n])
    return np.minimum(*found)


def _candidate_cuts(machine: Machine, members: np.ndarray, split: SplitCuts) -> list[np.ndarray]:
    """Node sets (bool masks) to try: each single rank, the minimum-bandwidth cuts between the
    members (``split``), and per ordering of ``families.orderings`` the ``SWEEP_CUTS`` prefixes
    splitting the members with the least bandwidth across."""
    nodes = machine.num_nodes
    cuts = list(split.sides)
    for v in members.tolist():
        alone = np.zeros(nodes, dtype=bool)
        alone[v] = True
        cuts.append(alone)
    is_member = np.zeros(nodes, dtype=bool)
    is_member[members] = True
    for _, order in orderings(machine):
        inside = np.cumsum(is_member[order])[:-1]
        splits = np.flatnonzero((inside > 0) & (inside < members.size))
        across = _sweep_bandwidth(machine, order)[splits]
        for size in splits[np.argsort(across, kind="stable")[:SWEEP_CUTS]] + 1:
            prefix = np.zeros(nodes, dtype=bool)
            prefix[order[:size]] = True
            cuts.append(prefix)
    return cuts


def _splitting_sides(cuts: list[np.ndarray], is_member: np.ndarray) -> Iterator[tuple[np.ndarray, bool]]:
    """(cut, way in) for each distinct cut with members on both sides, out of it and into it;
    under a job's clock, until it ends (``check_current``: the bound is then not made)."""
    seen: set[bytes] = set()
    for inside in cuts:
        check_current()
        key = inside.tobytes()
        if key in seen or not (is_member & inside).any() or not (is_member & ~inside).any():
            continue
        seen.add(key)
        yield inside, False
        yield inside, True


def _cut_bound(machine: Machine, members: np.ndarray, k: int, b: float, cuts: list[np.ndarray],
               from_ranks: np.ndarray, to_ranks: np.ndarray, delay: np.ndarray, busy: np.ndarray) -> Bound:
    """The best α-aware cut over ``cuts``.

    Each chunk needs, for one rank i on the tail side and one rank r on the head side, a crossing
    that carries i's contribution on its way to r: it starts no earlier than i's data can reach the
    crossing link's tail and is done no earlier than its head's way on to r. With i and r the ranks
    farthest from the cut on their sides (when the machine is small enough for all-pairs
    distances, ``PAIR_MAX_NODES``) that is the stronger form; the nearest ranks give the plain one.
    """
    is_member = np.zeros(machine.num_nodes, dtype=bool)
    is_member[members] = True
    pairs = machine.num_nodes <= PAIR_MAX_NODES
    dist = (distances(machine.num_nodes, machine.link_src, machine.link_dst, delay, np.arange(machine.num_nodes))
            if pairs else None)
    best: tuple[float, np.ndarray | None, bool, str] = (-1.0, None, False, "")
    for inside, way_in in _splitting_sides(cuts, is_member):
        tail_side = ~inside if way_in else inside
        cross = np.flatnonzero(tail_side[machine.link_src] & ~tail_side[machine.link_dst])
        tails, heads = machine.link_src[cross], machine.link_dst[cross]
        options = [(from_ranks[tails] + delay[cross] + to_ranks[heads], "")]
        if dist is not None and cross.size:
            senders, receivers = np.flatnonzero(is_member & tail_side), np.flatnonzero(is_member & ~tail_side)
            i = senders[np.argmax(dist[np.ix_(senders, tails)].min(axis=1))]
            r = receivers[np.argmax(dist[np.ix_(heads, receivers)].min(axis=0))]
            options.append((dist[i, tails] + delay[cross] + dist[heads, r],
                            f", carrying {machine.label(int(i))}'s contribution to {machine.label(int(r))}"))
        for first, how in options:
            value = _kth(k, first, busy[cross])
            if value > best[0]:
                best = (value, inside, way_in, how)
    value, inside, way_in, how = best
    assert inside is not None
    way = "into" if way_in else "out of"
    return Bound("allreduce-cut", value,
                 f"{describe_nodes(machine, np.flatnonzero(inside), members)}: each of the {k} chunk(s) "
                 f"must cross {way} S at least once{how} (contributions on one side are needed on the "
                 f"other); with each crossing link's j-th transfer no earlier than its first possible "
                 f"arrival + j·occupancy and the way on, the last cannot arrive before "
                 f"{format_time(value)} (the best of a family of cuts)", exact=False)


def _arrival_floors(start: np.ndarray, way: np.ndarray, busy: np.ndarray, ready: list[tuple[int, float]],
                    k: int) -> np.ndarray | None:
    """Per j = 1..k, a lower bound on the j-th arrival of k crossings, one per chunk, that each
    wait for their chunk's full content (``ready``: (q, no q contents before this)): at most q − 1
    crossings start before ready_q, so j − q + 1 of the first j arrivals started after it. None
    when the crossing links × k instants would be too many (``ARRIVAL_CELLS``)."""
    if start.size * k > ARRIVAL_CELLS:
        return None
    floors = np.full(k, -np.inf)
    steps = np.arange(k)
    for q, when in ready:
        instants = np.sort(((np.maximum(when, start) + way)[:, None] + steps[None, :] * busy[:, None]).ravel())
        floors[q - 1:] = np.maximum(floors[q - 1:], instants[: k - q + 1])
    return floors


@dataclass(frozen=True, eq=False)
class _OnceMachine:
    """What every cut of ``allreduce-cut-once`` reads of the machine (computed once per bound)."""

    machine: Machine
    members: np.ndarray
    k: int
    from_ranks: np.ndarray
    to_ranks: np.ndarray
    delay: np.ndarray
    busy: np.ndarray
    npu: np.ndarray
    combines: np.ndarray  # nodes that may combine: NPUs and reducing switches
    special: np.ndarray  # switches that reduce or multicast
    is_member: np.ndarray
    to_npus: np.ndarray
    npu_hop: np.ndarray  # from a send's start to the next NPU it can reach
    npu_hop_back: np.ndarray  # the same, for a reduction run backwards
    from_npus: np.ndarray  # per node, the least delay from any NPU to it
    relay_hop: float
    first_merge: float
    counts_kinds: bool  # crossings reach one NPU first, and only NPUs combine
    splits: np.ndarray  # the q (full contents before a crossing) tried

    @classmethod
    def of(cls, machine: Machine, members: np.ndarray, k: int, from_ranks: np.ndarray, to_ranks: np.ndarray,
           delay: np.ndarray, busy: np.ndarray) -> _OnceMachine:
        npu = np.arange(machine.num_nodes) < machine.num_npus
        combines = npu.copy()
        combines[machine.num_npus:] = [s.reduce for s in machine.switches]
        special = np.zeros(machine.num_nodes, dtype=bool)
        special[machine.num_npus:] = [s.reduce or s.multicast for s in machine.switches]
        is_member = np.zeros(machine.num_nodes, dtype=bool)
        is_member[members] = True
        to_npus = _distances(machine, delay, np.flatnonzero(npu), reverse=True)
        from_npus = _distances(machine, delay, np.flatnonzero(npu))
        sends = np.flatnonzero(npu[machine.link_src])
        into_npus = np.flatnonzero(npu[machine.link_dst])
        return cls(machine, members, k, from_ranks, to_ranks, delay, busy, npu, combines, special, is_member,
                   to_npus, delay + to_npus[machine.link_dst], delay + from_npus[machine.link_src], from_npus,
                   float((delay[sends] + to_ranks[machine.link_dst[sends]]).min(initial=np.inf)),
                   float((from_ranks[machine.link_src[into_npus]] + delay[into_npus]).min(initial=np.inf)),
                   not special.any(), np.unique(np.linspace(1, k, min(k, ONCE_SPLITS)).round().astype(np.int64)))


@dataclass(frozen=True, eq=False)
class _FarSide:
    """How a crossing's content reaches the other side's ``ranks`` (besides the one it reaches):
    at least ``spread`` after it arrives, under ``assumes``; ``profile``: the far NPUs' spreading
    links when the far side only forwards (``spread.spread_links``), else empty."""

    ranks: int
    npus: np.ndarray
    special: bool  # a switch there reduces or multicasts
    spread: float = 0.0
    assumes: tuple[str, ...] = ()
    profile: tuple = ()


def _far_side(net: _OnceMachine, near: np.ndarray, s: int, plain_way: bool,
              way_assumed: tuple[str, ...]) -> _FarSide:
    machine = net.machine
    far_special = np.flatnonzero(net.special & ~near)
    far_npus = np.flatnonzero(net.npu & ~near)
    n_far = int(net.members.size) - s
    if far_special.size and n_far > 1:  # the other far ranks learn it from the first NPU it reaches
        far_sends = np.flatnonzero(net.npu[machine.link_src] & ~near[machine.link_src])
        if plain_way and far_sends.size:
            spread = float((net.delay[far_sends] + net.to_ranks[machine.link_dst[far_sends]]).min())
            return _FarSide(n_far, far_npus, True, spread, way_assumed)
    elif not far_special.size:  # the far side only forwards each arrival once
        profile = spread_links(machine, far_npus, net.npu_hop, net.busy)
        far_switches = np.flatnonzero(~near[machine.num_npus:]) + machine.num_npus
        assumes = (f"the switches on the far side ({_node_list(machine, far_switches)}) neither reduce "
                   "nor multicast",) if far_switches.size else ()
        return _FarSide(n_far, far_npus, False, spread_time(n_far, profile), assumes, profile)
    return _FarSide(n_far, far_npus, bool(far_special.size))


def _readiness(s: int, backwards: tuple, depth: float, near_npus: int, merge_first: np.ndarray,
               merge_busy: np.ndarray, sends: RankSends) -> Callable[[int], float]:
    """q ↦ no q full contents of S (``s`` ranks) before this (memoised)."""
    merged: dict[int, float] = {}

    def ready(q: int) -> float:
        if q not in merged:
            # q reductions at once, run backwards: q chunks spreading over the same near NPUs
            together = spread_end((0.0,) * q, q * s, backwards, near_npus) \
                if backwards and q * s <= SPREAD_HOLDINGS else depth
            merged[q] = max(together, depth, _kth(q * (s - 1), merge_first, merge_busy), sends.ready(q)) \
                if s > 1 else 0.0
        return merged[q]
    return ready


def _crossed_once(net: _OnceMachine, ready: Callable[[int], float], s: int, starts: np.ndarray, way: np.ndarray,
                  busy: np.ndarray, spread: float, twice_most: float) -> float:
    """The last of the k crossings' arrivals when each chunk crosses once, full (``starts``,
    ``way``, ``busy``: per crossing link); stops early where the several-crossings case decides."""
    crossed = 0.0
    for q in (net.splits if s > 1 else net.splits[:1]).tolist():  # one rank merges nothing: q = 1 is the most
        crossed = max(crossed, _kth(net.k - q + 1, np.maximum(ready(q), starts) + way, busy))
        if crossed + spread >= twice_most:  # the cut's value is the several-crossings case's
            return crossed
    if s > 1 and crossed + spread < twice_most:  # the crossings in release order (``fullness``)
        steps = net.splits.tolist()
        crossed = max(crossed, release_order_end(
            lambda q: max(ready(steps[bisect_right(steps, q) - 1]), 0.0), net.k, starts.size,
            float(starts.min()), float(busy.min()), float(way.min())))
    return crossed


def _late_floors(net: _OnceMachine, ready: Callable[[int], float], s: int, starts: np.ndarray, way: np.ndarray,
                 busy: np.ndarray) -> np.ndarray | None:
    """``_arrival_floors`` of the k crossings at the splits the joint arguments use."""
    qs = np.unique(np.linspace(1, net.k, min(net.k, JOINT_SPLITS)).round().astype(np.int64)) if s > 1 else [1]
    return _arrival_floors(starts, way, busy, [(q, ready(q)) for q in qs], net.k)


def _last_chunks_end(net: _OnceMachine, floors: np.ndarray | None, crossed: float, far: _FarSide,
                     once: float) -> tuple[float, int]:
    """(end, L): the last L chunks, spreading over the same far NPUs, cannot all be spread
    before end (``once`` and L = 1 when no L does better)."""
    k, together = net.k, 1
    for late in ([] if floors is None else
                 np.unique(np.linspace(2, k, min(k - 1, JOINT_SPLITS)).round().astype(np.int64)).tolist()):
        if late * far.ranks > SPREAD_HOLDINGS:
            break
        arrivals = np.r_[floors[k - late:-1], max(floors[-1], crossed)]
        end = spread_end(tuple(arrivals.tolist()), late * far.ranks, far.profile, far.npus.size)
        if end > once:
            once, together = end, late
    return once, together


def _late_inlinks_end(net: _OnceMachine, near: np.ndarray, floors: np.ndarray | None,
                      crossed: float) -> tuple[float, int]:
    """(end, L): some far rank takes the last L crossings' chunks over its own in-links after they
    land, and cannot have them all before end (module docstring, the last chunks into every far
    rank); (0, 0) when no L applies."""
    machine, k = net.machine, net.k
    far = net.members[~near[net.members]]
    if floors is None or far.size < 2:
        return 0.0, 0
    arrivals = np.r_[floors[:-1], max(floors[-1], crossed)]
    # far ranks alike in their in-links (least delay from an NPU to the tail, delay, occupancy) once
    profiles: dict[bytes, int] = {}
    for v in far.tolist():
        into = np.flatnonzero(machine.link_dst == v)
        rows = np.stack([net.from_npus[machine.link_src[into]], net.delay[into], net.busy[into]], axis=1)
        key = rows[np.lexsort(rows.T[::-1])].tobytes()  # every in-link counts, alike ones too
        profiles[key] = profiles.get(key, 0) + 1
    best = (0.0, 0)
    for late in np.unique(np.linspace(2, k, min(k - 1, JOINT_SPLITS)).round().astype(np.int64)).tolist():
        if late >= far.size:
            break
        last = arrivals[k - late:]
        ends = []
        for key, count in profiles.items():
            tail, delay, busy = np.frombuffer(key).reshape(-1, 3).T
            end, _ = late_ingress(last, late - np.arange(late), last[:, None] + tail[None, :], delay, busy)
            ends += [end] * count
        end = sorted(ends, reverse=True)[late]  # the L ranks reached first may be the L latest
        if end > best[0]:
            best = (end, late)
    return best


def _once_cut(net: _OnceMachine, near: np.ndarray, floor: float,
              counted: set) -> tuple[float, str, tuple[str, ...]] | None:
    """``allreduce-cut-once`` for one side S (``near``, where the crossings leave): its value,
    detail and assumptions; None when it cannot beat ``floor`` or a like cut was ``counted``."""
    machine, k, delay, busy = net.machine, net.k, net.delay, net.busy
    cross = np.flatnonzero(near[machine.link_src] & ~near[machine.link_dst])
    tails, heads = machine.link_src[cross], machine.link_dst[cross]
    to_rank = delay[cross] + net.to_ranks[heads]
    twice = _kth(k + 1, net.from_ranks[tails] + to_rank, busy[cross])
    s = int(np.count_nonzero(net.is_member & near))
    links = CrossingLinks(net.from_ranks[tails], busy[cross], to_rank, net.npu_hop[cross] + net.relay_hop,
                          net.first_merge if s > 1 else -np.inf)
    passed = _until_npu(machine, heads, net.npu)  # a crossing reaches one NPU first through plain switches
    plain_way = not net.special[passed].any()
    kinds = net.counts_kinds or (plain_way and bool(net.npu[tails].all()))  # and a full one was made at an NPU
    way_assumed = (f"the switches a crossing passes before its first NPU ({_node_list(machine, passed)}) neither "
                   "reduce nor multicast",) if passed.size and not net.counts_kinds else ()
    # the several-crossings case is possible once K + 1 spreading crossings fit and K full ones
    twice_most = max(twice, _kth(k + 1, links.start + links.to_relay, links.busy),
                     _kth(k, np.maximum(links.start, links.full_from) + links.to_relay, links.busy)) \
        if kinds else twice
    if twice_most <= floor:  # the cut's value is at most this
        return None
    merges = np.flatnonzero(near[machine.link_src] & near[machine.link_dst] & net.combines[machine.link_dst])
    merge_first = net.from_ranks[machine.link_src[merges]] + delay[merges]
    far = _far_side(net, near, s, plain_way, way_assumed)
    # a reduction into an NPU run backwards is a spread from it over the near NPUs' in-links
    backwards = spread_links(machine, np.flatnonzero(net.npu & near), net.npu_hop_back, busy, inward=True) \
        if s > 1 and not net.special[near].any() else ()
    depth = spread_time(s, backwards) if backwards else 0.0
    profile = b"".join(np.unique(rows, axis=0).tobytes() for rows in (
        np.stack([net.from_ranks[tails], delay[cross] + net.to_npus[heads], to_rank, busy[cross]], axis=1),
        np.stack([merge_first, busy[merges]], axis=1)))
    key = (s, far.spread, twice, backwards, profile)  # a cut like one already counted (symmetric machines)
    if key in counted:
        return None
    counted.add(key)
    # the ranks' own sends, their content at an NPU (at the tail itself when a tail may combine)
    sends = rank_sends(machine.link_src, machine.link_dst, delay, busy,
                       net.to_npus if net.npu[tails].all() else np.zeros_like(net.to_npus), near,
                       np.flatnonzero(net.is_member & near))
    ready = _readiness(s, backwards, depth, int(np.count_nonzero(net.npu & near)), merge_first, busy[merges], sends)
    way = delay[cross] + net.to_npus[heads]
    crossed = _crossed_once(net, ready, s, net.from_ranks[tails], way, busy[cross], far.spread, twice_most)
    once, together, inlinks = crossed + far.spread, 1, (0.0, 0)
    if k > 1 and once < twice_most:
        floors = _late_floors(net, ready, s, net.from_ranks[tails], way, busy[cross])
        if far.profile:  # the last L chunks share the far NPUs
            once, together = _last_chunks_end(net, floors, crossed, far, once)
        if plain_way:  # the last L chunks come into some far rank over its own in-links
            inlinks = _late_inlinks_end(net, near, floors, crossed)
            if inlinks[0] > once:
                once, together = inlinks[0], 1
            else:
                inlinks = (0.0, 0)
    several = twice
    if kinds and once > twice:
        several = several_crossings_end(links, k, far.ranks, twice, min(once, twice_most))
    value = min(several, once)
    if value <= floor:
        return None
    assumed = (*(far.assumes if far.spread else ()), *(way_assumed if several > twice or inlinks[1] else ()))
    return (value, _once_detail(net, near, s, twice, crossed, several, far, once, together, inlinks[1]),
            tuple(dict.fromkeys(assumed)))


def _once_detail(net: _OnceMachine, near: np.ndarray, s: int, twice: float, crossed: float, several: float,
                 far: _FarSide, once: float, together: int, into_far: int) -> str:
    k = net.k
    then = (f", which must spread it to the other side's ranks ({format_time(far.spread)})" if far.spread else
            " (its spread through the other side is not counted: a switch there reduces or multicasts)")
    if far.spread and far.special:
        then = (f", whose content reaches the other side's other ranks only from the first NPU it reaches "
                f"(at least {format_time(far.spread)} more)")
    if together > 1:
        then += (f"; the last {together} chunks, spreading over the same {far.npus.size} NPUs (each sends one "
                 f"copy per link occupancy, whichever chunk it holds), cannot all be spread before "
                 f"{format_time(once)}")
    if into_far:
        then += (f"; and the last {into_far} chunks reach the other side at no more than {into_far} of its "
                 f"NPUs first, so another of its ranks takes all of them over its own in-links, one "
                 f"occupancy apart, each no earlier than it landed plus the way from an NPU to the link: "
                 f"not before {format_time(once)}")
    sorting = (f"; sorting the crossings into those that can still reach a second rank, those that can "
               f"carry all of S's contributions and the rest, no way of sharing them out ends before "
               f"{format_time(several)}" if several > twice else "")
    return (f"{describe_nodes(net.machine, np.flatnonzero(near), net.members)}: either some chunk "
            f"crosses out of S twice ({k + 1} crossings: the last cannot arrive before "
            f"{format_time(twice)}{sorting}), or each of the {k} chunk(s) crosses once carrying S's {s} "
            f"contributions (its other ranks' sends and {s - 1} reduce deliveries into S's NPUs and reducing "
            f"switches first, the crossings starting in that order), "
            f"the last arriving no earlier than {format_time(crossed)}{then}")


def _once_bound(machine: Machine, members: np.ndarray, k: int, cuts: list[np.ndarray], from_ranks: np.ndarray,
                to_ranks: np.ndarray, delay: np.ndarray, busy: np.ndarray) -> Bound:
    """``allreduce-cut-once`` (module docstring), the best over ``cuts`` and both directions."""
    net = _OnceMachine.of(machine, members, k, from_ranks, to_ranks, delay, busy)
    best: tuple[float, str, tuple[str, ...]] = (-1.0, "", ())
    counted: set[tuple[int, float, float, tuple[tuple[float, float], ...], bytes]] = set()
    for inside, way_in in _splitting_sides(cuts, net.is_member):
        found = _once_cut(net, ~inside if way_in else inside, best[0], counted)
        if found is not None:
            best = found
    value, detail, assumptions = best
    return Bound("allreduce-cut-once", max(value, 0.0), detail + " (the best of a family of cuts)",
                 exact=False, assumptions=assumptions)


def _until_npu(machine: Machine, heads: np.ndarray, npu: np.ndarray) -> np.ndarray:
    """The switches reachable from ``heads`` before any NPU: where none of them reduces or
    multicasts, a crossing's content reaches one NPU first and goes on only from there."""
    seen = np.zeros(machine.num_nodes, dtype=bool)
    todo = [int(v) for v in np.unique(heads) if not npu[v]]
    seen[todo] = True
    while todo:
        v = todo.pop()
        for w in machine.link_dst[machine.link_src == v].tolist():
            if not npu[w] and not seen[w]:
                seen[w] = True
                todo.append(w)
    return np.flatnonzero(seen)


def region_partitions(machine: Machine, members: np.ndarray) -> Iterator[np.ndarray]:
    """Per node its region (−1: outside), for each bandwidth threshold (at most
    ``families.BANDWIDTH_LEVELS``) whose faster links leave the members in two regions or more; components
    holding nothing that combines (plain switches only) stay outside. Distinct partitions only,
    from the coarsest."""
    nodes = machine.num_nodes
    combines = np.arange(nodes) < machine.num_npus
    combines[machine.num_npus:] = [s.reduce for s in machine.switches]
    seen: set[bytes] = set()
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    for threshold in bandwidth_levels(np.unique(machine.link_bandwidth)[:-1]):
        fast = machine.link_bandwidth > threshold
        graph = coo_matrix((np.ones(int(fast.sum())), (machine.link_src[fast], machine.link_dst[fast])),
                           shape=(nodes, nodes))
        _, component = connected_components(graph, directed=True, connection="weak")
        kept = np.zeros(component.max() + 1, dtype=bool)
        kept[component[combines]] = True
        region = np.where(kept[component], component, -1)
        if np.unique(region[members]).size < 2:
            continue
        key = region.tobytes()
        if key not in seen:
            seen.add(key)
            yield region


def _region_bounds(machine: Machine, members: np.ndarray, k: int, from_ranks: np.ndarray, to_ranks: np.ndarray,
                   delay: np.ndarray, busy: np.ndarray) -> list[Bound]:
    """``allreduce-regions`` and its egress form (module docstring), the best over
    ``region_partitions``."""
    best: dict[bool, tuple[float, str, tuple[str, ...]]] = {}
    for region in region_partitions(machine, members):
        n = int(np.unique(region[members]).size)
        deliveries = 2 * (n - 1) * k
        src, dst = region[machine.link_src], region[machine.link_dst]
        into = np.flatnonzero((dst >= 0) & (src != dst))
        outside = np.flatnonzero(region < 0)
        where = (f"{n} regions with ranks ({_describe_regions(machine, region, members)}; outside: "
                 f"{_node_list(machine, outside)})")
        assumes = (f"no in-network reduction outside the regions ({_node_list(machine, outside)} do not combine)",) \
            if outside.size else ()
        forms = [(False, into, from_ranks[machine.link_src[into]] + delay[into] + to_ranks[machine.link_dst[into]])]
        if not any(machine.switch(int(v)).multicast for v in outside):
            out_of = np.flatnonzero((src >= 0) & (src != dst))
            to_region = _distances(machine, delay, np.flatnonzero(region >= 0), reverse=True)
            forms.append((True, out_of, from_ranks[machine.link_src[out_of]] + delay[out_of]
                          + to_region[machine.link_dst[out_of]]))
        counted = []
        for egress, links, first in forms:
            value = _kth(deliveries, first, busy[links])
            counted.append(value)
            if value > best.get(egress, (-1.0,))[0]:
                way = "out of" if egress else "into"
                best[egress] = (value, f"{where}: each of the {k} chunk(s) enters regions at least 2(n − 1) = "
                                f"{2 * (n - 1)} times, so {deliveries} transfers {way} regions over {links.size} "
                                f"link(s), each link's j-th no earlier than its first possible one + j·occupancy "
                                f"and the way on: the last cannot be done before {format_time(value)}", assumes)
        if len(forms) == 2:
            more = max(_kth(deliveries + 1, first, busy[links]) for _, links, first in forms)
            released = _released_departures(machine, region, members, k, deliveries, from_ranks, delay, busy,
                                             forms[1][2] - from_ranks[machine.link_src[forms[1][1]]])
            value = max(*counted, min(more, released))
            if value > max(counted) and value > best.get("released", (-1.0,))[0]:
                best["released"] = (value, f"{where}: either some chunk enters regions more than 2(n − 1) = "
                                    f"{2 * (n - 1)} times ({deliveries + 1} transfers into regions: the last cannot "
                                    f"be done before {format_time(more)}), or each enters exactly 2(n − 1) times; "
                                    "then a transfer leaving a region before anything can enter it carries all of "
                                    "that region's contributions to its chunk, a different chunk each (the region's "
                                    "ranks' own sends first), and the first transfer out of each link waits for "
                                    f"them: the {deliveries} transfers out of regions cannot be done before "
                                    f"{format_time(released)}", assumes)
    found = []
    names = {False: "allreduce-regions", True: "allreduce-regions-egress", "released": "allreduce-regions-released"}
    for form, (value, detail, assumes) in sorted(best.items(), key=lambda item: str(item[0])):
        assumptions = (*assumes, "no switch multicast outside the regions") if form and assumes else assumes
        found.append(Bound(names[form], value, detail + " (the best of a family of region splits)", exact=False,
                           assumptions=assumptions))
    return found


def _released_departures(machine: Machine, region: np.ndarray, members: np.ndarray, k: int, deliveries: int,
                         from_ranks: np.ndarray, delay: np.ndarray, busy: np.ndarray, way: np.ndarray) -> float:
    """``allreduce-regions-released``'s second case (module docstring): every chunk enters regions
    exactly 2(n − 1) times. Per region X: a transfer out of X that starts before anything can enter X
    (``A_X``) carries X's ranks' contributions only, so (the case's derivation: one cluster per region,
    entered once more) all of them, and X sends that of each chunk out at most once; so the i-th
    earliest first start over X's out-links is no earlier than min(A_X, no i full contents of X at
    NPUs), ``fullness.RankSends``, where every out-link leaves an NPU (else no release is counted).
    X's out-links are given their least occupancy and way (a relaxation, so the releases' order
    does not matter), and the ``deliveries``-th of their instants is the bound. ``way``: per region
    out-link (in ``region`` order of links), its delay and way on into a region."""
    npu = np.arange(machine.num_nodes) < machine.num_npus
    src, dst = region[machine.link_src], region[machine.link_dst]
    out_links = np.flatnonzero((src >= 0) & (src != dst))
    way_of = dict(zip(out_links.tolist(), way.tolist()))
    to_npus = _distances(machine, delay, np.flatnonzero(npu), reverse=True)
    firsts, periods = [], []
    for x in np.unique(region[members]).tolist():
        inside = region == x
        out = out_links[inside[machine.link_src[out_links]]]
        into = np.flatnonzero(~inside[machine.link_src] & inside[machine.link_dst])
        if not out.size:
            continue
        enters = float((from_ranks[machine.link_src[into]] + delay[into]).min(initial=np.inf))
        releases = np.zeros(out.size)
        if npu[machine.link_src[out]].all():
            ranks = members[inside[members]]
            sends = rank_sends(machine.link_src, machine.link_dst, delay, busy, to_npus, inside, ranks)
            releases = np.array([min(enters, sends.ready(i)) if i <= k else enters for i in range(1, out.size + 1)])
        start = float(from_ranks[machine.link_src[out]].min())
        firsts.append(np.maximum(releases, start) + min(way_of[e] for e in out.tolist()))
        periods.append(np.full(out.size, float(busy[out].min())))
    if not firsts:
        return math.inf
    return _kth(deliveries, np.concatenate(firsts), np.concatenate(periods))


def _describe_regions(machine: Machine, region: np.ndarray, members: np.ndarray, limit: int = 3) -> str:
    """"{n0g0, …} 8 ranks; {n1g0, …} 8 ranks; …" for the first few regions holding ranks."""
    parts = []
    for r in np.unique(region[members])[:limit].tolist():
        inside = np.flatnonzero(region == r)
        ranks = int(np.isin(members, inside).sum())
        parts.append(f"{{{machine.label(int(inside[0]))}, …}} {ranks} rank(s)" if inside.size > 1
                     else f"{{{machine.label(int(inside[0]))}}}")
    more = np.unique(region[members]).size - limit
    return "; ".join(parts) + (f"; {more} more" if more > 0 else "")


def _node_list(machine: Machine, nodes: np.ndarray, limit: int = 4) -> str:
    shown = ", ".join(machine.label(int(v)) for v in nodes[:limit])
    return (shown + (", …" if nodes.size > limit else "")) or "nothing"
