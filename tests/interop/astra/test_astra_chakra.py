"""Chakra ET export: the wire format (cross-checked against google.protobuf), and verified
schedules decoding back to the same transfers and dependencies."""
import numpy as np
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from optcoll.collectives.builtins import make_collective
from optcoll.errors import InputError, ScheduleRejected
from optcoll.interop.astra import protowire as pw
from optcoll.interop.astra.chakra import COMM_RECV, COMM_SEND, Attr, Node, Trace, read_trace
from optcoll.interop.astra.etexport import export_chakra, system_snippet
from optcoll.instances.instance import Instance
from optcoll.machines import generators as g
from optcoll.producers.compose import synthesize
from optcoll.producers.greedy.engine import spread_greedy
from optcoll.schedules.schedule import REDUCE, ScheduleBuilder
from optcoll.verify import verify

GIB = 2**30


# -- wire format -------------------------------------------------------------------------------------

@pytest.mark.parametrize("value, encoded", [(0, b"\x00"), (1, b"\x01"), (300, b"\xac\x02"),
                                            (-1, b"\xff" * 9 + b"\x01")])
def test_varints(value, encoded):
    assert pw.varint(value) == encoded
    raw, end = pw.read_varint(encoded, 0)
    assert end == len(encoded) and pw.signed(raw) == value


def _schema_classes():
    """Chakra's messages built independently with google.protobuf from et_def.proto's numbers."""
    T = descriptor_pb2.FieldDescriptorProto
    f = descriptor_pb2.FileDescriptorProto(name="et_def_test.proto", package="ChakraProtoMsg", syntax="proto3")
    attr = f.message_type.add(name="AttributeProto")
    attr.oneof_decl.add(name="value")
    attr.field.add(name="name", number=1, type=T.TYPE_STRING, label=T.LABEL_OPTIONAL)
    for name, number, typ in [("double_val", 3, T.TYPE_DOUBLE), ("int32_val", 7, T.TYPE_INT32),
                              ("int64_val", 9, T.TYPE_INT64), ("uint64_val", 13, T.TYPE_UINT64),
                              ("bool_val", 27, T.TYPE_BOOL), ("string_val", 29, T.TYPE_STRING)]:
        attr.field.add(name=name, number=number, type=typ, label=T.LABEL_OPTIONAL, oneof_index=0)
    meta = f.message_type.add(name="GlobalMetadata")
    meta.field.add(name="version", number=1, type=T.TYPE_STRING, label=T.LABEL_OPTIONAL)
    meta.field.add(name="attr", number=2, type=T.TYPE_MESSAGE, type_name=".ChakraProtoMsg.AttributeProto",
                   label=T.LABEL_REPEATED)
    node = f.message_type.add(name="Node")
    for name, number, typ, label in [("id", 1, T.TYPE_UINT64, T.LABEL_OPTIONAL), ("name", 2, T.TYPE_STRING, T.LABEL_OPTIONAL),
                                     ("type", 3, T.TYPE_INT32, T.LABEL_OPTIONAL),
                                     ("ctrl_deps", 4, T.TYPE_UINT64, T.LABEL_REPEATED),
                                     ("data_deps", 5, T.TYPE_UINT64, T.LABEL_REPEATED),
                                     ("duration_micros", 7, T.TYPE_UINT64, T.LABEL_OPTIONAL)]:
        node.field.add(name=name, number=number, type=typ, label=label)
    node.field.add(name="attr", number=10, type=T.TYPE_MESSAGE, type_name=".ChakraProtoMsg.AttributeProto",
                   label=T.LABEL_REPEATED)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    get = lambda n: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"ChakraProtoMsg.{n}"))
    return get("GlobalMetadata"), get("Node")


ATTRS = (Attr("comm_src", "int32", 0), Attr("comm_dst", "int32", -3), Attr("comm_size", "int64", 2**40),
         Attr("big", "uint64", 2**63 + 5), Attr("is_cpu_op", "bool", False), Attr("pg_name", "string", "dp"),
         Attr("x", "double", 0.1))


