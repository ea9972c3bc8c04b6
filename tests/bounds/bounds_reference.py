"""Test helpers: small random machines, and a simple, obviously valid schedule builder.

The builder routes every needed (chunk, destination) pair along a fewest-hop path from the
chunk's nearest initial holder, store-and-forward, appending each hop to its link's queue (and to
the sender's and receiver's port queues when ports are limited): every transfer starts after the
sender holds the chunk and after everything queued before it on the same link/ports has finished.
Combining collectives are built as their dual on the reversed graph and run backwards (SCCL's
inversion); AllReduce is ReduceScatter then AllGather. Its schedules are far from optimal — they
only have to be valid, which the shared verifier confirms.
"""
from __future__ import annotations

import numpy as np
from scipy.sparse import csr_array
from scipy.sparse.csgraph import shortest_path

from optcoll.collectives.builtins import dual, split_allreduce
from optcoll.collectives.collective import Collective
from optcoll.instances.instance import TimeModel
from optcoll.machines.machine import Machine, MachineBuilder
from optcoll.schedules.schedule import REDUCE, Schedule, from_arrays

BANDWIDTHS = (1e9, 2e9, 3e9, 25e9, 50 * 2.0**30)
LATENCIES = (0.0, 5e-7, 1e-6)


def random_machine(rng: np.random.Generator, npus: int, switches: int = 0, extra: int = 3,
                   bidirectional: bool = True) -> Machine:
    """A strongly connected random multigraph: a random cycle through every node (both ways when
    ``bidirectional``), plus ``extra`` random links (some parallel). Switches multicast."""
    b = MachineBuilder("random", npus)
    handles: list[int | str] = list(range(npus))
    handles += [b.add_switch(f"sw{i}", multicast=True) for i in range(switches)]
    order = rng.permutation(len(handles))

    def link(u, v, both):
        b.add_link(handles[u], handles[v], bandwidth=float(rng.choice(BANDWIDTHS)),
                   latency=float(rng.choice(LATENCIES)), bidirectional=both)

    for i in range(len(order)):
        link(order[i], order[(i + 1) % len(order)], bidirectional and len(order) > 2)
    for _ in range(extra):
        u, v = rng.choice(len(handles), size=2, replace=False)
        link(u, v, bool(rng.integers(2)))
    return b.build()


def _hop_paths(machine: Machine):
    n = machine.num_nodes
    graph = csr_array((np.ones(machine.num_links), (machine.link_src, machine.link_dst)), shape=(n, n))
    return shortest_path(graph, unweighted=True, directed=True, return_predecessors=True)


def forward_schedule(machine: Machine, collective: Collective, model: TimeModel) -> Schedule:
    """Non-combining collectives: the queue-based store-and-forward schedule described above."""
    assert not collective.combining
    limited = model.send_ports is not None or model.recv_ports is not None
    assert not limited or (model.send_ports, model.recv_ports) == (1, 1), "ports: None or one-port"
    hops, pred = _hop_paths(machine)
    b = collective.chunk_bytes
    tau = (machine.link_latency + b / machine.link_bandwidth)
    occ = tau if model.occupancy == "link" else b / machine.link_bandwidth
    link_free = np.zeros(machine.num_links)
    send_free = np.zeros(machine.num_nodes)
    recv_free = np.zeros(machine.num_nodes)
    held: dict[tuple[int, int], float] = {}
    for c in range(collective.num_chunks):
        for h in collective.pre.of(c).tolist():
            held[(c, h)] = 0.0
    rows: list[tuple[int, int, float]] = []
    for c, d in zip(*(a.tolist() for a in collective.needs)):
        if (c, d) in held:
            continue
        holders = collective.pre.of(c)
        h = int(holders[np.argmin(hops[holders, d])])
        path = [d]
        while path[-1] != h:
            path.append(int(pred[h, path[-1]]))
        path.reverse()
        t = held[(c, h)]
        for u, v in zip(path[:-1], path[1:]):
            reuse = not machine.is_switch(v) or machine.switch(v).multicast
            if reuse and (c, v) in held:
                t = held[(c, v)]
                continue
            ids = machine.links_between(u, v)
            e = min(ids, key=lambda i: max(link_free[i], t) + tau[i])
            start = max(t, link_free[e])
            if limited:
                start = max(start, send_free[u] if u < machine.num_npus else 0.0,
                            recv_free[v] if v < machine.num_npus else 0.0)
                send_free[u] = recv_free[v] = start + occ[e]
            link_free[e] = start + occ[e]
            t = start + tau[e]
            rows.append((c, e, start))
            if reuse:
                held[(c, v)] = t
    chunk, link, start = (np.array(col) for col in zip(*rows)) if rows else (np.zeros(0),) * 3
    return from_arrays(chunk, link, start)


def _backwards(forward: Schedule, machine: Machine, reversed_machine: Machine, chunk_bytes: float) -> Schedule:
    """Run a schedule on the reversed graph backwards in time, copies becoming reductions.
    Link ids are shared by a machine and its reversal (``Machine.reversed`` keeps the order)."""
    tau = (reversed_machine.link_latency + chunk_bytes / reversed_machine.link_bandwidth)
    end = float((forward.start + tau[forward.link]).max()) if len(forward) else 0.0
    start = np.maximum(end - forward.start - tau[forward.link], 0.0)  # float dust below 0
    return from_arrays(forward.chunk, forward.link, start, op=np.full(len(forward), REDUCE))


def reference_schedule(machine: Machine, collective: Collective, model: TimeModel) -> Schedule:
    """A valid schedule for any built-in collective (combining ones on all-rank machines only)."""
    if collective.kind == "allreduce":
        rs, ag = split_allreduce(collective)
        first = reference_schedule(machine, rs, model)
        tau = (machine.link_latency + collective.chunk_bytes / machine.link_bandwidth)
        offset = float((first.start + tau[first.link]).max()) if len(first) else 0.0
        return Schedule.concat(first, reference_schedule(machine, ag, model), offset)
    if not collective.combining:
        return forward_schedule(machine, collective, model)
    flipped = TimeModel(occupancy=model.occupancy, send_ports=model.recv_ports,
                        recv_ports=model.send_ports)
    backwards = machine.reversed()
    return _backwards(forward_schedule(backwards, dual(collective), flipped), machine, backwards,
                      collective.chunk_bytes)

