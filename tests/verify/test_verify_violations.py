"""Every violation kind, triggered by a hand-built schedule, named precisely in its message."""
import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

from optcoll.collectives.builtins import make_custom
from optcoll.errors import InputError, ScheduleRejected
from optcoll.instances.instance import TimeModel
from optcoll.schedules.schedule import ScheduleBuilder, from_arrays
from optcoll.units import format_time
from optcoll.verify import VIOLATION_KINDS, require_valid, verify
from optcoll.verify.verifier import verify_with
from verify_helpers import (BW, CHUNK, LAT, TAU, collective, full, replace, ring, ring_allgather,
                            ring_reducescatter, star)


def rejected(machine, coll, schedule, kind, model=TimeModel(), *, chunk=None, link=None, at=None,
             transfer=None, words=()):
    """Asserts the verdict, the kind, and that the message names chunk, link and time."""
    result = verify(machine, coll, schedule, model)
    assert not result.valid and math.isinf(result.time)
    v = result.violation
    assert v.kind == kind, v.message
    if chunk is not None:
        assert v.chunk == chunk and f"chunk {chunk}" in v.message, v.message
    if link is not None:
        e = machine.link(link)
        assert v.link == link, v.message
        assert f"link {link} ({machine.label(e.src)}->{machine.label(e.dst)})" in v.message, v.message
    if at is not None:
        assert v.time == pytest.approx(at, abs=1e-15)
        if schedule.rounds is None:
            assert format_time(at) in v.message, v.message
    if transfer is not None:
        assert v.transfer == transfer, v.message
    for word in words:
        assert word in v.message, v.message
    # Engines that apply must agree on the verdict, down to the words.
    for engine in ("events", "vectorised"):
        try:
            other = verify_with(machine, coll, schedule, model, engine)
        except ValueError:
            continue
        w = other.violation
        assert (w.time == v.time or math.isnan(v.time) and math.isnan(w.time))
        assert dataclasses.replace(other.violation, time=0) == dataclasses.replace(v, time=0)
    return v


def append(schedule, chunk, link, start, op=0):
    return from_arrays(np.append(schedule.chunk, chunk), np.append(schedule.link, link),
                       np.append(schedule.start, start), np.append(schedule.op, op))


@pytest.fixture
def ring3():
    return ring(3)


@pytest.fixture
def ag3():
    return collective("allgather", 3)


# -- malformed transfers ---------------------------------------------------------------------------
def test_unknown_chunk(ring3, ag3):
    s = append(ring_allgather(ring3, 3), 7, 1, TAU)
    rejected(ring3, ag3, s, "unknown-chunk", chunk=None, link=1, at=TAU, transfer=6,
             words=("chunk 7", "3 chunks", "transfer 6"))


def test_unknown_link(ring3, ag3):
    s = append(ring_allgather(ring3, 3), 0, 99, 0.0)
    v = rejected(ring3, ag3, s, "unknown-link", chunk=0, at=0.0, transfer=6,
                 words=("link 99", "3 links"))
    assert v.link is None


def test_unknown_op(ring3, ag3):
    s = append(ring_allgather(ring3, 3), 0, 0, 0.0, op=5)
    rejected(ring3, ag3, s, "unknown-op", chunk=0, link=0, at=0.0, words=("op 5",))


@pytest.mark.parametrize("bad", [-1e-6, float("nan"), float("inf")])
def test_bad_time_is_reported_before_anything_else(ring3, ag3, bad):
    s = ring_allgather(ring3, 3)
    start = s.start.copy()
    start[4] = bad
    s = replace(s, start=start, chunk=np.where(np.arange(6) == 5, 9, s.chunk))  # also an unknown chunk
    v = rejected(ring3, ag3, s, "bad-time", chunk=int(s.chunk[4]), link=int(s.link[4]), transfer=4,
                 words=("non-negative",))
    assert repr(bad) in v.message


# -- value rules -----------------------------------------------------------------------------------
def test_causality_names_the_late_delivery(ring3, ag3):
    s = ring_allgather(ring3, 3)
    start = s.start.copy()
    start[4] = 0.5 * TAU  # npu1 forwards chunk 0 before it arrives from npu0 at TAU
    v = rejected(ring3, ag3, replace(s, start=start), "causality", chunk=0, link=1, at=0.5 * TAU,
                 transfer=4, words=("npu1 sends", f"only receives it at {format_time(TAU)}",
                                    "link 0 (npu0->npu1) from npu0"))
    assert v.node == 1


