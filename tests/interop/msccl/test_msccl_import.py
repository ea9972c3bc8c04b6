"""Importing MSCCL-IR XML: hand-written files (as msccl-tools would emit them) verify at their
closed-form times, and every way an XML can part from optcoll's model is reported."""
from pathlib import Path

import pytest

from msccl_helpers import BW, CHUNK, LAT, TAU, full
from optcoll.errors import InputError
from optcoll.interop.msccl import import_msccl_xml, validate_msccl_xml
from optcoll.instances.instance import TimeModel
from optcoll.machines.generators import dgx1, ring
from optcoll.machines.machine import MachineBuilder
from optcoll.verify import verify

DATA = Path(__file__).parent / "data"
N = 8


def _step(s, kind, src, dst, depid=-1, deps=-1, hasdep=0, cnt=1):
    return (f'<step s="{s}" type="{kind}" srcbuf="{src[0]}" srcoff="{src[1]}" dstbuf="{dst[0]}" '
            f'dstoff="{dst[1]}" cnt="{cnt}" depid="{depid}" deps="{deps}" hasdep="{hasdep}"/>')


def _algo(coll, ngpus, loop, gpus, inplace=0, extra=""):
    body = "".join(gpus)
    return (f'<algo name="t" proto="Simple" nchannels="1" nchunksperloop="{loop}" ngpus="{ngpus}" '
            f'coll="{coll}" inplace="{inplace}" outofplace="{1 - inplace}" minBytes="0" maxBytes="0" '
            f'{extra}>{body}</algo>')


def _gpu(g, i, o, s, tbs):
    return f'<gpu id="{g}" i_chunks="{i}" o_chunks="{o}" s_chunks="{s}">' + "".join(tbs) + "</gpu>"


def _tb(t, send, recv, steps, chan=0):
    return f'<tb id="{t}" send="{send}" recv="{recv}" chan="{chan}">' + "".join(steps) + "</tb>"


# -- the hand-written ring files --------------------------------------------------------------------


@pytest.mark.parametrize("bidirectional", [False, True])
def test_handwritten_ring_allgather_imports_at_n_minus_1_link_times(bidirectional):
    machine = ring(N, BW, LAT, bidirectional=bidirectional)
    path = DATA / "allgather_ring_8.xml"
    assert validate_msccl_xml(path) == []
    imported = import_msccl_xml(path, machine, size=N * CHUNK)
    assert imported.collective.kind == "allgather" and imported.collective.chunk_bytes == CHUNK
    assert imported.problems == () and imported.findings == ()
    assert len(imported.schedule) == N * (N - 1)
    result = verify(machine, imported.collective, imported.schedule)
    assert result.valid, result.summary()
    assert result.time == pytest.approx((N - 1) * TAU)
    assert imported.completion == pytest.approx((N - 1) * TAU)


def test_handwritten_ring_allreduce_imports_at_2_n_minus_1_link_times():
    machine = ring(N, BW, LAT, bidirectional=False)
    path = DATA / "allreduce_ring_8.xml"
    assert validate_msccl_xml(path) == []
    imported = import_msccl_xml(path, machine, size=N * CHUNK)
    coll = imported.collective
    assert (coll.kind, coll.num_chunks, coll.chunks_per_rank, coll.chunk_bytes) == ("allreduce", N, 1, CHUNK)
    assert imported.inplace and imported.problems == ()
    result = verify(machine, coll, imported.schedule)
    assert result.valid, result.summary()
    assert result.time == pytest.approx(2 * (N - 1) * TAU)
    # reduce-scatter hops reduce, allgather hops copy: N(N-1) of each
    assert int(imported.schedule.op.sum()) == N * (N - 1)


def test_chunk_size_follows_the_buffer_size():
    machine = ring(N, BW, LAT, bidirectional=False)
    imported = import_msccl_xml(DATA / "allreduce_ring_8.xml", machine, size=8 * N * CHUNK)
    result = verify(machine, imported.collective, imported.schedule)
    assert result.time == pytest.approx(2 * (N - 1) * (LAT + 8 * CHUNK / BW))


def test_ranks_map_gpus_onto_a_sub_communicator():
    # the ring of GPUs 0..7 laid onto NPUs 2, 3, ..., 9 of a 10-NPU ring
    machine = ring(10, BW, LAT, bidirectional=False)
    wrap = MachineBuilder("ring-of-8-in-10", 10)
    for i in range(10):
        wrap.add_link(i, (i + 1) % 10, bandwidth=BW, latency=LAT)
    wrap.add_link(9, 2, bandwidth=BW, latency=LAT)  # closes the ring 2..9
    m = wrap.build()
    imported = import_msccl_xml(DATA / "allgather_ring_8.xml", m, size=N * CHUNK, ranks=range(2, 10))
    assert imported.collective.ranks == tuple(range(2, 10))
    result = verify(m, imported.collective, imported.schedule)
    assert result.valid and result.time == pytest.approx((N - 1) * TAU)
    with pytest.raises(InputError, match="no link from NPU 9 to NPU 2"):
        import_msccl_xml(DATA / "allgather_ring_8.xml", machine, size=N * CHUNK, ranks=range(2, 10))


