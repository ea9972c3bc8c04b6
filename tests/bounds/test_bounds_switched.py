"""Bounds on switched, hierarchical machines: the entry bound settles the frontier's two-level
instances by hand-checkable formulas, and no bound beats an optimal schedule that the exact solver
found without it (random small servers-with-NICs, ASTRA-sim networks and switched graphs)."""
from __future__ import annotations

import numpy as np
import pytest

from bounds_reference import random_machine
from optcoll.bounds import lower_bounds
from optcoll.collectives.builtins import make_collective
from optcoll.instances.instance import Instance, TimeModel
from optcoll.instances.instancefile import load_instance
from optcoll.machines import generators as gen
from optcoll.producers.exact.timed import solve as timed_solve
from optcoll.verify import verify

GIB = 2.0**30


def by_name(machine, collective, model=TimeModel()):
    return {b.name: b for b in lower_bounds(machine, collective, model)}


def test_entry_bound_of_two_servers_is_three_nic_hops_and_eight_nvlink_hops():
    """cluster2x8, C = 2: every NIC cable carries two of its server's 16 chunks, so 8 chunks
    reach the other server only after three NIC occupancies, each at a different GPU; every GPU
    then needs the 7 it lacks over its one NVSwitch down-link, one NVLink occupancy apart, after
    two NVLink hops."""
    inst = load_instance("instances/frontier/cluster2x8-allgather-c2.toml")
    b = inst.collective.chunk_bytes
    nic, nvlink = 2e-6 + b / 25e9, 0.5e-6 + b / 300e9
    found = by_name(inst.machine, inst.collective)
    assert found["entry"].value == pytest.approx(3 * nic + 8 * nvlink, rel=1e-12)
    assert found["entry"].value > max(found["ingress"].value, found["cut"].value)
    assert "at best 2 of them come over links from outside the group" in found["entry"].detail


def test_entry_bound_of_the_astra_ring_by_switch_network():
    """Ring(4) × Switch(8), C = 1: 28 chunks enter each ring over its 4 switch down-links, 7 each
    after two switch hops; the last ones are two ring hops from the farthest member."""
    inst = load_instance("instances/frontier/astra-ring4-switch8-allgather-c1.toml")
    b = inst.collective.chunk_bytes
    switch, ring = 500e-9 + b / (50 * GIB), 500e-9 + b / (200 * GIB)
    assert by_name(inst.machine, inst.collective)["entry"].value == pytest.approx(8 * switch + 2 * ring, rel=1e-12)


def test_entry_bound_of_a_reduce_scatter_is_its_dual_allgather():
    machine = gen.multinode(2, 3, nvlink_bandwidth=100e9, nvlink_latency=1e-6, nic_bandwidth=10e9,
                            nic_latency=2e-6)
    rs = by_name(machine, make_collective("reducescatter", machine.npus, 2.0**24, 2))["entry"]
    ag = by_name(machine.reversed(), make_collective("allgather", machine.npus, 2.0**24, 2))["entry"]
    assert rs.value == pytest.approx(ag.value) and "reversed machine" in rs.detail


def test_no_entry_bound_on_machines_of_one_bandwidth():
    assert "entry" not in by_name(gen.torus([3, 3], 10e9, 1e-6), make_collective("allgather", range(9), 2.0**20))


def test_entry_groups_by_at_most_a_few_bandwidth_levels():
    """A ring whose every link has its own bandwidth: the entry bound groups nodes at a few levels
    spread over the bandwidths (one pass per node each), not one per link, and still bounds."""
    from optcoll.bounds.entry import _groups
    from optcoll.bounds.families import BANDWIDTH_LEVELS
    from optcoll.machines.machine import MachineBuilder

    def mixed_ring(n: int):
        b = MachineBuilder(f"ring{n}-mixed", n)
        for v in range(n):
            b.add_link(v, (v + 1) % n, bandwidth=1e9 * (1 + v / 1000), latency=1e-6, bidirectional=True)
        return b.build()

    levels = [level for level, _ in _groups(mixed_ring(80))]
    assert len(levels) == BANDWIDTH_LEVELS < 79
    assert min(levels) == pytest.approx(1e9 * 1.001) and max(levels) == pytest.approx(1e9 * 1.079)
    assert "entry" in by_name(mixed_ring(12), make_collective("allgather", range(12), 2.0**20))


def switched_machine(seed: int, combining: bool):
    """Small hierarchical machines with random figures: servers with NICs (own or shared), an
    ASTRA-sim network of two dimensions, or a random graph with (multicast) switches. Reductions
    get plain switches: the exact solver does not model them through multicast ones."""
    rng = np.random.default_rng(seed)
    kind = seed % 3
    bw = lambda: float(rng.choice([5e9, 10e9, 25e9, 100e9]))  # noqa: E731
    lat = lambda: float(rng.choice([0.0, 5e-7, 2e-6]))  # noqa: E731
    if kind == 0:
        gpus = int(rng.integers(2, 4))
        return gen.multinode(2, gpus, nvlink_bandwidth=bw(), nvlink_latency=lat(), nic_bandwidth=bw(),
                             nic_latency=lat(), gpus_per_nic=int(rng.choice([1, gpus])),
                             multicast=not combining and bool(rng.integers(2)))
    if kind == 1 or combining:
        tops = ["Ring", "Switch", "FullyConnected"]
        return gen.astra([gen.AstraDim(str(rng.choice(tops)), int(rng.integers(2, 4)), bw(), lat()),
                          gen.AstraDim(str(rng.choice(tops)), 2, bw(), lat())])
    return random_machine(rng, int(rng.integers(3, 6)), int(rng.integers(1, 3)), extra=int(rng.integers(0, 4)))


def _without_entry(machine, collective, model=TimeModel(), clock=None):
    """The solver's analytic floor with the bound under test left out, so the optimum it proves
    does not rest on that bound."""
    kept = [b for b in lower_bounds(machine, collective, model, clock) if b.name != "entry"]
    return max(kept, key=lambda b: b.value)


@pytest.mark.parametrize("seed", range(12))
def test_no_bound_beats_an_optimal_schedule_on_small_switched_machines(seed, monkeypatch):
    rng = np.random.default_rng(1000 + seed)
    kind = ["allgather", "reducescatter", "broadcast", "gather"][seed % 4]
    machine = switched_machine(seed, kind == "reducescatter")
    model = [TimeModel(), TimeModel(occupancy="serialization")][int(rng.integers(2))]
    root = 0 if kind in ("broadcast", "gather") else None
    coll = make_collective(kind, machine.npus, 2.0**20 * machine.num_npus, int(rng.integers(1, 3)), root=root)
    inst = Instance(f"switched-{seed}", machine, coll, model)
    monkeypatch.setattr(timed_solve, "best_lower_bound", _without_entry)
    out = timed_solve.solve_timed(inst, time_limit=5, threads=1, seed=0)
    result = verify(machine, coll, out.schedule, model)
    assert result.valid, result.violation
    for bound in lower_bounds(machine, coll, model):
        assert bound.value <= result.time * (1 + 1e-9), (bound, result.time, out.status)
