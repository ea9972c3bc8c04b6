"""Property tests on random small machines: the two engines agree, mutations never make a schedule
both valid and faster, inversion turns AllGather into ReduceScatter, step and timed models agree."""
import math
import random

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from optcoll.collectives.builtins import dual
from optcoll.instances.instance import TimeModel
from optcoll.schedules.schedule import Schedule
from optcoll.verify import step_to_timed, verify
from optcoll.verify.stepmodel import link_weights
from optcoll.verify.verifier import verify_with
from verify_helpers import (collective, invert, random_case, random_collective, random_machine, random_schedule,
                            random_step_schedule, replace, same_verdict, subset)

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True)
seeds = st.integers(min_value=0, max_value=2**32 - 1)


def _same(a, b) -> bool:
    """The engines agree: validity, time and every arrival, the violation down to its words."""
    return same_verdict(a, b, path=False)


def _delay(rng, machine, coll, s, i):
    return replace(s, start=np.where(np.arange(len(s)) == i, s.start + rng.choice([0.1, 1.0, 3.0]) * 1e-6,
                                     s.start))


def _remove(rng, machine, coll, s, i):
    return subset(s, np.arange(len(s)) != i)


def _move_to_a_no_faster_link(rng, machine, coll, s, i):
    """Another link into the same node whose link time is no shorter (None if there is none)."""
    e = int(s.link[i])
    times = (machine.link_latency + coll.chunk_bytes / machine.link_bandwidth)
    options = [f for f in machine.in_links[int(machine.link_dst[e])].tolist()
               if f != e and times[f] >= times[e]]
    if not options:
        return None
    return replace(s, link=np.where(np.arange(len(s)) == i, rng.choice(options), s.link))


def _earlier(rng, machine, coll, s, i):
    return replace(s, start=np.where(np.arange(len(s)) == i, s.start * rng.random(), s.start))


def _other_chunk(rng, machine, coll, s, i):
    return replace(s, chunk=np.where(np.arange(len(s)) == i, rng.randrange(coll.num_chunks + 1), s.chunk))


def _any_link(rng, machine, coll, s, i):
    return replace(s, link=np.where(np.arange(len(s)) == i, rng.randrange(machine.num_links), s.link))


def _reduce(rng, machine, coll, s, i):
    return replace(s, op=np.where(np.arange(len(s)) == i, 1, s.op).astype(np.uint8))


def _swap_times(rng, machine, coll, s, i):
    j = rng.randrange(len(s))
    start = s.start.copy()
    start[i], start[j] = start[j], start[i]
    return replace(s, start=start)


NO_FASTER = (_delay, _remove, _move_to_a_no_faster_link)
ANY = NO_FASTER + (_earlier, _other_chunk, _any_link, _reduce, _swap_times)


def _mutants(rng, machine, coll, s, kinds, count=4):
    for _ in range(count if len(s) else 0):
        m = rng.choice(kinds)(rng, machine, coll, s, rng.randrange(len(s)))
        if m is not None:
            yield m


@SETTINGS
@given(seeds)
def test_engines_agree_on_random_valid_and_mutated_schedules(seed):
    rng = random.Random(seed)
    machine, coll, model, s = random_case(rng, "multicast")
    fast = verify_with(machine, coll, s, model, "vectorised")
    slow = verify_with(machine, coll, s, model, "events")
    assert fast.valid, fast.violation.message
    assert _same(fast, slow)
    for mutant in _mutants(rng, machine, coll, s, ANY, count=6):
        assert _same(verify_with(machine, coll, mutant, model, "vectorised"),
                     verify_with(machine, coll, mutant, model, "events"))


@SETTINGS
@given(seeds)
def test_mutations_are_rejected_or_no_faster(seed):
    rng = random.Random(seed)
    machine, coll, model, s = random_case(rng, "any")
    base = verify(machine, coll, s, model)
    assert base.valid, base.violation.message
    for mutant in _mutants(rng, machine, coll, s, NO_FASTER):
        result = verify(machine, coll, mutant, model)
        assert not result.valid or result.time >= base.time * (1 - 1e-12)