# -- errors that stop an import ---------------------------------------------------------------------


def test_unknown_collective_is_named():
    text = (DATA / "allgather_ring_8.xml").read_text().replace('coll="allgather"', 'coll="allmix"')
    with pytest.raises(InputError, match="coll='allmix'"):
        import_msccl_xml(text, ring(N, BW, LAT), size=N * CHUNK)


def test_a_peer_pair_without_a_link_names_the_thread_block():
    # a unidirectional ring has no link 1 -> 0
    text = (DATA / "allgather_ring_8.xml").read_text()
    machine = MachineBuilder("line", N)
    for i in range(N - 1):
        machine.add_link(i, i + 1, bandwidth=BW, latency=LAT)
    with pytest.raises(InputError, match=r"gpu 0 tb 0 \(recv=7, chan=0\).*no link from NPU 7 to NPU 0"):
        import_msccl_xml(text, machine.build(), size=N * CHUNK)


def test_more_gpus_than_npus_and_missing_size_are_errors():
    with pytest.raises(InputError, match="has 8 GPUs"):
        import_msccl_xml(DATA / "allgather_ring_8.xml", ring(4, BW, LAT), size=N * CHUNK)
    with pytest.raises(InputError, match="pass size"):
        import_msccl_xml(DATA / "allgather_ring_8.xml", ring(N, BW, LAT))


def test_a_fatal_structural_finding_refuses_the_file():
    text = (DATA / "allgather_ring_8.xml").read_text().replace(
        '<step s="8" type="r" srcbuf="o" srcoff="1" dstbuf="o" dstoff="1"', '<step s="8" type="r" srcbuf="o" srcoff="1" dstbuf="o" dstoff="9"', 1)
    with pytest.raises(InputError, match=r"gpu 0 tb 0 step 8: dstbuf=o dstoff=9 is outside"):
        import_msccl_xml(text, ring(N, BW, LAT), size=N * CHUNK)


# -- semantics: values, ops and what the model cannot represent ------------------------------------


def _allpairs_allreduce(n, with_dependency=True):
    """msccl-tools' all-pairs AllReduce shape: rank r gathers every partial of chunk r into
    scratch, reduces them locally into its input, then sends the result to every other rank."""
    gpus = []
    for r in range(n):
        peers = [q for q in range(n) if q != r]
        tbs = []
        for k, q in enumerate(peers):
            wait = dict(depid=n - 1, deps=n - 2) if with_dependency else {}
            steps = [_step(0, "s", ("i", q), ("s", r if r < q else r - 1)),  # my partial of q's chunk
                     _step(1, "r", ("i", r), ("s", k), hasdep=1),  # q's partial of my chunk
                     _step(2, "s", ("i", r), ("i", r), **wait),  # my finished chunk to q
                     _step(3, "r", ("i", q), ("i", q))]  # q's finished chunk
            tbs.append(_tb(k, q, q, steps))
        local = [_step(k, "re", ("s", k), ("i", r), depid=k, deps=1, hasdep=int(k == n - 2))
                 for k in range(n - 1)]
        tbs.append(_tb(n - 1, -1, -1, local))
        gpus.append(_gpu(r, n, n, n - 1, tbs))
    return _algo("allreduce", n, n, gpus, inplace=1, extra='redop="sum"')


def test_receive_into_scratch_then_local_reduce_is_a_reduction_in_the_model():
    n = 4
    machine = full(n)
    imported = import_msccl_xml(_allpairs_allreduce(n), machine, size=n * CHUNK)
    assert imported.problems == ()
    result = verify(machine, imported.collective, imported.schedule)
    assert result.valid, result.summary()
    # partials travel once (reduce), results once (copy); each takes one link time
    assert int(imported.schedule.op.sum()) == n * (n - 1)
    assert result.time == pytest.approx(2 * TAU)


def test_a_missing_dependency_is_a_problem_not_a_silent_pass():
    n = 4
    imported = import_msccl_xml(_allpairs_allreduce(n, with_dependency=False), full(n), size=n * CHUNK)
    assert imported.problems, "sending the chunk before the local reductions must be reported"
    assert any("optcoll's model" in p or "must hold chunk" in p for p in imported.problems)


