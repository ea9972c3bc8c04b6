"""orbit-trees (``producers.baselines.orbittrees``, issue 34): per representative chunk an in-tree
and an out-tree in steps, every other chunk its image under the machine's symmetries; every
schedule through the shared verifier, never under a lower bound."""
from __future__ import annotations

import numpy as np
import pytest

from optcoll.bounds import lower_bounds
from optcoll.bundled import bundled_dir
from optcoll.instances.instance import TimeModel
from optcoll.instances.instancefile import load_instance
from optcoll.machines import generators as g
from optcoll.machines.catalog import load_machine
from optcoll.producers.base import NotApplicable
from optcoll.producers.registry import get_synthesizer
from producer_cases import instance, link_time, verified

ORBIT = get_synthesizer("orbit-trees")


def test_trn2_allreduce_c2_meets_the_transfer_bound_in_15_steps():
    """Trn2's 4 x 4 torus at C = 2: 32 chunks x 30 deliveries fill its 64 links for 15 steps, the
    allreduce-transfers bound, where ReduceScatter then AllGather needs 8 + 8."""
    inst = load_instance(bundled_dir("instances") / "machines" / "trn2-allreduce-c2.toml")
    schedule = ORBIT(inst, 0)
    made = verified(inst, schedule).time
    assert len(schedule) == 2 * 15 * 32 and schedule.meta["steps"] == 15
    assert made == pytest.approx(15 * link_time(inst), rel=1e-12)
    bounds = {b.name: b.value for b in lower_bounds(inst.machine, inst.collective, inst.model)}
    assert bounds["allreduce-transfers"] == pytest.approx(made, rel=1e-9)


@pytest.mark.parametrize("machine, chunks", [
    (g.ring(6, 1e10, 1e-6), 1), (g.ring(5, 1e10, 1e-6), 2), (g.torus([3, 3], 2e10, 5e-7), 1),
    (g.torus([2, 4], 2e10, 5e-7), 2), (g.hypercube(3, 1e10, 1e-6), 1), (g.fully_connected(4, 1e10, 1e-6), 3)],
    ids=["ring6", "ring5-c2", "torus3x3", "torus2x4-c2", "hypercube3", "fc4-c3"])
@pytest.mark.parametrize("occupancy", ["link", "serialization"])
def test_schedules_verify_and_stay_above_every_bound(machine, chunks, occupancy):
    inst = instance(machine, "allreduce", 2.0**20 * machine.num_npus, chunks, model=TimeModel(occupancy=occupancy))
    schedule = ORBIT(inst, 0)
    made = verified(inst, schedule).time
    steps = schedule.meta["steps"]
    assert made == pytest.approx(steps * link_time(inst), rel=1e-12)
    assert len(schedule) == 2 * (machine.num_npus - 1) * inst.collective.num_chunks
    assert max(b.value for b in lower_bounds(machine, inst.collective, inst.model)) <= made * (1 + 1e-9)
    again = ORBIT(inst, 0)
    assert np.array_equal(again.start, schedule.start) and np.array_equal(again.link, schedule.link)


def test_not_applicable_with_switches_unequal_links_or_no_regular_symmetry():
    with pytest.raises(NotApplicable, match="every NPU of the machine a rank, and no switches"):
        ORBIT(instance(g.switch(4, 1e10, 1e-6), "allreduce"), 0)
    with pytest.raises(NotApplicable, match="one time"):
        ORBIT(instance(g.torus([2, 3], [1e10, 2e10], 1e-6), "allreduce"), 0)
    with pytest.raises(NotApplicable, match="as many links"):
        ORBIT(instance(g.line(4, 1e10, 1e-6), "allreduce"), 0)
    with pytest.raises(NotApplicable, match="order 4 for 8 ranks"):  # DGX-1: four relabellings
        ORBIT(instance(load_machine("dgx1"), "allreduce"), 0)
    with pytest.raises(NotApplicable, match="AllReduce"):
        ORBIT(instance(g.ring(4, 1e10, 1e-6), "allgather"), 0)
