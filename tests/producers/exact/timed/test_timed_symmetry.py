"""Symmetries: found where expected, genuine (they map valid schedules to valid schedules of the
same time), sound for lex-leader symmetry breaking, and the symmetric restriction's solutions are
valid schedules of the full problem."""
from __future__ import annotations

import numpy as np
import pytest

from optcoll.machines import generators as G
from optcoll.producers.exact import toolkit
from optcoll.producers.exact.timed import expanded
from optcoll.producers.exact.timed.grid import choose_grids, seconds_grid
from optcoll.producers.exact.timed.listsched import greedy, retime
from optcoll.producers.exact.timed.reach import reach
from optcoll.producers.exact.timed.reverse import essential, to_schedule
from optcoll.producers.exact.timed.solve import _problem, solve_timed
from optcoll.producers.exact.timed.symmetry import (breaking_symmetries, fixed_point_free_group, lex_leader_rows,
                                                   orbit_classes, variable_permutation)
from optcoll.instances.instance import TimeModel
from optcoll.schedules.schedule import from_arrays
from optcoll.verify import verify
from optcoll.instances.clock import Clock

from solver_checks import proof_budget
from timed_helpers import BW, LAT, close, instance


def _group(machine, **kw):
    problem = _problem(instance(machine, **kw))
    grid, _ = choose_grids(problem)
    return fixed_point_free_group(problem, grid)


@pytest.mark.parametrize("machine, order", [
    (G.ring(8, BW, LAT, bidirectional=False), 8), (G.torus([4, 4], BW, LAT), 16),
    (G.hypercube(4, BW, LAT), 16), (G.switch(5, BW, LAT), 5), (G.fully_connected(6, BW, LAT), 6),
    (G.mesh([3, 3], BW, LAT), 1)], ids=["uniring8", "torus4x4", "hypercube4", "switch5", "fc6", "mesh3x3"])
def test_fixed_point_free_groups(machine, order):
    group = _group(machine)
    assert group.order == order
    npus = machine.num_npus
    for sym in group.elements[1:]:
        assert not np.any(sym.node[:npus] == np.arange(npus))


def test_dgx1_has_exactly_its_four_relabellings():
    group = _group(G.dgx1())
    found = sorted(sym.node.tolist() for sym in group.elements)
    assert found == sorted([list(range(8)), [2, 3, 0, 1, 6, 7, 4, 5], [4, 5, 6, 7, 0, 1, 2, 3],
                            [6, 7, 4, 5, 2, 3, 0, 1]])


CASES = [instance(G.dgx1(), chunks=2), instance(G.torus([3, 3], BW, LAT)), instance(G.switch(4, BW, LAT)),
         instance(G.ring(5, BW, LAT), "reducescatter", 2)]


@pytest.mark.parametrize("inst", CASES, ids=[c.name for c in CASES])
def test_symmetries_map_optimal_schedules_to_optimal_schedules(inst):
    out = solve_timed(inst, budget=proof_budget())
    base = verify(inst.machine, inst.collective, out.schedule, inst.model)
    problem = _problem(inst)
    grid, _ = choose_grids(problem)
    syms = breaking_symmetries(problem, grid, 64) + fixed_point_free_group(problem, grid).elements[1:]
    assert syms
    s = out.schedule
    for sym in syms:
        image = from_arrays(sym.chunk[s.chunk], sym.link[s.link], s.start, s.op)
        result = verify(inst.machine, inst.collective, image, inst.model)
        assert result.valid, result.violation
        assert close(result.time, base.time)


LEX = [instance(G.mesh([2, 3], BW, LAT), model=TimeModel(send_ports=1, recv_ports=1)),
       instance(G.switch(4, BW, LAT)), instance(G.dgx1(), chunks=2), instance(G.ring(5, BW, LAT), chunks=2)]


@pytest.mark.parametrize("inst", LEX, ids=[c.name for c in LEX])
def test_lex_leader_rows_keep_the_optimum(inst):
    problem = _problem(inst)
    grid, _ = choose_grids(problem)
    horizon = int(round(greedy(problem, grid).makespan(grid)))
    r = reach(problem, grid.delay)
    optima = []
    for broken in (False, True):
        model = expanded.build(problem, grid, r, horizon, lower=0)
        if broken:
            perms = [variable_permutation(model, s) for s in breaking_symmetries(problem, grid, 32)]
            assert perms and all(p is not None for p in perms)
            lex_leader_rows(model.linear, perms, model.x_index[np.lexsort((model.x_chunk, model.x_epoch))])
        res = toolkit.solve(model.linear, "cpsat", Clock(proof_budget()))
        assert res.status == "optimal"
        optima.append(round(res.objective))
    assert optima[0] == optima[1]


def test_symmetric_restriction_gives_invariant_valid_schedules():
    inst = instance(G.torus([4, 4], BW, LAT))
    problem = _problem(inst)
    grid, _ = choose_grids(problem)
    group = fixed_point_free_group(problem, grid)
    model = expanded.build(problem, grid, reach(problem, grid.delay), 4)
    classes = orbit_classes(model, group.generators)
    quotient = model.linear.quotient(classes)
    assert quotient.num_vars * group.order <= model.linear.num_vars + group.order
    res = toolkit.solve(quotient, "cpsat", Clock(proof_budget()))
    assert res.status == "optimal"
    values = res.values[classes]
    assert model.linear.check(values)
    transfers = essential(problem, model.decode(values), grid.delay)
    schedule = to_schedule(problem, retime(problem, seconds_grid(problem), transfers))
    assert verify(inst.machine, inst.collective, schedule, inst.model).valid
    rows = {(int(c), int(e), float(t)) for c, e, t in zip(transfers.chunk, transfers.link, transfers.start)}
    for sym in group.elements:
        assert {(int(sym.chunk[c]), int(sym.link[e]), t) for c, e, t in rows} == rows
