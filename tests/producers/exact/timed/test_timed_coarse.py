"""Coarse grids (issue #16): links carrying several transfers per epoch. Rounded up, every discrete
schedule is valid in true time; rounded down, capacities keep the grid a relaxation; and a
256-NPU switch's coarse model fits where the fine one is refused."""
from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optcoll.instances.clock import Clock
from optcoll.instances.instance import TimeModel
from optcoll.machines import generators as G
from optcoll.producers.exact.memory import ModelTooLarge, estimate, require_fits
from optcoll.producers.exact.timed import coarse, expanded
from optcoll.producers.exact.timed.grid import choose_grids, make_grid
from optcoll.producers.exact.timed.listsched import Transfers, greedy, retime, to_seconds
from optcoll.producers.exact.timed.reach import egress_bound, ingress_bound, reach
from optcoll.producers.exact.timed.reverse import to_schedule
from optcoll.producers.exact.timed.search import search
from optcoll.producers.exact.timed.solve import _grid_floor, _problem, solve_timed
from optcoll.producers.exact.timed.star import shift_transfers
from optcoll.producers.exact.timed.stitch import allgather_holders
from optcoll.producers.exact.toolkit import solve
from optcoll.verify import verify

from solver_checks import proof_budget
from timed_helpers import BW, LAT, MB, instance, link_time

GiB = 2**30


def _cluster():
    return G.multinode(2, 4, nvlink_bandwidth=4 * BW, nvlink_latency=LAT, nic_bandwidth=BW, nic_latency=2 * LAT)


#: Small switched and direct machines: (instance, the optimum is cheap to prove).
MACHINES = {
    "star4": lambda: instance(G.switch(4, BW, LAT)),
    "star6-multicast": lambda: instance(G.switch(6, BW, LAT, multicast=True)),
    "cluster2x4": lambda: instance(_cluster()),
    "ring5": lambda: instance(G.ring(5, BW, LAT), chunks=2),
    "dgx1": lambda: instance(G.dgx1()),
    "fc4-ports": lambda: instance(G.fully_connected(4, BW, LAT), model=TimeModel(send_ports=1, recv_ports=1)),
}


@functools.cache
def _optimum(name: str) -> float:
    inst = MACHINES[name]()
    out = solve_timed(inst, budget=proof_budget())
    assert out.status == "optimal", out.notes
    return verify(inst.machine, inst.collective, out.schedule, inst.model).time


def test_up_capacity_fits_back_to_back_transfers_in_an_epoch():
    inst = instance(G.switch(4, BW, LAT))
    problem = _problem(inst)
    b = link_time(inst)
    up = make_grid(problem, 3.5 * b, "up")  # three whole transfers fit, the half does not
    assert set(up.capacity.tolist()) == {3} and set(up.delay.tolist()) == set(up.busy.tolist()) == {1}
    down = make_grid(problem, 3.5 * b, "down")  # starts ≥ b apart: 4 in a half-open epoch
    assert set(down.capacity.tolist()) == {4} and set(down.busy.tolist()) == {1}
    fine, _ = choose_grids(problem)
    assert fine.exact and set(fine.capacity.tolist()) == {1}


def test_up_capacity_costs_no_delay_when_latency_dominates():
    # Serialization occupancy: b = 0.1 ms, d = 0.95 ms on a 1 ms epoch. A second transfer per epoch
    # would deliver after the epoch's end, so capacity stays 1, as on a fine grid.
    inst = instance(G.ring(4, BW, 0.85e-3), model=TimeModel(occupancy="serialization"), per_rank=0.1 * MB)
    problem = _problem(inst)
    grid = make_grid(problem, 1e-3, "up")
    assert set(grid.capacity.tolist()) == {1} and set(grid.delay.tolist()) == {1}
    grid = make_grid(problem, 2e-3, "up")  # 2 ms: 10 b + d fits (not 20 b: 19 b + d > 2 ms)
    assert set(grid.capacity.tolist()) == {11} and set(grid.delay.tolist()) == {1}


def test_port_windows_of_a_shared_link_cover_all_its_transfers():
    inst = instance(G.fully_connected(4, BW, LAT), "reducescatter",
                    model=TimeModel(occupancy="serialization", send_ports=1))
    problem = _problem(inst)
    b = float(problem.busy.min())
    grid = make_grid(problem, 4 * b, "up")
    shift = problem.port_shift / grid.quantum
    assert np.all(grid.port_lo <= np.floor(shift + 1e-9))
    assert np.all(grid.port_hi >= np.ceil(shift + grid.capacity * problem.busy / grid.quantum - 1e-9))


