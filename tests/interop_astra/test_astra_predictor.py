"""The ASTRA-sim-compatible predictor against closed forms derived by hand.

Conventions used in every derivation below (ASTRA-sim 2.0 analytical backends, system layer):
- bandwidth 50 "GB/s" is 50·2^30/1e9 = 53.6870912 B/ns, 200 "GB/s" is 214.7483648 B/ns;
  1 MiB at 50 GB/s serialises in 1e9·2^20/(50·2^30) = 19531.25 ns, 2 MiB at 200 in 9765.625 ns.
- unaware message time T = floor(hops·latency + bytes/bandwidth); Ring hops = shorter way round,
  FullyConnected 1, Switch 2.
- d = endpoint-delay (10 ns) before every send and after every receive; r = 30 ns when the received
  message is reduced. A packet algorithm's phase: d, then per message (T + d [+ r]).
"""
import pytest

from optcoll.collectives.builtins import make_collective
from optcoll.bounds import best_lower_bound
from optcoll.errors import InputError
from optcoll.interop.astra.algorithms import binary_tree
from optcoll.interop.astra.network import parse_network
from optcoll.interop.astra.predictor import predict, stream_sizes
from optcoll.interop.astra.system import parse_system, read_system
from optcoll.instances.instance import TimeModel

MiB = 2**20


def net(topology, counts, bandwidth, latency):
    return parse_network({"topology": topology, "npus_count": counts, "bandwidth": bandwidth,
                          "latency": latency})


RING8 = net(["Ring"], [8], [50], [500])


def system(impl, ndim=1, **extra):
    data = {f"{k}-implementation": [impl] * ndim for k in ("all-reduce", "all-gather", "reduce-scatter")}
    return parse_system({**data, "preferred-dataset-splits": 1, "endpoint-delay": 10, **extra})


@pytest.mark.parametrize("impl, kind, size, expected", [
    # ring AllGather, comm 1 MiB per NPU: 7 messages of 1 MiB, T = floor(500 + 19531.25) = 20031:
    # d + 7(T + d) = 10 + 7·20041
    ("ring", "allgather", MiB, 10 + 7 * 20041),
    # ring ReduceScatter of 8 MiB: 7 messages of 1 MiB, every receipt reduced: d + 7(T + d + r)
    ("ring", "reducescatter", 8 * MiB, 10 + 7 * (20031 + 10 + 30)),
    # ring AllReduce of 8 MiB: 14 messages of 1 MiB, the first 7 receipts reduced
    ("ring", "allreduce", 8 * MiB, 10 + 14 * 20041 + 7 * 30),
    # halvingDoubling AllReduce of 8 MiB: 4, 2, 1, 1, 2, 4 MiB at offsets 1, 2, 4, 4, 2, 1 (= hops):
    # T = 500+78125, 1000+39062.5, 2000+19531.25 (floored) twice each; log2(8)-1 = 2 receipts reduced
    ("halvingDoubling", "allreduce", 8 * MiB, 10 + 6 * 10 + 2 * (78625 + 40062 + 21531) + 2 * 30),
    # halvingDoubling AllGather, comm 1 MiB: 1, 2, 4 MiB at offsets 4, 2, 1: no reduction
    ("halvingDoubling", "allgather", MiB, 10 + 3 * 10 + 21531 + 40062 + 78625),
    # halvingDoubling ReduceScatter of 8 MiB: 4, 2, 1 MiB at offsets 1, 2, 4; 2 receipts reduced
    ("halvingDoubling", "reducescatter", 8 * MiB, 10 + 3 * 10 + 78625 + 40062 + 21531 + 2 * 30),
    # direct AllGather, comm 1 MiB: all 7 messages at d; the farthest (4 hops) T = floor(2000 +
    # 19531.25) = 21531; done d after the last receipt: 2d + T
    ("direct", "allgather", MiB, 20 + 21531),
    # direct AllReduce of 8 MiB (1 MiB messages): reduce-scatter half, then the all-gather half
    # once every partial is reduced: d + T + (d + r) + T + d
    ("direct", "allreduce", 8 * MiB, 3 * 10 + 30 + 2 * 21531),
])
def test_single_dimension_closed_forms(impl, kind, size, expected):
    assert predict(RING8, system(impl), kind, size, "unaware").total_ns == expected


