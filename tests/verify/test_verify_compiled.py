"""The compiled path of the event engine decides exactly as the Python one: the same verdict, time
and violation down to its words, on random machines with every kind of switch, combining or not,
valid or mutated, timed or step, and on every schedule recorded as ground truth and its mutants
(there the vectorised engine too, wherever it applies).

The compiled path takes its words from the event engine (it replays the chunk that goes wrong
first), so what these tests pin down is that both meet the *same* first violation, and that a
valid schedule gets the same time: the part the kernel decides on its own.
"""
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optcoll.instances.instance import TimeModel
from optcoll.schedules.files import load_schedule
from optcoll.schedules.jsonfile import schedule_to_dict
from optcoll.schedules.npzfile import schedule_from_npz, schedule_to_npz
from optcoll.schedules.schedule import ScheduleBuilder
from optcoll.verify import verify
from optcoll.verify.verifier import COMPILED_FROM, verify_with
from verify_helpers import (collective, combining_schedules, mutants, random_case, random_collective, random_machine,
                            random_model, random_step_case, same_verdict, star, stored_schedules)

SETTINGS = settings(max_examples=80, deadline=None, derandomize=True)
seeds = st.integers(min_value=0, max_value=2**32 - 1)
ALL_KINDS = ("allgather", "broadcast", "gather", "scatter", "alltoall", "reducescatter", "allreduce", "reduce")


def assert_same(machine, coll, schedule, model):
    """Both paths agree; and the compiled one keeps the verdict (valid or not, and the time) with
    the transfers listed in reverse (``via`` renumbered). Returns the verdict."""
    ref = verify_with(machine, coll, schedule, model, "events")
    got = verify_with(machine, coll, schedule, model, "compiled")
    assert same_verdict(ref, got, path=False), (ref.summary(), got.summary())
    again = verify_with(machine, coll, schedule.take(np.arange(len(schedule))[::-1]), model, "compiled")
    assert (again.valid, again.time) == (ref.valid, ref.time), (ref.summary(), again.summary())
    return ref


def agree_on_mutants(rng, machine, coll, schedule, model, count):
    """Both paths agree on ``count`` random mutants of ``schedule``."""
    for _, mutant in mutants(rng, machine, coll, schedule, count):
        assert_same(machine, coll, mutant, model)


@SETTINGS
@given(seeds)
def test_copies_through_any_switch_and_their_mutants(seed):
    rng = random.Random(seed)
    machine, coll, model, s = random_case(rng, "any")
    assert assert_same(machine, coll, s, model).valid
    agree_on_mutants(rng, machine, coll, s, model, 5)


@SETTINGS
@given(seeds)
def test_combining_schedules_and_their_mutants(seed):
    """ReduceScatter (an inverted AllGather) and AllReduce (it, then an AllGather) through plain,
    multicast and reducing switches, plain switches' sends named (via) or not, under both combining
    rules, then mutated into double counts, ambiguous arrivals and forwards, overwrites, missing
    contributions, switch forwarding errors, bad names and overlaps."""
    rng = random.Random(seed)
    machine = random_machine(rng, switches=rng.choice(["none", "reduce-multicast", "any", "plain"]))
    n = machine.num_npus
    ranks = sorted(rng.sample(range(n), rng.randint(2, n)))
    c = rng.randint(1, 3)
    model = TimeModel(occupancy="link", send_ports=rng.choice([None, 1]), recv_ports=rng.choice([None, 2]),
                      combining=rng.choice(["copy-or-reduce", "reduce-only"]))
    rs, reduce_scatter, ar, allreduce = combining_schedules(rng, machine, ranks, c, model)
    assert_same(machine, rs, reduce_scatter, model)
    assert_same(machine, ar, allreduce, model)
    agree_on_mutants(rng, machine, ar, allreduce, model, 6)


def _exchange(rng: random.Random, k: int, c: int):
    """AllReduce among k NPUs around one plain switch, every partial passing the switch: NPU v
    copies its partial into the switch k-1 times, then in round m the switch reduces into each NPU
    the partial of another (a random pairing per round), all k departures of a round at one
    instant, so partials of one chunk arrive and leave together. Some departures name their
    arrival (``via``), some not; some starts moved off their instant. Valid when all are named and
    none moved."""
    machine = star(k)
    sw = k
    b = ScheduleBuilder(machine)
    named = rng.choice([0.0, 0.5, 1.0])
    tau = 2e-6  # one hop (collective's chunk bytes at 1 GB/s plus 1 us)
    jitter = rng.choice([0.0, 0.0, 0.5])

    def late() -> float:
        return tau * jitter if rng.random() < 0.1 else 0.0

    for chunk in range(k * c):
        t0 = chunk * 2 * k * tau
        rows = {(v, m): b.add(chunk, machine.links_between(v, sw)[0], t0 + m * tau + late())
                for v in range(k) for m in range(k - 1)}
        shifts = list(range(1, k))  # in round m NPU v gets the partial of v + shifts[m]: all, once
        rng.shuffle(shifts)
        for m, shift in enumerate(shifts):
            for v in range(k):
                b.add(chunk, machine.links_between(sw, v)[0], t0 + (k - 1 + m) * tau + late(), "reduce",
                      via=rows[(v + shift) % k, m] if rng.random() < named else None)
    return machine, collective("allreduce", k, c=c), b.build()