def test_our_bytes_parse_with_google_protobuf_and_back():
    Meta, PbNode = _schema_classes()
    trace = Trace((Node(0, "a", COMM_SEND, data_deps=(), attrs=ATTRS),
                   Node(7, "b", COMM_RECV, data_deps=(0, 3, 300), ctrl_deps=(1,), duration_micros=5)))
    messages = pw.split_delimited(trace.encode())
    meta = Meta.FromString(messages[0])
    assert meta.version == "0.0.4"
    first, second = (PbNode.FromString(m) for m in messages[1:])
    assert (first.id, first.name, first.type) == (0, "a", COMM_SEND)
    got = {a.name: getattr(a, a.WhichOneof("value")) for a in first.attr}
    assert got == {a.name: a.value for a in ATTRS}  # defaults (0, False) kept: oneof presence
    assert list(second.data_deps) == [0, 3, 300] and list(second.ctrl_deps) == [1]
    # and google.protobuf's own encoding (packed deps) decodes with ours
    assert Node.decode(second.SerializeToString()) == trace.nodes[1]
    assert Node.decode(first.SerializeToString()) == trace.nodes[0]
    assert Trace.decode(trace.encode()) == trace


def test_unpacked_repeated_fields_decode():
    data = pw.field_varint(5, 4) + pw.field_varint(5, 9) + pw.field_varint(3, COMM_RECV)
    assert Node.decode(data).data_deps == (4, 9)


# -- export -------------------------------------------------------------------------------------------

def decode_all(export):
    return [read_trace(path) for path in export.files]


def transfers_of(traces):
    """(tag, src, dst, size) of every send and of every receive, and the dependency map on
    receives, and how many sends also wait for the send before them on their link (to the same
    peer on a switch-free machine; checked here), as they do under link occupancy."""
    sends, recvs, deps = {}, {}, {}
    last_to: dict[tuple[int, int], int] = {}
    chains = 0
    for p, trace in enumerate(traces):
        assert trace.version == "0.0.4"
        assert [n.id for n in trace.nodes] == list(range(len(trace.nodes)))
        for node in trace.nodes:
            key = (node.attr("comm_tag"), node.attr("comm_src"), node.attr("comm_dst"), node.attr("comm_size"))
            assert node.attr("is_cpu_op") is False
            if node.type == COMM_SEND:
                assert node.attr("comm_src") == p
                sends[key[0]] = key
                deps[(p, key[0])] = {trace.nodes[d].attr("comm_tag") for d in node.data_deps
                                     if trace.nodes[d].type == COMM_RECV}
                chained = [d for d in node.data_deps if trace.nodes[d].type == COMM_SEND]
                assert chained in ([], [last_to.get((p, key[2]))])
                last_to[(p, key[2])] = node.id
                chains += len(chained)
            else:
                assert node.type == COMM_RECV and node.attr("comm_dst") == p and not node.data_deps
                recvs[key[0]] = key
    return sends, recvs, deps, chains


def ring_allgather(n=4, chunk=1024):
    machine = g.ring(n, 25 * GIB, 1e-6)
    coll = make_collective("allgather", range(n), n * chunk)
    tau = 1e-6 + chunk / (25 * GIB)
    b = ScheduleBuilder(machine)
    for step in range(n - 1):
        for i in range(n):
            b.send((i - step) % n, i, (i + 1) % n, start=step * tau)
    return machine, coll, b.build()


def test_ring_allgather_decodes_to_the_same_transfers(tmp_path):
    machine, coll, schedule = ring_allgather()
    export = export_chakra(machine, coll, schedule, tmp_path / "ag")
    assert [p.name for p in export.files] == [f"ag.{p}.et" for p in range(4)]
    sends, recvs, deps, chains = transfers_of(decode_all(export))
    assert sends == recvs and len(sends) == 12 and chains == 8  # each NPU's 2nd and 3rd send
    assert sorted((s, d) for _, s, d, _ in sends.values()) == sorted([(i, (i + 1) % 4) for i in range(4)] * 3)
    assert {size for *_, size in sends.values()} == {1024}
    by_tag = {t.tag: t for t in export.transfers}
    for (p, tag), dep in deps.items():
        t = by_tag[tag]
        if t.chunk == p:  # its own chunk: held at t = 0
            assert dep == set()
        else:  # the receive that brought the chunk: from the left neighbour, one step earlier
            (d,) = dep
            assert by_tag[d].chunk == t.chunk and by_tag[d].dst == p and by_tag[d].arrival <= t.start