def test_causality_when_never_received(ring3, ag3):
    s = append(ring_allgather(ring3, 3), 2, 0, 0.0)  # npu0 sends chunk 2 at 0 but gets it at TAU
    rejected(ring3, ag3, s, "causality", chunk=2, link=0, at=0.0)
    s = append(ring_allgather(ring3, 3), 1, 0, 0.0)  # chunk 1 would reach npu0 at 2 TAU
    rejected(ring3, ag3, s, "causality", chunk=1, link=0, at=0.0,
             words=(f"only receives it at {format_time(2 * TAU)}",))
    b = ScheduleBuilder(ring3)
    b.send(1, 0, 1, start=0.0)  # nobody ever delivers chunk 1 to npu0
    rejected(ring3, ag3, b.build(), "causality", chunk=1, link=0, at=0.0, words=("never receives it",))


def test_arrival_at_exactly_the_start_counts_as_held(ring3, ag3):
    assert verify(ring3, ag3, ring_allgather(ring3, 3)).valid


def test_op_not_allowed(ring3, ag3):
    s = ring_allgather(ring3, 3)
    op = s.op.copy()
    op[3] = 1
    rejected(ring3, ag3, replace(s, op=op), "op-not-allowed", chunk=int(s.chunk[3]),
             link=int(s.link[3]), at=TAU, words=("allgather is not a combining",))


def test_switch_reduce_into_a_plain_switch():
    m = star(3)
    b = ScheduleBuilder(m)
    b.send(0, 0, 3, start=0.0, op="reduce")
    rejected(m, collective("reducescatter", 3), b.build(), "switch-reduce", chunk=0, link=0, at=0.0,
             words=("switch sw", "reduce = false"))


def test_switch_forward_plain_switch_forwards_each_arrival_once():
    m = star(3)  # links: 0 npu0->sw, 1 sw->npu0, 2 npu1->sw, 3 sw->npu1, 4 npu2->sw, 5 sw->npu2
    b = ScheduleBuilder(m)
    b.send(0, 0, 3, start=0.0)
    b.send(0, 3, 1, start=TAU)
    b.send(0, 3, 2, start=TAU)
    v = rejected(m, collective("broadcast", 3, root=0), b.build(), "switch-forward", chunk=0, link=5,
                 at=TAU, transfer=2, words=("switch sw", "received chunk 0 1 time(s) and sent it 1 time(s)"))
    assert v.node == 3


def _exchange_through_a_plain_switch(named: bool = True, swapped: bool = False):
    """Two NPUs swap their partials of each chunk through one plain switch, both at one instant
    (the rail exchange's crossing): npu0 and npu1 send into sw at t, sw reduces each into the
    other NPU at t + TAU. ``named``: each departure names its arrival (via); ``swapped``: names the
    wrong one (each NPU gets its own partial back)."""
    m = star(2)
    b = ScheduleBuilder(m)
    for c, t in ((0, 0.0), (1, TAU)):
        rows = [b.add(c, m.links_between(v, 2)[0], t) for v in (0, 1)]
        for v, row in zip((1, 0), rows if not swapped else rows[::-1]):
            b.add(c, m.links_between(2, v)[0], t + TAU, "reduce", via=row if named else None)
    return m, collective("allreduce", 2), b.build()


def test_named_forwards_make_a_simultaneous_exchange_valid_in_every_order():
    m, coll, s = _exchange_through_a_plain_switch()
    rng = np.random.default_rng(0)
    orders = [np.arange(len(s)), np.arange(len(s))[::-1]] + [rng.permutation(len(s)) for _ in range(30)]
    verdicts = {(r.valid, r.time) for r in (verify(m, coll, s.take(order)) for order in orders)}
    assert len(verdicts) == 1 and verdicts.pop() == (True, pytest.approx(3 * TAU))


def test_ambiguous_forward_when_simultaneous_partials_leave_unnamed():
    m, coll, s = _exchange_through_a_plain_switch(named=False)
    for order in (np.arange(len(s)), np.arange(len(s))[::-1]):
        rejected(m, coll, s.take(order), "ambiguous-forward", chunk=0, at=TAU,
                 words=("switch sw forwards 2 transfers of chunk 0", "{npu0}; {npu1}", "set via"))


def test_named_forwards_of_the_wrong_arrivals_count_twice():
    m, coll, s = _exchange_through_a_plain_switch(swapped=True)
    rejected(m, coll, s, "double-count", chunk=0, at=2 * TAU, words=("counted twice",))


