"""The entry bound (docs/model.md §6, a per-rank ingress bound for hierarchical networks): chunks from
outside a group of well-connected nodes (a server, a ring of an ASTRA-sim dimension) queue on the
few slow links into the group, and the ones that enter last still have to reach every member.

For a node v in a group S and the chunks v needs: let y of them first reach v over v's own links
from outside S (the *direct* links D). Those y arrive one occupancy apart on D, none before its
sender can hold a chunk: T ≥ kth(y; D). Every other chunk first reaches v over v's links from
inside S (the *inner* links I). A chunk that some node of S holds at t = 0 cannot reach v before
its shortest delivery time; a chunk held only outside S first entered S over a link e into S whose
head h is not v (else v had it earlier, over D), as one of e's transfers (distinct chunks take
distinct transfers, the j-th no earlier than f_e + j·busy_e), and then needs dist(h, v) more. So
for every threshold ρ at most ``below(ρ)`` chunks first reach v over I before ρ, and the other
need − y − below(ρ) arrive over I no earlier than ρ (``release.late_ingress``). T is at least the
least, over y, of the larger of the two bounds.

Assumptions: none beyond the timed model (multicast, in-network reduction and port limits only
remove schedules or are not used by the argument; reduction costs are left out, which only lowers
the bound). Combining collectives with one destination per chunk are bounded through their dual
on the reversed machine (a reduction chain run backwards is a delivery chain, link intervals
mirror), as the cut bound does. The groups are the connected components of the links at least as
fast as each bandwidth level of the machine; any group gives a valid bound, these make it tight
on servers joined by NICs and on ASTRA-sim dimensions.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from optcoll.bounds.bound import Bound, describe_nodes
from optcoll.bounds.families import bandwidth_levels
from optcoll.bounds.paths import holder_groups
from optcoll.bounds.release import kth_arrivals, late_ingress
from optcoll.collectives.collective import ChunkSets, Collective
from optcoll.graphs.shortest import distances
from optcoll.instances.instance import TimeModel
from optcoll.machines.machine import Machine
from optcoll.units import format_bandwidth, format_time

#: Machines with more nodes are skipped (all-pairs delivery times would not fit comfortably).
MAX_NODES = 2048
#: Entry instants considered per (node, group): beyond this the group is skipped for that node.
MAX_ENTRIES = 2_000_000


@dataclass(frozen=True, eq=False)
class _Spread:
    """The non-combining spread problem the bound reasons about: who holds each chunk at t = 0 and
    which (chunk, node) pairs need a delivery, on the machine the transfers run on."""

    machine: Machine
    holders: ChunkSets
    need_chunk: np.ndarray
    need_node: np.ndarray
    dual: bool


def _spread(machine: Machine, collective: Collective) -> _Spread | None:
    chunk, node = collective.needs
    if not collective.combining:
        return _Spread(machine, collective.pre, chunk, node, False)
    if np.any(collective.post.counts()[np.unique(chunk)] != 1):
        return None  # several destinations per chunk (AllReduce): bounded through its parts
    # Dual: the destination holds the chunk, every other contributor needs it.
    pre_c, pre_v = collective.pre.pairs()
    dest = np.full(collective.num_chunks, -1, dtype=np.int64)
    dest[chunk] = node
    keep = (dest[pre_c] >= 0) & (pre_v != dest[pre_c])
    return _Spread(machine.reversed(), collective.post, pre_c[keep], pre_v[keep], True)


def _groups(machine: Machine) -> list[tuple[float, np.ndarray]]:
    """(bandwidth level, component label per node) for each level but the slowest (at most
    ``families.BANDWIDTH_LEVELS`` of them)."""
    levels = bandwidth_levels(np.unique(machine.link_bandwidth)[1:]).tolist()
    if not levels:
        return []
    from scipy.sparse import csr_array  # only a machine with several bandwidth levels has groups
    from scipy.sparse.csgraph import connected_components

    n, found = machine.num_nodes, []
    for level in levels:
        fast = machine.link_bandwidth >= level
        graph = csr_array((np.ones(int(fast.sum())), (machine.link_src[fast], machine.link_dst[fast])), shape=(n, n))
        _, labels = connected_components(graph, directed=False)
        found.append((level, labels))
    return found


@dataclass(frozen=True)
class _Witness:
    value: float
    node: int
    level: float
    inside: tuple[int, ...]
    need: int
    direct: int
    late: int
    threshold: float


def _node_bound(need: int, inner_release: np.ndarray, outer_release: np.ndarray, entries: np.ndarray,
                direct_first: np.ndarray, direct_busy: np.ndarray, ready: np.ndarray,
                inner_delay: np.ndarray, inner_busy: np.ndarray) -> tuple[float, int, int, float]:
    """min over y of max(kth(y; direct links), inner-link bound with y direct); returns the value,
    the y, the late count and the threshold that give it. Arrays of instants are sorted."""
    outer_cap = entries[: outer_release.size]
    rho = np.unique(np.concatenate([inner_release, outer_cap, outer_release]))
    below = (np.searchsorted(inner_release, rho, "left")
             + np.minimum(np.searchsorted(outer_cap, rho, "left"), np.searchsorted(outer_release, rho, "left")))

    def inner(y: int) -> tuple[float, int]:
        return late_ingress(rho, need - y - below, ready, inner_delay, inner_busy)

    def direct(y: int) -> float:
        return float(kth_arrivals(np.array([y]), direct_first[None, :], direct_busy)[0]) if y else 0.0

    lo, hi = 0, need + 1  # least y with direct(y) >= inner(y), need + 1 when none
    while lo < hi:
        mid = (lo + hi) // 2
        if direct(mid) >= inner(mid)[0]:
            hi = mid
        else:
            lo = mid + 1
    options = []
    if lo <= need:
        options.append((direct(lo), lo, inner(lo)[1]))
    if lo > 0:
        value, i = inner(lo - 1)
        options.append((value, lo - 1, i))
    value, y, i = min(options, key=lambda item: item[0])
    late = int(need - y - below[i]) if i >= 0 else 0
    return value, y, late, float(rho[i]) if i >= 0 else 0.0


def entry_bound(machine: Machine, collective: Collective, model: TimeModel) -> Bound | None:
    """The entry bound (module docstring) over every needing NPU and every group level; None when
    the machine has one bandwidth level (no groups), is too large, or the collective has no dual."""
    if machine.num_nodes > MAX_NODES or collective.needs[0].size == 0 or len(_groups(machine)) == 0:
        return None
    sp = _spread(machine, collective)
    if sp is None or sp.need_chunk.size == 0:
        return None
    m = sp.machine
    timing = model.link_timing(m, collective.chunk_bytes)
    delay, busy = timing.delay, timing.busy
    dist = distances(m.num_nodes, m.link_src, m.link_dst, delay, np.arange(m.num_nodes))
    chunks = np.unique(sp.need_chunk)
    group_of, members = holder_groups(sp.holders, chunks)
    group = np.full(collective.num_chunks, -1, dtype=np.int64)
    group[chunks] = group_of
    earliest = np.stack([dist[h].min(axis=0) for h in members])  # holder group × node
    best: _Witness | None = None
    cache: dict[bytes, tuple[float, int, int, float]] = {}
    for level, labels in _groups(m):
        for v in np.unique(sp.need_node).tolist():
            inside = labels == labels[v]
            if inside.all():
                continue
            groups = np.unique(group[sp.need_chunk[sp.need_node == v]])
            counts = np.bincount(group[sp.need_chunk[sp.need_node == v]], minlength=len(members))[groups]
            outer = np.array([not inside[members[g]].any() for g in groups.tolist()])
            release = earliest[groups, v]
            inner_release = np.sort(np.repeat(release[~outer], counts[~outer]))
            outer_release = np.sort(np.repeat(release[outer], counts[outer]))
            links = m.in_links[v]
            from_out = ~inside[m.link_src[links]]
            d, i = links[from_out], links[~from_out]
            enter = np.flatnonzero(~inside[m.link_src] & inside[m.link_dst] & (m.link_dst != v))
            n_out = int(outer_release.size)
            if enter.size * n_out > MAX_ENTRIES:
                continue
            entries = np.zeros(0)
            if n_out and outer.any():
                first = delay[enter] + earliest[groups[outer]][:, m.link_src[enter]].min(axis=0)
                grid = first[:, None] + busy[enter][:, None] * np.arange(n_out)[None, :]
                entries = np.sort((grid + dist[m.link_dst[enter], v][:, None]).ravel())[:n_out]
            direct_first = delay[d] + earliest[groups][:, m.link_src[d]].min(axis=0)
            ready = earliest[groups][:, m.link_src[i]].min(axis=0)
            args = (int(counts.sum()), inner_release, outer_release, entries, direct_first, busy[d],
                    ready, delay[i], busy[i])
            key = b"|".join(np.asarray(a, dtype=float).tobytes() for a in args)
            if key not in cache:
                cache[key] = _node_bound(*args)
            value, y, late, rho = cache[key]
            if best is None or value > best.value:
                best = _Witness(value, v, level, tuple(np.flatnonzero(inside).tolist()), args[0], y, late, rho)
    if best is None or best.value <= 0:
        return None
    way = " (on the reversed machine: the dual of the reduction)" if sp.dual else ""
    return Bound("entry", best.value,
                 f"{m.label(best.node)} needs {best.need} chunk(s){way}; group "
                 f"{describe_nodes(m, best.inside, collective.ranks)} joined by links of at least "
                 f"{format_bandwidth(best.level)}: at best {best.direct} of them come over links from "
                 f"outside the group, and then {best.late} still reach it over links inside the group "
                 f"no earlier than {format_time(best.threshold)}; the last "
                 f"cannot arrive before {format_time(best.value)}", False)
