"""A verified schedule as Chakra ETs that ASTRA-sim replays as a custom collective.

Every NPU p of the communicator gets ``<prefix>.<p>.et`` (p is the position in the communicator,
which is what ASTRA-sim's CustomAlgorithm opens and what its comm_src/comm_dst mean). Each
transfer becomes a COMM_SEND node at the sender and a COMM_RECV node at the receiver carrying
comm_src, comm_dst, comm_size (int64 bytes: the chunk), comm_tag (int32, unique per transfer, so
ASTRA-sim's (tag, src, dst, size) matching pairs exactly these two nodes) and is_cpu_op = false.

Dependencies (data_deps): a send of chunk c by p waits for the receive that brought c to p (the
first one; none when p held c at t = 0); for combining collectives it waits for every receive of
c at p that arrived by the send's start, because p sends its partial including those
contributions. Receives have no dependencies: ASTRA-sim posts them at once and matches arrivals. Under link
occupancy (optcoll's default: a link carries one transfer at a time, held until it arrives) a
send also waits for the send before it on the same link (a direct NPU-to-NPU link), so ASTRA-sim,
which issues a node as soon as its dependencies are done, keeps the schedule's order on every
link instead of putting two chunks on it at once.

Switches: ASTRA-sim models a Switch dimension natively (the message crosses NPU→switch→NPU in the
network backend), so a schedule hop NPU→switch→NPU (or through several switches) becomes one
send/receive pair between the two NPUs, timed from the first hop's start to the last hop's
arrival. In-network reduction at a switch has no NPU-to-NPU form and is refused.

Node ids follow the schedule's start times, so dependency-free sends are issued in schedule order.
Reductions are free in optcoll's default model, so no COMP nodes are emitted (ASTRA-sim would charge
at least 1 ns for each).
"""
from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from optcoll.collectives.collective import Collective
from optcoll.errors import InputError
from optcoll.interop.astra.chakra import COMM_RECV, COMM_SEND, Attr, Node, Trace
from optcoll.fileio import write_bytes_atomic, write_text_atomic
from optcoll.instances.instance import TimeModel
from optcoll.machines.machine import Machine
from optcoll.schedules.schedule import REDUCE, Schedule
from optcoll.verify import require_valid

#: optcoll collective kind → the ASTRA-sim system.json key that loads a custom ET for it
CUSTOM_KEYS = {"allgather": "all-gather-implementation-custom",
               "reducescatter": "reduce-scatter-implementation-custom",
               "allreduce": "all-reduce-implementation-custom",
               "alltoall": "all-to-all-implementation-custom"}
INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class Transfer:
    """One NPU-to-NPU message after collapsing switch relays (NPU ids, seconds)."""

    tag: int
    chunk: int
    src: int
    dst: int
    start: float
    arrival: float
    reduce: bool
    link: int = -1  # the machine link of a direct (one-hop) transfer, -1 for a switch relay


def npu_transfers(machine: Machine, collective: Collective, schedule: Schedule,
                  starts: np.ndarray, arrivals: np.ndarray) -> list[Transfer]:
    """The schedule's transfers with every NPU→switch(→switch…)→NPU relay joined into one."""
    rows = np.lexsort((schedule.link, arrivals))  # deterministic order for the feeding search
    into: dict[tuple[int, int], list[int]] = defaultdict(list)  # (switch, chunk) → rows, by arrival
    for i in rows.tolist():
        v = int(machine.link_dst[schedule.link[i]])
        if machine.is_switch(v):
            into[(v, int(schedule.chunk[i]))].append(i)

    def origin(i: int) -> int:
        """The row whose source NPU started the relay that row i continues."""
        u = int(machine.link_src[schedule.link[i]])
        while machine.is_switch(u):
            sw = machine.switch(u)
            feeding = [j for j in into[(u, int(schedule.chunk[i]))] if arrivals[j] <= starts[i] + 1e-15]
            if not feeding:
                raise InputError(f"transfer {i} leaves switch {sw.label} with chunk "
                                 f"{int(schedule.chunk[i])} that never reached it", field="schedule")
            if sw.reduce and len(feeding) > 1 and schedule.op[i] == REDUCE:
                raise InputError(f"switch {sw.label} combines partials of chunk {int(schedule.chunk[i])} "
                                 "(in-network reduction), which has no NPU-to-NPU form for ASTRA-sim",
                                 field="schedule")
            i = feeding[-1]
            u = int(machine.link_src[schedule.link[i]])
        return i

    out = []
    order = np.lexsort((schedule.link, starts))
    for i in order.tolist():
        dst = int(machine.link_dst[schedule.link[i]])
        if machine.is_switch(dst):
            continue
        first = origin(i)
        out.append((float(starts[first]), float(arrivals[i]), int(schedule.chunk[i]),
                    int(machine.link_src[schedule.link[first]]), dst, bool(schedule.op[i] == REDUCE),
                    int(schedule.link[i]) if first == i else -1))
    out.sort(key=lambda t: (t[0], t[1], t[3], t[4], t[2]))
    if len(out) > INT32_MAX:
        raise InputError(f"{len(out)} transfers do not fit ASTRA-sim's int32 comm_tag")
    return [Transfer(tag, c, s, d, st, ar, red, link) for tag, (st, ar, c, s, d, red, link) in enumerate(out)]