def test_ring_on_a_ring_has_no_contention_so_both_backends_agree():
    for kind, size in (("allgather", MiB), ("allreduce", 8 * MiB)):
        ring = system("ring")
        assert (predict(RING8, ring, kind, size, "aware").total_ns
                == predict(RING8, ring, kind, size, "unaware").total_ns)


def test_direct_on_a_switch_queues_on_the_uplink_when_congestion_aware():
    switch4 = net(["Switch"], [4], [50], [500])
    # unaware: 2d + floor(2·500 + 19531.25)
    assert predict(switch4, system("direct"), "allgather", MiB, "unaware").total_ns == 20 + 20531
    # aware: NPU i's three 1 MiB messages queue on i→switch: they leave at d, d+s, d+2s with
    # s = floor(19531.25) = 19531 and reach the switch c = floor(500 + 19531.25) = 20031 later;
    # switch→j forwards each as it comes (j's k-th message arrives when the link frees), so the
    # last arrives at d + 2s + 2c, and the phase ends d later
    assert predict(switch4, system("direct"), "allgather", MiB, "aware").total_ns == 20 + 2 * 19531 + 2 * 20031


def test_double_binary_tree_levels():
    # RootMax tree over 8 (in-order ids): 7 → 3 → {1, 5} → {0, 2}, {4, 6}; RootMin: 0 → 4 → ...
    assert binary_tree(8, True)[3] == (7, [1, 5]) and binary_tree(8, True)[7] == (None, [3])
    assert binary_tree(8, False)[0] == (None, [4]) and binary_tree(8, False)[4] == (0, [2, 6])
    # AllReduce of 1 MiB, whole buffer per message, T = floor(hops·500 + 19531.25):
    # leaves send at d; level by level up (each inner node: d + r after its last child), the root
    # reduces (d + r) and sends down, inner nodes d + r, leaves d: 7d + 5r + 6T
    fc8 = net(["FullyConnected"], [8], [50], [500])
    assert predict(fc8, system("doubleBinaryTree"), "allreduce", MiB, "unaware").total_ns == 70 + 150 + 6 * 20031
    sw8 = net(["Switch"], [8], [50], [500])
    assert predict(sw8, system("doubleBinaryTree"), "allreduce", MiB, "unaware").total_ns == 70 + 150 + 6 * 20531


RING4_RING2 = net(["Ring", "Ring"], [4, 2], [200, 50], [500, 500])


def test_local_bandwidth_aware_allreduce_composition():
    # 8 MiB: RS in dim 0 (n=4, 2 MiB messages, T1 = floor(500+9765.625) = 10265): d + 3(T1+d+r);
    # AR in dim 1 on 2 MiB (n=2, 1 MiB messages, T2 = 20031): d + 2(T2+d) + r;
    # AG back in dim 0 on 2 MiB (2 MiB messages): d + 3(T1+d)
    s = system("ring", 2, **{"collective-optimization": "localBWAware"})
    p = predict(RING4_RING2, s, "allreduce", 8 * MiB, "unaware")
    assert [(ph.dim, ph.kind, ph.bytes_in, ph.bytes_out) for ph in p.phases] == [
        (0, "reducescatter", 8 * MiB, 2 * MiB), (1, "allreduce", 2 * MiB, 2 * MiB), (0, "allgather", 2 * MiB, 8 * MiB)]
    assert p.total_ns == (10 + 3 * 10305) + (10 + 2 * 20041 + 30) + (10 + 3 * 10275)
    assert p.phases[0].start_ns == 0 and p.phases[-1].end_ns == p.total_ns


def test_baseline_allreduce_and_the_other_compositions():
    # baseline: AllReduce of the full 8 MiB in each dimension: d + 6(T1+d) + 3r, then
    # n=2 with 4 MiB messages (T = floor(500 + 78125) = 78625): d + 2(T+d) + r
    base = system("ring", 2, **{"collective-optimization": "baseline"})
    assert predict(RING4_RING2, base, "allreduce", 8 * MiB, "unaware").total_ns == (10 + 6 * 10275 + 90) + (10 + 2 * 78635 + 30)
    # AllGather runs the last dimension first: comm 1 MiB: d + (T2+d), then 2 MiB in dim 0: d + 3(T1+d)
    p = predict(RING4_RING2, base, "allgather", MiB, "unaware")
    assert [ph.dim for ph in p.phases] == [1, 0] and p.total_ns == (10 + 20041) + (10 + 3 * 10275)
    # ReduceScatter runs dims upwards: d + 3(T1+d+r), then 2 MiB over n=2: d + (T2+d+r)
    assert predict(RING4_RING2, base, "reducescatter", 8 * MiB, "unaware").total_ns == (10 + 3 * 10305) + (10 + 20071)


