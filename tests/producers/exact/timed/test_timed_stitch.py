"""Symmetry decomposition (``stitch``): servers and rails are found, the stitched schedules pass
the shared verifier on every kind of switched cluster, and on rail-optimized clusters they meet
the entry bound, so the solver proves them optimal without a time-expanded model."""
from __future__ import annotations

import numpy as np
import pytest

from optcoll.bounds import best_lower_bound
from optcoll.collectives.builtins import make_collective
from optcoll.instances.instance import Instance, TimeModel
from optcoll.instances.instancefile import load_instance
from optcoll.machines import generators as G
from optcoll.machines.clusters import Network, NodeGroup, cluster
from optcoll.machines.modelfile import load_machine_file
from optcoll.producers.base import NotApplicable
from optcoll.producers.exact.timed.grid import seconds_grid
from optcoll.producers.exact.timed.listsched import retime
from optcoll.producers.exact.timed.problem import direct_problem, dual_problem
from optcoll.producers.exact.timed.reverse import to_schedule
from optcoll.producers.exact.timed.solve import solve_timed
from optcoll.producers.exact.timed.stitch import rails, servers, stitched
from optcoll.verify import verify
from solver_checks import proof_budget

GIB = 2.0**30


def rail_cluster(nodes: int, gpus: int, *, multicast: bool, network: str = "rail"):
    node = G.switch(gpus, 100e9, 0.5e-6, multicast=multicast)
    return cluster([NodeGroup(node, nodes, nic_bandwidth=12.5e9, nic_latency=2e-6)], Network(network, 1e-6))


def stitched_time(inst: Instance) -> float:
    """The stitched schedule, rails solved exactly, retimed and checked by the shared verifier."""
    problem = dual_problem(inst) if inst.collective.combining else direct_problem(inst)
    transfers = stitched(inst, problem, lambda sub: solve_timed(sub, budget=proof_budget()).schedule)
    schedule = to_schedule(problem, retime(problem, seconds_grid(problem), transfers))
    result = verify(inst.machine, inst.collective, schedule, inst.model)
    assert result.valid, result.violation
    return result.time


CASES = {
    "rail-3x4-nvls": (rail_cluster(3, 4, multicast=True), "allgather", 1, TimeModel()),
    "rail-2x4-plain-C2": (rail_cluster(2, 4, multicast=False), "allgather", 2, TimeModel()),
    "leaf-2x3-serial": (rail_cluster(2, 3, multicast=False, network="leaf"), "allgather", 1,
                        TimeModel(occupancy="serialization")),
    "rail-2x4-reducescatter": (rail_cluster(2, 4, multicast=False), "reducescatter", 1, TimeModel()),
    "shared-nics": (G.multinode(2, 4, nvlink_bandwidth=100e9, nvlink_latency=1e-6, nic_bandwidth=25e9,
                                nic_latency=2e-6, gpus_per_nic=2), "allgather", 1, TimeModel()),
    "astra-ring-switch": (G.astra([G.AstraDim("Ring", 4, 100 * GIB, 5e-7), G.AstraDim("Switch", 3, 25 * GIB, 5e-7)]),
                          "allgather", 1, TimeModel()),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_stitched_schedules_pass_the_verifier(case):
    machine, kind, chunks, model = CASES[case]
    inst = Instance(case, machine, make_collective(kind, machine.npus, 2.0**20 * machine.num_npus, chunks), model)
    time = stitched_time(inst)
    assert time >= best_lower_bound(machine, inst.collective, model).value * (1 - 1e-9)


def test_servers_and_rails_of_a_rail_optimized_cluster():
    machine = rail_cluster(3, 4, multicast=True)
    server = servers(machine)
    assert server[: machine.num_npus].tolist() == [0] * 4 + [1] * 4 + [2] * 4
    assert [r.tolist() for r in rails(machine, server)] == [[0, 4, 8], [1, 5, 9], [2, 6, 10], [3, 7, 11]]


def test_one_switch_for_every_nic_makes_a_rail_per_gpu_position():
    machine = load_machine_file("models/cluster2x8.toml")
    assert [r.tolist() for r in rails(machine, servers(machine))] == [[g, 8 + g] for g in range(8)]


@pytest.mark.parametrize("machine", [G.torus([3, 3], 10e9, 1e-6), G.switch(4, 10e9, 1e-6), G.dgx1()],
                         ids=lambda m: m.name)
def test_no_servers_no_stitching(machine):
    inst = Instance("x", machine, make_collective("allgather", machine.npus, 2.0**20, 1))
    with pytest.raises(NotApplicable):
        stitched(inst, direct_problem(inst), lambda sub: None)


def test_a_broadcast_is_not_stitched():
    machine = rail_cluster(2, 2, multicast=False)
    inst = Instance("x", machine, make_collective("broadcast", machine.npus, 2.0**20, 1, root=0))
    with pytest.raises(NotApplicable, match="the same number of chunks at every NPU"):
        stitched(inst, direct_problem(inst), lambda sub: None)


@pytest.mark.parametrize("name, bound", [("dgxh100-rail-4x8-allgather-c1", "entry bound"),
                                         ("dgxh100-rail-2x8-reducescatter-c1", "per-node ingress")])
def test_rail_clusters_are_proven_optimal_by_the_stitched_start(name, bound):
    """Every NIC delivers its rail's chunks back to back and NVLS multicasts each on: the stitched
    schedule meets the entry bound (on two servers, the ingress bound already), so no
    time-expanded model is built."""
    inst = load_instance(f"instances/machines/{name}.toml")
    out = solve_timed(inst, budget=proof_budget())
    assert out.status == "optimal" and out.lower_bound_source.startswith(bound)
    assert "first upper bound from the stitched rails and servers" in " ".join(out.notes)
    assert out.params["formulation"].startswith("none")
    result = verify(inst.machine, inst.collective, out.schedule, inst.model)
    assert result.valid and np.isclose(result.time, out.lower_bound, rtol=1e-9)


def test_the_stitched_schedule_of_two_servers_meets_the_entry_bound():
    """cluster2x8, C = 2 (plain NVSwitch): each GPU forwards what its NIC brings to the others in
    turn, starting after itself, so the copies arriving at once go to different GPUs."""
    inst = load_instance("instances/frontier/cluster2x8-allgather-c2.toml")
    bound = best_lower_bound(inst.machine, inst.collective, inst.model)
    assert bound.name == "entry"
    assert np.isclose(stitched_time(inst), bound.value, rtol=1e-12)