def reference_deps(machine, coll, schedule):
    """Dependencies recomputed from the schedule rows (switch-free machine): for each NPU-level send
    (chunk, src, dst, start), the receives of that chunk at src arriving by its start."""
    res = verify(machine, coll, schedule)
    rows = [(int(c), int(machine.link_src[e]), int(machine.link_dst[e]), s, a)
            for c, e, s, a in zip(schedule.chunk, schedule.link, res.starts, res.arrivals)]
    out = {}
    for c, u, v, s, a in rows:
        before = sorted((a2, u2) for c2, u2, v2, s2, a2 in rows if c2 == c and v2 == u and a2 <= s + 1e-15)
        out[(c, u, v, s)] = {(c, u2, u) for _, u2 in before}
    return out


def test_reduce_scatter_depends_on_every_partial_received(tmp_path):
    machine = g.ring(4, 25 * GIB, 1e-6)
    coll = make_collective("reducescatter", range(4), 4096)
    schedule = synthesize(Instance("rs", machine, coll), spread_greedy, 0)
    assert (schedule.op == REDUCE).any()
    export = export_chakra(machine, coll, schedule, tmp_path / "rs")
    sends, recvs, deps, _ = transfers_of(decode_all(export))
    assert sends == recvs and len(sends) == len(schedule)
    by_tag = {t.tag: t for t in export.transfers}
    expected = reference_deps(machine, coll, schedule)
    for (p, tag), dep in deps.items():
        t = by_tag[tag]
        assert {(by_tag[d].chunk, by_tag[d].src, by_tag[d].dst) for d in dep} == expected[(t.chunk, t.src, t.dst, t.start)]


def test_switch_relays_become_npu_pairs(tmp_path):
    machine = g.astra([g.AstraDim("Switch", 4, 50 * GIB, 5e-7)])
    coll = make_collective("allgather", range(4), 4 * 4096)
    schedule = synthesize(Instance("ag", machine, coll), spread_greedy, 0)
    into_npus = int(np.sum(machine.link_dst[schedule.link] < 4))
    export = export_chakra(machine, coll, schedule, tmp_path / "sw")
    sends, recvs, deps, _ = transfers_of(decode_all(export))
    assert sends == recvs and len(sends) == into_npus == 12  # each NPU gets 3 chunks, one message each
    assert all(s != d and s < 4 and d < 4 for _, s, d, _ in sends.values())
    by_tag = {t.tag: t for t in export.transfers}
    for (p, tag), dep in deps.items():  # the owner sends freely; a relaying NPU after its receive
        t = by_tag[tag]
        assert dep == set() if t.chunk == p else [by_tag[d].chunk for d in dep] == [t.chunk]
    hops = {(int(machine.link_src[e]), int(machine.link_dst[e])) for e in schedule.link}
    assert all((t.src, 4) in hops and (4, t.dst) in hops for t in export.transfers)  # via switch 4
    snippet = system_snippet(coll, str(tmp_path / "sw"))
    assert snippet["all-gather-implementation-custom"] == [str(tmp_path / "sw")]
    assert snippet["preferred-dataset-splits"] == 1 and export.system_json.exists()


def test_refusals(tmp_path):
    machine, coll, schedule = ring_allgather()
    odd = make_collective("allgather", range(4), 4 * 1024 + 2)
    with pytest.raises(InputError, match="whole number of bytes"):
        export_chakra(machine, odd, schedule, tmp_path / "x")
    broken = ScheduleBuilder(machine)
    broken.send(1, 0, 1, start=0.0)  # NPU 0 does not hold chunk 1
    with pytest.raises(ScheduleRejected):
        export_chakra(machine, coll, broken.build(), tmp_path / "y")
    with pytest.raises(InputError, match="custom collectives"):
        system_snippet(make_collective("broadcast", range(4), 1024, root=0), "p")
    assert not list(tmp_path.iterdir())
