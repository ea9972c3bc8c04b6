"""An ASTRA-sim-compatible predictor: a native collective's time on an analytical backend, in ns.

How ASTRA-sim 518bd51's system layer runs a collective of ``comm_size`` bytes
(``astra-sim/system/Sys.cc``: ``Sys::generate_collective``, ``Sys::determine_chunk_size``;
AllGather's comm_size is each NPU's input, the others' the whole buffer):

1. Streams: the buffer is cut into ``preferred-dataset-splits`` chunks of ``size // splits`` bytes
   (non-AllGather: at least one byte per NPU, the buffer grown to match); every chunk is a stream.
2. Phases per stream, one per dimension: AllGather runs the dimensions from the last to the first,
   ReduceScatter and AlltoAll from the first; an AllReduce runs an AllReduce in every dimension on the full
   chunk (``baseline``) or, with ``localBWAware``, a ReduceScatter up the dimensions, an AllReduce
   in the last and an AllGather back down (data shrinking by each dimension's size).
   The AllGather half of localBWAware runs its rings the other way round (anticlockwise).
3. Every NPU schedules its streams itself: at most ``active-chunks-per-dimension`` streams run a
   phase in one dimension at once; a stream that ends a phase starts its next one at once (or
   queues, by stream priority: LIFO favours later streams). There is no barrier between NPUs.
4. Each phase runs the dimension's algorithm (algorithms.py) over the network backend
   (backends.py). A NPU's collective ends when its last stream ends its last phase; the predicted
   time is the latest NPU's.

Assumed, as ASTRA-sim's defaults: one queue per dimension (``--num-queues-per-dim 1``), no
rendezvous protocol, injection scale 1. A ``one*`` algorithm is one phase over all NPUs
(messages timed in the lowest dimension in which their ends differ, as the backends do).
Refused as ASTRA-sim refuses it: the congestion-aware
backend on a network of more than one dimension (its ``construct_topology`` exits: "only support
1-dim topology"), halvingDoubling AlltoAll. Not modelled: the shared-bus (LogGP) model,
custom (Chakra) collectives (``replay.py``), communicator groups.
"""
from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass

from optcoll.collectives.builtins import canonical_kind
from optcoll.errors import InputError
from optcoll.interop.astra.algorithms import A2A, AG, ANTICLOCKWISE, AR, CLOCKWISE, RS, PhasePlan, make_algorithm
from optcoll.interop.astra.backends import EventQueue, check_backend, check_message, make_network
from optcoll.interop.astra.network import AstraNetwork
from optcoll.interop.astra.system import SystemConfig


@dataclass(frozen=True)
class PhaseReport:
    """One phase of the collective: the same for every stream; times over all NPUs and streams."""

    index: int
    dim: int
    kind: str
    algorithm: str
    bytes_in: int
    bytes_out: int
    messages: tuple[tuple[int, int], ...]  # (peer offset, bytes) per message one NPU sends
    start_ns: int
    end_ns: int


@dataclass(frozen=True)
class Prediction:
    collective: str
    size_bytes: int  # M, the collective's size (docs/model.md §4)
    comm_size: int  # ASTRA-sim's comm_size for it (``comm_size_of``)
    backend: str
    total_ns: int
    npu_finish_ns: tuple[int, ...]
    streams: int
    chunk_bytes: int
    phases: tuple[PhaseReport, ...]
    messages: int
    notes: tuple[str, ...] = ()

    def summary(self) -> str:
        comm = ("" if self.comm_size == self.size_bytes else
                f" (ASTRA-sim comm_size {self.comm_size} B per NPU)")
        lines = [f"{self.collective} of M = {self.size_bytes} B{comm}, {self.backend} backend: {self.total_ns} ns "
                 f"({self.streams} stream(s) of {self.chunk_bytes} B, {self.messages} messages)"]
        lines += [f"  note: {note}" for note in self.notes]
        for p in self.phases:
            lines.append(f"  phase {p.index}: dim {p.dim} {p.kind} by {p.algorithm}, {p.bytes_in} B -> "
                         f"{p.bytes_out} B per stream, {len(p.messages)} message(s) per NPU, "
                         f"{p.start_ns}..{p.end_ns} ns")
        return "\n".join(lines)