@SETTINGS
@given(seeds)
def test_exchanges_through_a_plain_switch_named_or_not(seed):
    """Simultaneous partials of one chunk at a plain switch (docs/model.md §5.3): named forwards,
    unnamed ones decided together (ambiguous-forward), names of taken or missing arrivals, bad
    names, under both combining rules; both paths agree, in any listing order."""
    rng = random.Random(seed)
    machine, coll, s = _exchange(rng, rng.randint(2, 4), rng.randint(1, 2))
    model = TimeModel(combining=rng.choice(["copy-or-reduce", "reduce-only"]))
    assert_same(machine, coll, s, model)
    assert_same(machine, coll, s.take(np.array(rng.sample(range(len(s)), len(s)))), model)
    agree_on_mutants(rng, machine, coll, s, model, 6)


@SETTINGS
@given(seeds)
def test_random_rows_of_every_collective(seed):
    """Schedules of random rows: mostly invalid in every way there is, for every collective."""
    rng = random.Random(seed)
    machine = random_machine(rng, switches="any")
    coll = random_collective(rng, machine, kinds=ALL_KINDS)
    n = rng.randint(0, 30)
    tau = 2e-6
    b = ScheduleBuilder(machine)
    for _ in range(n):
        b.add(rng.randrange(coll.num_chunks), rng.randrange(machine.num_links), rng.randrange(8) * tau / 2,
              rng.choice(["copy", "copy", "reduce"]))
    assert_same(machine, coll, b.build(), random_model(rng))


@SETTINGS
@given(seeds)
def test_step_model_schedules(seed):
    rng = random.Random(seed)
    machine, coll, s = random_step_case(rng)
    assert assert_same(machine, coll, s, TimeModel()).valid
    agree_on_mutants(rng, machine, coll, s, TimeModel(), 3)


@SETTINGS
@given(seeds)
def test_link_overlap_compiled_finds_the_transfer_timing_finds(seed):
    """The compiled overlap check and ``timing.link_overlap`` (sorts over batches of links) name
    the same first transfer, on schedules with many overlaps, ties in start and small batches."""
    from optcoll.verify import compiled
    from optcoll.verify.problem import prepare
    from optcoll.verify.timing import link_overlap

    rng = random.Random(seed)
    machine = random_machine(rng, switches="any")
    coll = random_collective(rng, machine)
    model = random_model(rng)
    b = ScheduleBuilder(machine)
    for _ in range(rng.randint(0, 40)):
        b.add(rng.randrange(coll.num_chunks), rng.randrange(machine.num_links), rng.randrange(12) * 1e-6)
    problem, _ = prepare(machine, coll, b.build(), model, None)
    want = link_overlap(problem, rng.choice([1, 3, 1 << 20]))
    got = compiled._link_overlap(problem)
    assert (got is None) == (want is None)
    if want is not None:
        assert got.violation == want.violation


def test_plain_switch_forwards_arrivals_in_order_in_both_paths():
    """A plain switch holds one copy per arrival and forwards each once: a third send of two
    arrivals is a switch-forward violation, named the same way."""
    machine = star(3)
    coll = collective("broadcast", 3, root=0)
    b = ScheduleBuilder(machine)
    b.send(0, 0, 3, start=0.0)
    b.send(0, 0, 3, start=2e-6)
    for t, dst in ((4e-6, 1), (5e-6, 2), (6e-6, 1)):
        b.send(0, 3, dst, start=t)
    result = assert_same(machine, coll, b.build(), TimeModel())
    assert result.violation.kind == "switch-forward"


def test_auto_runs_the_compiled_path_on_large_combining_schedules():
    from optcoll.collectives.builtins import make_collective
    from optcoll.instances.instance import Instance
    from optcoll.machines.generators import torus
    from optcoll.producers.registry import get_synthesizer

    machine = torus([16, 16], 50 * 2.0**30, 0.5e-6)
    coll = make_collective("allreduce", range(machine.num_npus), 2.0**30, 1)
    s = get_synthesizer("tacos+")(Instance("ar", machine, coll), 0)
    assert len(s) >= COMPILED_FROM
    result = verify(machine, coll, s)
    assert result.path == "compiled" and result.valid
    assert result.time == verify_with(machine, coll, s, TimeModel(), "events").time


def _stored_cases(max_bytes):
    return [pytest.param(name, instance, path, id=name) for name, instance, path in stored_schedules(max_bytes)]


def _assert_all_paths_agree(machine, coll, schedule, model):
    """``assert_same``, and where the vectorised engine applies (``verify`` picks it) it agrees too."""
    ref = assert_same(machine, coll, schedule, model)
    chosen = verify(machine, coll, schedule, model)
    if chosen.path == "vectorised":
        assert same_verdict(ref, chosen, path=False), (ref.summary(), chosen.summary())
    return ref


def _check_stored(instance, path, count):
    """Every path agrees on the stored schedule and its mutants, and it reads back the same from
    its compact form (JSON → npz → JSON gives the same JSON)."""
    machine, coll, model = instance.machine, instance.collective, instance.model
    schedule = load_schedule(path, machine)
    back = schedule_from_npz(schedule_to_npz(schedule, machine), machine)
    assert schedule_to_dict(back, machine) == schedule_to_dict(schedule, machine)
    assert _assert_all_paths_agree(machine, coll, schedule, model).valid
    rng = random.Random(path.name)
    for kind, mutant in mutants(rng, machine, coll, schedule, count):
        result = _assert_all_paths_agree(machine, coll, mutant, model)
        if not result.valid:  # words a person can act on: which transfer, chunk or node, and when
            assert result.violation.message and result.violation.kind, kind


@pytest.mark.parametrize("name, instance, path", _stored_cases(10_000))
def test_stored_schedules_and_their_mutants(name, instance, path):
    _check_stored(instance, path, 3)


@pytest.mark.slow
@pytest.mark.parametrize("name, instance, path", _stored_cases(None))
def test_every_stored_schedule_and_its_mutants(name, instance, path):
    _check_stored(instance, path, 8)
