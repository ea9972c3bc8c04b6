"""One time-expanded model, three solvers (CP-SAT, SCIP, HiGHS), plus the continuous interval
model on the same integer durations: all must find the same optimal makespan, and every solution
must decode to a schedule the shared verifier accepts with that time."""
from __future__ import annotations

import pytest

from optcoll.producers.exact import toolkit
from optcoll.producers.exact.timed import continuous, expanded
from optcoll.producers.exact.timed.grid import choose_grids, seconds_grid
from optcoll.producers.exact.timed.listsched import greedy, retime
from optcoll.producers.exact.timed.reach import reach
from optcoll.producers.exact.timed.reverse import essential, to_schedule
from optcoll.producers.exact.timed.solve import _problem
from optcoll.verify import verify
from optcoll.instances.clock import Clock

from solver_checks import proof_budget
from timed_helpers import close, small_instances

INSTANCES = small_instances()


def _verified_time(inst, problem, transfers) -> float:
    true = retime(problem, seconds_grid(problem), transfers)
    result = verify(inst.machine, inst.collective, to_schedule(problem, true), inst.model)
    assert result.valid, result.violation
    return result.time


@pytest.mark.parametrize("inst", INSTANCES, ids=[i.name for i in INSTANCES])
def test_cpsat_mip_and_continuous_agree(inst):
    problem = _problem(inst)
    grid, _ = choose_grids(problem)
    start = greedy(problem, grid)
    horizon = int(round(start.makespan(grid)))
    model = expanded.build(problem, grid, reach(problem, grid.delay), horizon, lower=0)
    optima = {}
    for solver in toolkit.SOLVERS:
        res = toolkit.solve(model.linear, solver, Clock(proof_budget(solver)))
        assert res.status == "optimal", (solver, res)
        assert model.linear.check(res.values)
        optima[solver] = round(res.objective)
        transfers = essential(problem, model.decode(res.values), grid.delay)
        assert transfers.makespan(grid) == optima[solver]
        seconds = _verified_time(inst, problem, transfers)
        # Retiming in true seconds never loses; on an exact grid it is the grid time itself.
        assert seconds <= grid.seconds(optima[solver]) * (1 + 1e-9)
        if grid.exact:
            assert close(seconds, grid.seconds(optima[solver]))
    cont = continuous.build(problem, grid, horizon, 0)
    assert continuous.hint(cont, essential(problem, start, grid.delay))
    res = continuous.solve(cont, Clock(proof_budget()))
    assert res.status == "optimal"
    optima["continuous"] = round(res.objective)
    _verified_time(inst, problem, cont.decode(res.values))
    assert len(set(optima.values())) == 1, optima
    assert optima["cpsat"] <= horizon  # never worse than the greedy start
