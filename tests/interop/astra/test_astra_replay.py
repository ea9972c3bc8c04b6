"""The Chakra replay predictor: ASTRA-sim's custom-collective semantics, derived by hand from
CustomAlgorithm.cc and CommonNetworkApi.cc, and optcoll exports replayed to the times the real
ASTRA-sim reported for them (data/README.md)."""
from pathlib import Path

import pytest

from optcoll.errors import InputError
from optcoll.instances.instancefile import load_instance
from optcoll.interop.astra.chakra import COMM_RECV, COMM_SEND, COMP, Attr, Node, Trace
from optcoll.interop.astra.etexport import chakra_traces
from optcoll.interop.astra.network import parse_network
from optcoll.interop.astra.replay import explain, replay
from optcoll.collectives.builtins import make_collective
from optcoll.machines.catalog import load_machine
from optcoll.machines.generators import ring
from optcoll.schedules.jsonfile import load_schedule

DATA = Path(__file__).parent / "data"
REPO = Path(__file__).resolve().parents[3]
MiB = 2**20
RING4 = parse_network({"topology": ["Ring"], "npus_count": [4], "bandwidth": [50], "latency": [500]})
T1 = 20031  # floor(500 + 2^20 / (50 * 2^30 / 1e9)) = floor(500 + 19531.25): one hop, 1 MiB


def message(node_id, kind, src, dst, tag, size=MiB, deps=()):
    attrs = (Attr("comm_src", "int32", src), Attr("comm_dst", "int32", dst), Attr("comm_size", "int64", size),
             Attr("comm_tag", "int32", tag), Attr("is_cpu_op", "bool", False))
    return Node(node_id, f"n{node_id}", kind, data_deps=tuple(deps), attrs=attrs)


def traces(*per_npu):
    return [Trace(tuple(nodes)) for nodes in per_npu]


def test_a_forwarded_message_takes_two_message_times_with_no_endpoint_delay():
    # 0 -> 1, then 1 forwards to 2 once it has it (its send depends on its receive)
    t = traces([message(0, COMM_SEND, 0, 1, 7)],
               [message(0, COMM_RECV, 0, 1, 7), message(1, COMM_SEND, 1, 2, 8, deps=[0])],
               [message(0, COMM_RECV, 1, 2, 8)], [])
    r = replay(RING4, t)
    assert (r.total_ns, r.npu_finish_ns, r.messages) == (2 * T1, (T1, 2 * T1, 2 * T1, 0), 2)


def test_comp_nodes_take_their_duration_and_at_least_one_ns():
    t = traces([Node(0, "reduce", COMP, duration_micros=2), message(1, COMM_SEND, 0, 1, 1, deps=[0]),
                Node(2, "free", COMP, data_deps=(1,))],
               [message(0, COMM_RECV, 0, 1, 1)], [], [])
    assert replay(RING4, t).total_ns == 2000 + T1 + 1


def test_two_messages_on_one_link_share_it_only_when_congestion_aware():
    # NPU 0 sends two 1 MiB messages to NPU 1 at once: the unaware backend delivers both after T;
    # the aware one serialises them on the link 0->1: the second leaves floor(19531.25) = 19531 later
    t = traces([message(0, COMM_SEND, 0, 1, 1), message(1, COMM_SEND, 0, 1, 2)],
               [message(0, COMM_RECV, 0, 1, 1), message(1, COMM_RECV, 0, 1, 2)], [], [])
    assert replay(RING4, t, "unaware").total_ns == T1
    aware = replay(RING4, t, "aware")
    assert aware.total_ns == 19531 + T1 and "several sends to one peer at once" in aware.notes[0]
    # the same replay without ASTRA-sim's floors
    assert replay(RING4, t, "unaware", exact=True).total_ns == 500 + 19531.25


def test_receives_match_by_tag_source_and_size_in_order():
    # the receive posted for tag 2 is not satisfied by the tag 1 message: NPU 1 never finishes
    t = traces([message(0, COMM_SEND, 0, 1, 1)], [message(0, COMM_RECV, 0, 1, 2)], [], [])
    with pytest.raises(InputError, match="never finishes"):
        replay(RING4, t)


@pytest.mark.parametrize("bad, words", [
    (Node(0, "x", COMM_SEND), "no comm_src"),
    (message(0, COMM_SEND, 0, 9, 1), "not in the communicator"),
    (message(0, COMM_SEND, 2, 1, 1), "names 2 as its own rank"),
    (message(0, COMM_SEND, 0, 1, 1, deps=[5]), "not in the trace"),
    (Node(0, "x", 7), "COMM_COLL"),
])
def test_malformed_traces_are_refused(bad, words):
    with pytest.raises(InputError, match=words):
        replay(RING4, traces([bad], [], [], []))


# -- optcoll exports replayed to ASTRA-sim's own times (data/README.md) ---------------------------------

RING8_NET = parse_network({"topology": ["Ring"], "npus_count": [8], "bandwidth": [50], "latency": [500]})
FC8_NVLINK = parse_network({"topology": ["FullyConnected"], "npus_count": [8],
                            "bandwidth": [25e9 / 2**30], "latency": [500]})


def test_ring_allreduce_on_ring8_replays_to_astra_sims_time():
    machine = ring(8, 50 * 2**30, 5e-7)
    coll = make_collective("allreduce", range(8), 8 * MiB, 1)
    built = chakra_traces(machine, coll, load_schedule(DATA / "ring8-allreduce-ring.json.gz", machine))
    for backend in ("unaware", "aware"):
        report = explain(RING8_NET, built.traces, backend, built.time)
        # ASTRA-sim 518bd51 reported 280434 ns on both backends; optcoll's time is 14 steps of
        # 500 + 19531.25 ns = 280437.5 ns: the 14 floors of 0.25 ns account for the difference
        assert report.astra_ns == 280434 and report.verified_ns == pytest.approx(280437.5)
        assert report.exact_ns == pytest.approx(280437.5) and "3.500 ns off" in report.notes[0]


@pytest.mark.parametrize("c, backend, measured", [(1, "unaware", 10738418), (1, "aware", 16107127),
                                                   (2, "unaware", 8054562)])
def test_optimal_dgx1_allgather_replays_to_astra_sims_time(c, backend, measured):
    inst = load_instance(REPO / "instances" / "quick" / f"dgx1-allgather-c{c}.toml")
    assert inst.machine.name == load_machine("dgx1").name
    schedule = load_schedule(DATA / f"dgx1-allgather-c{c}-optimal.json.gz", inst.machine)
    built = chakra_traces(inst.machine, inst.collective, schedule, inst.model)
    report = explain(FC8_NVLINK, built.traces, backend, built.time, same_machine=False)
    assert report.astra_ns == measured
    if backend == "unaware":  # every DGX-1 link is one FullyConnected link: the schedule's time, floored
        assert report.exact_ns == pytest.approx(report.verified_ns)
    else:  # DGX-1's double NVLinks are one link of FullyConnected(8): queued there
        assert report.astra_ns > report.verified_ns
