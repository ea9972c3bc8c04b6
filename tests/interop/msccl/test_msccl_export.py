"""Exporting verified schedules to MSCCL-IR XML: structure by the rules, and round trips
(schedule → XML → schedule) that verify to the same time."""
import dataclasses
from collections import Counter
from pathlib import Path

import pytest

from msccl_helpers import (BW, CHUNK, LAT, TAU, allreduce, collective, full, greedy_spread, reduction,
                           ring_allgather, ring_allreduce)
from optcoll.collectives.builtins import make_collective, make_custom
from optcoll.errors import InputError
from optcoll.interop.msccl import (EXECUTOR, build_msccl_algo, export_msccl_xml, import_msccl_xml,
                                   parse_algo, save_msccl_xml, validate_msccl_xml)
from optcoll.instances.instance import Instance, TimeModel
from optcoll.machines.generators import dgx1, nvswitch, ring, torus
from optcoll.schedules.schedule import ScheduleBuilder
from optcoll.verify import verify

DATA = Path(__file__).parent / "data"
N = 8


def round_trip(machine, coll, schedule, model=TimeModel(), **options):
    """(original time, time after XML and back, the XML text); checks everything on the way."""
    original = verify(machine, coll, schedule, model)
    assert original.valid, original.summary()
    text = export_msccl_xml(machine, coll, schedule, model=model, **options)
    runtime = options.get("runtime", "executor")
    assert validate_msccl_xml(text, runtime=runtime) == []
    back = import_msccl_xml(text, machine, collective=coll, inplace=options.get("inplace", False),
                            model=model, runtime=runtime)
    assert back.problems == () and back.findings == ()
    result = verify(machine, coll, back.schedule, model)
    assert result.valid, result.summary()
    assert sorted(zip(back.schedule.chunk.tolist(), back.schedule.link.tolist())) == \
        sorted(zip(schedule.chunk.tolist(), schedule.link.tolist()))
    return original.time, result.time, text


def types(text):
    algo, _, _ = parse_algo(text)
    return Counter(s.type for g in algo.gpus for t in g.tbs for s in t.steps)


# -- rings: closed forms and the hand-written files --------------------------------------------------


@pytest.mark.parametrize("inplace", [False, True])
def test_ring_allgather_round_trip_fuses_forwarding(inplace):
    machine = ring(N, BW, LAT, bidirectional=False)
    before, after, text = round_trip(machine, collective("allgather", N), ring_allgather(machine, N),
                                     inplace=inplace)
    assert after == pytest.approx(before) and before == pytest.approx((N - 1) * TAU)
    kinds = types(text)
    # each GPU: one plain send, N-2 receive-and-forward, one final receive
    assert (kinds["s"], kinds["rcs"], kinds["r"]) == (N, N * (N - 2), N)
    assert kinds["cpy"] == (0 if inplace else N)  # out of place: own chunk input -> output


def test_ring_allreduce_in_place_export_equals_the_handwritten_file():
    machine = ring(N, BW, LAT, bidirectional=False)
    before, after, text = round_trip(machine, collective("allreduce", N), ring_allreduce(machine, N),
                                     inplace=True)
    assert after == pytest.approx(before) and before == pytest.approx(2 * (N - 1) * TAU)
    exported, _, _ = parse_algo(text)
    handwritten, _, _ = parse_algo(DATA / "allreduce_ring_8.xml")
    assert exported.gpus == handwritten.gpus
    assert (exported.coll, exported.inplace, exported.outofplace, exported.redop) == ("allreduce", 1, 0, "sum")


def test_algo_attributes():
    machine = ring(N, BW, LAT, bidirectional=False)
    text = export_msccl_xml(machine, collective("allreduce", N), ring_allreduce(machine, N), name="ar8",
                            proto="LL128", min_bytes=1024, max_bytes=1 << 20)
    head = text.splitlines()[1]
    assert head == ('<algo name="ar8" proto="LL128" nchannels="1" nchunksperloop="8" ngpus="8" '
                    'coll="allreduce" inplace="0" outofplace="1" minBytes="1024" maxBytes="1048576" '
                    'redop="sum">')
    assert text.startswith("<!-- optcoll export for the executor runtime: allreduce over 8 ranks")
    assert "<?xml" not in text and "\t" not in text