def build_traces(collective: Collective, transfers: list[Transfer], link_order: bool = False) -> list[Trace]:
    """One Trace per communicator position (see module docstring for the node contents);
    ``link_order``: each send also waits for the previous send on its link (link occupancy)."""
    position = {r: p for p, r in enumerate(collective.ranks)}
    for t in transfers:
        for v in (t.src, t.dst):
            if v not in position:
                raise InputError(f"transfer of chunk {t.chunk} {t.src}->{t.dst} relays through NPU {v}, "
                                 "which is not in the communicator; ASTRA-sim runs custom collectives "
                                 "on communicator members only", field="schedule")
    size = _whole_chunk(collective)
    held = defaultdict(set)
    pre_c, pre_v = collective.pre.pairs()
    for c, v in zip(pre_c.tolist(), pre_v.tolist()):
        held[v].add(c)
    nodes: list[list[Node]] = [[] for _ in collective.ranks]
    recv_id: dict[int, int] = {}
    recvs_at: dict[tuple[int, int], list[Transfer]] = defaultdict(list)
    for t in transfers:
        recvs_at[(t.dst, t.chunk)].append(t)
    for (_v, _c), lst in recvs_at.items():
        lst.sort(key=lambda t: (t.arrival, t.tag))
    last_send: dict[int, int] = {}  # link -> node id of the latest send on it (transfers are by start)
    for t in transfers:
        p, q = position[t.src], position[t.dst]
        common = (Attr("comm_src", "int32", p), Attr("comm_dst", "int32", q),
                  Attr("comm_size", "int64", int(size)), Attr("comm_tag", "int32", t.tag),
                  Attr("is_cpu_op", "bool", False))
        before = [r for r in recvs_at[(t.src, t.chunk)] if r.arrival <= t.start + 1e-15]
        if collective.combining:
            deps = before
        else:
            deps = [] if t.chunk in held[t.src] else before[:1]
            if not deps and t.chunk not in held[t.src]:
                raise InputError(f"NPU {t.src} sends chunk {t.chunk} before receiving it", field="schedule")
        dep_ids = {recv_id[r.tag] for r in deps}
        if link_order and t.link >= 0:
            if t.link in last_send:
                dep_ids.add(last_send[t.link])
            last_send[t.link] = len(nodes[p])
        nodes[p].append(Node(len(nodes[p]), f"send c{t.chunk} {t.src}->{t.dst}", COMM_SEND,
                             data_deps=tuple(sorted(dep_ids)), attrs=common))
        recv_id[t.tag] = len(nodes[q])
        nodes[q].append(Node(len(nodes[q]), f"recv c{t.chunk} {t.src}->{t.dst}", COMM_RECV, attrs=common))
    return [Trace(tuple(ns)) for ns in nodes]


def _whole_chunk(collective: Collective) -> int:
    size = collective.chunk_bytes
    if not float(size).is_integer():
        raise InputError(f"chunk size {size} B is not a whole number of bytes; Chakra's comm_size is an "
                         "integer (choose a size divisible by N·C)", field="size")
    return int(size)


def system_snippet(collective: Collective, prefix: str) -> dict[str, object]:
    """The ASTRA-sim system.json keys that make it replay ``<prefix>.<p>.et`` for this collective.

    One dataset split (the traces already hold the whole buffer); the native keys beside it are
    ASTRA-sim's usual ones and do not affect a custom replay.
    """
    kind = collective.kind
    if kind not in CUSTOM_KEYS:
        raise InputError(f"ASTRA-sim loads custom collectives for {', '.join(CUSTOM_KEYS)}, not {kind}",
                         field="collective")
    return {"scheduling-policy": "LIFO", "endpoint-delay": 10, "active-chunks-per-dimension": 1,
            "preferred-dataset-splits": 1, CUSTOM_KEYS[kind]: [prefix]}


@dataclass(frozen=True)
class ChakraTraces:
    transfers: tuple[Transfer, ...]
    traces: tuple[Trace, ...]  # one per communicator position
    time: float  # the schedule's verified time (s)


@dataclass(frozen=True)
class ChakraExport:
    files: tuple[Path, ...]
    system_json: Path
    transfers: tuple[Transfer, ...]


def chakra_traces(machine: Machine, collective: Collective, schedule: Schedule,
                  model: TimeModel = TimeModel()) -> ChakraTraces:
    """Verifies the schedule (ScheduleRejected if invalid) and builds its traces."""
    _whole_chunk(collective)
    result = require_valid(machine, collective, schedule, model)
    transfers = npu_transfers(machine, collective, schedule, result.starts, result.arrivals)
    traces = build_traces(collective, transfers, model.occupancy == "link")
    return ChakraTraces(tuple(transfers), tuple(traces), result.time)


def export_chakra(machine: Machine, collective: Collective, schedule: Schedule, prefix: str | Path,
                  model: TimeModel = TimeModel()) -> ChakraExport:
    """Verifies the schedule, then writes ``<prefix>.<p>.et`` per communicator position and
    ``<prefix>.system.json`` (the snippet above). Raises ScheduleRejected for invalid schedules."""
    prefix = str(prefix)
    system = system_snippet(collective, prefix)  # cheap refusals first, before verifying
    built = chakra_traces(machine, collective, schedule, model)
    files = []
    for p, trace in enumerate(built.traces):
        path = Path(f"{prefix}.{p}.et")
        write_bytes_atomic(path, trace.encode())
        files.append(path)
    system_path = Path(f"{prefix}.system.json")
    write_text_atomic(system_path, json.dumps(system, indent=2) + "\n")
    return ChakraExport(tuple(files), system_path, built.transfers)
