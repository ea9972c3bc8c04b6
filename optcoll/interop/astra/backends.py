"""ASTRA-sim's two analytical network backends, in whole nanoseconds, on one event queue.

Followed: astra-network-analytical 599a047 (``congestion_unaware/basic-topology/*.cpp``,
``congestion_unaware/multi-dim-topology/MultiDimTopology.cpp``, ``congestion_aware/network/
Link.cpp`` ``serialization_delay``/``communication_delay``, ``common/NetworkFunction.cpp``
``bw_GBps_to_Bpns``); checked against the built binaries (tests/interop/astra/data).

Congestion-unaware: a message between NPUs that differ in dimension d (the lowest differing one,
as ASTRA-sim's MultiDimTopology picks) takes ``floor(hops·latency + bytes/bandwidth)`` ns with
hops 1 (FullyConnected), 2 (Switch) or the shorter way round a bidirectional Ring; concurrent
messages never slow each other.

Congestion-aware: the message follows its route in that dimension (Ring: the shorter direction,
clockwise on a tie; Switch: NPU→switch→NPU; FullyConnected: direct). Every directed link is a FIFO:
a message occupies it for ``floor(bytes/bandwidth)`` and reaches the next device after
``floor(latency + bytes/bandwidth)``, where it queues for the next link (store-and-forward).
Bandwidth is ASTRA-sim's ``GB/s · 2^30 / 1e9`` bytes per ns, computed in the same double
arithmetic so every floor lands on the same nanosecond. ``exact=True`` drops the floors (times in
fractional ns), to measure what they account for.
"""
from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from optcoll.errors import InputError
from optcoll.interop.astra.network import AstraNetwork

BACKENDS = ("unaware", "aware")


class EventQueue:
    """Callbacks at (integer) ns; equal times run in the order they were scheduled (like ASTRA-sim)."""

    def __init__(self) -> None:
        self.now: float = 0
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = 0

    def at(self, time: float, callback: Callable[[], None]) -> None:
        if time < self.now:
            raise ValueError(f"event at {time} ns scheduled in the past (now {self.now})")
        heapq.heappush(self._heap, (time, self._seq, callback))
        self._seq += 1

    def after(self, delay: float, callback: Callable[[], None]) -> None:
        self.at(self.now + delay, callback)

    def run(self) -> None:
        while self._heap:
            self.now, _, callback = heapq.heappop(self._heap)
            callback()


def transfer_dim(network: AstraNetwork, src: int, dst: int) -> int:
    a, b = network.coords(src), network.coords(dst)
    for d, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return d
    raise ValueError(f"message from NPU {src} to itself")


def _whole_ns(exact: bool) -> Callable[[float], float]:
    return float if exact else int


class UnawareNetwork:
    def __init__(self, network: AstraNetwork, queue: EventQueue, exact: bool = False):
        self.network, self.queue, self.floor = network, queue, _whole_ns(exact)

    def message_time(self, src: int, dst: int, nbytes: int) -> float:
        d = transfer_dim(self.network, src, dst)
        dim = self.network.dims[d]
        hops = dim.hops(self.network.coords(src)[d], self.network.coords(dst)[d])
        return self.floor(hops * dim.latency_ns + nbytes / dim.bytes_per_ns)

    def send(self, src: int, dst: int, nbytes: int, arrived: Callable[[], None]) -> None:
        self.queue.after(self.message_time(src, dst, nbytes), arrived)


@dataclass
class _Link:
    latency: float
    bytes_per_ns: float
    busy: bool = False
    pending: deque = field(default_factory=deque)


class AwareNetwork:
    """Links are keyed by device: NPUs by id, a Switch dimension's switch by (dim, lowest member)."""

    def __init__(self, network: AstraNetwork, queue: EventQueue, exact: bool = False):
        self.network, self.queue, self.floor = network, queue, _whole_ns(exact)
        self.links: dict[tuple[object, object], _Link] = {}

    def _link(self, u: object, v: object, d: int) -> _Link:
        link = self.links.get((u, v))
        if link is None:
            dim = self.network.dims[d]
            link = self.links[(u, v)] = _Link(dim.latency_ns, dim.bytes_per_ns)
        return link

    def route(self, src: int, dst: int) -> tuple[int, list[object]]:
        d = transfer_dim(self.network, src, dst)
        dim, group = self.network.dims[d], self.network.group(src, d)
        i, j = self.network.coords(src)[d], self.network.coords(dst)[d]
        if dim.topology == "FullyConnected":
            return d, [src, dst]
        if dim.topology == "Switch":
            return d, [src, ("switch", d, group[0]), dst]
        n = dim.npus_count
        step = -1 if (i - j) % n < (j - i) % n else 1  # anticlockwise only when strictly shorter
        path, k = [src], i
        while k != j:
            k = (k + step) % n
            path.append(group[k])
        return d, path

    def send(self, src: int, dst: int, nbytes: int, arrived: Callable[[], None]) -> None:
        d, path = self.route(src, dst)
        self._hop(path, 0, d, nbytes, arrived)

    def _hop(self, path: list[object], k: int, d: int, nbytes: int, arrived: Callable[[], None]) -> None:
        if k == len(path) - 1:
            arrived()
            return
        link = self._link(path[k], path[k + 1], d)
        job = (path, k, d, nbytes, arrived)
        if link.busy:
            link.pending.append(job)
        else:
            self._transmit(link, job)

    def _transmit(self, link: _Link, job: tuple) -> None:
        path, k, d, nbytes, arrived = job
        link.busy = True
        serial = nbytes / link.bytes_per_ns
        self.queue.after(self.floor(link.latency + serial), lambda: self._hop(path, k + 1, d, nbytes, arrived))
        self.queue.after(self.floor(serial), lambda: self._free(link))

    def _free(self, link: _Link) -> None:
        link.busy = False
        if link.pending:
            self._transmit(link, link.pending.popleft())


def check_backend(backend: str, network: AstraNetwork) -> None:
    """Refuses what ASTRA-sim refuses: the congestion-aware backend builds one-dimensional networks
    only (astra-network-analytical 599a047, ``congestion_aware/topology/Helper.cpp``
    ``construct_topology``: "only support 1-dim topology", exit)."""
    if backend not in BACKENDS:
        raise InputError(f"unknown backend {backend!r}; use {' or '.join(BACKENDS)}", field="backend")
    if backend == "aware" and len(network.dims) > 1:
        raise InputError(f"ASTRA-sim's congestion-aware backend refuses a {len(network.dims)}-dimensional "
                         "network (only 1-dim topologies); use the unaware backend", field="backend")


def make_network(backend: str, network: AstraNetwork, queue: EventQueue, exact: bool = False
                 ) -> UnawareNetwork | AwareNetwork:
    check_backend(backend, network)
    return (UnawareNetwork if backend == "unaware" else AwareNetwork)(network, queue, exact)


def check_message(nbytes: int) -> int:
    """ASTRA-sim asserts chunk_size > 0 in both backends."""
    if nbytes <= 0 or not float(nbytes).is_integer():
        raise InputError(f"a message of {nbytes} B: ASTRA-sim sends whole positive byte counts "
                         "(the collective is too small for this network and split)", field="size")
    return int(nbytes)


__all__ = ["BACKENDS", "EventQueue", "UnawareNetwork", "AwareNetwork", "check_backend", "make_network",
           "check_message",
           "transfer_dim"]
