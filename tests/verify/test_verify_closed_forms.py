"""Schedules whose time is known in closed form, verified in both engines where both apply."""
import numpy as np
import pytest

from optcoll.collectives.builtins import make_custom
from optcoll.instances.instance import TimeModel
from optcoll.machines.machine import MachineBuilder
from optcoll.schedules.schedule import Schedule, ScheduleBuilder, from_arrays
from optcoll.verify import step_to_timed, verify
from optcoll.verify.verifier import verify_with
from verify_helpers import (BW, CHUNK, LAT, TAU, bidirectional_ring_allgather, collective, full,
                            replace, ring, ring_allgather, ring_reducescatter, star)


def time_of(machine, coll, schedule, model=TimeModel()):
    """The verified time, after checking every applicable engine agrees on it."""
    times = set()
    for engine in ("events", "vectorised"):
        try:
            result = verify_with(machine, coll, schedule, model, engine)
        except ValueError:
            continue
        assert result.valid, result.violation.message
        times.add(result.time)
    assert len(times) == 1
    return times.pop()


@pytest.mark.parametrize("n", [2, 3, 5, 8])
def test_unidirectional_ring_allgather(n):
    m = ring(n)
    assert time_of(m, collective("allgather", n), ring_allgather(m, n)) == pytest.approx((n - 1) * TAU)


def test_fully_connected_allgather_in_one_link_time():
    n = 5
    m = full(n)
    b = ScheduleBuilder(m)
    for u in range(n):
        for v in range(n):
            if u != v:
                b.send(u, u, v, start=0.0)
    assert time_of(m, collective("allgather", n), b.build()) == pytest.approx(TAU)