def test_reducing_chunks_of_different_ids_is_a_problem():
    gpus = [_gpu(0, 2, 2, 0, [_tb(0, 1, -1, [_step(0, "s", ("i", 0), ("i", 1))])]),
            _gpu(1, 2, 2, 0, [_tb(0, -1, 0, [_step(0, "rrc", ("i", 1), ("i", 1))])])]
    imported = import_msccl_xml(_algo("allreduce", 2, 2, gpus, inplace=1, extra='redop="sum"'), full(2),
                                size=2 * CHUNK)
    assert any("reduces chunk 0 with chunk 1" in p for p in imported.problems)


def test_reading_an_empty_slot_and_a_wrong_output_are_problems():
    # allgather on 2 GPUs where GPU 0 sends its (never written) output slot 0
    gpus = [_gpu(0, 1, 2, 0, [_tb(0, 1, 1, [_step(0, "s", ("o", 0), ("o", 0)),
                                             _step(1, "r", ("o", 1), ("o", 1))])]),
            _gpu(1, 1, 2, 0, [_tb(0, 0, 0, [_step(0, "s", ("i", 0), ("o", 1)),
                                             _step(1, "r", ("o", 0), ("o", 0))])])]
    imported = import_msccl_xml(_algo("allgather", 2, 2, gpus), full(2), size=2 * CHUNK)
    text = " | ".join(imported.problems)
    assert "gpu 0 tb 0 step 0 (s) reads o[0] on gpu 0, which holds nothing" in text
    assert "gpu 1 o[0] ends holding nothing; it must hold chunk 0" in text
    assert "gpu 0 o[0] ends holding nothing" in text  # out of place: nobody copied i[0] there
    assert len(imported.schedule) == 1  # nothing real travelled from the empty slot


def test_recv_reduce_send_without_storing_parts_from_the_model():
    # Reduce to GPU 2 along 0 -> 1 -> 2. GPU 1's rrs forwards {0, 1} without storing it, then
    # sends its buffer again: it still holds {1}, while optcoll's model (one value per chunk per
    # NPU, updated on arrival) believes GPU 1 holds {0, 1}.
    gpus = [_gpu(0, 1, 1, 0, [_tb(0, 1, -1, [_step(0, "s", ("i", 0), ("i", 0))])]),
            _gpu(1, 1, 1, 0, [_tb(0, 2, 0, [_step(0, "rrs", ("i", 0), ("i", 0)),
                                             _step(1, "s", ("i", 0), ("s", 0))])]),
            _gpu(2, 1, 1, 1, [_tb(0, -1, 1, [_step(0, "rrc", ("i", 0), ("o", 0)),
                                              _step(1, "r", ("i", 0), ("s", 0))])])]
    imported = import_msccl_xml(_algo("reduce", 3, 1, gpus, extra='redop="sum"'), full(3), size=CHUNK,
                                root=2)
    assert imported.collective.root == 2
    assert any("gpu 1 tb 0 step 1 (s) sends chunk 0 with the contributions of GPUs {1}, but in "
               "optcoll's model" in p for p in imported.problems), imported.problems


def test_the_root_is_inferred_or_must_be_given():
    # broadcast 0 -> 1 -> 2: GPU 0 only sends
    gpus = [_gpu(0, 1, 1, 0, [_tb(0, 1, -1, [_step(0, "s", ("i", 0), ("o", 0))]),
                              _tb(1, -1, -1, [_step(0, "cpy", ("i", 0), ("o", 0))])]),
            _gpu(1, 1, 1, 0, [_tb(0, 2, 0, [_step(0, "rcs", ("i", 0), ("o", 0))])]),
            _gpu(2, 1, 1, 0, [_tb(0, -1, 1, [_step(0, "r", ("o", 0), ("o", 0))])])]
    text = _algo("broadcast", 3, 1, gpus)
    machine = ring(3, BW, LAT, bidirectional=False)
    imported = import_msccl_xml(text, machine, size=CHUNK)
    assert imported.collective.root == 0 and imported.problems == ()
    result = verify(machine, imported.collective, imported.schedule)
    assert result.valid and result.time == pytest.approx(2 * TAU)
    # GPU 1 would be a root that holds nothing
    wrong = import_msccl_xml(text, machine, size=CHUNK, root=1)
    assert wrong.problems


