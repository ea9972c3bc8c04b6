"""``allreduce-regions`` (``optcoll.bounds.allreduce``): each chunk enters the servers of a cluster
2(n − 1) times. Values by hand on clusters, where it applies (reduction and multicast inside the
servers, not outside), and below every verified schedule on random small clusters (issue 13)."""
from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optcoll.bounds import lower_bounds
from optcoll.bounds.allreduce import region_partitions
from optcoll.bundled import bundled_dir
from optcoll.collectives.builtins import make_collective
from optcoll.instances.instance import Instance, TimeModel
from optcoll.instances.instancefile import load_instance
from optcoll.machines import generators as G
from optcoll.machines.machine import Switch
from optcoll.producers.base import NotApplicable
from optcoll.producers.registry import get_synthesizer
from optcoll.verify import verify

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_bounds_allreduce import _direct_schedule  # noqa: E402

REGIONS, EGRESS, RELEASED = "allreduce-regions", "allreduce-regions-egress", "allreduce-regions-released"


def _cluster(nodes: int, gpus: int, **flags) -> G.Machine:
    return G.multinode(nodes, gpus, nvlink_bandwidth=3e11, nvlink_latency=5e-7, nic_bandwidth=2.5e10,
                       nic_latency=2e-6, **flags)


def _bounds(machine, chunks: int = 1, model: TimeModel = TimeModel()) -> dict:
    coll = make_collective("allreduce", range(machine.num_npus), 2.0**30, chunks)
    return {b.name: b for b in lower_bounds(machine, coll, model)}


def test_servers_are_the_regions_and_the_spine_stays_outside():
    machine = _cluster(3, 4)
    (region,) = list(region_partitions(machine, np.arange(machine.num_npus)))
    assert [len(set(region[4 * k:4 * k + 4].tolist())) for k in range(3)] == [1, 1, 1]
    assert len(set(region[:12].tolist())) == 3
    assert region[machine.labels.index("spine")] == -1
    assert region[machine.labels.index("n0.nvswitch")] == region[0]


@pytest.mark.parametrize("nodes", [2, 4])
def test_value_by_hand_on_clusters(nodes):
    """n servers of 8 GPUs, one NIC each: K = 8n chunks enter servers 2(n − 1) times over 8n NIC
    downlinks, 2(n − 1) per link; the first lands two NIC hops after the start (uplink, downlink),
    each next one occupancy later."""
    machine = _cluster(nodes, 8)
    b = 2.0**30 / (8 * nodes)
    nic = 2e-6 + b / 2.5e10
    found = _bounds(machine)
    per_link = 2 * (nodes - 1)
    assert found[REGIONS].value == pytest.approx(2 * nic + (per_link - 1) * nic)
    assert found[EGRESS].value == pytest.approx(found[REGIONS].value)
    assert "spine" in found[REGIONS].assumptions[0]


def test_four_servers_beat_every_other_bound():
    """Servers of 8 GPUs on NVSwitch that reduces in the network: the NVSwitch is inside its server,
    so the bound holds there and is the best one (no other AllReduce bound sees the NICs twice)."""
    machine = _cluster(4, 8, multicast=True, reduce=True)
    found = _bounds(machine)
    assert max(found.values(), key=lambda b: b.value).name in (REGIONS, EGRESS, RELEASED)
    assert "allreduce-transfers" not in found


def test_released_value_by_hand_on_servers_that_reduce():
    """4 servers of 8 GPUs on a reducing NVSwitch, one NIC per GPU on a spine (x one NVLink hop,
    h one NIC hop of a 32 MiB chunk). Counted: 192 transfers out of the servers over 32 NIC uplinks,
    6 each, each done one more NIC hop later: 7h, the plain form. A 193rd needs a 7th slot on some
    link: 8h. With exactly 192, the first send on each uplink carries its server's full content of a
    different chunk: the i-th of a server's 8 waits for 7i of the ranks' own sends into the switch
    (each rank one per chunk, x apart) and the switch's hop to a GPU, 2x + ⌊(7i − 1)/8⌋x, so the
    eighth for 8x, and that link's sixth is done at 8x + 7h."""
    machine = _cluster(4, 8, multicast=True, reduce=True)
    b = 2.0**30 / 32
    x, h = 5e-7 + b / 3e11, 2e-6 + b / 2.5e10
    found = _bounds(machine)
    assert found[EGRESS].value == pytest.approx(7 * h, rel=1e-9)
    assert found[RELEASED].value == pytest.approx(8 * x + 7 * h, rel=1e-9)
    assert "either some chunk enters regions more than 2(n − 1) = 6 times" in found[RELEASED].detail


def _with_spine(machine, spine: Switch):
    switches = tuple(spine if s.label == "spine" else s for s in machine.switches)
    return replace(machine, switches=switches)