# -- DGX-1: double links, greedy schedules of every collective ---------------------------------------


DGX1 = dgx1(BW, LAT)


@pytest.mark.parametrize("kind,c,root", [("allgather", 1, None), ("allgather", 3, None),
                                         ("reducescatter", 2, None), ("allreduce", 1, None),
                                         ("broadcast", 4, 3), ("reduce", 4, 5)])
@pytest.mark.parametrize("inplace", [False, True])
def test_dgx1_round_trips_at_the_same_time(kind, c, root, inplace):
    coll = collective(kind, N, c, root)
    if kind in ("allgather", "broadcast"):
        schedule = greedy_spread(DGX1, coll)
    elif kind == "allreduce":
        schedule = allreduce(DGX1, N, c)
    else:
        schedule = reduction(DGX1, kind, N, c, root)
    before, after, text = round_trip(DGX1, coll, schedule, inplace=inplace)
    assert after == pytest.approx(before)
    if coll.combining:
        assert types(text)["rrc"] + types(text)["rrcs"] > 0


def test_dgx1_double_nvlinks_become_two_channels():
    coll = collective("allgather", N, 3)
    schedule = greedy_spread(DGX1, coll)
    algo, _ = build_msccl_algo(DGX1, coll, schedule)
    assert algo.nchannels == 2
    for g in algo.gpus:
        chans = {(t.send, t.chan) for t in g.tbs if t.send >= 0}
        doubles = {v for v in range(N) if len(DGX1.links_between(g.id, v)) == 2}
        assert {v for v, ch in chans if ch == 1} <= doubles
    used = {(int(DGX1.link_src[e]), int(DGX1.link_dst[e])) for e in schedule.link.tolist()}
    assert any(len(DGX1.links_between(u, v)) == 2 and
               len({e for e in schedule.link.tolist() if (DGX1.link_src[e], DGX1.link_dst[e]) == (u, v)}) == 2
               for u, v in used)


def test_dependencies_signal_and_nops_carry_one_each():
    coll = collective("reducescatter", N, 2)
    algo, _ = build_msccl_algo(DGX1, coll, reduction(DGX1, "reducescatter", N, 2))
    for g in algo.gpus:
        waited = {(s.depid, s.deps) for t in g.tbs for s in t.steps if s.depid >= 0}
        signalled = {(t.id, s.s) for t in g.tbs for s in t.steps if s.hasdep}
        assert waited == signalled  # hasdep exactly on the steps others wait on
        for t in g.tbs:
            for k, s in enumerate(t.steps):
                assert s.s == k and s.depid != t.id
                if s.type == "nop":
                    assert s.depid >= 0
                    nxt = next(x for x in t.steps[k:] if x.type != "nop")
                    assert nxt.depid >= 0


def test_without_fusion_the_time_is_the_same():
    machine = ring(N, BW, LAT, bidirectional=False)
    coll = collective("allreduce", N)
    before, after, text = round_trip(machine, coll, ring_allreduce(machine, N), fuse=False)
    assert after == pytest.approx(before)
    assert set(types(text)) <= {"s", "r", "rrc", "cpy", "nop"}


# -- other collectives, layouts and options ------------------------------------------------------


@pytest.mark.parametrize("kind,root", [("alltoall", None), ("gather", 1), ("scatter", 1)])
@pytest.mark.parametrize("inplace", [False, True])
def test_direct_collectives_on_a_fully_connected_machine(kind, root, inplace):
    machine = full(5)
    coll = collective(kind, 5, 2, root)
    before, after, _ = round_trip(machine, coll, greedy_spread(machine, coll), inplace=inplace)
    assert after == pytest.approx(before)


