"""A schedule is a set of transfers: every stored schedule of every built-in suite, listed in three
other orders (``via`` renumbered with its rows, ``Schedule.take``), keeps its verdict and its
time (docs/model.md, "Switches: forwarding simultaneous arrivals"). Four rail-exchange AllReduce
schedules were valid only in their listed order before plain switches were told which arrival to
forward. The largest files, and the sizes suite above 64 KiB, run under ``-m slow``."""
from __future__ import annotations

import functools

import numpy as np
import pytest

from optcoll.instances.suite import builtin_suite_names, find_suite
from optcoll.producers.chunks import chosen
from optcoll.schedules.files import load_schedule
from optcoll.truth.stored import load_truth, schedule_path
from optcoll.verify import verify

LARGE = 25_000  # bytes of compressed schedule: above this, -m slow
#: A suite read once per process: reading one builds every instance in it (about a second).
_suite = functools.cache(find_suite)
#: The sizes suite asks each machine and collective at four sizes; by default only its smallest
#: size runs (32 schedules), the other three under -m slow.
SIZES_DEFAULT = "-64k"


def _stored():
    out = []
    for suite in builtin_suite_names():
        for spec in _suite(suite).specs:
            path = schedule_path(spec)
            if path is not None and path.exists():
                slow = path.stat().st_size > LARGE or (suite == "sizes" and not spec.name.endswith(SIZES_DEFAULT))
                marks = [pytest.mark.slow] if slow else []
                out.append(pytest.param(suite, spec.name, id=f"{suite}/{spec.name}", marks=marks))
    return out


@pytest.mark.parametrize("suite, name", _stored())
def test_stored_schedule_keeps_its_verdict_and_time_in_any_order(suite, name):
    spec = _suite(suite).spec(name)
    truth, stale = load_truth(spec)
    assert truth is not None and truth.best is not None, stale
    instance = chosen(spec.instance, truth.best.details.get("params", {}))
    schedule = load_schedule(spec.path.parent / truth.schedule, instance.machine)
    listed = verify(instance.machine, instance.collective, schedule, instance.model)
    assert listed.valid and listed.time == truth.best.value, listed.violation
    rng = np.random.default_rng(0)
    key = schedule.start if schedule.rounds is None else schedule.step.astype(float)
    for order in (np.lexsort((schedule.link, key)), rng.permutation(len(schedule)), np.arange(len(schedule))[::-1]):
        again = verify(instance.machine, instance.collective, schedule.take(order), instance.model)
        assert (again.valid, again.time) == (True, listed.time), again.violation
