"""The structural validator: clean files give no findings; each broken rule gives a precise one."""
import dataclasses
from pathlib import Path

import pytest

from optcoll.errors import InputError
from optcoll.interop.msccl import EXECUTOR, parse_algo, to_xml, validate_msccl_xml
from optcoll.interop.msccl.ir import Step

DATA = Path(__file__).parent / "data"
RING_AG = DATA / "allgather_ring_8.xml"
RING_AR = DATA / "allreduce_ring_8.xml"


def edit(path, gpu=None, tb=None, step=None, **changes):
    """The file with one algo / gpu / tb / step replaced by a copy with ``changes``."""
    algo, _, _ = parse_algo(path)
    if gpu is None:
        return to_xml(dataclasses.replace(algo, **changes))
    gpus = list(algo.gpus)
    g = gpus[gpu]
    if tb is None:
        gpus[gpu] = dataclasses.replace(g, **changes)
    else:
        tbs = list(g.tbs)
        t = tbs[tb]
        if step is None:
            tbs[tb] = dataclasses.replace(t, **changes)
        else:
            steps = list(t.steps)
            steps[step] = dataclasses.replace(steps[step], **changes) if changes else None
            tbs[tb] = dataclasses.replace(t, steps=tuple(s for s in steps if s is not None))
        gpus[gpu] = dataclasses.replace(g, tbs=tuple(tbs))
    return to_xml(dataclasses.replace(algo, gpus=tuple(gpus)))


def findings(text, **kw):
    return validate_msccl_xml(text, **kw)


def test_the_handwritten_files_are_clean_and_survive_a_parse_write_cycle():
    for path in (RING_AG, RING_AR):
        assert findings(path) == []
        algo, parsed, _ = parse_algo(path)
        assert parsed == []
        again, _, _ = parse_algo(to_xml(algo))
        assert again == algo


def test_missing_required_algo_attributes_are_named():
    text = RING_AG.read_text().replace(' outofplace="1"', "").replace(' maxBytes="0"', "")
    out = findings(text)
    assert "algo: missing attribute 'outofplace' (the executor runtime refuses it)" in out
    assert "algo: missing attribute 'maxBytes' (the executor runtime refuses it)" in out
    assert findings(text, runtime="msccl") == []
    # the first runtime needs a name; neither reads redop (msccl-tools never writes it)
    assert findings(text.replace(' name="allgather_ring_8"', ""), runtime="msccl") == [
        "algo: missing attribute 'name' (the msccl runtime refuses it)"]
    assert findings(RING_AR.read_text().replace(' redop="sum"', "")) == []


def test_coll_spelling_follows_the_runtime():
    text = RING_AG.read_text().replace('coll="allgather"', 'coll="reduce_scatter"')
    out = findings(text)
    assert any(f.startswith("algo: coll='reduce_scatter' is not one of") for f in out)
    assert not any("is not one of" in f for f in findings(text, runtime="msccl"))
    assert findings(RING_AG.read_text().replace('coll="allgather"', 'coll="allthings"'))[0].startswith(
        "algo: attribute coll='allthings': unknown collective")


def test_unmatched_send_and_receive_counts():
    text = edit(RING_AG, gpu=3, tb=0, step=8)  # drop GPU 3's last receive
    out = findings(text)
    assert "connection gpu 2 -> gpu 3 channel 0: gpu 2 tb 0 sends 7 time(s) but gpu 3 tb 0 receives 6 time(s)" in out


def test_fifo_order_mismatch_by_count():
    text = edit(RING_AG, gpu=4, tb=0, step=3, cnt=2)
    out = findings(text)
    assert ("connection gpu 3 -> gpu 4 channel 0: FIFO order mismatch at the 2nd transfer: gpu 3 tb 0 "
            "step 2 (rcs) sends cnt=1 but gpu 4 tb 0 step 3 (rcs) receives cnt=2") in out