def test_switch_forward_when_two_sends_name_one_arrival():
    m, coll, s = _exchange_through_a_plain_switch()
    via = s.via.copy()
    via[3] = via[2]
    rejected(m, coll, replace(s, via=via), "switch-forward", chunk=0, at=TAU, transfer=3,
             words=("as the arrival of transfer 0 (via)", "already forwarded"))


def test_bad_via_names_a_sender_that_is_no_plain_switch_or_a_wrong_arrival():
    m, coll, s = _exchange_through_a_plain_switch()
    via = s.via.copy()
    via[0] = 1  # npu0's send into the switch names an arrival: an NPU forwards nothing
    rejected(m, coll, replace(s, via=via), "bad-via", chunk=0, at=0.0, transfer=0,
             words=("its sender npu0 is an NPU",))
    via = s.via.copy()
    via[6] = 2  # a departure of chunk 1 names a departure of chunk 0
    rejected(m, coll, replace(s, via=via), "bad-via", chunk=1, transfer=6, words=("names transfer 2",))


def test_switch_forward_before_the_copy_arrives_names_the_next_arrival():
    m = star(2)
    b = ScheduleBuilder(m)
    b.send(0, 0, 2, start=0.0)
    b.send(0, 2, 1, start=0.5 * TAU)
    rejected(m, collective("broadcast", 2, root=0), b.build(), "switch-forward", chunk=0, link=3,
             at=0.5 * TAU, words=(f"next copy arrives at {format_time(TAU)}",))


def test_switch_forward_reduction_switch_without_multicast_sends_as_often_as_it_receives():
    m = star(3, reduce=True)
    b = ScheduleBuilder(m)
    for v in range(3):
        b.send(0, v, 3, start=0.0, op="reduce")
    for v in range(3):
        b.send(0, 3, v, start=TAU)
    ok = b.build()
    ar = make_custom(range(3), [[0, 1, 2]], [[0, 1, 2]], CHUNK, combining=True, name="allreduce-1")
    assert verify(m, ar, ok).time == pytest.approx(2 * TAU)
    b.send(0, 3, 0, start=3 * TAU)  # a fourth send after three arrivals
    rejected(m, ar, b.build(), "switch-forward", chunk=0, link=1, at=3 * TAU, transfer=6,
             words=("received chunk 0 3 time(s) and sent it 3 time(s)", "reduction switch"))


def test_double_count(ring3):
    rs = collective("reducescatter", 3)
    s = ring_reducescatter(ring3, 3)
    assert verify(ring3, rs, s).valid
    # npu1 reduces its partial of chunk 0 into npu2 once more: npu2 already holds npu1's part.
    v = rejected(ring3, rs, append(s, 0, 1, 2 * TAU, op=1), "double-count", chunk=0, link=1,
                 at=3 * TAU, transfer=6, words=("npu2 receives a reduce", "npu1",
                                                "counted twice"))
    assert v.node == 2


def test_ambiguous_copy_and_reduce_at_one_instant():
    m = full(3)
    b = ScheduleBuilder(m)
    b.send(1, 0, 1, start=0.0, op="copy")
    b.send(1, 2, 1, start=0.0, op="reduce")
    rejected(m, collective("reducescatter", 3), b.build(), "ambiguous-arrival", chunk=1,
             link=int(m.links_between(2, 1)[0]), at=TAU, transfer=1,
             words=("by copy and by reduce", "transfer 0", "transfer 1"))


def test_postcondition_names_the_missing_pair(ring3, ag3):
    s = ring_allgather(ring3, 3)
    keep = np.arange(len(s)) != 4
    s = from_arrays(s.chunk[keep], s.link[keep], s.start[keep])
    v = rejected(ring3, ag3, s, "postcondition", chunk=0, at=2 * TAU,
                 words=("npu2 never holds chunk 0", "after the last delivery at"))
    assert v.node == 2


def test_missing_contribution(ring3):
    s = ring_reducescatter(ring3, 3)
    op = s.op.copy()
    op[1] = 0  # npu1 copies (not reduces) chunk 0 into npu2: npu2's own part is lost on the way
    v = rejected(ring3, collective("reducescatter", 3), replace(s, op=op), "missing-contribution",
                 chunk=0, at=2 * TAU, words=("npu0 ends holding chunk 0 without the contributions of npu2",
                                 "(it has npu0, npu1;"))
    assert v.node == 0


