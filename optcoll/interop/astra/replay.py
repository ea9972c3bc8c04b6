"""ASTRA-sim's time for a custom collective: Chakra ET traces replayed as its system layer does.

Followed: ASTRA-sim 518bd51 ``astra-sim/system/astraccl/custom_collectives/CustomAlgorithm.cc``
(``issue``, ``issue_dep_free_nodes``, ``call``), ``system/Sys.cc`` (``generate_collective``: a
custom implementation is one stream on every NPU, started together), and the analytical frontend
``network_frontend/analytical/common/CommonNetworkApi.cc`` (``sim_recv``,
``process_chunk_arrival``); message times from the backends of ``backends.py``.

Every NPU p runs ``<prefix>.p.et`` from t = 0:

- a node is issued once every node in its ``data_deps`` (and ``ctrl_deps``) has finished, at once
  and with no endpoint delay (custom collectives skip the memory bus);
- COMM_SEND hands ``comm_size`` bytes to the network; the node finishes when the message arrives
  (the frontend runs the send handler at arrival). COMM_RECV finishes at the arrival of the
  matching message, matched by (comm_tag, comm_src, comm_dst, comm_size) in order, or at once
  (a zero-delay event) when it arrived before the receive was posted. COMP nodes take their
  ``duration_micros`` in ns·1000, at least 1 ns;
- the NPU is done when all its nodes are; the collective when every NPU is.

Nodes that become free together are issued in ascending id; ASTRA-sim takes them in the order
of an ``unordered_set``. That only matters on the congestion-aware backend when one NPU issues two
sends onto one link at the same instant; ``Replay.notes`` says when that happened.
"""
from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass

from optcoll.errors import InputError
from optcoll.interop.astra.backends import EventQueue, check_backend, check_message, make_network
from optcoll.interop.astra.chakra import COMM_RECV, COMM_SEND, COMP, NODE_TYPES, Node, Trace
from optcoll.interop.astra.network import AstraNetwork


@dataclass(frozen=True)
class Replay:
    backend: str
    total_ns: float  # whole ns, as ASTRA-sim reports it (fractional only with ``exact``)
    npu_finish_ns: tuple[float, ...]
    messages: int
    notes: tuple[str, ...] = ()


def _attr(node: Node, name: str, source: str) -> int:
    try:
        return int(node.attr(name))
    except KeyError:
        raise InputError(f"node {node.id} ({NODE_TYPES.get(node.type, node.type)}) has no {name} attribute",
                         source=source, field=name) from None


class _Npu:
    """One NPU's trace: nodes still waiting for parents, and the count of unfinished nodes."""

    def __init__(self, trace: Trace, source: str):
        self.nodes = {n.id: n for n in trace.nodes}
        if len(self.nodes) != len(trace.nodes):
            raise InputError("node ids repeat", source=source, field="id")
        self.waiting = {n.id: len(set(n.data_deps) | set(n.ctrl_deps)) for n in trace.nodes}
        self.children: dict[int, list[int]] = defaultdict(list)
        for n in trace.nodes:
            for d in set(n.data_deps) | set(n.ctrl_deps):
                if d not in self.nodes:
                    raise InputError(f"node {n.id} depends on node {d}, which is not in the trace",
                                     source=source, field="data_deps")
                self.children[d].append(n.id)
        self.left, self.finish, self.source = len(self.nodes), 0.0, source


class _Replayer:
    def __init__(self, network: AstraNetwork, traces: Sequence[Trace], backend: str,
                 ranks: Sequence[int], sources: Sequence[str], exact: bool):
        self.queue = EventQueue()
        self.net = make_network(backend, network, self.queue, exact=exact)
        self.ranks, self.exact = list(ranks), exact
        self.npus = [_Npu(t, s) for t, s in zip(traces, sources)]
        self.arrived: dict[tuple, int] = defaultdict(int)  # match key -> arrivals not yet received
        self.posted: dict[tuple, deque] = defaultdict(deque)  # match key -> receives waiting
        self.sent = 0
        self.sends_at: dict[tuple[int, int, float], int] = defaultdict(int)  # (src, dst, time)

    def run(self) -> None:
        for p, npu in enumerate(self.npus):
            self._issue(p, sorted(i for i, w in npu.waiting.items() if w == 0))
        self.queue.run()

    def _issue(self, p: int, ids: list[int]) -> None:
        npu = self.npus[p]
        for i in ids:
            node = npu.nodes[i]
            if node.type == COMM_SEND:
                key, src, dst, size = self._key(p, node)
                self.sent += 1
                self.sends_at[(src, dst, self.queue.now)] += 1
                self.net.send(src, dst, check_message(size), lambda p=p, i=i, key=key: self._arrive(p, i, key))
            elif node.type == COMM_RECV:
                key = self._key(p, node)[0]
                if self.arrived[key]:
                    self.arrived[key] -= 1
                    self.queue.after(0, lambda p=p, i=i: self._done(p, i))
                else:
                    self.posted[key].append((p, i))
            elif node.type == COMP:
                self.queue.after(max(1, node.duration_micros * 1000), lambda p=p, i=i: self._done(p, i))
            else:
                raise InputError(f"node {i} has type {NODE_TYPES.get(node.type, node.type)}; a custom "
                                 "collective holds COMM_SEND, COMM_RECV and COMP nodes", source=npu.source,
                                 field="type")

    def _key(self, p: int, node: Node) -> tuple[tuple, int, int, int]:
        source = self.npus[p].source
        src, dst = _attr(node, "comm_src", source), _attr(node, "comm_dst", source)
        size, tag = _attr(node, "comm_size", source), _attr(node, "comm_tag", source)
        for end in (src, dst):
            if not 0 <= end < len(self.ranks):
                raise InputError(f"node {node.id}: rank {end} is not in the communicator of {len(self.ranks)}",
                                 source=source, field="comm_src" if end == src else "comm_dst")
        me = src if node.type == COMM_SEND else dst
        if me != p:
            raise InputError(f"node {node.id} of NPU {p}'s trace names {me} as its own rank", source=source,
                             field="comm_src" if node.type == COMM_SEND else "comm_dst")
        return (tag, src, dst, size), self.ranks[src], self.ranks[dst], size

    def _arrive(self, p: int, i: int, key: tuple) -> None:
        self._done(p, i)  # the send handler runs first, then the receive's
        waiting = self.posted[key]
        if waiting:
            self._done(*waiting.popleft())
        else:
            self.arrived[key] += 1

    def _done(self, p: int, i: int) -> None:
        npu = self.npus[p]
        npu.left -= 1
        npu.finish = max(npu.finish, self.queue.now)
        free = []
        for c in npu.children.get(i, ()):
            npu.waiting[c] -= 1
            if npu.waiting[c] == 0:
                free.append(c)
        self._issue(p, sorted(free))


