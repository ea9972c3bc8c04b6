"""Batching changes memory, never the verdict: the event engine over ranges of chunks (timing
checked once, vectorised) and the timing checks over ranges of links and nodes give exactly the
verdict of one pass over everything, valid or not, combining or not, with switches, timed or step."""
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optcoll.collectives.builtins import make_collective
from optcoll.instances.instance import Instance, TimeModel
from optcoll.machines.generators import torus
from optcoll.producers.registry import get_synthesizer
from optcoll.schedules.schedule import REDUCE, Schedule, ScheduleBuilder
from optcoll.verify.problem import ranges
from optcoll.verify.verifier import verify_with
from verify_helpers import (TAU, collective, combining_schedules, full, random_case, random_machine, random_step_case,
                            replace, same_verdict, subset)

BATCH_SETTINGS = settings(max_examples=60, deadline=None, derandomize=True)
SMALL_BATCHES = (1, 2, 7, 40)


def assert_batching_invisible(machine, coll, schedule, model, engine="events"):
    whole = verify_with(machine, coll, schedule, model, engine)
    for batch in SMALL_BATCHES:
        part = verify_with(machine, coll, schedule, model, engine, batch=batch)
        assert same_verdict(whole, part), (batch, whole.summary(), part.summary())
    return whole


def mutate(rng: random.Random, machine, coll, s: Schedule, count: int) -> Schedule:
    """``count`` random edits (time, chunk, link or op of a row, or a dropped row): often several
    violations in different chunks at once, which is what the batches must order correctly."""
    cols = {name: getattr(s, name).copy() for name in ("chunk", "link", "start", "op", "step")}
    keep = np.ones(len(s), dtype=bool)
    for _ in range(count if len(s) else 0):
        i = rng.randrange(len(s))
        edit = rng.choice(["start", "chunk", "link", "op", "drop"])
        if edit == "start":
            cols["start"][i] = max(0.0, cols["start"][i] + rng.choice([-1.0, -0.5, 0.3, 1.0]) * TAU)
        elif edit == "chunk":
            cols["chunk"][i] = rng.randrange(coll.num_chunks)
        elif edit == "link":
            cols["link"][i] = rng.randrange(machine.num_links)
        elif edit == "op":
            cols["op"][i] ^= 1
        else:
            keep[i] = False
    return subset(replace(s, **cols), keep)


@BATCH_SETTINGS
@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_batched_timed_schedules_copies_through_any_switch(seed):
    rng = random.Random(seed)
    machine, coll, model, s = random_case(rng, "any")
    result = assert_batching_invisible(machine, coll, s, model)
    assert result.valid, result.violation.message
    for _ in range(3):
        assert_batching_invisible(machine, coll, mutate(rng, machine, coll, s, rng.randint(1, 3)), model)
    if all(sw.multicast for sw in machine.switches):
        assert_batching_invisible(machine, coll, mutate(rng, machine, coll, s, 2), model, "vectorised")


@BATCH_SETTINGS
@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_batched_combining_schedules(seed):
    """ReduceScatter (an inverted AllGather) and AllReduce (it, then an AllGather), with and
    without in-network reduction switches, then mutated into double counts, ambiguous arrivals,
    missing contributions and overlaps."""
    rng = random.Random(seed)
    machine = random_machine(rng, switches=rng.choice(["none", "reduce-multicast"]))
    n = machine.num_npus
    ranks = sorted(rng.sample(range(n), rng.randint(2, n)))
    c = rng.randint(1, 3)
    model = TimeModel(occupancy="link", send_ports=rng.choice([None, 1]), recv_ports=rng.choice([None, 2]))
    rs, reduce_scatter, ar, allreduce = combining_schedules(rng, machine, ranks, c, model)
    rs_result = assert_batching_invisible(machine, rs, reduce_scatter, model)
    assert rs_result.valid, rs_result.violation.message
    assert assert_batching_invisible(machine, ar, allreduce, model).valid
    for _ in range(4):
        assert_batching_invisible(machine, ar, mutate(rng, machine, ar, allreduce, rng.randint(1, 3)), model)


