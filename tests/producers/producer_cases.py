"""Small machines and instances shared by the producer tests."""
from __future__ import annotations

import random

from optcoll.collectives.builtins import make_collective
from optcoll.instances.instance import Instance, TimeModel
from optcoll.machines import generators as g
from optcoll.machines.machine import Machine, MachineBuilder
from optcoll.verify import Verification, verify

GIB = 2.0**30


def instance(machine: Machine, kind: str, size: float = 1e6, chunks_per_rank: int = 1,
             root: int | None = None, ranks: list[int] | None = None,
             model: TimeModel = TimeModel()) -> Instance:
    members = list(range(machine.num_npus)) if ranks is None else ranks
    coll = make_collective(kind, members, size, chunks_per_rank, root)
    return Instance(f"{machine.name}-{kind}", machine, coll, model)


def verified(inst: Instance, schedule) -> Verification:
    """The shared verifier's verdict; fails the test with the violation when invalid."""
    result = verify(inst.machine, inst.collective, schedule, inst.model)
    assert result.valid, result.violation.message if result.violation else "invalid"
    return result


def link_time(inst: Instance) -> float:
    """τ = α + b/B of the first link (the machines these tests use are homogeneous)."""
    return float((inst.machine.link_latency + inst.collective.chunk_bytes / inst.machine.link_bandwidth)[0])


def sharp_cluster(nodes: int, gpus: int, bandwidth: float = 10 * GIB) -> Machine:
    """``nodes`` servers of ``gpus`` GPUs on an NVLS switch (multicast and reduce), one NIC per
    GPU to a spine that reduces (SHARP-like): every in-network feature NCCL can use."""
    b = MachineBuilder(f"sharp{nodes}x{gpus}", nodes * gpus)
    spine = b.add_switch("spine", reduce=True)
    for k in range(nodes):
        fabric = b.add_switch(f"n{k}.nvswitch", multicast=True, reduce=True)
        for v in range(k * gpus, (k + 1) * gpus):
            b.add_link(v, fabric, bandwidth=4 * bandwidth, latency=1e-6, bidirectional=True)
            b.add_link(v, spine, bandwidth=bandwidth, latency=2e-6, bidirectional=True)
    return b.build()


def small_machines() -> list[Machine]:
    """A spread of models: rings, torus, mesh with unequal links, hypercube, DGX-1 (double links),
    plain / multicast / reducing switches, a multi-node cluster with shared NICs, an ASTRA-sim
    network, a torus with failed links, and NVLS switches with a reducing spine."""
    bw = 10 * GIB
    return [
        g.ring(5, bw, 1e-6),
        g.ring(4, bw, 1e-6, bidirectional=False),
        g.torus([4, 4], bw, 1e-6),
        g.mesh([3, 3], [bw, 2 * bw], [1e-6, 3e-6]),
        g.hypercube(3, bw, 1e-6),
        g.dgx1(),
        g.switch(4, bw, 1e-6),
        g.switch(4, bw, 1e-6, multicast=True),
        g.switch(4, bw, 1e-6, reduce=True),
        g.multinode(2, 4, nvlink_bandwidth=100e9, nvlink_latency=1e-6, nic_bandwidth=25e9,
                    nic_latency=2e-6, gpus_per_nic=2),
        g.astra([g.AstraDim("Ring", 4, bw, 1e-6), g.AstraDim("Switch", 3, bw / 2, 2e-6)]),
        g.torus([3, 3], bw, 1e-6).without(links=[0, 5]),
        g.switch(4, bw, 1e-6, multicast=True, reduce=True),
        sharp_cluster(2, 2),
    ]


MODELS = [TimeModel(), TimeModel(occupancy="serialization"), TimeModel(send_ports=1, recv_ports=1),
          TimeModel(reduce_cost=1e-12)]
ROOTED = {"broadcast", "reduce", "gather", "scatter"}
KINDS = ["allgather", "reducescatter", "allreduce", "broadcast", "reduce", "gather", "scatter",
         "alltoall"]


def random_machine(rng: random.Random, max_npus: int = 5) -> Machine:
    """A small strongly connected machine: a ring backbone (one way or both), a few random extra
    links, up to two switches of random kinds (plain, multicast, reducing, both) on random NPUs;
    latencies and bandwidths vary per link, so α and b/B differ from link to link."""
    n = rng.randint(2, max_npus)
    b = MachineBuilder(f"random{n}", n)

    def link() -> dict:
        return {"bandwidth": rng.choice([1, 2, 4]) * GIB, "latency": rng.choice([0.0, 1e-6, 5e-6, 2e-5])}

    both = rng.random() < 0.5
    for i in range(n):
        b.add_link(i, (i + 1) % n, bidirectional=both, **link())
    for _ in range(rng.randint(0, n)):
        u, v = rng.sample(range(n), 2)
        b.add_link(u, v, **link())
    for k in range(rng.randint(0, 2)):
        sw = b.add_switch(f"sw{k}", multicast=rng.random() < 0.4, reduce=rng.random() < 0.3)
        for v in rng.sample(range(n), rng.randint(2, n)):
            b.add_link(v, sw, bidirectional=True, **link())
    return b.build()