def test_in_place_alltoall_waits_until_the_outgoing_chunk_has_left():
    # GPU 0's slot i[1] holds the chunk it sends GPU 1 (late, at 1.5 tau) and must end with the
    # chunk GPU 1 sends it (arriving at tau): the arrival waits in scratch, then moves in.
    machine = full(2)
    coll = collective("alltoall", 2)
    b = ScheduleBuilder(machine)
    b.send(2, 1, 0, start=0.0)  # chunk (1 -> 0)
    b.send(1, 0, 1, start=1.5 * TAU)  # chunk (0 -> 1)
    schedule = b.build()
    text = export_msccl_xml(machine, coll, schedule, inplace=True)
    algo, _, _ = parse_algo(text)
    assert algo.gpus[0].s_chunks == 1
    cpy = [s for t in algo.gpus[0].tbs for s in t.steps if s.type == "cpy"]
    assert [(s.src, s.dst) for s in cpy] == [(("s", 0), ("i", 1))]
    assert cpy[0].depid >= 0  # after the send of i[1]
    back = import_msccl_xml(text, machine, collective=coll, inplace=True)
    assert back.problems == ()


def test_a_partial_arriving_while_the_old_one_is_sent_goes_to_scratch():
    # One chunk reduced to two roots (GPUs 2 and 3) along different trees. GPU 3 sends its own
    # partial from 0.5 tau to 1.5 tau; GPU 2's partial lands at tau and must not overwrite it.
    machine = full(4)
    coll = make_custom(range(4), [[0, 1, 2, 3]], [[2, 3]], CHUNK, combining=True, name="tworoots")
    b = ScheduleBuilder(machine)
    for chunk_src, dst, t in ((0, 1, 0.0), (1, 2, 0.0), (0, 2, 0.0), (2, 3, 0.0), (3, 2, 0.5 * TAU),
                              (1, 3, TAU)):
        b.send(0, chunk_src, dst, start=t, op="reduce")
    schedule = b.build()
    with pytest.raises(InputError, match="the executor runtime has no custom collective"):
        export_msccl_xml(machine, coll, schedule)
    before, after, text = round_trip(machine, coll, schedule, inplace=True, runtime="msccl")
    assert after <= before == pytest.approx(2 * TAU)
    algo, _, _ = parse_algo(text)
    assert algo.coll == "custom" and algo.gpus[3].s_chunks == 1
    blocks = {t.id: t for t in algo.gpus[3].tbs}
    receives = {t.recv: [(s.type, s.src, s.dst) for s in t.steps] for t in blocks.values() if t.recv >= 0}
    assert receives == {2: [("rrc", ("i", 0), ("s", 0))],  # at tau: i[0] is still being sent
                        1: [("nop", ("i", -1), ("o", -1)),  # at 2 tau: back into the output, after
                            ("rrc", ("s", 0), ("i", 0))]}  # that send and the scratch write
    waits = {blocks[s.depid].send if blocks[s.depid].send >= 0 else ("recv", blocks[s.depid].recv)
             for t in blocks.values() if t.recv == 1 for s in t.steps}
    assert waits == {2, ("recv", 2)}


def test_the_first_msccl_runtime_spells_reduce_scatter():
    coll = collective("reducescatter", N, 1)
    text = export_msccl_xml(DGX1, coll, reduction(DGX1, "reducescatter", N, 1), runtime="msccl")
    assert 'coll="reduce_scatter"' in text
    assert any(f.startswith("algo: coll='reduce_scatter' is not one of") and f.endswith(
        "(the executor runtime refuses it)") for f in validate_msccl_xml(text))
    assert validate_msccl_xml(text, runtime="msccl") == []


