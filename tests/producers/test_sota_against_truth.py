"""No recorded optimum is slower than an algorithm people run, and no published algorithm beats a
recorded lower bound: over every suite's recorded ground truth, in the instance's own model.

A failure here is a bug in a bound or a solver (or in the algorithm's schedule, which the shared
verifier would have caught first): report it, never loosen it. The family bound of AllReduce
(optimal only within ReduceScatter + AllGather) is not a lower bound and is not used; NCCL's tree,
NVLS and CollNet are allowed to beat it.
"""
from __future__ import annotations

import pytest

from optcoll.instances.suite import builtin_suite_names, find_suite
from optcoll.producers.base import NotApplicable
from optcoll.producers.registry import SYNTHESIZERS
from optcoll.results.record import meets
from optcoll.truth.record import OPTIMAL
from optcoll.truth.stored import load_truth
from optcoll.verify import verify

#: The algorithms of issue 19: NCCL's, and the ring/torus algorithms of 2024-26.
PUBLISHED = ("nccl-ring", "nccl-tree", "nccl-pat", "nccl-nvls", "nccl-nvls-tree", "nccl-collnet",
             "swing", "trivance", "bine")
#: Suites whose every instance runs in the default test suite (seconds); the rest are slow.
FAST_SUITES = ("quick", "standard")


def recorded(suites: list[str]):
    out = []
    for name in suites:
        for spec in find_suite(name).specs:
            truth, _ = load_truth(spec)
            if truth is not None and (truth.lower_bound is not None or truth.best is not None):
                out.append(pytest.param(spec, truth, id=f"{name}/{spec.name}"))
    return out


def check(spec, truth) -> None:
    """Runs every published algorithm that applies to the instance."""
    inst = spec.instance
    assert truth.model == inst.model.kind
    for name in PUBLISHED:
        try:
            schedule = SYNTHESIZERS[name](inst, 0)
        except NotApplicable:
            continue
        result = verify(inst.machine, inst.collective, schedule, inst.model)
        assert result.valid, f"{name} on {spec.name}: {result.violation.message}"
        if truth.lower_bound is not None:
            assert result.time >= truth.lower_bound.value or meets(result.time, truth.lower_bound.value), (
                f"{name} on {spec.name} takes {result.time!r} s, below the recorded lower bound "
                f"{truth.lower_bound.describe()}")
        if truth.status == OPTIMAL:
            assert result.time >= truth.best.value or meets(result.time, truth.best.value), (
                f"{name} on {spec.name} takes {result.time!r} s, faster than the recorded optimum "
                f"{truth.best.describe()}")


@pytest.mark.parametrize("spec, truth", recorded(list(FAST_SUITES)))
def test_no_recorded_optimum_is_slower_than_a_published_algorithm(spec, truth):
    check(spec, truth)


@pytest.mark.slow
@pytest.mark.parametrize("spec, truth", recorded([s for s in builtin_suite_names() if s not in FAST_SUITES]))
def test_no_recorded_optimum_is_slower_than_a_published_algorithm_slow_suites(spec, truth):
    check(spec, truth)