def test_overwrite_only_under_reduce_only(ring3):
    """Ring AllReduce's AllGather phase copies each full sum over a partial that it contains: valid
    by default (a copy writes the buffer), rejected under SCCL's rules (nothing is overwritten)."""
    ar = collective("allreduce", 3)
    s = ring_reducescatter(ring3, 3)
    ag = ring_allgather(ring3, 3, offset=2 * TAU)
    both = from_arrays(np.concatenate([s.chunk, ag.chunk]), np.concatenate([s.link, ag.link]),
                       np.concatenate([s.start, ag.start]), np.concatenate([s.op, ag.op]))
    assert verify(ring3, ar, both).valid
    v = rejected(ring3, ar, both, "overwrite", TimeModel(combining="reduce-only"), chunk=0, link=0,
                 at=3 * TAU, transfer=6, words=("npu1 receives a copy of chunk 0", "over its partial sum of npu1",
                                                'combining = "reduce-only"'))
    assert v.node == 1


# -- timing rules ----------------------------------------------------------------------------------
def test_link_overlap(ring3, ag3):
    s = append(ring_allgather(ring3, 3), 0, 0, 0.5 * TAU)
    v = rejected(ring3, ag3, s, "link-overlap", chunk=0, link=0, at=0.5 * TAU, transfer=6,
                 words=("still busy with chunk 0 (transfer 0", f"until {format_time(TAU)}"))
    assert "α + b/B" in v.message


def test_send_ports_and_recv_ports():
    m = full(3)
    bc = collective("broadcast", 3, root=0)
    b = ScheduleBuilder(m)
    b.send(0, 0, 1, start=0.0)
    b.send(0, 0, 2, start=0.0)
    one = TimeModel(send_ports=1)
    rejected(m, bc, b.build(), "send-ports", chunk=0, link=int(m.links_between(0, 2)[0]), at=0.0,
             model=one, transfer=1, words=("npu0 already has 1 transfer(s) leaving", "send_ports = 1"))
    assert verify(m, bc, b.build(), TimeModel(send_ports=2)).valid
    ga = collective("gather", 3, root=0)
    b = ScheduleBuilder(m)
    b.send(1, 1, 0, start=0.0)
    b.send(2, 2, 0, start=0.5 * TAU)
    rejected(m, ga, b.build(), "recv-ports", chunk=2, link=int(m.links_between(2, 0)[0]),
             at=0.5 * TAU, model=TimeModel(recv_ports=1), words=("entering",))
    b = ScheduleBuilder(m)
    b.send(1, 1, 0, start=0.0)
    b.send(2, 2, 0, start=TAU)  # back to back: the first releases the port as the second starts
    assert verify(m, ga, b.build(), TimeModel(recv_ports=1)).time == pytest.approx(2 * TAU)


# -- step model ------------------------------------------------------------------------------------
def step_schedule(rows, rounds):
    chunk, link, step = zip(*rows)
    return from_arrays(chunk, link, step=step, rounds=rounds)


def test_step_order(ring3, ag3):
    for bad in (0, 3):
        s = step_schedule([(0, 0, 1), (1, 1, 1), (2, 2, 1), (2, 0, bad)], (1, 1))
        rejected(ring3, ag3, s, "step-order", chunk=2, link=0, transfer=3,
                 words=(f"in step {bad}", "steps 1..2"))


def test_step_rounds(ring3, ag3):
    s = step_schedule([(0, 0, 1)], (1, 0))
    v = rejected(ring3, ag3, s, "step-rounds", words=("rounds[1] (step 2) is 0",))
    assert v.step == 2


def test_step_causality_a_chunk_received_in_step_s_is_sent_from_step_s_plus_1(ring3, ag3):
    s = step_schedule([(0, 0, 1), (0, 1, 1)], (1,))
    v = rejected(ring3, ag3, s, "causality", chunk=0, link=1, transfer=1,
                 words=("in step 1", "only receives it in step 1", "from step s+1"))
    assert v.step == 1 and v.time == 0.0


def test_step_capacity_on_a_double_bandwidth_link():
    from optcoll.machines.machine import MachineBuilder

    b = MachineBuilder("pair", 2)
    b.add_link(0, 1, bandwidth=2 * BW, latency=LAT)  # relative bandwidth 2
    b.add_link(1, 0, bandwidth=BW, latency=LAT)
    m = b.build()
    g = collective("gather", 2, root=1, c=3)  # npu0 must send 3 chunks to npu1
    s = step_schedule([(0, 0, 1), (1, 0, 1), (2, 0, 1)], (1,))
    v = rejected(m, g, s, "step-capacity", chunk=2, link=0, transfer=2,
                 words=("3 transfers in step 1", "capacity is 2", "relative bandwidth 2 × 1"))
    assert v.step == 1
    ok = verify(m, g, step_schedule([(0, 0, 1), (1, 0, 1), (2, 0, 1)], (2,)))
    assert ok.valid and ok.time == pytest.approx(LAT + 2 * CHUNK / BW)