@pytest.mark.parametrize("occupancy", ["link", "serialization"])
def test_time_models_round_trip(occupancy):
    model = TimeModel(occupancy=occupancy, reduce_cost=1e-10)
    machine = torus([3, 3], BW, LAT)
    coll = collective("allgather", 9, 2)
    before, after, _ = round_trip(machine, coll, greedy_spread(machine, coll, model), model=model)
    assert after == pytest.approx(before)
    machine = ring(N, BW, LAT, bidirectional=False)
    b = ScheduleBuilder(machine)  # ring allreduce, each reducing hop gamma later
    step = TAU + 1e-10 * CHUNK
    for k in range(N - 1):
        for i in range(N):
            b.send((i - 1 - k) % N, i, (i + 1) % N, start=k * step, op="reduce")
    for k in range(N - 1):
        for i in range(N):
            b.send((i - k) % N, i, (i + 1) % N, start=(N - 1) * step + k * TAU)
    before, after, _ = round_trip(machine, collective("allreduce", N), b.build(), model=model)
    assert after == pytest.approx(before) and before == pytest.approx((N - 1) * (step + TAU))


def test_step_model_schedules_are_converted():
    machine = ring(N, BW, LAT, bidirectional=False)
    b = ScheduleBuilder(machine, rounds=[1] * (N - 1))
    for k in range(N - 1):
        for i in range(N):
            b.send((i - k) % N, i, (i + 1) % N, step=k + 1)
    before, after, _ = round_trip(machine, collective("allgather", N), b.build())
    assert after == pytest.approx((N - 1) * TAU)


def test_exports_are_deterministic_and_saved_atomically(tmp_path):
    coll = collective("allreduce", N)
    schedule = allreduce(DGX1, N)
    text = export_msccl_xml(DGX1, coll, schedule)
    assert export_msccl_xml(DGX1, coll, schedule, check=False) == text
    save_msccl_xml(tmp_path / "out" / "ar.xml", DGX1, coll, schedule)
    assert (tmp_path / "out" / "ar.xml").read_text() == text
    assert validate_msccl_xml(tmp_path / "out" / "ar.xml") == []


# -- what cannot be exported --------------------------------------------------------------------


def test_relays_outside_the_communicator_and_invalid_schedules_are_refused():
    machine = ring(4, BW, LAT, bidirectional=False)
    coll = make_collective("broadcast", [0, 2], CHUNK, 1, root=0)
    b = ScheduleBuilder(machine)
    b.send(0, 0, 1, start=0.0)
    b.send(0, 1, 2, start=TAU)
    with pytest.raises(InputError, match="NPU 'npu1', which is not a rank of the collective"):
        export_msccl_xml(machine, coll, b.build())
    with pytest.raises(InputError, match="refusing to export an invalid schedule"):
        export_msccl_xml(machine, collective("allgather", 4), b.build())


def test_bad_options_are_named():
    machine = ring(N, BW, LAT, bidirectional=False)
    coll, schedule = collective("allgather", N), ring_allgather(machine, N)
    for options, field in (({"proto": "LL64"}, "proto"), ({"redop": "xor"}, "redop"),
                           ({"min_bytes": 10, "max_bytes": 5}, "max_bytes"),
                           ({"runtime": "old"}, "runtime")):
        with pytest.raises(InputError) as info:
            export_msccl_xml(machine, coll, schedule, **options)
        assert info.value.field == field


# -- every producer's schedules round-trip (independent implementations cross-checked) --------------


def test_every_registered_producer_round_trips_on_dgx1():
    from optcoll.producers.base import NotApplicable
    from optcoll.producers.registry import IMPLEMENTS, SYNTHESIZERS

    done = 0
    for kind in ("allgather", "reducescatter", "allreduce", "broadcast", "reduce", "gather", "scatter",
                 "alltoall"):
        root = 2 if kind in ("broadcast", "reduce", "gather", "scatter") else None
        coll = collective(kind, N, 1, root)
        for name, synth in SYNTHESIZERS.items():
            if kind not in IMPLEMENTS[name]:
                continue
            try:
                schedule = synth(Instance("x", DGX1, coll), 0)
            except NotApplicable:
                continue
            before, after, _ = round_trip(DGX1, coll, schedule)
            assert after <= before * (1 + 1e-9), (name, kind)
            done += 1
    assert done >= 40