@pytest.mark.parametrize("capacity", [2, 3])
def test_a_link_of_capacity_c_takes_c_transfers_in_one_epoch_not_c_plus_one(capacity):
    for chunks, feasible in ((capacity, True), (capacity + 1, False)):
        inst = instance(G.line(2, BW, LAT), "broadcast", chunks, root=0)
        problem = _problem(inst)
        grid = make_grid(problem, (capacity + 0.5) * link_time(inst), "up")
        assert int(grid.capacity[0]) == capacity and int(grid.delay[0]) == 1
        model = expanded.build(problem, grid, reach(problem, grid.delay), 1)
        res = solve(model.linear, "cpsat", Clock(proof_budget()))
        assert res.status == ("optimal" if feasible else "infeasible")
        assert (_grid_floor(problem, grid, None)[0] <= 1) == feasible  # the grid's ingress bound agrees


def _coarse_schedule(problem, grid) -> Transfers:
    """The best schedule the coarse grid's search finds in a few seconds (epochs)."""
    start = retime(problem, grid, greedy(problem, grid))
    floor, why = _grid_floor(problem, grid, None)
    out = search(problem, grid, floor, why, start, "cpsat", Clock(proof_budget(work=8)),
                 lambda inc, low: None)
    return out.best


@pytest.mark.parametrize("name", sorted(MACHINES))
@pytest.mark.parametrize("m", [2, 3])
def test_coarse_schedules_are_valid_in_true_time_and_no_better_than_the_optimum(name, m):
    inst = MACHINES[name]()
    problem = _problem(inst)
    grid = make_grid(problem, m * coarse.shortest_transfer(problem), "up")
    found = _coarse_schedule(problem, grid)
    true = to_seconds(problem, grid, found)  # not retimed: the grid's own timing must be valid
    result = verify(inst.machine, inst.collective, to_schedule(problem, true), inst.model)
    assert result.valid, result.violation
    assert result.time <= grid.seconds(found.makespan(grid)) * (1 + 1e-9)  # deliveries rounded up
    assert result.time >= _optimum(name) * (1 - 1e-9)


@settings(max_examples=8, deadline=None, derandomize=True)
@given(name=st.sampled_from(sorted(MACHINES)), fraction=st.floats(0.15, 1.0))
def test_the_down_grid_with_capacities_bounds_the_optimum(name, fraction):
    inst = MACHINES[name]()
    problem = _problem(inst)
    q = fraction * float(problem.delay.min())  # every delay stays ≥ 1 epoch
    grid = make_grid(problem, q, "down")
    assert grid.delay.min() >= 1
    optimum = _optimum(name)
    r = reach(problem, grid.delay)
    assert grid.seconds(ingress_bound(problem, r, grid)) <= optimum * (1 + 1e-9)
    assert grid.seconds(egress_bound(problem, r, grid)) <= optimum * (1 + 1e-9)
    floor, why = _grid_floor(problem, grid, None)
    start = retime(problem, grid, greedy(problem, grid))
    out = search(problem, grid, floor, why, start, "cpsat", Clock(proof_budget(work=10)),
                 lambda inc, low: None)
    assert grid.seconds(out.floor) <= optimum * (1 + 1e-9), out.phases


def test_a_256_npu_switch_gets_a_coarse_model_where_the_fine_one_is_refused():
    inst = instance(G.nvswitch(256))
    problem = _problem(inst)
    fine, _ = choose_grids(problem)
    start = shift_transfers(problem, allgather_holders(problem))
    k = int(round(retime(problem, fine, start).makespan(fine)))
    limit = 8 * GiB
    with pytest.raises(ModelTooLarge):
        require_fits(expanded.size(problem, fine, reach(problem, fine.delay), k), "cpsat", 1, limit)
    assert coarse.needed(problem, fine, start, "cpsat", 1, limit) == f"the fine grid needs {k} epochs"
    grid = make_grid(problem, 16 * coarse.shortest_transfer(problem), "up")
    assert set(grid.capacity.tolist()) == {16}
    k = int(round(retime(problem, grid, start).makespan(grid)))
    size = expanded.size(problem, grid, reach(problem, grid.delay), k)
    assert size.variables < 4e6 and estimate(size, "cpsat") < limit
    assert math.isclose(grid.quantum, 16 * fine.quantum)


def test_structured_false_leaves_the_shift_schedule_out():
    """The switch of the bench's coarse row, small: without its shift schedule the solve starts
    from the greedies (what ``optcoll bench exact --only coarse`` measures on 256 ports)."""
    inst = instance(G.switch(4, BW, LAT))
    budget = proof_budget(work=20)
    with_shift, without = solve_timed(inst, budget=budget), solve_timed(inst, budget=budget, structured=False)
    assert any(n.startswith("the shift schedule") for n in with_shift.notes)
    assert not any(n.startswith("the shift schedule") for n in without.notes)
    for out in (with_shift, without):
        assert verify(inst.machine, inst.collective, out.schedule, inst.model).valid