def test_step_ambiguous_copy_and_reduce_in_one_step():
    m = full(3)
    s = step_schedule([(1, int(m.links_between(0, 1)[0]), 1), (1, int(m.links_between(2, 1)[0]), 1)], (1,))
    s = replace(s, op=np.array([0, 1], dtype=np.uint8))
    rejected(m, collective("reducescatter", 3), s, "ambiguous-arrival", chunk=1,
             words=("in the same step",))


def test_step_model_rejects_fractional_weights_and_timed_options(ring3, ag3):
    from optcoll.machines.machine import MachineBuilder

    b = MachineBuilder("odd", 2)
    b.add_link(0, 1, bandwidth=1.5 * BW, latency=LAT)
    b.add_link(1, 0, bandwidth=BW, latency=LAT)
    with pytest.raises(InputError, match="integer multiple"):
        verify(b.build(), collective("allgather", 2), step_schedule([(0, 0, 1), (1, 1, 1)], (1,)))
    with pytest.raises(InputError, match="model.occupancy"):
        verify(ring3, ag3, step_schedule([(0, 0, 1)], (1,)), TimeModel(occupancy="serialization"))


# -- ordering and plumbing -------------------------------------------------------------------------
def test_first_violation_is_the_earliest_in_time(ring3, ag3):
    s = ring_allgather(ring3, 3)
    start = s.start.copy()
    start[5] = 1.5 * TAU  # causality of transfer 5 at 1.5 TAU (chunk 0 reaches npu2 at 2 TAU)...
    s = append(replace(s, start=start), 0, 0, 0.5 * TAU)  # ...but link 0 overlaps at 0.5 TAU
    rejected(ring3, ag3, s, "link-overlap", at=0.5 * TAU, transfer=6)
    s = append(ring_allgather(ring3, 3), 9, 0, 5 * TAU)  # an unknown chunk after a causality error
    start = s.start.copy()
    start[3] = 0.0
    rejected(ring3, ag3, replace(s, start=start), "causality", transfer=3)


def test_ties_are_broken_by_transfer_index(ring3, ag3):
    b = ScheduleBuilder(ring3)
    b.send(1, 0, 1, start=0.0)  # causality, transfer 0
    b.send(2, 1, 2, start=0.0)  # causality, transfer 1
    rejected(ring3, ag3, b.build(), "causality", transfer=0)


def test_require_valid(ring3, ag3):
    assert require_valid(ring3, ag3, ring_allgather(ring3, 3)).time == pytest.approx(2 * TAU)
    with pytest.raises(ScheduleRejected, match=r"\[postcondition\] npu1 never holds chunk 0") as info:
        require_valid(ring3, ag3, from_arrays([], [], []))
    assert info.value.violation.kind == "postcondition"


def test_collective_must_fit_the_machine(ag3):
    with pytest.raises(InputError, match="collective.ranks"):
        verify(ring(2), ag3, from_arrays([], [], []))


def test_every_violation_kind_has_a_hand_built_schedule_here():
    source = Path(__file__).read_text().split("def test_every_violation_kind")[0]
    assert [k for k in VIOLATION_KINDS if f'"{k}"' not in source] == []


def test_a_transfer_whose_link_time_vanishes_in_rounding_is_bad_input():
    """An AlltoAllv with one 1e33-byte entry beside 64 KiB ones: the small chunk, started after
    the big one ended (1e24 s), would arrive at its own start in floating point. Through a plain
    switch the event engine then met its delivery before its start (a KeyError); it is refused as
    bad input instead, naming the transfer."""
    from optcoll.collectives.builtins import make_alltoallv

    m = star(2)
    coll = make_alltoallv([0, 1], np.array([[0, 1e33], [65536, 0]]), 1)
    b = ScheduleBuilder(m)
    b.send(0, 0, 2, start=0.0)
    b.send(0, 2, 1, start=1e24)
    b.send(1, 1, 2, start=1e24)
    b.send(1, 2, 0, start=1e24 + 1e10)
    with pytest.raises(InputError, match=r"transfer 2 \(chunk 1 on link 2 \(npu1->sw\)\) starts at 1e\+24 s, "
                                         r"where its link time vanishes in double-precision rounding"):
        verify(m, coll, b.build())
