"""Instances and checks shared by the timed-solver tests."""
from __future__ import annotations

from optcoll.collectives.builtins import make_collective
from optcoll.instances.instance import Instance, TimeModel
from optcoll.machines import generators as G
from optcoll.machines.machine import Machine
from solver_checks import close, verified  # noqa: F401  (re-exported to the tests)

BW = 1e9  # bytes/s
LAT = 1e-6  # s
MB = 1e6


def instance(machine: Machine, kind: str = "allgather", chunks: int = 1, *, model: TimeModel = TimeModel(),
             ranks: list[int] | None = None, root: int | None = None, per_rank: float = MB) -> Instance:
    """``per_rank`` bytes per rank-slot (AllGather chunk bytes = per_rank / chunks)."""
    ranks = list(range(machine.num_npus)) if ranks is None else ranks
    size = per_rank * len(ranks) if kind not in ("broadcast", "reduce") else per_rank
    coll = make_collective(kind, ranks, size, chunks, root=root)
    tags = [f"{machine.name}-{kind}-C{chunks}"]
    tags += [f"root{root}"] if root is not None else []
    tags += [f"ranks{len(ranks)}"] if len(ranks) < machine.num_npus else []
    tags += [f"ports{model.send_ports}"] if model.send_ports else []
    tags += [model.occupancy] if model.occupancy != "link" else []
    return Instance("-".join(tags), machine, coll, model)


def link_time(inst: Instance, link: int = 0) -> float:
    m = inst.machine
    return float(m.link_latency[link] + inst.collective.chunk_bytes / m.link_bandwidth[link])


#: Small instances on which every solver and formulation must agree (seconds each).
def small_instances() -> list[Instance]:
    fc = G.fully_connected(4, BW, LAT)
    return [
        instance(G.ring(3, BW, LAT)),
        instance(G.ring(5, BW, LAT, bidirectional=False)),
        instance(G.ring(6, BW, LAT), chunks=2),
        instance(G.line(4, BW, LAT)),
        instance(G.switch(4, BW, LAT)),
        instance(G.switch(4, BW, LAT, multicast=True)),
        instance(fc),
        instance(fc, model=TimeModel(send_ports=1, recv_ports=1)),
        instance(G.hypercube(3, BW, LAT)),
        instance(G.dgx1()),
        instance(G.torus([3, 3], BW, LAT)),
        instance(G.mesh([2, 3], [BW, 1.5 * BW], [LAT, LAT])),
        instance(G.ring(4, BW, LAT), "reducescatter"),
        instance(G.line(4, BW, LAT), "broadcast", 2, root=1),
        instance(G.mesh([2, 3], BW, LAT), "gather", root=0),
        instance(G.ring(4, BW, LAT), "alltoall"),
        instance(G.torus([3, 3], BW, LAT), ranks=[0, 4, 8]),
        instance(G.ring(4, BW, 0.5 * MB / BW), model=TimeModel(occupancy="serialization")),
    ]