def test_runtime_limits_are_checked_on_export():
    machine = full(5)
    coll = collective("alltoall", 5)
    schedule = greedy_spread(machine, coll)
    text = export_msccl_xml(machine, coll, schedule)
    tight = dataclasses.replace(EXECUTOR, max_peers_per_channel=3)
    found = validate_msccl_xml(text, runtime=tight)
    assert "gpu 0: 4 thread blocks sending on channel 0, more than 3 (the executor runtime refuses it)" in found
    assert "gpu 0: 4 thread blocks receiving on channel 0, more than 3 (the executor runtime refuses it)" in found
    # exported for that runtime, peers beyond the third of a GPU move to further channels
    spread = export_msccl_xml(machine, coll, schedule, runtime=tight)
    assert validate_msccl_xml(spread, runtime=tight) == []
    algo, _, _ = parse_algo(spread)
    assert algo.nchannels > 1
    for side in ("send", "recv"):
        assert max(max(Counter(t.chan for t in g.tbs if getattr(t, side) >= 0).values()) for g in algo.gpus) <= 3


# -- per-runtime limits: thread blocks cut to the executor's 64 steps ------------------------------


def _ring_allreduce_export(c, **options):
    from optcoll.producers.registry import SYNTHESIZERS

    machine = ring(N, BW, LAT)
    coll = make_collective("allreduce", range(N), N * c * CHUNK, c)
    schedule = SYNTHESIZERS["ring"](Instance("ring-ar", machine, coll), 0)
    text = export_msccl_xml(machine, coll, schedule, **options)
    algo, _, _ = parse_algo(text)
    return machine, coll, schedule, text, algo


def _longest(algo):
    return max(len(t.steps) for g in algo.gpus for t in g.tbs)


def test_an_export_too_long_for_the_executor_unfuses_its_thread_blocks():
    # ring AllReduce with C = 8: a fused receive-and-forward block holds 111 steps, which the first
    # runtime (256) loads; for the executor (64) the blocks are built unfused, 56 transfers each
    _, _, _, _, fused = _ring_allreduce_export(8, runtime="msccl")
    assert _longest(fused) == 111
    machine, coll, schedule, text, algo = _ring_allreduce_export(8)
    assert _longest(algo) <= 64 and algo.nchannels == 1
    assert validate_msccl_xml(text, runtime="executor") == []


def test_a_connection_longer_than_the_limit_is_cut_into_channels_in_order():
    # C = 16: 112 transfers on every connection; cut into segments on channels 0 and 1 (one link
    # per pair, so both map to it), the second segment's first send waiting for the first's last
    machine, coll, schedule, text, algo = _ring_allreduce_export(16)
    assert _longest(algo) <= 64 and algo.nchannels == 2
    assert validate_msccl_xml(text) == []
    sends = sorted((t.chan, len(t.steps)) for t in algo.gpus[0].tbs if t.send == 1)
    assert [chan for chan, _ in sends] == [0, 1] and sum(n for _, n in sends) >= 112
    second = next(t for t in algo.gpus[0].tbs if t.send == 1 and t.chan == 1)
    first = next(t for t in algo.gpus[0].tbs if t.send == 1 and t.chan == 0)
    waits = [(s.depid, s.deps) for s in second.steps[:2]]
    assert (first.id, len(first.steps) - 1) in waits and first.steps[-1].hasdep == 1
    back = import_msccl_xml(text, machine, collective=coll, runtime="executor")
    assert verify(machine, coll, back.schedule).time == pytest.approx(verify(machine, coll, schedule).time)


def test_an_export_that_cannot_fit_is_refused_in_one_line():
    tiny = dataclasses.replace(EXECUTOR, max_steps=8, max_channels=4)
    with pytest.raises(InputError) as err:
        _ring_allreduce_export(16, runtime=tiny)
    assert err.value.field == "schedule" and "\n" not in str(err.value)
    assert "channels" in str(err.value) and "the executor runtime has 4 channels" in str(err.value)