def test_an_allreduce_with_fewer_chunks_than_gpus_becomes_a_custom_collective():
    # one chunk, reduced along 0 -> 1 -> 2 and broadcast back 2 -> 1 -> 0 (a chain AllReduce)
    gpus = [_gpu(0, 1, 1, 0, [_tb(0, 1, 1, [_step(0, "s", ("i", 0), ("i", 0)), _step(1, "r", ("i", 0), ("i", 0))])]),
            _gpu(1, 1, 1, 0, [_tb(0, 2, 0, [_step(0, "rrcs", ("i", 0), ("i", 0))]),
                              _tb(1, 0, 2, [_step(0, "rcs", ("i", 0), ("i", 0))])]),
            _gpu(2, 1, 1, 0, [_tb(0, 1, 1, [_step(0, "rrcs", ("i", 0), ("i", 0))])])]
    text = _algo("allreduce", 3, 1, gpus, inplace=1, extra='redop="sum"')
    machine = ring(3, BW, LAT, bidirectional=True)
    imported = import_msccl_xml(text, machine, size=CHUNK)
    assert imported.collective.num_chunks == 1 and imported.collective.combining
    assert imported.problems == ()
    result = verify(machine, imported.collective, imported.schedule)
    assert result.valid and result.time == pytest.approx(4 * TAU)


def test_channels_map_to_parallel_links():
    # DGX-1 GPUs 0 and 1 share a double NVLink: channel c runs on the c-th link of the pair, so
    # the two chunks of each GPU cross at once (AllGather, C = 2, one link time).
    gpus = []
    for g in range(2):
        peer = 1 - g
        tbs = [_tb(c, peer, -1, [_step(0, "s", ("i", c), ("o", 2 * g + c))], chan=c) for c in range(2)]
        tbs += [_tb(2 + c, -1, peer, [_step(0, "r", ("i", c), ("o", 2 * peer + c))], chan=c)
                for c in range(2)]
        tbs.append(_tb(4, -1, -1, [_step(0, "cpy", ("i", 0), ("o", 2 * g), cnt=2)]))
        gpus.append(_gpu(g, 2, 4, 0, tbs))
    text = _algo("allgather", 2, 4, gpus).replace('nchannels="1"', 'nchannels="2"')
    machine = dgx1(BW, LAT).without(npus=list(range(2, 8)))
    assert validate_msccl_xml(text) == []
    imported = import_msccl_xml(text, machine, size=4 * CHUNK)
    assert imported.findings == () and imported.problems == ()
    assert sorted(imported.schedule.link.tolist()) == list(range(4))  # all four links once
    assert verify(machine, imported.collective, imported.schedule).time == pytest.approx(TAU)


def test_reduce_cost_delays_reducing_receives():
    machine = ring(N, BW, LAT, bidirectional=False)
    gamma = 1e-9  # s per byte: one microsecond per chunk
    model = TimeModel(reduce_cost=gamma)
    imported = import_msccl_xml(DATA / "allreduce_ring_8.xml", machine, size=N * CHUNK, model=model)
    result = verify(machine, imported.collective, imported.schedule, model)
    assert result.valid, result.summary()
    assert result.time == pytest.approx(2 * (N - 1) * TAU + (N - 1) * gamma * CHUNK)


def test_a_step_moving_several_chunks_is_one_message():
    # ring AllGather on 4 GPUs with C = 2, each step moving both chunks of a rank (cnt = 2)
    n = 4
    gpus = []
    for r in range(n):
        steps = [_step(0, "s", ("i", 0), ("o", 2 * r), cnt=2)]
        for k in range(1, n - 1):
            c = 2 * ((r - k) % n)
            steps.append(_step(k, "rcs", ("o", c), ("o", c), cnt=2))
        c = 2 * ((r + 1) % n)
        steps.append(_step(n - 1, "r", ("o", c), ("o", c), cnt=2))
        tbs = [_tb(0, (r + 1) % n, (r - 1) % n, steps), _tb(1, -1, -1, [_step(0, "cpy", ("i", 0), ("o", 2 * r), cnt=2)])]
        gpus.append(_gpu(r, 2, 2 * n, 0, tbs))
    text = _algo("allgather", n, 2 * n, gpus)
    assert validate_msccl_xml(text) == []
    machine = ring(n, BW, LAT, bidirectional=False)
    imported = import_msccl_xml(text, machine, size=2 * n * CHUNK)
    assert imported.collective.chunks_per_rank == 2 and imported.problems == ()
    # one message per step: latency once, both chunks on the wire: α + 2b/B, the chunks streamed
    # b/B apart (valid with serialization occupancy, the model the importer picks)
    assert imported.model.occupancy == "serialization" and "one message each" in imported.findings[0]
    result = verify(machine, imported.collective, imported.schedule, imported.model)
    assert result.valid and result.time == pytest.approx((n - 1) * (LAT + 2 * CHUNK / BW))
    first = imported.schedule.start[imported.schedule.link == 0]
    assert sorted(first.tolist())[:2] == pytest.approx([0.0, CHUNK / BW])
    # asked for link occupancy, the chunks follow one another: 2(α + b/B) per step
    linked = import_msccl_xml(text, machine, size=2 * n * CHUNK, model=TimeModel())
    assert verify(machine, linked.collective, linked.schedule).time == pytest.approx((n - 1) * 2 * TAU)