def test_fifo_order_mismatch_by_remote_reference():
    # GPU 1 swaps its first two receives: GPU 0's plain send says where its chunk should land
    algo, _, _ = parse_algo(RING_AG)
    g1 = algo.gpus[1]
    steps = list(g1.tbs[0].steps)
    steps[2], steps[3] = (dataclasses.replace(steps[3], s=2), dataclasses.replace(steps[2], s=3))
    text = edit(RING_AG, gpu=1, tb=0, steps=tuple(steps))
    assert findings(text) == ["connection gpu 0 -> gpu 1 channel 0: FIFO order mismatch at the 1st "
                              "transfer: gpu 0 tb 0 step 1 (s) names remote o[0] but gpu 1 tb 0 step 2 "
                              "(rcs) writes o[7]"]


def test_offsets_out_of_bounds():
    out = findings(edit(RING_AG, gpu=2, tb=0, step=1, srcoff=8))
    assert out == ["gpu 2 tb 0 step 1: srcbuf=o srcoff=8 is outside the buffer (o_chunks=8) (the executor "
                   "runtime refuses it)"]
    out = findings(edit(RING_AG, gpu=2, tb=0, step=0, dstbuf="s"))
    assert "gpu 2 tb 0 step 0: dstbuf=s dstoff=2 is outside the buffer (s_chunks=0) (the executor runtime " \
           "refuses it)" in out
    # the loader checks where a step starts; a count running past the end is found here
    out = findings(edit(RING_AG, gpu=2, tb=0, step=1, srcoff=7, cnt=2))
    assert "gpu 2 tb 0 step 1: srcbuf=o srcoff=7 cnt=2 is outside the buffer (o_chunks=8)" in out


def test_dependencies_on_nonexistent_thread_blocks_or_steps():
    out = findings(edit(RING_AG, gpu=5, tb=0, step=2, depid=3, deps=0))
    assert "gpu 5 tb 0 step 2: depends on tb 3 step 0, which does not exist on gpu 5" in out
    out = findings(edit(RING_AG, gpu=5, tb=0, step=2, depid=0, deps=40))
    assert "gpu 5 tb 0 step 2: depends on tb 0 step 40, which does not exist on gpu 5" in out


def test_duplicate_thread_block_for_a_connection():
    algo, _, _ = parse_algo(RING_AG)
    g = algo.gpus[0]
    extra = dataclasses.replace(g.tbs[0], id=1, recv=-1, steps=(Step(0, "s", "i", 0, "o", 0),))
    out = findings(edit(RING_AG, gpu=0, tbs=g.tbs + (extra,)))
    assert ("gpu 0 tb 1: tb 0 and tb 1 both send to gpu 1 on channel 0 (one thread block per peer, "
            "channel and direction)") in out


def test_count_limit_and_dense_step_indices():
    out = findings(edit(RING_AG, gpu=6, tb=0, step=0, cnt=72))
    assert "gpu 6 tb 0 step 0: cnt=72 is not below 72 (the executor runtime refuses it)" in out
    out = findings(edit(RING_AG, gpu=6, tb=0, step=4, s=7))
    assert ("gpu 6 tb 0 step 4: attribute s=7 but this is step 4 of the thread block (indices must be "
            "dense 0, 1, 2, ... in order)") in out


def test_step_limit_follows_the_runtime():
    assert findings(RING_AR) == []
    out = findings(RING_AR, runtime=dataclasses.replace(EXECUTOR, max_steps=8))
    assert "gpu 0 tb 0: 15 steps, more than its 8 per thread block (the executor runtime refuses it)" in out
    assert "gpu 0 tb 0 step 8: attribute s=8 must be in 0..7 (the executor runtime refuses it)" in out


def test_missing_hasdep_and_bad_nop_chains():
    # GPU 0's cpy waits on nothing; make its first send wait on a local tb step that never signals
    algo, _, _ = parse_algo(RING_AG)
    g = algo.gpus[0]
    steps = list(g.tbs[0].steps)
    local = dataclasses.replace(g.tbs[0], id=1, send=-1, recv=-1, steps=(steps[0],))
    steps = [dataclasses.replace(s, s=k) for k, s in enumerate(steps[1:])]
    steps[0] = dataclasses.replace(steps[0], depid=1, deps=0)
    text = edit(RING_AG, gpu=0, tbs=(dataclasses.replace(g.tbs[0], steps=tuple(steps)), local))
    out = findings(text)
    assert ("gpu 0 tb 1 step 0 (cpy): other thread blocks wait on this step but it has hasdep=0 (the "
            "runtime never signals it)") in out
    nop = Step(0, "nop", "i", -1, "o", -1, 0, 1, 0, 0)
    steps = [nop] + [dataclasses.replace(s, s=k + 1, depid=-1, deps=-1) for k, s in enumerate(steps)]
    text = edit(RING_AG, gpu=0, tbs=(dataclasses.replace(g.tbs[0], steps=tuple(steps)), local))
    out = findings(text)
    assert ("gpu 0 tb 0 step 1: follows 1 nop step(s) but has no dependency of its own (the last "
            "dependency of a chain belongs on the real step) (the executor runtime refuses it)") in out


