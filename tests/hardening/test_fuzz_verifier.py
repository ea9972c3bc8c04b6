"""The shared verifier on random schedules over random small machines: every schedule is either
rejected with a violation (a kind and a message a person can act on) or accepted with a time no
lower bound beats. Valid schedules come from the verifier tests' generators (list scheduling along
random routing trees, SCCL inversion, step-model packing), then are mutated; garbage rows name
chunks and links that may not exist, negative, NaN and infinite times."""
from __future__ import annotations

import math
import random

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optcoll.bounds import lower_bounds
from optcoll.collectives.builtins import KINDS
from optcoll.instances.instance import TimeModel
from optcoll.results.record import MEET_TOLERANCE
from optcoll.schedules.schedule import COPY, REDUCE, Schedule, from_arrays
from optcoll.verify import verify
from optcoll.verify.stepmodel import link_weights
from verify.verify_helpers import (collective, invert, random_machine, random_model, random_schedule,
                            random_step_schedule, replace, subset)

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])
seeds = st.integers(min_value=0, max_value=2**32 - 1)
ROOTED = tuple(kind for kind, (_, rooted) in KINDS.items() if rooted)


def judged(machine, coll, schedule: Schedule, model: TimeModel):
    """The verdict, after checking it is one of the two allowed: a rejection that names its kind
    and says why, or a time at or above every lower bound (within the float tolerance results use)."""
    result = verify(machine, coll, schedule, model)
    if not result.valid:
        violation = result.violation
        assert isinstance(violation.kind, str) and violation.kind.strip(), violation
        assert isinstance(violation.message, str) and violation.message.strip(), violation
        return result
    assert math.isfinite(result.time) and result.time >= 0, result.time
    for bound in lower_bounds(machine, coll, model):
        assert result.time >= bound.value * (1 - MEET_TOLERANCE) - 1e-15, \
            f"verified time {result.time!r} beats the {bound.name} bound {bound.value!r}: {bound.detail}"
    return result


def _random_collective(rng: random.Random, machine, kinds=tuple(KINDS)):
    ranks = sorted(rng.sample(range(machine.num_npus), rng.randint(2, machine.num_npus)))
    kind = rng.choice(kinds)
    return collective(kind, ranks, rng.choice(ranks) if kind in ROOTED else None, rng.randint(1, 2))


def _mutate(rng: random.Random, machine, coll, schedule: Schedule) -> Schedule:
    """One random edit of a schedule: a row delayed, moved earlier, removed, duplicated, sent on
    another link, carrying another (possibly nonexistent) chunk, or with its op flipped."""
    n = len(schedule)
    if n == 0:
        return schedule
    i = rng.randrange(n)
    at = np.arange(n) == i
    tau = float((machine.link_latency + coll.chunk_bytes / machine.link_bandwidth).max())
    edit = rng.choice(["delay", "earlier", "remove", "duplicate", "link", "chunk", "op"])
    if edit == "delay":
        return replace(schedule, start=np.where(at, schedule.start + rng.choice([0.25, 1.0, 3.0]) * tau,
                                                schedule.start))
    if edit == "earlier":
        return replace(schedule, start=np.where(at, schedule.start * rng.random(), schedule.start))
    if edit == "remove":
        return subset(schedule, ~at)
    if edit == "duplicate":
        return subset(schedule, np.r_[np.arange(n), i])
    if edit == "link":
        return replace(schedule, link=np.where(at, rng.randrange(machine.num_links), schedule.link))
    if edit == "chunk":
        return replace(schedule, chunk=np.where(at, rng.randrange(coll.num_chunks + 1), schedule.chunk))
    return replace(schedule, op=np.where(at, REDUCE - schedule.op, schedule.op))


@SETTINGS
@given(seed=seeds)
def test_garbage_schedules_are_rejected_with_a_reason_or_beat_no_bound(seed):
    """Rows of random chunks (some nonexistent), links (some nonexistent), ops and start times
    (multiples of a link time, some negative, NaN or infinite) on random machines, for every
    built-in collective and random time models."""
    rng = random.Random(seed)
    machine = random_machine(rng, max_npus=5)
    coll = _random_collective(rng, machine)
    model = random_model(rng)
    tau = float((machine.link_latency + coll.chunk_bytes / machine.link_bandwidth).max())
    n = rng.randint(0, 3 * coll.num_chunks)
    times = [rng.choice([0.0, 1.0, 2.0, 3.0, 0.5]) * tau for _ in range(n)]
    for i in range(n):
        if rng.random() < 0.05:
            times[i] = rng.choice([-tau, math.nan, math.inf])
    schedule = from_arrays([rng.randint(-1, coll.num_chunks) for _ in range(n)],
                           [rng.randint(-1, machine.num_links) for _ in range(n)], times,
                           [rng.choice([COPY, REDUCE]) for _ in range(n)])
    judged(machine, coll, schedule, model)


