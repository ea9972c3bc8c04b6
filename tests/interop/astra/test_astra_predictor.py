"""The ASTRA-sim-compatible predictor against closed forms derived by hand from ASTRA-sim 518bd51.

Conventions used in every derivation below (ASTRA-sim analytical backends, system layer):
- bandwidth 50 "GB/s" is 50·2^30/1e9 = 53.6870912 B/ns, 200 "GB/s" is 214.7483648 B/ns;
  1 MiB at 50 GB/s serialises in 1e9·2^20/(50·2^30) = 19531.25 ns, 2 MiB at 200 in 9765.625 ns.
- unaware message time T = floor(hops·latency + bytes/bandwidth); Ring hops = shorter way round,
  FullyConnected 1, Switch 2.
- d = endpoint-delay (10 ns) before every send and after every receive; a received message that is
  reduced adds r(b) = 3·floor(b / (local-mem-bw·1e9) · 1e9) ns (PacketBundle.cc), b the size of the
  packet the receipt makes. With local-mem-bw 1600 (ASTRA-sim's Ring_4chunks.json): r(1 MiB) =
  3·655 = 1965, r(2 MiB) = 3·1310 = 3930, r(4 MiB) = 3·2621 = 7863.
  A packet algorithm's phase: d, then per message (T + d [+ r]).
"""
import pytest

from optcoll.collectives.builtins import make_collective
from optcoll.bounds import best_lower_bound
from optcoll.errors import InputError
from optcoll.interop.astra.algorithms import binary_tree
from optcoll.interop.astra.network import parse_network
from optcoll.interop.astra.predictor import predict, stream_sizes
from dataclasses import replace

from optcoll.interop.astra.system import ASTRA_DEFAULTS, Impl, parse_system, read_system
from optcoll.instances.instance import TimeModel

MiB = 2**20


def net(topology, counts, bandwidth, latency):
    return parse_network({"topology": topology, "npus_count": counts, "bandwidth": bandwidth,
                          "latency": latency})


RING8 = net(["Ring"], [8], [50], [500])


R1, R2, R4 = 1965, 3930, 7863


