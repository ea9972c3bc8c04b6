"""Symmetry decomposition for servers joined by rails (issue 16; docs/model.md §6: a verified
schedule whose gap to the global bound is proven, not a claim of optimality).

Servers are the connected groups of NPUs over the fastest links (all of one size, at least two);
a rail is the r-th NPU of every server (rail-optimized clusters: GPU g of every server on leaf g). For an AllGather-shaped problem (each chunk one
holder, needed by every other NPU; the dual of a ReduceScatter is one) the schedule is stitched
from two kinds of sub-problems:

1. *one rail*: the AllGather among the rail's NPUs on the rail's own part of the network, solved
   by the exact timed solver once per class of identical rails and replicated over the class;
2. *one server*: every chunk that reaches an NPU of a server (its own chunks at t = 0, the rail
   deliveries when they arrive) goes on to the server's other NPUs along a shortest-delay tree of
   the server's fabric (a multicast switch sends one arrival on to all; a plain switch forwards
   each arrival once, so a path through it gets transfers of its own).

The transfers of both, in the order of their ideal start times, are retimed on the whole machine
by the shared list scheduler (``listsched.retime``), so contention between sub-problems is paid
in full; the caller verifies the result and compares it with the global lower bound.
"""
from __future__ import annotations

import numpy as np
from scipy.sparse import csr_array
from scipy.sparse.csgraph import connected_components, shortest_path

from optcoll.collectives.builtins import make_collective
from optcoll.instances.instance import Instance
from optcoll.machines.machine import Machine, MachineBuilder
from optcoll.producers.base import NotApplicable
from optcoll.producers.exact.timed.listsched import Transfers
from optcoll.producers.exact.timed.problem import TimedProblem

#: Rail sub-problems larger than this many NPUs are not solved (one rail of a 512-GPU cluster
#: has 64).
MAX_RAIL_NPUS = 256


def servers(machine: Machine) -> np.ndarray:
    """Server index per node (−1 for network nodes): the components over the links of the lowest
    bandwidth level at which NPUs fall into at least two components of one size ≥ 2 (in NPUs and
    in nodes: a component that took in the network is not a server)."""
    n = machine.num_nodes
    for level in np.unique(machine.link_bandwidth)[1:].tolist():
        fast = machine.link_bandwidth >= level
        graph = csr_array((np.ones(int(fast.sum())), (machine.link_src[fast], machine.link_dst[fast])),
                          shape=(n, n))
        _, labels = connected_components(graph, directed=False)
        npu_labels, sizes = np.unique(labels[: machine.num_npus], return_counts=True)
        nodes = np.bincount(labels)[npu_labels]
        if npu_labels.size >= 2 and sizes.min() == sizes.max() >= 2 and nodes.min() == nodes.max():
            index = np.full(labels.max() + 1, -1)
            index[npu_labels] = np.arange(npu_labels.size)
            return index[labels]
    raise NotApplicable("no servers: the NPUs do not fall into groups of one size over faster links")


def rails(machine: Machine, server: np.ndarray) -> list[np.ndarray]:
    """The r-th NPU of every server (in id order) for each r: GPU g of every node, which is rail
    g's in a rail-optimized cluster; NPUs without a link to the network are refused."""
    network = server < 0
    for v in range(machine.num_npus):
        if not network[machine.link_dst[machine.out_links[v]]].any():
            raise NotApplicable(f"{machine.label(v)} has no link to the network")
    members = [np.flatnonzero(server[: machine.num_npus] == s) for s in range(int(server.max()) + 1)]
    return [np.array([m[r] for m in members]) for r in range(members[0].size)]