def test_a_spine_that_reduces_is_a_region_too():
    """A spine that reduces (SHARP-like) may hold the first full sum, so it is a region of its own
    and transfers into it count: the bound is weaker than with a plain spine, and says nothing
    stays outside."""
    plain, sharp = _cluster(2, 2), _with_spine(_cluster(2, 2), Switch("spine", reduce=True))
    (region,) = list(region_partitions(sharp, np.arange(4)))
    assert region[sharp.labels.index("spine")] >= 0
    found = _bounds(sharp)
    assert found[REGIONS].value < _bounds(plain)[REGIONS].value
    assert found[REGIONS].assumptions == () and "outside: nothing" in found[REGIONS].detail


def test_egress_form_needs_a_spine_without_multicast():
    found = _bounds(_with_spine(_cluster(2, 2), Switch("spine", multicast=True)))
    assert REGIONS in found and EGRESS not in found


@pytest.mark.parametrize("name", ["dgxh100-rail-16x8-allreduce-c1", "perlmutter-allreduce-c1"])
def test_below_the_recorded_schedules_of_real_clusters(name):
    inst = load_instance(bundled_dir("instances") / "machines" / f"{name}.toml")
    found = {b.name: b for b in lower_bounds(inst.machine, inst.collective, inst.model)}
    for producer in ("nccl-ring", "tacos+"):
        schedule = get_synthesizer(producer)(inst, 0)
        result = verify(inst.machine, inst.collective, schedule, inst.model)
        assert result.valid and found[REGIONS].value <= result.time * (1 + 1e-9)
        assert found[RELEASED].value <= result.time * (1 + 1e-9)


@settings(max_examples=16, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), nodes=st.integers(2, 4), gpus=st.integers(2, 3),
       intra=st.sampled_from(["nvswitch", "full_mesh"]), inc=st.booleans(), shared_nic=st.booleans(),
       chunks=st.integers(1, 2), occupancy=st.sampled_from(["link", "serialization"]))
def test_below_verified_schedules_on_small_clusters(seed, nodes, gpus, intra, inc, shared_nic, chunks, occupancy):
    """Every verified schedule (NCCL's ring, tree and NVLS-tree, TACOS, tacos+, rail-exchange, and
    the direct exact model's best on 4 GPUs) takes at least both forms, with and without reduction
    and multicast inside the servers."""
    rng = np.random.default_rng(seed)
    inc = inc and intra == "nvswitch"
    machine = G.multinode(nodes, gpus, nvlink_bandwidth=float(rng.uniform(5e10, 3e11)),
                          nvlink_latency=float(rng.uniform(0, 2e-6)), nic_bandwidth=float(rng.uniform(5e9, 2.4e10)),
                          nic_latency=float(rng.uniform(0, 5e-6)), multicast=inc, reduce=inc,
                          gpus_per_nic=gpus if shared_nic and intra == "nvswitch" else 1, intra=intra)
    model = TimeModel(occupancy=occupancy)  # NICs slower than any NVLink: the servers are the regions
    n = machine.num_npus
    inst = Instance("random", machine, make_collective("allreduce", range(n), 2.0**20 * n, chunks), model)
    found = [b for b in lower_bounds(machine, inst.collective, model) if b.name in (REGIONS, EGRESS, RELEASED)]
    assert found
    schedules = []
    for name in ("nccl-ring", "nccl-tree", "nccl-nvls-tree", "tacos", "tacos+", "rail-exchange"):
        try:
            schedules.append(get_synthesizer(name)(inst, 0))
        except NotApplicable:
            continue
    if n <= 4:  # the direct model's best from the last of them (CP-SAT work units: any load)
        schedules.append(_direct_schedule(inst, schedules[-1], 2.0))
    times = []
    for schedule in [s for s in schedules if s is not None]:
        result = verify(machine, inst.collective, schedule, model)
        assert result.valid, result.violation.message
        times.append(result.time)
    assert len(times) >= 2
    for bound in found:
        assert bound.value <= min(times) * (1 + 1e-9), (bound, min(times))


def test_a_machine_of_all_different_bandwidths_tries_a_bounded_number_of_splits():
    """Every link of a ring at its own bandwidth: at most BANDWIDTH_LEVELS thresholds are tried
    (one pass each), not one per link (300 NPUs), and the bound still comes out (12 NPUs)."""
    from optcoll.bounds.families import BANDWIDTH_LEVELS
    from optcoll.machines.machine import MachineBuilder

    def mixed_ring(n: int):
        b = MachineBuilder(f"ring{n}-mixed", n)
        for v in range(n):
            b.add_link(v, (v + 1) % n, bandwidth=1e9 * (1 + v / 1000), latency=1e-6, bidirectional=True)
        return b.build()

    assert len(list(region_partitions(mixed_ring(300), np.arange(300)))) <= BANDWIDTH_LEVELS
    assert REGIONS in _bounds(mixed_ring(12))