def replay(network: AstraNetwork, traces: Sequence[Trace], backend: str = "unaware", *,
           ranks: Sequence[int] | None = None, sources: Sequence[str] | None = None,
           exact: bool = False) -> Replay:
    """The time ASTRA-sim reports for ``traces`` (one per communicator position) on ``network``.

    ``ranks``: the NPU of each position (default 0, 1, ...). ``exact``: message times without
    ASTRA-sim's floor to whole ns (to tell how much the floors account for).
    """
    ranks = list(range(len(traces))) if ranks is None else list(ranks)
    sources = [f"trace {p}" for p in range(len(traces))] if sources is None else list(sources)
    if len(ranks) != len(traces) or any(not 0 <= r < network.num_npus for r in ranks):
        raise InputError(f"{len(traces)} traces need as many distinct NPUs of the {network.num_npus}-NPU "
                         f"network, got {ranks}", field="ranks")
    check_backend(backend, network)
    run = _Replayer(network, traces, backend, ranks, sources, exact)
    run.run()
    stuck = [p for p, npu in enumerate(run.npus) if npu.left]
    if stuck:
        p = stuck[0]
        raise InputError(f"NPU {ranks[p]} never finishes: {run.npus[p].left} node(s) wait for a message or "
                         "a dependency that never comes (ASTRA-sim would hang)", source=sources[p])
    notes = []
    ties = sorted(k for k, n in run.sends_at.items() if n > 1)
    if ties and backend == "aware":
        src, dst, t = ties[0]
        notes.append(f"{len(ties)} time(s) an NPU issued several sends to one peer at once (first: {src}->{dst} "
                     f"at {t:g} ns); ASTRA-sim queues them in its own order, which may change the time")
    finish = tuple(npu.finish for npu in run.npus)
    return Replay(backend, max(finish, default=0.0), finish, run.sent, tuple(notes))


@dataclass(frozen=True)
class ReplayReport:
    """A replay next to optcoll's verified time, with what separates them."""

    backend: str
    astra_ns: int
    exact_ns: float  # the same replay without the floors
    verified_ns: float
    messages: int
    notes: tuple[str, ...]

    def summary(self) -> str:
        lines = [f"ASTRA-sim ({self.backend} backend) replays the traces in {self.astra_ns} ns "
                 f"({self.messages} messages); optcoll's verified time is {self.verified_ns:.3f} ns"]
        return "\n".join(lines + [f"  {note}" for note in self.notes])

    def to_dict(self) -> dict[str, object]:
        return {"backend": self.backend, "astra_ns": self.astra_ns, "exact_ns": self.exact_ns,
                "verified_ns": self.verified_ns, "messages": self.messages, "notes": list(self.notes)}


def explain(network: AstraNetwork, traces: Sequence[Trace], backend: str, verified_s: float, *,
            ranks: Sequence[int] | None = None, sources: Sequence[str] | None = None,
            same_machine: bool = True) -> ReplayReport:
    """Replays ``traces`` twice (ASTRA-sim's whole-ns floors, and exact) and says where the time
    differs from the schedule's verified ``verified_s`` (seconds)."""
    floored = replay(network, traces, backend, ranks=ranks, sources=sources)
    exact = replay(network, traces, backend, ranks=ranks, sources=sources, exact=True)
    verified = verified_s * 1e9
    notes = [f"the floor of every message time to whole ns takes {exact.total_ns - floored.total_ns:.3f} ns off",
             "no endpoint delay: a custom collective's sends and receives skip the memory bus"]
    gap = verified - exact.total_ns
    scale = max(verified, 1.0) * 1e-9
    if not same_machine:
        notes.append(f"replayed on {network.describe()}, a different model from the schedule's machine: "
                     "its link times differ")
    elif abs(gap) <= scale:
        notes.append("otherwise the replay moves every message exactly when the schedule does")
    elif gap > 0:
        notes.append(f"ASTRA-sim issues every message as soon as its data (and, under link occupancy, its "
                     f"link) is free, {gap:.3f} ns sooner in all than the schedule's own start times"
                     + ("; the unaware backend never makes messages wait for a busy link"
                        if backend == "unaware" else ""))
    else:
        notes.append(f"the replay is {-gap:.3f} ns slower than the schedule: the congestion-aware backend "
                     "queues messages on each link in the order they were issued"
                     if backend == "aware" else f"the replay is {-gap:.3f} ns slower than the schedule")
    notes += list(floored.notes)
    return ReplayReport(backend, int(floored.total_ns), exact.total_ns, verified, floored.messages, tuple(notes))