def _rail_machine(machine: Machine, rail: np.ndarray, server: np.ndarray) -> tuple[Machine, np.ndarray, bytes]:
    """The rail's NPUs and the network nodes next to them (all network nodes when those do not
    join the rail), with every link among them: (sub-machine, full link id per sub link, the
    signature shared by identical rails)."""
    network = np.flatnonzero(server < 0)
    near = np.unique(np.concatenate([machine.link_dst[machine.out_links[v]] for v in rail.tolist()]))
    for switches in (np.intersect1d(near, network), network):
        keep = np.full(machine.num_nodes, -1)
        keep[rail] = np.arange(rail.size)
        keep[switches] = rail.size + np.arange(switches.size)
        links = np.flatnonzero((keep[machine.link_src] >= 0) & (keep[machine.link_dst] >= 0))
        src, dst = keep[machine.link_src[links]], keep[machine.link_dst[links]]
        graph = csr_array((np.ones(links.size), (src, dst)), shape=(keep.max() + 1,) * 2)
        if connected_components(graph, directed=True, connection="strong")[0] == 1:
            break
    else:
        raise NotApplicable("a rail's NPUs are not joined by the network")
    builder = MachineBuilder("rail", int(rail.size), npu_labels=[machine.label(v) for v in rail.tolist()])
    handles: list[int | str] = list(range(rail.size))
    for s in switches.tolist():
        spec = machine.switch(s)
        handles.append(builder.add_switch(spec.label, multicast=spec.multicast, reduce=spec.reduce))
    for e, u, v in zip(links.tolist(), src.tolist(), dst.tolist()):
        builder.add_link(handles[u], handles[v], bandwidth=float(machine.link_bandwidth[e]),
                         latency=float(machine.link_latency[e]))
    flags = [(machine.switch(s).multicast, machine.switch(s).reduce) for s in switches.tolist()]
    signature = b"|".join([src.tobytes(), dst.tobytes(), machine.link_bandwidth[links].tobytes(),
                           machine.link_latency[links].tobytes(), repr(flags).encode()])
    return builder.build(), links, signature