def comm_size_of(kind: str, size: int, npus: int) -> int:
    """ASTRA-sim's comm_size for a collective of M = ``size`` bytes on ``npus`` NPUs: AllGather's is
    each NPU's input, M/N (which must be whole bytes), the others' the whole buffer M."""
    if kind != AG:
        return size
    if size % npus:
        raise InputError(f"an AllGather of M = {size} B on {npus} NPUs gives each NPU M/N, not whole bytes; "
                         f"use a multiple of {npus} B", field="size")
    return size // npus


def size_of(kind: str, comm_size: int, npus: int) -> int:
    """M for ASTRA-sim's ``comm_size`` (the inverse of ``comm_size_of``)."""
    return comm_size * npus if kind == AG else comm_size


def stream_sizes(kind: str, size: int, splits: int, total_npus: int) -> tuple[int, int]:
    """(number of streams, bytes per stream) as Sys::determine_chunk_size and its loop cut them."""
    chunk = size // splits
    if kind != AG and total_npus > chunk:
        chunk, size = total_npus, splits * total_npus
    if chunk == 0:
        raise InputError(f"an AllGather of {size} B cut into {splits} splits leaves empty chunks",
                         field="size")
    return -(-size // chunk), chunk


def plan_phases(network: AstraNetwork, system: SystemConfig, kind: str, chunk: int) -> list[PhasePlan]:
    """The phases every stream goes through (module docstring, point 2)."""
    impls = system.implementation(kind, len(network.dims))
    if impls[0].whole:  # one logical dimension over all NPUs
        return [PhasePlan(0, kind, impls[0], network.num_npus, chunk, CLOCKWISE)]
    dims = list(range(len(network.dims)))
    if kind == AR and len(dims) > 1 and system.collective_optimization is None:
        raise InputError("is not set: ASTRA-sim leaves it uninitialised and a multi-dimensional AllReduce "
                         "then never finishes; set baseline or localBWAware", source=system.source,
                         field="collective-optimization")
    phases: list[PhasePlan] = []

    def add(dim: int, op: str, direction: int) -> None:
        size = phases[-1].size_out if phases else chunk
        phases.append(PhasePlan(dim, op, impls[dim], network.dims[dim].npus_count, size, direction))

    if kind == AR and system.collective_optimization == "localBWAware":
        for dim in dims[:-1]:
            add(dim, RS, CLOCKWISE)
        add(dims[-1], AR, CLOCKWISE)
        for dim in reversed(dims[:-1]):
            add(dim, AG, ANTICLOCKWISE)
    else:
        for dim in (reversed(dims) if kind == AG else dims):
            add(dim, kind, CLOCKWISE)
    return phases


class _Run:
    """One simulation: the event queue, the network, mailboxes and every NPU's stream queues."""

    def __init__(self, network: AstraNetwork, system: SystemConfig, backend: str,
                 phases: list[PhasePlan], streams: int):
        self.network, self.system, self.phases, self.streams = network, system, phases, streams
        self.queue = EventQueue()
        self.net = make_network(backend, network, self.queue)
        n = network.num_npus
        # Stream priority: FIFO makes earlier streams win, LIFO later ones (Sys::get_priority).
        self.order = list(range(streams)) if system.scheduling_policy == "FIFO" else list(reversed(range(streams)))
        self.rank = {s: k for k, s in enumerate(self.order)}
        self.running = [[0] * len(network.dims) for _ in range(n)]
        self.waiting: list[list[list[int]]] = [[[] for _ in network.dims] for _ in range(n)]
        self.arrived: dict[tuple, int] = defaultdict(int)
        self.posted: dict[tuple, deque] = defaultdict(deque)
        self.window: dict[int, list[int]] = {}
        self.finish = [0] * n
        self.sent = 0
        self.tree_index = self._tree_index()
        self._phase_of = {(npu, s): 0 for npu in range(n) for s in range(streams)}

    def _tree_index(self) -> dict[tuple[int, int], int]:
        """For (stream, phase) on a doubleBinaryTree dimension: how many tree phases of that
        dimension every NPU built before (streams are generated in order, phases in order)."""
        index, count = {}, defaultdict(int)
        for s in range(self.streams):
            for k, plan in enumerate(self.phases):
                if plan.impl.name == "doubleBinaryTree":
                    index[(s, k)] = count[plan.dim]
                    count[plan.dim] += 1
        return index

    # -- per-NPU stream scheduling ----------------------------------------------------------------
    def _enter(self, npu: int, stream: int, k: int) -> None:
        dim = self.phases[k].dim
        waiting = self.waiting[npu][dim]
        waiting.append(stream)
        waiting.sort(key=self.rank.__getitem__)
        self._fill(npu, dim)

    def _fill(self, npu: int, dim: int) -> None:
        waiting = self.waiting[npu][dim]
        while waiting and self.running[npu][dim] < self.system.active_chunks_per_dimension:
            stream = waiting.pop(0)
            self.running[npu][dim] += 1
            self._start(npu, stream, self._phase_of[(npu, stream)])

    def _start(self, npu: int, stream: int, k: int) -> None:
        plan = self.phases[k]
        if plan.impl.whole:
            members, index = list(range(self.network.num_npus)), npu
        else:
            members, index = self.network.group(npu, plan.dim), self.network.coords(npu)[plan.dim]
        ctx = _Context(self, npu, stream, k, members, index)
        span = self.window.setdefault(k, [self.queue.now, self.queue.now])
        span[0] = min(span[0], self.queue.now)
        make_algorithm(ctx, plan, self.tree_index.get((stream, k), 0)).start()

    def phase_done(self, npu: int, stream: int, k: int) -> None:
        now = self.queue.now
        self.window[k][1] = max(self.window[k][1], now)
        dim = self.phases[k].dim
        self.running[npu][dim] -= 1
        self._fill(npu, dim)
        if k + 1 < len(self.phases):
            self._phase_of[(npu, stream)] = k + 1
            self._enter(npu, stream, k + 1)
        else:
            self.finish[npu] = max(self.finish[npu], now)

    # -- messages ---------------------------------------------------------------------------------
    def send(self, src: int, dst: int, nbytes: int, tag: tuple) -> None:
        self.sent += 1
        self.net.send(src, dst, check_message(nbytes), lambda: self._arrive(tag))

    def _arrive(self, tag: tuple) -> None:
        waiting = self.posted[tag]
        if waiting:
            waiting.popleft()()
        else:
            self.arrived[tag] += 1

    def post_recv(self, tag: tuple, callback: Callable[[], None]) -> None:
        if self.arrived[tag]:
            self.arrived[tag] -= 1
            self.queue.after(0, callback)  # ASTRA-sim schedules it with a zero delay
        else:
            self.posted[tag].append(callback)

    def run(self) -> None:
        for npu in range(self.network.num_npus):
            for stream in self.order:
                self._enter(npu, stream, 0)
        self.queue.run()


class _Context:
    """The PhaseContext algorithms see: positions in the dimension group, tags per stream/phase."""

    def __init__(self, run: _Run, npu: int, stream: int, phase: int, members: list[int], index: int):
        self.run, self.npu, self.stream, self.phase = run, npu, stream, phase
        self.members, self.index = members, index
        self.endpoint_delay = run.system.endpoint_delay
        self.reduction_ns = run.system.reduction_ns

    def after(self, delay: int, callback: Callable[[], None]) -> None:
        self.run.queue.after(delay, callback)

    def send(self, dst: int, nbytes: int) -> None:
        target = self.members[dst]
        self.run.send(self.npu, target, nbytes, (self.stream, self.phase, self.npu, target))

    def post_recv(self, src: int, callback: Callable[[], None]) -> None:
        self.run.post_recv((self.stream, self.phase, self.members[src], self.npu), callback)

    def exit(self) -> None:
        self.run.phase_done(self.npu, self.stream, self.phase)


#: Memory of a simulation: bytes per NPU, per NPU and stream, and the factor of the congestion-
#: aware backend (its link queues). Measured with tracemalloc on Ring×Ring networks of 1024 and
#: 4096 NPUs with 1 and 4 streams (3.8-7.1 KB per NPU and stream, unaware; 10.5 KB aware),
#: rounded up so that the estimate is not below any of them.
_BYTES_PER_NPU, _BYTES_PER_NPU_STREAM, _AWARE_FACTOR = 3.5 * 2**10, 4 * 2**10, 1.7


def require_fits(npus: int, streams: int, phases: list[PhasePlan], backend: str,
                 max_memory: int | None) -> None:
    """Before a simulation starts: its memory estimate within ``max_memory`` bytes (None: not
    checked) and its message count within the ``predict_messages`` cap."""
    from optcoll import limits
    from optcoll.units import format_size

    messages = streams * npus * sum(len(p.messages()) for p in phases)
    need = npus * (_BYTES_PER_NPU + _BYTES_PER_NPU_STREAM * streams)
    need *= _AWARE_FACTOR if backend == "aware" else 1
    what = (f"simulating {npus} NPUs x {streams} stream(s) ({messages} messages, about "
            f"{format_size(need)} of memory)")
    if max_memory is not None and need > max_memory:
        raise InputError(f"{what} needs more than the {format_size(max_memory)} of memory it may use; "
                         "not started", field="network")
    if not limits.within("predict_messages", messages):
        raise limits.refusal("predict_messages", what, "`astra predict` simulates").located(field="network")


def predict(network: AstraNetwork, system: SystemConfig, collective: str, comm_size: int,
            backend: str = "unaware", max_memory: int | None = None) -> Prediction:
    """ASTRA-sim's time for a native collective given ASTRA-sim's own ``comm_size`` (see the
    module docstring; ``comm_size_of`` gives it for a collective of M bytes) on ``network`` with ``system``'s algorithms, on the "unaware" or "aware"
    analytical backend; refused before it starts when its memory estimate is over ``max_memory``
    bytes or its messages over the ``predict_messages`` cap (``require_fits``)."""
    kind = canonical_kind(collective)
    if kind not in (AR, RS, AG, A2A):
        raise InputError(f"ASTRA-sim runs allreduce, reducescatter, allgather and alltoall natively, not "
                         f"{kind}", field="collective")
    if isinstance(comm_size, bool) or int(comm_size) != comm_size or comm_size < 1:
        raise InputError(f"must be a positive whole number of bytes, got {comm_size!r}", field="size")
    check_backend(backend, network)
    if system.endpoint_delay < 1:
        raise InputError("endpoint-delay 0 makes ASTRA-sim abort (EventQueue.cpp:33 asserts every event is "
                         "later than the last); use at least 1 ns", source=system.source, field="endpoint-delay")
    streams, chunk = stream_sizes(kind, int(comm_size), system.preferred_dataset_splits, network.num_npus)
    phases = plan_phases(network, system, kind, chunk)
    require_fits(network.num_npus, streams, phases, backend, max_memory)
    run = _Run(network, system, backend, phases, streams)
    run.run()
    stalled = [npu for npu in range(network.num_npus) if any(run.running[npu])]
    if stalled:  # a message never matched: a modelling bug, not a user error
        raise RuntimeError(f"simulation stalled with phases still running on NPUs {stalled[:5]}")
    reports = tuple(PhaseReport(k, p.dim, p.kind, str(p.impl), p.size_in, p.size_out, tuple(p.messages()),
                                run.window[k][0], run.window[k][1]) for k, p in enumerate(phases))
    return Prediction(kind, size_of(kind, int(comm_size), network.num_npus), int(comm_size), backend, max(run.finish), tuple(run.finish), streams, chunk,
                      reports, run.sent, system.notes() if _reduces(phases) else ())


def _reduces(phases: list[PhasePlan]) -> bool:
    return any(p.kind in (AR, RS) or p.impl.name == "doubleBinaryTree" for p in phases)
