"""Greedy step schedules, cleaning, splitting and stretching keep schedules valid."""
from __future__ import annotations

from collections import Counter

import pytest

from step_helpers import STEP, agreement_instances

from optcoll.collectives.builtins import split_allreduce
from optcoll.producers.exact.step.greedy import greedy_solution
from optcoll.producers.exact.step.inversion import plan
from optcoll.producers.exact.step.solution import StepSolution, cleaned, split_step, stretched
from optcoll.verify import verify

PLANS = [(inst, part, plan(inst.machine, part)) for inst in agreement_instances()
         for part in (split_allreduce(inst.collective) if inst.collective.kind == "allreduce"
                      else [inst.collective])]
IDS = [f"{inst.name}:{part.kind}" for inst, part, _ in PLANS]


def _valid(inst, part, chosen, solution):
    check = verify(inst.machine, part, chosen.schedule(solution), STEP)
    assert check.valid, check.violation
    assert check.time == pytest.approx(chosen.problem.cost(solution.steps, solution.total_rounds), rel=1e-12)


@pytest.mark.parametrize("inst, part, chosen", PLANS, ids=IDS)
def test_greedy_is_valid_and_free_rounds_meet_the_latency_bound(inst, part, chosen):
    free = greedy_solution(chosen.problem)
    assert free.steps == chosen.problem.latency_bound
    _valid(inst, part, chosen, free)
    unit = greedy_solution(chosen.problem, 1)
    assert set(unit.rounds) == {1}
    _valid(inst, part, chosen, unit)


@pytest.mark.parametrize("inst, part, chosen", PLANS, ids=IDS)
def test_stretching_splits_long_steps_then_pads(inst, part, chosen):
    p = chosen.problem
    free = greedy_solution(p)
    longer = stretched(p, free, free.steps + 2)
    assert longer.steps == free.steps + 2
    splits = sum(r - 1 for r in free.rounds)
    assert longer.total_rounds == free.total_rounds + max(0, 2 - splits)
    _valid(inst, part, chosen, longer)


@pytest.mark.parametrize("inst, part, chosen", PLANS, ids=IDS)
def test_cleaning_drops_only_useless_copies(inst, part, chosen):
    """A greedy schedule with every copy sent twice more one step later cleans back to a valid
    schedule with no more copies than the greedy's own (run backwards, the noisy one would count
    partials twice)."""
    p = chosen.problem
    base = stretched(p, greedy_solution(p), p.latency_bound + 1)
    rows = base.rows() + 2 * [(c, e, s + 1) for c, e, s in base.rows() if s < base.steps]
    load = Counter((e, s) for _, e, s in rows)
    rounds = [max([r] + [-(-n // int(p.edge_weight[e])) for (e, t), n in load.items() if t == s])
              for s, r in enumerate(base.rounds, start=1)]
    noisy = StepSolution.from_rows(rounds, rows)
    if not chosen.inverted:
        _valid(inst, part, chosen, noisy)
    clean = cleaned(p, noisy)
    assert len(clean.chunk) <= len(base.chunk)
    _valid(inst, part, chosen, clean)


def test_split_step_needs_a_step_of_two_rounds():
    inst, part, chosen = PLANS[0]
    unit = greedy_solution(chosen.problem, 1)
    assert split_step(chosen.problem, unit) is None