@SETTINGS
@given(seed=seeds, edits=st.integers(0, 3))
def test_valid_schedules_and_their_mutations(seed, edits):
    """A valid list-scheduled schedule for a copy-only collective (it must verify and beat no
    bound), then up to three random edits of it."""
    rng = random.Random(seed)
    machine = random_machine(rng, max_npus=5)
    coll = _random_collective(rng, machine, ("allgather", "broadcast", "gather", "scatter", "alltoall"))
    model = random_model(rng)
    schedule = random_schedule(rng, machine, coll, model)
    assert judged(machine, coll, schedule, model).valid
    for _ in range(edits):
        schedule = _mutate(rng, machine, coll, schedule)
    judged(machine, coll, schedule, model)


@SETTINGS
@given(seed=seeds, edits=st.integers(0, 3))
def test_inverted_schedules_of_combining_collectives_and_their_mutations(seed, edits):
    """ReduceScatter and Reduce schedules built by SCCL inversion of a valid AllGather/Broadcast
    schedule on the reversed machine (sub-communicators, reducing switches, port limits mirrored),
    unmutated (valid, beating no bound) and then edited."""
    rng = random.Random(seed)
    machine = random_machine(rng, switches=rng.choice(["none", "reduce-multicast"]))
    ranks = sorted(rng.sample(range(machine.num_npus), rng.randint(2, machine.num_npus)))
    dual_kind = rng.choice(["allgather", "broadcast"])
    root = rng.choice(ranks) if dual_kind == "broadcast" else None
    c = rng.randint(1, 2)
    forward_coll = collective(dual_kind, ranks, root, c)
    coll = collective({"allgather": "reducescatter", "broadcast": "reduce"}[dual_kind], ranks, root, c)
    # as in tests/verify: time reversal keeps port intervals apart under "link" occupancy only
    occupancy = rng.choice(["link", "serialization"])
    ports = occupancy == "link"
    forward_model = TimeModel(occupancy=occupancy, send_ports=rng.choice([None, 1]) if ports else None,
                              recv_ports=rng.choice([None, 2]) if ports else None)
    model = TimeModel(occupancy=occupancy, send_ports=forward_model.recv_ports,
                      recv_ports=forward_model.send_ports)
    reversed_machine = machine.reversed()
    forward = random_schedule(rng, reversed_machine, forward_coll, forward_model)
    horizon = verify(reversed_machine, forward_coll, forward, forward_model).time
    schedule = invert(reversed_machine, forward, coll.chunk_bytes, horizon)
    assert judged(machine, coll, schedule, model).valid
    for _ in range(edits):
        schedule = _mutate(rng, machine, coll, schedule)
    judged(machine, coll, schedule, model)


@SETTINGS
@given(seed=seeds, edits=st.integers(0, 2))
def test_step_model_schedules_and_their_mutations(seed, edits):
    """Step-model schedules (holders send to non-holders within each link's per-step capacity),
    valid and beating no bound, then with rows removed, duplicated, re-linked or re-chunked."""
    rng = random.Random(seed)
    machine = random_machine(rng, max_npus=5, switches="none", equal_links=rng.random() < 0.5)
    coll = _random_collective(rng, machine, ("allgather", "broadcast", "gather", "scatter", "alltoall"))
    model = TimeModel(kind="step")
    schedule = random_step_schedule(rng, machine, coll, link_weights(machine))
    assert judged(machine, coll, schedule, model).valid
    for _ in range(edits):
        n = len(schedule)
        if n == 0:
            break
        i = rng.randrange(n)
        at = np.arange(n) == i
        edit = rng.choice(["remove", "duplicate", "link", "chunk", "step"])
        if edit == "remove":
            schedule = subset(schedule, ~at)
        elif edit == "duplicate":
            schedule = subset(schedule, np.r_[np.arange(n), i])
        elif edit == "link":
            schedule = replace(schedule, link=np.where(at, rng.randrange(machine.num_links), schedule.link))
        elif edit == "chunk":
            schedule = replace(schedule, chunk=np.where(at, rng.randrange(coll.num_chunks + 1),
                                                        schedule.chunk))
        else:
            schedule = replace(schedule, step=np.where(at, rng.randint(0, len(schedule.rounds) + 1),
                                                       schedule.step))
        judged(machine, coll, schedule, model)
