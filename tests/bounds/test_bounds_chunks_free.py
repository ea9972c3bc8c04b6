"""The bound of an instance that leaves C free (the least over C of the best bound per C) is ≤
every verified schedule at every allowed C, on small random machines; the runner's choice over C
keeps the fastest verified schedule and that least bound."""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bounds_reference import forward_schedule, random_machine
from optcoll.collectives.builtins import make_collective
from optcoll.producers.chunks import at_chunks, least_bound
from optcoll.instances.instance import Instance
from optcoll.producers import run
from optcoll.results.record import meets
from optcoll.verify import require_valid

ALLOWED = (1, 2, 4)


@st.composite
def free_instances(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    npus = draw(st.integers(2, 5))
    machine = random_machine(rng, npus, draw(st.integers(0, 1)), extra=draw(st.integers(0, 4)),
                             bidirectional=draw(st.booleans()))
    size = draw(st.sampled_from((4 * 2.0**10, 3 * 2.0**20)))  # latency- and bandwidth-bound
    collective = make_collective("allgather", range(npus), size, ALLOWED[0])
    return Instance("free", machine, collective, chunk_choices=ALLOWED)


def _not_below(time: float, bound: float) -> bool:
    return time >= bound or meets(time, bound)


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(free_instances())
def test_least_bound_is_below_every_verified_schedule_at_every_allowed_c(inst):
    least = least_bound(inst)
    assert "at C=" in least.name and "least over C in {1, 2, 4}" in least.detail
    times = {}
    for c in ALLOWED:
        fixed = at_chunks(inst, c)
        assert fixed.collective.chunks_per_rank == c and not fixed.chunk_choices
        schedule = forward_schedule(fixed.machine, fixed.collective, fixed.model)
        time = require_valid(fixed.machine, fixed.collective, schedule, fixed.model).time
        assert _not_below(time, least.value), (c, time, least)
        produced = run.synthesized(fixed, "tacos")
        assert _not_below(produced.result.time, least.value)
        times[c] = produced.result.time
    chosen = run.synthesized(inst, "tacos")
    best_c = min(ALLOWED, key=lambda c: (times[c], c))
    assert chosen.result.params["chunks_per_rank"] == best_c == chosen.schedule.meta["chunks_per_rank"]
    assert chosen.result.time == times[best_c] and chosen.result.lower_bound == least.value
    assert chosen.result.status == ("optimal" if meets(times[best_c], least.value) else "heuristic")
    at_best = at_chunks(inst, best_c)
    assert require_valid(at_best.machine, at_best.collective, chosen.schedule, at_best.model).time == times[best_c]


def test_a_per_c_bound_may_exceed_a_schedule_at_another_c():
    """Why only the least bounds a C-free instance: on a ring, C = 8's latency-laden bound is
    above the verified C = 2 optimum, so applying it to every C would be wrong."""
    from optcoll.bounds import best_lower_bound
    from optcoll.machines.catalog import load_machine

    machine = load_machine("ring4")
    inst = Instance("ring", machine, make_collective("allgather", range(4), 2.0**20, 1), chunk_choices=(1, 2, 8))
    at_8 = at_chunks(inst, 8)
    bound_8 = best_lower_bound(at_8.machine, at_8.collective, at_8.model).value
    best = run.synthesized(inst, "tacos")
    assert best.result.params["chunks_per_rank"] != 8
    assert bound_8 > best.result.time and _not_below(best.result.time, best.result.lower_bound)