@BATCH_SETTINGS
@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_batched_step_model_schedules(seed):
    rng = random.Random(seed)
    machine, coll, s = random_step_case(rng)
    assert assert_batching_invisible(machine, coll, s, TimeModel()).valid
    for _ in range(3 if len(s) else 0):
        i = rng.randrange(len(s))
        bumped = replace(s, step=np.where(np.arange(len(s)) == i, rng.randint(1, s.num_steps), s.step),
                         chunk=np.where(np.arange(len(s)) == rng.randrange(len(s)),
                                        rng.randrange(coll.num_chunks), s.chunk))
        assert_batching_invisible(machine, coll, bumped, TimeModel())
        assert_batching_invisible(machine, coll, bumped, TimeModel(), "vectorised")


def test_a_delivery_just_after_a_start_is_met_before_it_across_batches():
    """Chunk 0 is double-counted on delivery at t; chunk 2 overlaps a link at a start within the
    tolerance before t. The engine applies deliveries up to start + eps before that start, so the
    double count comes first, although its time is later (plain time order would say otherwise)."""
    machine = full(3)
    coll = collective("allreduce", 3)
    link = {(u, v): machine.links_between(u, v)[0] for u in range(3) for v in range(3) if u != v}
    b = ScheduleBuilder(machine)
    b.send(0, 1, 0, start=0.0, op="reduce")
    b.send(0, 1, 0, start=TAU, op="reduce")  # delivers {1} again at 2·TAU: double count
    twice = TAU + TAU
    just_before = twice - 2e-15  # within eps = 1e-9 · 2·TAU + 1e-15 of the delivery
    b.add(1, link[2, 1], start=just_before - TAU / 2)
    b.add(2, link[2, 1], start=just_before)  # the link is still busy: link-overlap
    s = b.build()
    whole = verify_with(machine, coll, s, TimeModel(), "events")
    assert whole.violation.kind == "double-count", whole.violation.message
    per_chunk = verify_with(machine, coll, s, TimeModel(), "events", batch=1)
    assert same_verdict(whole, per_chunk)
    # Without the double count the overlap remains, earlier in time: ordered by time alone it
    # would have won. The batches found them apart and still agree with the single pass.
    overlap = verify_with(machine, coll, replace(s, op=np.zeros(len(s), dtype=np.uint8)), TimeModel(),
                          "events", batch=1)
    assert overlap.violation.kind == "link-overlap"
    assert overlap.violation.time == just_before < whole.violation.time


@pytest.mark.parametrize("kind", ["allreduce", "reducescatter"])
def test_greedy_schedule_on_a_16x16_torus_verifies_identically_in_batches(kind):
    machine = torus([16, 16], 50 * 2.0**30, 0.5e-6)
    coll = make_collective(kind, range(machine.num_npus), 2.0**30, 1)
    s = get_synthesizer("tacos+")(Instance(kind, machine, coll), 0)
    model = TimeModel()
    whole = verify_with(machine, coll, s, model, "events")  # one pass: far below BATCH_TRANSFERS
    assert whole.valid, whole.violation.message
    per_chunk = coll.pre.counts()[0] + coll.post.counts()[0] + len(s) // coll.num_chunks
    batched = verify_with(machine, coll, s, model, "events", batch=int(per_chunk * 37))
    assert same_verdict(whole, batched)
    # The last reduce started one link time early: invalid, the same way in batches.
    reduce_rows = np.flatnonzero(s.op == REDUCE)
    last = int(reduce_rows[np.argmax(s.start[reduce_rows])])
    tau = (machine.link_latency + coll.chunk_bytes / machine.link_bandwidth)[0]
    early = replace(s, start=np.where(np.arange(len(s)) == last, s.start - tau, s.start))
    broken = verify_with(machine, coll, early, model, "events")
    assert not broken.valid
    assert same_verdict(broken, verify_with(machine, coll, early, model, "events", batch=int(per_chunk * 37)))


@given(st.lists(st.integers(min_value=0, max_value=9), max_size=30), st.integers(min_value=1, max_value=25))
def test_ranges_cover_every_index_in_order_within_the_limit(weights, limit):
    spans = ranges(np.array(weights, dtype=np.int64), limit)
    assert [i for lo, hi in spans for i in range(lo, hi)] == list(range(len(weights)))
    for lo, hi in spans:
        assert hi > lo
        assert sum(weights[lo:hi]) <= limit or hi == lo + 1
    # Greedy: no range could have taken the next index too.
    for (lo, hi), _ in zip(spans, spans[1:]):
        assert sum(weights[lo:hi + 1]) > limit