def allgather_holders(problem: TimedProblem) -> np.ndarray:
    """Holder per chunk, when each chunk has one NPU holder and every other NPU needs it."""
    counts = problem.holders.counts()
    npus = problem.machine.num_npus
    if np.any(counts != 1) or problem.need_chunk.size != problem.num_chunks * (npus - 1):
        raise NotApplicable("stitching needs an AllGather-shaped problem over every NPU")
    holder = problem.holders.nodes[problem.holders.indptr[:-1]]
    if holder.max() >= npus or np.any(np.bincount(holder, minlength=npus) != problem.num_chunks // npus):
        raise NotApplicable("stitching needs the same number of chunks at every NPU")
    return holder


def _rail_transfers(problem: TimedProblem, instance: Instance, holder: np.ndarray, server: np.ndarray,
                    solve_rail) -> tuple[list[Transfers], dict[tuple[int, int], float]]:
    """Phase 1: per rail, the solved rail AllGather mapped to the machine, and when each NPU
    first holds each chunk after it."""
    machine = problem.machine
    per_npu = problem.num_chunks // machine.num_npus
    chunks_of = np.argsort(holder, kind="stable").reshape(machine.num_npus, per_npu)
    solved: dict[bytes, object] = {}
    out: list[Transfers] = []
    arrival: dict[tuple[int, int], float] = {}
    for rail in rails(machine, server):
        if rail.size > MAX_RAIL_NPUS:
            raise NotApplicable(f"a rail of {rail.size} NPUs is more than {MAX_RAIL_NPUS}")
        sub_machine, links, signature = _rail_machine(machine, rail, server)
        if signature not in solved:
            coll = make_collective("allgather", range(rail.size), instance.collective.chunk_bytes * rail.size * per_npu,
                                   per_npu)
            solved[signature] = (coll, solve_rail(Instance("rail", sub_machine, coll, instance.model)))
        coll, schedule = solved[signature]
        sub_holder = coll.pre.nodes[coll.pre.indptr[:-1]]
        rank_in_holder = np.argsort(np.argsort(sub_holder, kind="stable"), kind="stable") % per_npu
        chunk = chunks_of[rail[sub_holder[schedule.chunk]], rank_in_holder[schedule.chunk]]
        link = links[schedule.link]
        start = schedule.start.astype(float)
        out.append(Transfers(chunk, link, start))
        for c, e, t in zip(chunk.tolist(), link.tolist(), (start + problem.delay[link]).tolist()):
            v = int(problem.dst[e])
            if v < machine.num_npus and t < arrival.get((c, v), np.inf):
                arrival[(c, v)] = t
    return out, arrival


def _server_transfers(problem: TimedProblem, holder: np.ndarray, server: np.ndarray,
                      arrival: dict[tuple[int, int], float]) -> Transfers:
    """Phase 2: each chunk from the NPU of each server that holds it first to the server's other
    NPUs, along shortest-delay trees of the server's own links."""
    machine = problem.machine
    inside = (server[problem.src] >= 0) & (server[problem.src] == server[problem.dst])
    links = np.flatnonzero(inside)
    n = machine.num_nodes
    order = np.lexsort((problem.delay[links], problem.dst[links], problem.src[links]))
    links = links[order]
    first = np.r_[True, (np.diff(problem.src[links]) != 0) | (np.diff(problem.dst[links]) != 0)]
    links = links[first]  # the fastest of parallel links
    graph = csr_array((problem.delay[links], (problem.src[links], problem.dst[links])), shape=(n, n))
    link_of = {(int(problem.src[e]), int(problem.dst[e])): int(e) for e in links.tolist()}
    entry: dict[tuple[int, int], tuple[int, float]] = {}  # (chunk, server) -> (npu, time)
    for c, v in enumerate(holder.tolist()):
        entry[(c, int(server[v]))] = (v, 0.0)
    for (c, v), t in arrival.items():
        key = (c, int(server[v]))
        if t < entry.get(key, (-1, np.inf))[1]:
            entry[key] = (v, t)
    sources = np.unique([v for v, _ in entry.values()])
    _, pred = shortest_path(graph, method="D", directed=True, indices=sources, return_predecessors=True)
    row = {int(s): i for i, s in enumerate(sources.tolist())}
    members = [np.flatnonzero(server[: machine.num_npus] == s) for s in range(int(server.max()) + 1)]
    rows: list[tuple[int, int, float]] = []
    for (c, s), (v, t0) in sorted(entry.items()):
        # The others in turn from the one after v, so that entries sending at once aim at
        # different NPUs; copies of c on one link (through a plain switch) follow each other.
        group = members[s]
        others = np.roll(group, -int(np.searchsorted(group, v)))[1:]
        shared: dict[int, float] = {}  # link -> nominal start, for links into copy nodes
        free: dict[int, float] = {}  # link -> when its next copy of c can start
        for u in others.tolist():
            if (c, u) in arrival:
                continue
            path, x = [], u
            while x != v:
                p = int(pred[row[v], x])
                if p < 0:
                    raise NotApplicable(f"{machine.label(u)} cannot be reached inside its server")
                path.append(link_of[(p, x)])
                x = p
            t = t0
            for e in reversed(path):
                if problem.copy[problem.dst[e]] and e in shared:
                    t = shared[e] + float(problem.delay[e])
                    continue
                t = max(t, free.get(e, t))
                free[e] = t + float(problem.busy[e])
                if problem.copy[problem.dst[e]]:
                    shared[e] = t
                rows.append((c, e, t))
                t += float(problem.delay[e])
    cols = list(zip(*rows)) if rows else [(), (), ()]
    return Transfers(np.array(cols[0], dtype=np.int64), np.array(cols[1], dtype=np.int64),
                     np.array(cols[2], dtype=float))


def stitched(instance: Instance, problem: TimedProblem, solve_rail) -> Transfers:
    """The stitched schedule's transfers with their ideal starts (module docstring); the caller
    retimes them. ``solve_rail(instance)`` returns a schedule of a rail sub-instance. Raises
    NotApplicable when the machine has no servers and rails or the problem is not AllGather-shaped."""
    holder = allgather_holders(problem)
    server = servers(problem.machine)
    phase1, arrival = _rail_transfers(problem, instance, holder, server, solve_rail)
    phase2 = _server_transfers(problem, holder, server, arrival)
    parts = phase1 + [phase2]
    return Transfers(np.concatenate([p.chunk for p in parts]), np.concatenate([p.link for p in parts]),
                     np.concatenate([p.start for p in parts]))