def test_streams_and_active_chunks():
    # two 1 MiB streams of a 2 MiB AllGather: one at a time, the second starts on each NPU when
    # the first ends there (all NPUs in step): twice one stream; two at a time: as one stream
    one = 10 + 7 * 20041
    for active, expected in ((1, 2 * one), (2, one)):
        s = system("ring", **{"preferred-dataset-splits": 2, "active-chunks-per-dimension": active})
        p = predict(RING8, s, "allgather", 2 * MiB, "unaware")
        assert (p.streams, p.chunk_bytes, p.total_ns) == (2, MiB, expected)
    assert stream_sizes("allreduce", 100, 64, 8) == (64, 8)  # at least one byte per NPU per chunk
    assert stream_sizes("allgather", 100, 8, 8) == (9, 12)


def test_endpoint_delay_and_reduction_delay_enter_linearly():
    s0 = parse_system({"all-reduce-implementation": ["ring"], "preferred-dataset-splits": 1,
                       "endpoint-delay": 0}, reduction_delay=0)
    # AllReduce of 8 MiB with no endpoint or reduction cost: 14 T
    assert predict(RING8, s0, "allreduce", 8 * MiB).total_ns == 14 * 20031


def test_unaware_beats_bandwidth_bounds_while_aware_does_not():
    size = 64 * MiB
    coll = make_collective("allgather", range(8), size)
    bound = best_lower_bound(RING8.machine(), coll, TimeModel(occupancy="serialization")).value * 1e9
    direct = system("direct")
    assert predict(RING8, direct, "allgather", size // 8, "unaware").total_ns < bound
    assert predict(RING8, direct, "allgather", size // 8, "aware").total_ns >= bound


@pytest.mark.parametrize("data, field, words", [
    ({"all-reduce-implementation": ["ring"]}, "preferred-dataset-splits", "missing"),
    ({"all-reduce-implementation": ["tree"], "preferred-dataset-splits": 1}, "all-reduce-implementation[0]", "unknown"),
    ({"all-reduce-implementation": ["oneRing"], "preferred-dataset-splits": 1}, "all-reduce-implementation[0]", "not modelled"),
    ({"all-reduce-implementation": ["directx"], "preferred-dataset-splits": 1}, "all-reduce-implementation[0]", "window"),
    ({"all-reduce-implementation": ["ring"], "preferred-dataset-splits": 1, "model-shared-bus": 1}, "model-shared-bus", "not modelled"),
    ({"all-reduce-implementation": ["ring"], "preferred-dataset-splits": 0}, "preferred-dataset-splits", "at least 1"),
])
def test_system_errors_name_the_field(data, field, words):
    with pytest.raises(InputError) as err:
        parse_system(data, "sys.json")
    assert err.value.field == field and words in str(err.value) and err.value.source == "sys.json"


def test_predict_refusals(tmp_path):
    path = tmp_path / "sys.json"
    path.write_text('{"all-reduce-implementation": ["ring", "ring"], "preferred-dataset-splits": 1,'
                    ' "all-gather-implementation-custom": ["et/ag"]}')
    s = read_system(path)
    with pytest.raises(InputError, match="1-dimensional"):
        predict(RING8, s, "allreduce", MiB)
    with pytest.raises(InputError, match="native algorithms only"):
        predict(RING8, s, "allgather", MiB)
    with pytest.raises(InputError, match="power-of-two"):
        predict(net(["Ring"], [6], [50], [500]), system("halvingDoubling"), "allreduce", MiB)
    with pytest.raises(InputError, match="backend"):
        predict(RING8, system("ring"), "allreduce", MiB, "exact")
    with pytest.raises(InputError, match="alltoall"):
        predict(RING8, system("ring"), "alltoall", MiB)
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(InputError, match="bad.json"):
        read_system(tmp_path / "bad.json")