def system(impl, ndim=1, **extra):
    data = {f"{k}-implementation": [impl] * ndim
            for k in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")}
    return parse_system({**data, "preferred-dataset-splits": 1, "endpoint-delay": 10, "local-mem-bw": 1600,
                         **extra})


@pytest.mark.parametrize("impl, kind, size, expected", [
    # ring AllGather, comm 1 MiB per NPU: 7 messages of 1 MiB, T = floor(500 + 19531.25) = 20031:
    # d + 7(T + d) = 10 + 7·20041
    ("ring", "allgather", MiB, 10 + 7 * 20041),
    # ring ReduceScatter of 8 MiB: 7 messages of 1 MiB, every receipt reduced: d + 7(T + d + r)
    ("ring", "reducescatter", 8 * MiB, 10 + 7 * (20031 + 10 + R1)),
    # ring AllReduce of 8 MiB: 14 messages of 1 MiB, the first 7 receipts reduced
    ("ring", "allreduce", 8 * MiB, 10 + 14 * 20041 + 7 * R1),
    # halvingDoubling AllReduce of 8 MiB: 4, 2, 1, 1, 2, 4 MiB at offsets 1, 2, 4, 4, 2, 1 (= hops):
    # T = 500+78125, 1000+39062.5, 2000+19531.25 (floored) twice each; log2(8)-1 = 2 receipts
    # reduced, charged by the packets they make: 2 and 1 MiB
    ("halvingDoubling", "allreduce", 8 * MiB, 10 + 6 * 10 + 2 * (78625 + 40062 + 21531) + R2 + R1),
    # halvingDoubling AllGather, comm 1 MiB: 1, 2, 4 MiB at offsets 4, 2, 1: no reduction
    ("halvingDoubling", "allgather", MiB, 10 + 3 * 10 + 21531 + 40062 + 78625),
    # halvingDoubling ReduceScatter of 8 MiB: 4, 2, 1 MiB at offsets 1, 2, 4; the 2 receipts reduced
    # make the 2 and 1 MiB packets
    ("halvingDoubling", "reducescatter", 8 * MiB, 10 + 3 * 10 + 78625 + 40062 + 21531 + R2 + R1),
    # direct AllGather, comm 1 MiB: all 7 messages at d; the farthest (4 hops) T = floor(2000 +
    # 19531.25) = 21531; done d after the last receipt: 2d + T
    ("direct", "allgather", MiB, 20 + 21531),
    # direct AllReduce of 8 MiB (1 MiB messages): the reduce-scatter half at d; once every partial
    # has arrived (d + T(4 hops)), each packet coming back from the bus (d + r after its receipt)
    # sends the next all-gather message in ring order: the 4-hop one (4th) goes with the second
    # pair back, those received from 2 hops away: d + T(2) + d + r + T(4) + d
    ("direct", "allreduce", 8 * MiB, 3 * 10 + 20531 + R1 + 21531),
    # ring AlltoAll of 8 MiB (Ring.cc): 8·7/2 = 28 messages of 1 MiB to the next NPU, none reduced
    ("ring", "alltoall", 8 * MiB, 10 + 28 * 20041),
    # direct AlltoAll of 8 MiB (AllToAll.cc): 7 messages of 1 MiB at once; the farthest 4 hops
    ("direct", "alltoall", 8 * MiB, 20 + 21531),
    # direct4 AlltoAll: 4 at d, 3 more as the first receipts come back (1 and 3 hops away first:
    # offsets 1, 2, 3, 4 then 5, 6, 7 = 3, 2, 1 hops): last sent at 2d + T(1 hop), arrives +T(3 hops)
    ("direct4", "alltoall", 8 * MiB, 3 * 10 + 20031 + 21031),
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


def test_reduction_cost_is_three_truncated_memory_accesses():
    # PacketBundle.cc: (uint64)(b / (bw·1e9) · 1e9) per access, in doubles: 1 MiB at 50 GB/s is
    # 20971.52 ns per access; at 1600 GB/s 655.36
    assert system("ring", **{"local-mem-bw": 50}).reduction_ns(MiB) == 3 * 20971
    assert system("ring").reduction_ns(MiB) == R1 and system("ring").reduction_ns(4 * MiB) == R4
    absent = parse_system({"all-reduce-implementation": ["ring"], "preferred-dataset-splits": 1})
    assert absent.reduction_ns(MiB) == 0 and "local-mem-bw" in absent.notes()[0]
    p = predict(RING8, absent, "allreduce", 8 * MiB)
    assert p.total_ns == 10 + 14 * 20041 and "local-mem-bw" in p.summary()


def test_a_one_algorithm_runs_once_over_all_npus_timed_in_the_first_differing_dimension():
    # oneRing AllGather on Ring(4, 200) x Ring(2, 50), 1 MiB per NPU: one ring over NPUs 0..7 in
    # id order. 3 -> 4 is (3, 0) -> (0, 1): the backends time it in dimension 0, the first that
    # differs, one hop round the ring of 4, like every other message: T0 = floor(500 + 4882.8125)
    s = system("oneRing", 2)
    assert str(s.implementations["allgather"][0]) == "oneRing"
    p = predict(RING4_RING2, s, "allgather", MiB)
    assert len(p.phases) == 1 and p.total_ns == 10 + 7 * (5382 + 10)


def test_astra_defaults_without_a_system_file():
    # Sys::Sys: endpoint-delay 10; no local-mem-bw; one dataset split (ASTRA-sim has none)
    assert (ASTRA_DEFAULTS.endpoint_delay, ASTRA_DEFAULTS.preferred_dataset_splits,
            ASTRA_DEFAULTS.local_mem_bw_gbps) == (10, 1, None)
    ring = replace(ASTRA_DEFAULTS, implementations={"allgather": (Impl("ring"),)})
    assert predict(RING8, ring, "allgather", MiB).total_ns == 10 + 7 * 20041


def test_double_binary_tree_levels():
    # RootMax tree over 8 (in-order ids): 7 → 3 → {1, 5} → {0, 2}, {4, 6}; RootMin: 0 → 4 → ...
    assert binary_tree(8, True)[3] == (7, [1, 5]) and binary_tree(8, True)[7] == (None, [3])
    assert binary_tree(8, False)[0] == (None, [4]) and binary_tree(8, False)[4] == (0, [2, 6])
    # AllReduce of 1 MiB, whole buffer per message, T = floor(hops·500 + 19531.25):
    # leaves send at d; level by level up (each inner node: d + r after its last child), the root
    # reduces (d + r) and sends down, inner nodes d + r, leaves d: 7d + 5r + 6T
    fc8 = net(["FullyConnected"], [8], [50], [500])
    assert predict(fc8, system("doubleBinaryTree"), "allreduce", MiB, "unaware").total_ns == 70 + 5 * R1 + 6 * 20031
    sw8 = net(["Switch"], [8], [50], [500])
    assert predict(sw8, system("doubleBinaryTree"), "allreduce", MiB, "unaware").total_ns == 70 + 5 * R1 + 6 * 20531
    # any other collective on doubleBinaryTree runs the same AllReduce (generate_collective_phase)
    assert predict(fc8, system("doubleBinaryTree"), "alltoall", MiB, "unaware").total_ns == 70 + 5 * R1 + 6 * 20031


RING4_RING2 = net(["Ring", "Ring"], [4, 2], [200, 50], [500, 500])


def test_local_bandwidth_aware_allreduce_composition():
    # 8 MiB: RS in dim 0 (n=4, 2 MiB messages, T1 = floor(500+9765.625) = 10265): d + 3(T1+d+r);
    # AR in dim 1 on 2 MiB (n=2, 1 MiB messages, T2 = 20031): d + 2(T2+d) + r;
    # AG back in dim 0 on 2 MiB (2 MiB messages): d + 3(T1+d)
    s = system("ring", 2, **{"collective-optimization": "localBWAware"})
    p = predict(RING4_RING2, s, "allreduce", 8 * MiB, "unaware")
    assert [(ph.dim, ph.kind, ph.bytes_in, ph.bytes_out) for ph in p.phases] == [
        (0, "reducescatter", 8 * MiB, 2 * MiB), (1, "allreduce", 2 * MiB, 2 * MiB), (0, "allgather", 2 * MiB, 8 * MiB)]
    assert p.total_ns == (10 + 3 * (10275 + R2)) + (10 + 2 * 20041 + R1) + (10 + 3 * 10275)
    assert p.phases[0].start_ns == 0 and p.phases[-1].end_ns == p.total_ns


def test_baseline_allreduce_and_the_other_compositions():
    # baseline: AllReduce of the full 8 MiB in each dimension: d + 6(T1+d) + 3r(2 MiB), then
    # n=2 with 4 MiB messages (T = floor(500 + 78125) = 78625): d + 2(T+d) + r(4 MiB)
    base = system("ring", 2, **{"collective-optimization": "baseline"})
    assert predict(RING4_RING2, base, "allreduce", 8 * MiB, "unaware").total_ns == (10 + 6 * 10275 + 3 * R2) + (10 + 2 * 78635 + R4)
    # AllGather runs the last dimension first: comm 1 MiB: d + (T2+d), then 2 MiB in dim 0: d + 3(T1+d)
    p = predict(RING4_RING2, base, "allgather", MiB, "unaware")
    assert [ph.dim for ph in p.phases] == [1, 0] and p.total_ns == (10 + 20041) + (10 + 3 * 10275)
    # ReduceScatter runs dims upwards: d + 3(T1+d+r), then 2 MiB over n=2: d + (T2+d+r)
    assert predict(RING4_RING2, base, "reducescatter", 8 * MiB, "unaware").total_ns == (10 + 3 * (10275 + R2)) + (10 + 20041 + R1)
    # AlltoAll runs dims upwards like ReduceScatter, whatever the collective-optimization: 8 MiB over
    # n=4 is 6 messages of 2 MiB, then over n=2 one of 4 MiB
    a2a = predict(RING4_RING2, system("ring", 2, **{"collective-optimization": "localBWAware"}), "alltoall", 8 * MiB)
    assert [ph.dim for ph in a2a.phases] == [0, 1] and a2a.total_ns == (10 + 6 * 10275) + (10 + 78635)


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


def test_the_least_endpoint_delay_and_no_local_mem_bw_leave_nearly_the_network_alone():
    s1 = parse_system({"all-reduce-implementation": ["ring"], "preferred-dataset-splits": 1,
                       "endpoint-delay": 1})
    # AllReduce of 8 MiB with no reduction cost: 1 + 14(T + 1)
    assert predict(RING8, s1, "allreduce", 8 * MiB).total_ns == 1 + 14 * 20032
    # ASTRA-sim aborts with endpoint-delay 0 (an event at the current time)
    with pytest.raises(InputError, match="makes ASTRA-sim abort"):
        predict(RING8, replace(s1, endpoint_delay=0), "allreduce", 8 * MiB)


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
    ({"all-reduce-implementation": ["oneDoubleBinaryTree"], "preferred-dataset-splits": 1}, "all-reduce-implementation[0]", "unknown"),
    ({"all-reduce-implementation": ["directx"], "preferred-dataset-splits": 1}, "all-reduce-implementation[0]", "window"),
    ({"all-reduce-implementation": ["ring"], "preferred-dataset-splits": 1, "model-shared-bus": 1}, "model-shared-bus", "not modelled"),
    ({"all-reduce-implementation": ["ring"], "preferred-dataset-splits": 0}, "preferred-dataset-splits", "at least 1"),
    ({"all-reduce-implementation": ["ring"], "preferred-dataset-splits": 1, "local-mem-bw": -50}, "local-mem-bw", "positive"),
    ({"all-reduce-implementation": ["ring"], "preferred-dataset-splits": 1, "endpoint-delay": 0}, "endpoint-delay", "aborts"),
    ({"all-reduce-implementation": ["ring"], "preferred-dataset-splits": 1, "local-mem-bw": "fast"}, "local-mem-bw", "number"),
    ({"all-reduce-implementation": ["ring"], "preferred-dataset-splits": 1, "endpoint-dealy": 5}, "endpoint-dealy", "endpoint-delay"),
    ({"all-reduce-implementation": ["ring"], "preferred-dataset-splits": 1, "intra-dimension-scheduling": "FIFO"},
     "intra-dimension-scheduling", "unknown key"),
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
    with pytest.raises(InputError, match=r"a one\* algorithm goes first"):
        predict(RING4_RING2, system("ring", 2, **{"all-reduce-implementation": ["ring", "oneRing"]}), "allreduce", MiB)
    with pytest.raises(InputError, match="HalvingDoubling.cc"):
        predict(RING8, system("halvingDoubling"), "alltoall", 8 * MiB)
    with pytest.raises(InputError, match="congestion-aware backend refuses a 2-dimensional") as err:
        predict(RING4_RING2, system("ring", 2), "allreduce", 8 * MiB, "aware")
    assert err.value.field == "backend"
    with pytest.raises(InputError, match="power-of-two"):
        predict(net(["Ring"], [6], [50], [500]), system("halvingDoubling"), "allreduce", MiB)
    with pytest.raises(InputError, match="backend"):
        predict(RING8, system("ring"), "allreduce", MiB, "exact")
    with pytest.raises(InputError, match="natively"):
        predict(RING8, system("ring"), "broadcast", MiB)
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(InputError, match="bad.json"):
        read_system(tmp_path / "bad.json")


def test_comm_size_is_astra_sims_per_npu_input_for_allgather_only():
    from optcoll.interop.astra.predictor import comm_size_of

    assert comm_size_of("allgather", 8 * MiB, 8) == MiB
    assert all(comm_size_of(kind, 8 * MiB, 8) == 8 * MiB for kind in ("allreduce", "reducescatter", "alltoall"))
    with pytest.raises(InputError, match="multiple of 8"):
        comm_size_of("allgather", 8 * MiB + 1, 8)
    p = predict(RING8, system("ring"), "allgather", MiB)
    assert (p.size_bytes, p.comm_size) == (8 * MiB, MiB)