@pytest.mark.parametrize("n", [3, 4, 6, 7])
def test_bidirectional_ring_allgather(n):
    m = ring(n, bidirectional=True)
    t = time_of(m, collective("allgather", n), bidirectional_ring_allgather(m, n))
    assert t == pytest.approx(-(-(n - 1) // 2) * TAU)


@pytest.mark.parametrize("n", [2, 3, 6])
def test_reducescatter_ring_and_a_double_reduce(n):
    m = ring(n)
    rs = collective("reducescatter", n)
    s = ring_reducescatter(m, n)
    assert time_of(m, rs, s) == pytest.approx((n - 1) * TAU)
    # The final reduce into the owner sent twice: the owner would count it twice.
    last = len(s) - 1
    twice = from_arrays(np.append(s.chunk, s.chunk[last]), np.append(s.link, s.link[last]),
                        np.append(s.start, s.start[last] + TAU), np.append(s.op, s.op[last]))
    assert verify(m, rs, twice).violation.kind == "double-count"


def test_allreduce_is_reducescatter_then_allgather():
    n = 4
    m = ring(n)
    ar = collective("allreduce", n)
    rs, ag = ring_reducescatter(m, n), ring_allgather(m, n)
    # RS leaves the full chunk c at npu c; the AG ring starts from there.
    both = Schedule.concat(rs, ag, (n - 1) * TAU)
    assert time_of(m, ar, both) == pytest.approx(2 * (n - 1) * TAU)
    assert verify(m, ar, rs).violation.kind == "missing-contribution"


def test_reduce_cost_delays_reduced_values():
    n = 3
    m = ring(n)
    gamma = 1e-9  # s/byte: 1 us per chunk
    t = verify(m, collective("reducescatter", n), ring_reducescatter(m, n, tau=TAU + gamma * CHUNK),
               TimeModel(reduce_cost=gamma)).time
    assert t == pytest.approx((n - 1) * (TAU + gamma * CHUNK))
    rejected = verify(m, collective("reducescatter", n), ring_reducescatter(m, n),
                      TimeModel(reduce_cost=gamma))
    # Each node forwards its partial before the incoming one is reduced in: a part goes missing.
    assert rejected.violation.kind == "missing-contribution"


def test_serialization_lets_back_to_back_transfers_pipeline_latency():
    b = MachineBuilder("long", 2)
    b.add_link(0, 1, bandwidth=BW, latency=10 * LAT)
    b.add_link(1, 0, bandwidth=BW, latency=10 * LAT)
    m = b.build()
    c = 4
    g = collective("gather", 2, root=1, c=c)
    serial = CHUNK / BW
    s = from_arrays(range(c), [0] * c, [k * serial for k in range(c)])
    assert time_of(m, g, s, TimeModel(occupancy="serialization")) == pytest.approx(10 * LAT + c * serial)
    assert verify(m, g, s).violation.kind == "link-overlap"
    spaced = from_arrays(range(c), [0] * c, [k * (10 * LAT + serial) for k in range(c)])
    assert time_of(m, g, spaced) == pytest.approx(c * (10 * LAT + serial))


def test_one_port_broadcast_takes_log_rounds_on_a_full_graph():
    """Binomial tree: 4 ranks, one send and one receive at a time, 2 rounds."""
    m = full(4)
    bc = collective("broadcast", 4, root=0)
    b = ScheduleBuilder(m)
    b.send(0, 0, 1, start=0.0)
    b.send(0, 0, 2, start=TAU)
    b.send(0, 1, 3, start=TAU)
    one = TimeModel(send_ports=1, recv_ports=1)
    assert time_of(m, bc, b.build(), one) == pytest.approx(2 * TAU)
    flat = ScheduleBuilder(m)
    for v in (1, 2, 3):
        flat.send(0, 0, v, start=0.0)
    assert time_of(m, bc, flat.build()) == pytest.approx(TAU)  # multi-port: one round
    assert verify(m, bc, flat.build(), one).violation.kind == "send-ports"


def _star_allgather(m, n, copies_into_switch):
    """Every NPU's chunk goes through the switch: once (multicast) or once per destination.

    Chunk u leaves the switch towards its k-th destination at (1 + k + u)·TAU (one copy per
    destination) or at (1 + u)·TAU (multicast), so no switch->v link carries two at once.
    """
    b = ScheduleBuilder(m)
    for u in range(n):
        others = [v for v in range(n) if v != u]
        for k, v in enumerate(others):
            if copies_into_switch or k == 0:
                b.send(u, u, n, start=k * TAU)
            b.send(u, n, v, start=(1 + u + (k if copies_into_switch else 0)) * TAU)
    return b.build()


def test_switch_flavours_for_allgather():
    n = 3
    ag = collective("allgather", n)
    plain, mcast = star(n), star(n, multicast=True)
    once = _star_allgather(mcast, n, copies_into_switch=False)
    assert time_of(mcast, ag, once) == pytest.approx((n + 1) * TAU)
    # A plain switch forwards each arrival once: the same schedule is refused...
    assert verify(plain, ag, once).violation.kind == "switch-forward"
    # ...and works with one copy per destination (npu2's second copy leaves at 4 TAU).
    assert time_of(plain, ag, _star_allgather(plain, n, copies_into_switch=True)) == pytest.approx(5 * TAU)


def test_in_network_reduction_allreduce():
    n = 4
    sharp = star(n, multicast=True, reduce=True)
    ar = make_custom(range(n), [list(range(n))], [list(range(n))], CHUNK, combining=True, name="ar1")
    b = ScheduleBuilder(sharp)
    for v in range(n):
        b.send(0, v, n, start=0.0, op="reduce")
    for v in range(n):
        b.send(0, n, v, start=TAU)
    assert time_of(sharp, ar, b.build()) == pytest.approx(2 * TAU)
    # The same on a multicast switch without reduction is refused at the first reduce into it.
    assert verify(star(n, multicast=True), ar, b.build()).violation.kind == "switch-reduce"
    # Sending the partial back before every contribution arrived leaves ranks short.
    early = replace(b.build(), start=np.array([0.0, 0.0, 0.0, TAU, TAU, TAU, TAU, 2 * TAU]))
    assert verify(sharp, ar, early).violation.kind == "missing-contribution"


def test_sub_communicator_with_a_non_member_relay():
    """Ranks {0, 2} on a line 0 - 1 - 2: npu1 relays without contributing."""
    b = MachineBuilder("line3", 3)
    b.add_link(0, 1, bandwidth=BW, latency=LAT, bidirectional=True)
    b.add_link(1, 2, bandwidth=BW, latency=LAT, bidirectional=True)
    m = b.build()
    ag = collective("allgather", [0, 2])
    s = ScheduleBuilder(m)
    s.send(0, 0, 1, start=0.0)
    s.send(0, 1, 2, start=TAU)
    s.send(1, 2, 1, start=0.0)
    s.send(1, 1, 0, start=TAU)
    assert time_of(m, ag, s.build()) == pytest.approx(2 * TAU)
    rs = collective("reducescatter", [0, 2])  # chunk 0 ends at npu0, chunk 1 at npu2
    r = ScheduleBuilder(m)
    r.send(0, 2, 1, start=0.0, op="reduce")  # npu1 holds nothing: the reduce just stores npu2's part
    r.send(0, 1, 0, start=TAU, op="reduce")
    r.send(1, 0, 1, start=0.0, op="reduce")
    r.send(1, 1, 2, start=TAU, op="reduce")
    assert time_of(m, rs, r.build()) == pytest.approx(2 * TAU)


def test_time_is_when_the_postcondition_first_holds_not_the_last_transfer():
    n = 3
    m = ring(n)
    ag = collective("allgather", n)
    s = ring_allgather(m, n)
    late = from_arrays(np.append(s.chunk, 0), np.append(s.link, 0), np.append(s.start, 10 * TAU))
    result = verify(m, ag, late)
    assert result.time == pytest.approx(2 * TAU) and result.redundant == 1
    assert result.makespan == pytest.approx(11 * TAU)


def test_an_empty_schedule_for_a_collective_that_needs_nothing_takes_no_time():
    m = ring(3)
    result = verify(m, collective("allgather", [1]), from_arrays([], [], []))
    assert result.valid and result.time == 0.0
    assert verify(m, collective("reducescatter", [1]), from_arrays([], [], [])).time == 0.0


def test_times_computed_in_integer_quanta_pass_within_tolerance():
    q = 1e-6 / 6  # link time 5 quanta; starts rounded through k * q
    m = ring(4, latency=2 * q, bandwidth=CHUNK / (3 * q))
    s = ring_allgather(m, 4, tau=5 * q)
    jitter = replace(s, start=np.array([round(t / q) * q for t in s.start]) - 1e-21 * (s.start > 0))
    assert time_of(m, collective("allgather", 4), jitter) == pytest.approx(15 * q)
    early = replace(s, start=np.where(s.start > 0, s.start - 1e-12, 0.0))
    assert verify(m, collective("allgather", 4), early).violation.kind == "causality"


# -- step model ------------------------------------------------------------------------------------
def _ring_steps(n):
    rows = [((i - k) % n, i, k + 1) for k in range(n - 1) for i in range(n)]
    chunk, link, step = zip(*rows)
    return from_arrays(chunk, link, step=step, rounds=[1] * (n - 1))


def test_step_model_ring_cost_and_loads():
    n = 5
    m = ring(n)
    result = verify(m, collective("allgather", n), _ring_steps(n))
    assert result.valid and result.steps == n - 1 and result.rounds == n - 1
    assert result.time == pytest.approx((n - 1) * (LAT + CHUNK / BW))
    assert result.step_loads.shape == (n - 1, n) and (result.step_loads == 1).all()


def test_step_model_uses_the_largest_latency_and_smallest_bandwidth():
    """DGX-1-like: a double NVLink (two parallel links) next to single links of double bandwidth."""
    b = MachineBuilder("dgx-ish", 3)
    b.add_link(0, 1, bandwidth=BW, latency=LAT, count=2)  # double link: two lanes of capacity 1
    b.add_link(1, 2, bandwidth=2 * BW, latency=3 * LAT)  # one link of capacity 2
    b.add_link(2, 0, bandwidth=BW, latency=LAT)
    m = b.build()
    coll = make_custom(range(3), [[0], [0]], [[1, 2], [1, 2]], CHUNK)  # npu0 sends two chunks on
    rows = [(0, 0, 1), (1, 1, 1), (0, 2, 2), (1, 2, 2)]
    chunk, link, step = zip(*rows)
    s = from_arrays(chunk, link, step=step, rounds=[1, 1])
    result = verify(m, coll, s)
    assert result.valid and result.time == pytest.approx(2 * (3 * LAT + CHUNK / BW))
    one_lane = from_arrays([0, 1, 0, 1], [0, 0, 2, 2], step=[1, 1, 2, 2], rounds=[1, 1])
    assert verify(m, coll, one_lane).violation.kind == "step-capacity"
    two_rounds = from_arrays([0, 1, 0, 1], [0, 0, 2, 2], step=[1, 1, 2, 2], rounds=[2, 1])
    assert verify(m, coll, two_rounds).time == pytest.approx(2 * 3 * LAT + 3 * CHUNK / BW)


def test_step_model_combining_ring():
    n = 4
    m = ring(n)
    rows = [((i - k - 1) % n, i, k + 1) for k in range(n - 1) for i in range(n)]
    chunk, link, step = zip(*rows)
    s = from_arrays(chunk, link, op=[1] * len(rows), step=step, rounds=[1] * (n - 1))
    assert verify(m, collective("reducescatter", n), s).time == pytest.approx((n - 1) * TAU)
    timed = step_to_timed(m, collective("reducescatter", n), s)
    assert time_of(m, collective("reducescatter", n), timed) == pytest.approx((n - 1) * TAU)


@pytest.mark.parametrize("n", [3, 4, 6])
def test_step_to_timed_gives_steps_times_link_time(n):
    m = ring(n, bidirectional=True)
    ag = collective("allgather", n)
    timed = bidirectional_ring_allgather(m, n)
    # The same algorithm in steps: a transfer starting at k·TAU is in step k+1.
    steps = from_arrays(timed.chunk, timed.link, step=np.rint(timed.start / TAU).astype(int) + 1,
                        rounds=[1] * (-(-(n - 1) // 2)))
    result = verify(m, ag, steps)
    back = step_to_timed(m, ag, steps)
    assert np.allclose(back.start, timed.start)
    assert time_of(m, ag, back) == pytest.approx(result.steps * TAU) == pytest.approx(result.time)