@SETTINGS
@given(seeds)
def test_inverted_allgather_is_a_reducescatter_and_allreduce_composes(seed):
    """SCCL inversion, checked through the combining (event) engine, then RS + AG = AllReduce."""
    rng = random.Random(seed)
    machine = random_machine(rng, switches=rng.choice(["none", "reduce-multicast"]))
    n = machine.num_npus
    ranks = sorted(rng.sample(range(n), rng.randint(2, n)))
    c = rng.randint(1, 2)
    ag, rs, ar = (collective(kind, ranks, c=c) for kind in ("allgather", "reducescatter", "allreduce"))
    assert dual(rs).post.as_lists() == ag.post.as_lists()
    # Time reversal mirrors each occupancy interval exactly under "link" occupancy; under
    # "serialization" it also shifts it by the link's latency, which keeps links apart but not ports.
    occupancy = rng.choice(["link", "serialization"])
    ports = occupancy == "link"
    ag_model = TimeModel(occupancy=occupancy, send_ports=rng.choice([None, 1]) if ports else None,
                         recv_ports=rng.choice([None, 2]) if ports else None)
    rs_model = TimeModel(occupancy=occupancy, send_ports=ag_model.recv_ports, recv_ports=ag_model.send_ports)

    reversed_machine = machine.reversed()
    forward = random_schedule(rng, reversed_machine, ag, ag_model)
    horizon = verify(reversed_machine, ag, forward, ag_model).time
    inverted = invert(reversed_machine, forward, ag.chunk_bytes, horizon)
    result = verify(machine, rs, inverted, rs_model)
    assert result.valid and result.path == "events", result.violation.message
    # The root of chunk k collects its last partial when the forward tree's first send from it left.
    roots = np.array([ag.pre.of(k)[0] for k in range(ag.num_chunks)])
    from_root = reversed_machine.link_src[forward.link] == roots[forward.chunk]
    assert math.isclose(result.time, horizon - forward.start[from_root].min(), rel_tol=1e-12)

    for mutant in _mutants(rng, machine, rs, inverted, (_delay,)):
        delayed = verify(machine, rs, mutant, rs_model)
        assert not delayed.valid or delayed.time >= result.time * (1 - 1e-12)
    for mutant in _mutants(rng, machine, rs, inverted, (_remove,)):
        assert verify(machine, rs, mutant, rs_model).violation.kind in ("missing-contribution", "causality")

    second = random_schedule(rng, machine, ag, rs_model)
    t_ag = verify(machine, ag, second, rs_model).time
    both = Schedule.concat(inverted, second, result.time)
    allreduce = verify(machine, ar, both, rs_model)
    assert allreduce.valid, allreduce.violation.message
    assert math.isclose(allreduce.time, result.time + t_ag, rel_tol=1e-12)


@SETTINGS
@given(seeds)
def test_step_model_engines_agree_and_match_the_timed_model(seed):
    rng = random.Random(seed)
    equal = rng.random() < 0.5
    machine = random_machine(rng, switches="none", equal_links=equal)
    coll = random_collective(rng, machine)
    s = random_step_schedule(rng, machine, coll, link_weights(machine), max_rounds=1 if equal else 2)
    fast = verify_with(machine, coll, s, TimeModel(), "vectorised")
    assert fast.valid, fast.violation.message
    assert _same(fast, verify_with(machine, coll, s, TimeModel(), "events"))
    for mutant in _mutants(rng, machine, coll, s, (_remove, _other_chunk, _any_link, _reduce), count=4):
        assert _same(verify_with(machine, coll, mutant, TimeModel(), "vectorised"),
                     verify_with(machine, coll, mutant, TimeModel(), "events"))
    bumped = replace(s, step=np.clip(s.step + np.array([rng.choice([-1, 0, 1]) for _ in range(len(s))],
                                                       dtype=np.int64), 0, s.num_steps + 1))
    assert _same(verify_with(machine, coll, bumped, TimeModel(), "vectorised"),
                 verify_with(machine, coll, bumped, TimeModel(), "events"))
    if equal:
        # One round per step on equal links: the timed schedule is valid, every delivery lands by
        # the end of its step, and the postcondition holds when the last needed chunk first lands.
        timed = verify(machine, coll, step_to_timed(machine, coll, s))
        assert timed.valid, timed.violation.message
        tau = fast.time / fast.steps
        first_step = {}
        for k, e, step in zip(s.chunk.tolist(), s.link.tolist(), s.step.tolist()):
            key = (k, int(machine.link_dst[e]))
            first_step[key] = min(first_step.get(key, step), step)
        post = [(k, v) for k in range(coll.num_chunks) for v in coll.post.of(k).tolist()
                if v not in coll.pre.of(k)]
        expected = max((first_step[p] for p in post), default=0) * tau
        assert math.isclose(timed.time, expected, rel_tol=1e-12)
        assert timed.time <= fast.time * (1 + 1e-12)