def test_deadlock_from_circular_dependencies():
    algo, _, _ = parse_algo(RING_AG)
    g = algo.gpus[0]
    steps = list(g.tbs[0].steps)
    local = dataclasses.replace(g.tbs[0], id=1, send=-1, recv=-1,
                                steps=(dataclasses.replace(steps[0], depid=0, deps=0, hasdep=1),))
    rest = [dataclasses.replace(s, s=k) for k, s in enumerate(steps[1:])]
    rest[0] = dataclasses.replace(rest[0], depid=1, deps=0, hasdep=1)
    out = findings(edit(RING_AG, gpu=0, tbs=(dataclasses.replace(g.tbs[0], steps=tuple(rest)), local)))
    assert "deadlock: gpu 0 tb 0 step 0 (s) never runs: waits for gpu 0 tb 1 step 0 (cpy), which never runs" in out
    assert any(f.startswith("deadlock: gpu 1 tb 0 step 2 (rcs) never runs: waits for data from gpu 0 tb 0 step 0 (s)") for f in out)


def test_gpu_and_thread_block_ids():
    out = findings(edit(RING_AG, gpu=7, id=3))
    assert "gpu 3: appears 2 times" in out
    assert "algo: ngpus=8 but no <gpu> element for id(s) 7" in out
    out = findings(edit(RING_AG, gpu=7, tb=0, id=2))
    assert "gpu 7: thread block ids 2 are not dense 0..0 (the executor runtime refuses it)" in out
    out = findings(edit(RING_AG, gpu=7, tb=0, send=7))
    assert "gpu 7 tb 0: attribute send=7 must be -1 or another GPU id (the executor runtime refuses it)" in out


def test_nchannels_must_be_the_largest_channel_plus_one():
    out = findings(edit(RING_AG, nchannels=2))
    assert out == ["algo: nchannels=2 but the thread blocks use channels 0..0 (nchannels must be the "
                   "largest chan + 1 = 1)"]


def test_buffer_sizes_must_hold_the_layout():
    assert findings(edit(RING_AG, gpu=1, o_chunks=7)) == [
        "gpu 1 tb 0 step 3: dstbuf=o dstoff=7 is outside the buffer (o_chunks=7) (the executor runtime refuses it)",
        "gpu 1: o_chunks=7, but the allgather layout with nchunksperloop=8 needs 8 o chunks"]
    assert findings(edit(RING_AG, nchunksperloop=12)) == [
        "algo: nchunksperloop=12: allgather on 8 GPUs needs a multiple of 8 chunks, got 12"]


def test_sends_need_a_send_peer():
    out = findings(edit(RING_AG, gpu=2, tb=0, send=-1))
    assert "gpu 2 tb 0 step 1: type='s' sends, but tb 0 has send=-1 (the executor runtime refuses it)" in out


def test_malformed_input_and_missing_attributes():
    with pytest.raises(InputError, match="not well-formed XML"):
        validate_msccl_xml("<algo><gpu></algo>")
    with pytest.raises(InputError, match="expected <algo>"):
        validate_msccl_xml("<topology/>")
    with pytest.raises(InputError, match="file not found"):
        validate_msccl_xml(DATA / "no_such_file.xml")
    text = RING_AG.read_text().replace(' cnt="1" depid', ' depid', 1).replace('ngpus="8"', 'ngpus="eight"')
    out = findings(text)
    assert "gpu 0 tb 0 step 0: missing attribute 'cnt'" in out
    assert "algo: attribute ngpus='eight' is not an integer (the runtimes read it as 0)" in out
    assert "algo: attribute ngpus='eight' is not an integer" in [f.message for f in parse_algo(text)[1]]
