"""Every registered synthesizer on small random machines, under both occupancies with one send and
one receive port per NPU: every schedule it accepts to make verifies, and keeps its verdict and
time when its transfers are listed in other orders (docs/model.md, "Switches: forwarding
simultaneous arrivals"). The port limits under serialization occupancy once broke in every
producer built by time reversal: the reversed transfer's port window sits at the end of the dual's
(``SpreadProblem.port_shift``)."""
from __future__ import annotations

import random

import numpy as np
import pytest

from optcoll.instances.instance import TimeModel
from optcoll.machines.machine import MachineBuilder
from optcoll.producers.base import NotApplicable
from optcoll.producers.registry import SYNTHESIZERS
from optcoll.verify import verify
from producer_cases import GIB, instance, random_machine, verified

KINDS = ("allgather", "reducescatter", "allreduce", "alltoall", "broadcast", "reduce")


def relisted(inst, schedule, orders: int = 3, seed: int = 0) -> set[tuple[bool, float]]:
    """The verdicts and times of ``schedule`` listed in ``orders`` random orders."""
    rng = np.random.default_rng(seed)
    return {(r.valid, r.time) for r in (
        verify(inst.machine, inst.collective, schedule.take(rng.permutation(len(schedule))), inst.model)
        for _ in range(orders))}


@pytest.mark.parametrize("occupancy", ["link", "serialization"])
@pytest.mark.parametrize("seed", range(8))
def test_every_producer_verifies_on_random_one_port_machines(seed, occupancy):
    rng = random.Random(seed)
    machine = random_machine(rng)
    model = TimeModel(occupancy=occupancy, send_ports=1, recv_ports=1)
    produced = 0
    for kind in KINDS:
        inst = instance(machine, kind, 1e6, rng.randint(1, 2), 0 if kind in ("broadcast", "reduce") else None,
                        None, model)
        for name, synth in SYNTHESIZERS.items():
            try:
                schedule = synth(inst, seed=0)
            except NotApplicable:
                continue
            result = verified(inst, schedule)
            assert relisted(inst, schedule, seed=seed) == {(True, result.time)}, (name, kind)
            produced += 1
    assert produced > 20


def test_collnet_with_a_nic_per_gpu_counts_every_contribution_once():
    """Each GPU has its own NIC to the reducing network switch and the node's own switch is slow:
    the members' reductions into their head went through the network switch (its shortest path),
    whose partial of the chunk the relayed copy replaced, and the head's partial then counted the
    members twice."""
    b = MachineBuilder("collnet2x2", 4)
    spine = b.add_switch("spine", reduce=True)
    for k in range(2):
        fabric = b.add_switch(f"n{k}.nvswitch")
        for v in (2 * k, 2 * k + 1):
            b.add_link(v, fabric, bandwidth=2.5 * GIB, latency=1e-6, bidirectional=True)
            b.add_link(v, spine, bandwidth=10 * GIB, latency=2e-6, bidirectional=True)
    inst = instance(b.build(), "allreduce", 64 * 2**20)
    schedule = SYNTHESIZERS["nccl-collnet"](inst, seed=0)
    result = verified(inst, schedule)
    assert relisted(inst, schedule) == {(True, result.time)}


@pytest.mark.parametrize("kind", ["reducescatter", "allreduce"])
@pytest.mark.parametrize("model", ["timed", "step"])
def test_exact_schedules_through_a_plain_switch_keep_their_verdict_in_any_order(kind, model):
    """The exact solvers' inversion (and the step solver's) names what a plain switch forwards:
    partials of one chunk pass the switch of a star together."""
    from dataclasses import replace

    from optcoll.instances.budget import Budget
    from optcoll.machines import generators as g
    from optcoll.producers.run import exact

    inst = instance(g.switch(4, GIB, 1e-6), kind, 4e6)
    inst = replace(inst, model=replace(inst.model, kind=model), budget=Budget(time_limit=60, threads=1, work_limit=5))
    produced = exact(inst)
    assert produced.schedule is not None
    result = verified(inst, produced.schedule)
    assert relisted(inst, produced.schedule) == {(True, result.time)}


FLOWS = ("rail-exchange", "nccl-tree", "nccl-nvls-tree", "nccl-collnet", "nccl-ring", "tacos")


@pytest.mark.parametrize("seed", range(8))
def test_allreduce_on_random_clusters_keeps_its_verdict_in_any_order(seed):
    """Where the audit found rail-exchange schedules valid only as listed (97 of 183 random
    machines): clusters of 2-3 nodes, NVLink fabrics with or without NVLS, shared or own NICs,
    links of random speeds; partials of one chunk cross the plain NIC switches together."""
    from optcoll.machines import generators as g

    rng = random.Random(seed)
    gpus = rng.choice([2, 4])
    machine = g.multinode(rng.choice([2, 3]), gpus, nvlink_bandwidth=rng.choice([2, 8, 32]) * GIB,
                          nvlink_latency=rng.choice([0.5e-6, 2e-6]), nic_bandwidth=rng.choice([1, 4]) * GIB,
                          nic_latency=rng.choice([1e-6, 5e-6]), gpus_per_nic=rng.choice([1, gpus // 2]),
                          multicast=rng.random() < 0.5, reduce=rng.random() < 0.5)
    inst = instance(machine, "allreduce", rng.choice([1e6, 64e6]), rng.randint(1, 2))
    produced = 0
    for name in FLOWS:
        try:
            schedule = SYNTHESIZERS[name](inst, seed=0)
        except NotApplicable:
            continue
        result = verified(inst, schedule)
        assert relisted(inst, schedule, seed=seed) == {(True, result.time)}, name
        produced += 1
    assert produced >= 2
