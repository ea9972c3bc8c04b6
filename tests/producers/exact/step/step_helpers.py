"""Instances and checks shared by the step-solver tests."""
from __future__ import annotations

import networkx as nx

from optcoll.collectives.builtins import make_collective, make_custom
from optcoll.collectives.collective import Collective
from optcoll.instances.instance import Instance, TimeModel
from optcoll.machines import generators as G
from optcoll.machines.machine import Machine, MachineBuilder
from solver_checks import close, verified  # noqa: F401  (re-exported to the tests)

BW = 1e9  # bytes/s
LAT = 1e-6  # s: with 1 kB per rank-slot a round (b/B) costs as much as a step's latency
STEP = TimeModel(kind="step")


def instance(machine: Machine, kind: str = "allgather", chunks: int = 1, *, root: int | None = None,
             ranks: list[int] | None = None, per_rank: float = 1e3) -> Instance:
    ranks = list(range(machine.num_npus)) if ranks is None else ranks
    size = per_rank if kind in ("broadcast", "reduce") else per_rank * len(ranks)
    coll = make_collective(kind, ranks, size, chunks, root=root)
    tag = f"C{chunks}" + (f"-root{root}" if root is not None else "")
    tag += f"-ranks{len(ranks)}" if len(ranks) < machine.num_npus else ""
    return named(machine, coll, tag)


def named(machine: Machine, coll: Collective, tag: str = "") -> Instance:
    flags = "".join(f"-{flag}" for flag in ("multicast", "reduce")
                    if any(getattr(s, flag) for s in machine.switches))
    return Instance(f"{machine.name}{flags}-{coll.kind}-{tag}".rstrip("-"), machine, coll, STEP)


def random_machine(n: int, extra: int, seed: int) -> Machine:
    """A connected random graph: a random spanning tree plus ``extra`` random cables."""
    tree = nx.random_labeled_tree(n, seed=seed)
    graph = nx.Graph(tree)
    more = nx.gnm_random_graph(n, extra, seed=seed + 1)
    graph.add_edges_from(more.edges())
    b = MachineBuilder(f"random{n}s{seed}", n)
    for u, v in sorted(graph.edges()):
        b.add_link(u, v, bandwidth=BW, latency=LAT, bidirectional=True)
    return b.build()


def hetero_ring(n: int) -> Machine:
    """A bidirectional ring whose even cables have twice the bandwidth (w = 2)."""
    b = MachineBuilder(f"hetring{n}", n)
    for i in range(n):
        b.add_link(i, (i + 1) % n, bandwidth=BW * (2 if i % 2 == 0 else 1), latency=LAT, bidirectional=True)
    return b.build()


def all_to_next(machine: Machine) -> Instance:
    n = machine.num_npus
    coll = make_custom(range(n), [[i] for i in range(n - 1)], [[i + 1] for i in range(n - 1)], 1e3,
                       name="alltonext")
    return named(machine, coll)


def agreement_instances() -> list[Instance]:
    """Small instances on which CP-SAT, the MIP solvers and z3 must agree (seconds each)."""
    fc4 = G.fully_connected(4, BW, LAT)
    return [
        instance(G.ring(3, BW, LAT)),
        instance(G.ring(4, BW, LAT), chunks=2),
        instance(G.ring(5, BW, LAT)),
        instance(G.ring(5, BW, LAT, bidirectional=False)),
        instance(G.ring(6, BW, LAT, bidirectional=False)),
        instance(G.ring(6, BW, LAT)),
        instance(G.ring(8, BW, LAT)),
        instance(G.ring(6, BW, LAT), ranks=[0, 2, 4]),
        instance(G.line(3, BW, LAT), chunks=2),
        instance(G.line(4, BW, LAT)),
        instance(G.line(5, BW, LAT), "broadcast", chunks=2, root=0),
        instance(G.line(6, BW, LAT)),
        instance(G.line(4, BW, LAT), "reduce", root=1),
        instance(G.switch(4, BW, LAT)),
        instance(G.switch(3, BW, LAT), chunks=2),
        instance(G.switch(4, BW, LAT, multicast=True)),
        instance(G.switch(5, BW, LAT), "scatter", root=0),
        instance(G.switch(4, BW, LAT), "reducescatter"),
        instance(fc4),
        instance(fc4, "alltoall"),
        instance(G.fully_connected(5, BW, LAT)),
        instance(G.fully_connected(6, BW, LAT), "gather", root=0),
        instance(G.fully_connected(8, BW, LAT), "broadcast", chunks=3, root=0),
        instance(G.hypercube(3, BW, LAT)),
        instance(G.hypercube(3, BW, LAT), "broadcast", chunks=2, root=0),
        instance(G.dgx1()),
        instance(G.dgx1(), "scatter", root=0),
        instance(G.mesh([3, 3], BW, LAT)),
        instance(G.torus([3, 3], BW, LAT)),
        instance(random_machine(5, 2, seed=1)),
        instance(random_machine(6, 3, seed=2), "broadcast", chunks=2, root=0),
        all_to_next(random_machine(6, 2, seed=3)),
        instance(hetero_ring(4)),
        instance(G.ring(4, BW, LAT), "reducescatter"),
        instance(G.ring(3, BW, LAT), "allreduce"),
        instance(G.multinode(2, 2, nvlink_bandwidth=2 * BW, nvlink_latency=LAT, nic_bandwidth=BW,
                             nic_latency=LAT)),
    ]
