"""ASTRA-sim's native collective algorithms for one phase (one dimension), per NPU.

What each NPU does, as ASTRA-sim 518bd51's system layer does it (``astraccl/native_collectives/
collective_algorithm/``: Ring.cc, AllToAll.cc, HalvingDoubling.cc, DoubleBinaryTreeAllReduce.cc;
``system/PacketBundle.cc``, ``system/MemBus.cc``):

*Packet algorithms* (ring, direct, halvingDoubling). Every message to send is a "packet" that
first crosses the memory bus: ``endpoint-delay`` ns, plus the reduction time of the packet's
message (``SystemConfig.reduction_ns``) when it carries a received partial that must be reduced;
only then may it be sent. At phase start ``parallel`` packets are made (1, or the direct window);
each receipt makes one more, sized like the message the algorithm would send next. Whether a
receipt is reduced follows ASTRA-sim's bookkeeping (``insert_packet``): receipts come in rounds of
``parallel`` "zero-latency" packets (never reduced) and ``nonzero`` others, which are reduced in a
ReduceScatter, and in an AllReduce only in its first (reduce-scatter) half. So a ring
ReduceScatter reduces all N-1 receipts, a ring AllReduce its first N-1, halving-doubling only
log2(N)-1 of them (its last reduce-scatter receipt starts a new round).
A send goes out when a packet is ready (bus done) and the phase still has messages to send; it
posts the matching receive at the same moment. The phase ends when all its messages are sent and
every packet has come back from the bus. Direct AllReduce sends its all-gather half only after
all reduce-scatter receipts arrived.

*AlltoAll* (comm_size: each NPU's whole buffer, messages of comm_size/N). ``ring`` (Ring.cc):
N(N-1)/2 messages, all to the next NPU of the ring, none reduced. ``direct`` (AllToAll.cc): N-1
messages, one to every peer in ring order, ``parallel`` at a time. ``halvingDoubling`` has no
AlltoAll (HalvingDoubling.cc exits: "unknown communication type"); ``doubleBinaryTree`` runs its
AllReduce of the whole buffer for any collective (``Sys::generate_collective_phase``).

*doubleBinaryTree* (AllReduce of the whole buffer, one tree per stream, the two trees used in
turn): leaves send up after the bus delay, inner nodes forward once both children's partials
are reduced, the root reduces and sends down, inner nodes reduce and forward down.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from optcoll.errors import InputError
from optcoll.interop.astra.system import Impl

AR, RS, AG, A2A = "allreduce", "reducescatter", "allgather", "alltoall"
CLOCKWISE, ANTICLOCKWISE = 1, -1


class PhaseContext(Protocol):
    """What an algorithm may do: the predictor supplies it per (NPU, stream, phase)."""

    index: int  # this NPU's position in its dimension group
    endpoint_delay: int

    def reduction_ns(self, nbytes: int) -> int: ...

    def after(self, delay: int, callback: Callable[[], None]) -> None: ...
    def send(self, dst: int, nbytes: int) -> None: ...  # dst: position in the group
    def post_recv(self, src: int, callback: Callable[[], None]) -> None: ...
    def exit(self) -> None: ...


@dataclass(frozen=True)
class PhasePlan:
    """One phase of a stream: which collective, algorithm and sizes (bytes per stream). A
    ``one*`` algorithm's phase (``impl.whole``) spans all NPUs; it queues as dimension 0."""

    dim: int
    kind: str
    impl: Impl
    n: int
    size_in: int
    direction: int

    @property
    def size_out(self) -> int:
        if self.impl.name == "doubleBinaryTree" or self.kind in (AR, A2A):
            return self.size_in
        return self.size_in * self.n if self.kind == AG else self.size_in // self.n

    def messages(self) -> list[tuple[int, int]]:
        """(peer offset, bytes) of every message one NPU sends, in order (for reports)."""
        if self.impl.name == "halvingDoubling":
            return _hd_steps(self.kind, self.n, self.size_in, _log2(self.n, "halvingDoubling")
                             * (2 if self.kind == AR else 1))
        if self.impl.name == "doubleBinaryTree":
            return [(0, self.size_in)] * 2
        count = _ring_counts(self.kind, self.n, self.impl.name)
        if self.impl.name == "ring":
            return [(self.direction, _message(self.kind, self.size_in, self.n))] * count
        return [(self.direction * (1 + k % (self.n - 1)), _message(self.kind, self.size_in, self.n))
                for k in range(count)]


def _message(kind: str, size: int, n: int) -> int:
    return size if kind == AG else size // n


def _ring_counts(kind: str, n: int, name: str) -> int:
    """Messages one NPU sends (Ring.cc and AllToAll.cc ``stream_count``)."""
    if kind == A2A:
        return n * (n - 1) // 2 if name == "ring" else n - 1
    return 2 * (n - 1) if kind == AR else n - 1


def _log2(n: int, what: str) -> int:
    if n < 2 or n & (n - 1):
        raise InputError(f"{what} needs a power-of-two dimension, got {n} NPUs", field="implementation")
    return n.bit_length() - 1


def _hd_steps(kind: str, n: int, size: int, count: int) -> list[tuple[int, int]]:
    """(rank offset, bytes) of the first ``count`` packets halving-doubling makes, as
    ``HalvingDoubling::process_max_count`` evolves them (int offset, uint64 message, both scaled
    by a double): offset doubles and the message halves per step (AllGather: the reverse); an
    AllReduce turns round when the offset reaches n. Packets past the last send keep evolving:
    their sizes set their reduction time."""
    _log2(n, "halvingDoubling")
    offset, mult, msg = (n // 2, 0.5, size) if kind == AG else (1, 2.0, size // 2)
    out = []
    for _ in range(count):
        out.append((offset, msg))
        offset, msg = int(offset * mult), int(msg / mult)
        if offset == n and kind == AR:
            mult = 0.5
            offset, msg = int(offset * mult), int(msg / mult)
    return out


def _hd_peer(index: int, offset: int, n: int) -> int:
    """Partner at ``offset``: clockwise when (index / offset) is even (the XOR partner)."""
    return (index + offset) % n if (index // offset) % 2 == 0 else (index - offset) % n


class PacketAlgorithm:
    """ring, direct and halvingDoubling (see module docstring)."""

    def __init__(self, ctx: PhaseContext, plan: PhasePlan):
        self.ctx, self.kind = ctx, plan.kind
        n, i, name = plan.n, ctx.index, plan.impl.name
        if plan.kind not in (AR, RS, AG, A2A):
            raise InputError(f"{name} models allreduce, reducescatter, allgather and alltoall, not "
                             f"{plan.kind}", field="collective")
        self.middle = None  # direct AllReduce: all-gather half waits for every receipt
        if name == "halvingDoubling":
            if plan.kind == A2A:
                raise InputError("ASTRA-sim's halvingDoubling has no AlltoAll (HalvingDoubling.cc exits "
                                 "with 'unknown communication type'); use ring or direct", field="implementation")
            self.to_send = _log2(n, name) * (2 if plan.kind == AR else 1)
            self.parallel, self.nonzero = 1, _log2(n, name) - 1
            steps = _hd_steps(plan.kind, n, plan.size_in, self.to_send + self.parallel)
            # (destination, source, bytes): halving-doubling exchanges with one partner per step
            self.specs = [(_hd_peer(i, off, n), _hd_peer(i, off, n), size) if off else (i, i, size)
                          for off, size in steps]
        else:
            msg = _message(plan.kind, plan.size_in, n)
            self.to_send, step = _ring_counts(plan.kind, n, name), plan.direction
            if name == "ring":
                self.parallel, self.nonzero = 1, n - 1
                self.specs = [((i + step) % n, (i - step) % n, msg)] * (self.to_send + 1)
            else:  # direct: one message to every peer, peers taken in ring order, round and round
                window = plan.impl.window
                self.parallel = n - 1 if window is None else min(window, n - 1)
                self.nonzero = self.parallel
                self.middle = n - 1 if plan.kind == AR else None
                peers = [((i + step * k) % n, (i - step * k) % n, msg) for k in range(1, n)]
                self.specs = [peers[k % (n - 1)] for k in range(self.to_send + self.parallel)]
        self.packets: deque = deque()
        self.made = self.free = self.received = 0
        self.zero = self.nonzero_left = 0
        self.toggle = False

    def start(self) -> None:
        for _ in range(self.parallel):
            self._make_packet()

    def _make_packet(self) -> None:
        if self.zero == 0 and self.nonzero_left == 0:
            self.zero, self.nonzero_left, self.toggle = self.parallel, self.nonzero, not self.toggle
        if self.zero > 0:
            self.zero -= 1
            reduced = False
        else:
            self.nonzero_left -= 1
            reduced = self.kind == RS or (self.kind == AR and self.toggle)
        spec = self.specs[self.made]
        self.packets.append(spec)
        self.made += 1
        delay = self.ctx.endpoint_delay + (self.ctx.reduction_ns(spec[2]) if reduced else 0)
        self.ctx.after(delay, self._ready)

    def _received(self) -> None:
        self.received += 1
        self._make_packet()

    def _ready(self) -> None:
        self.free += 1
        if self.middle is not None and self.to_send <= self.middle:
            if self.received < self.middle:
                return
            for _ in range(self.parallel):
                self._send()
        else:
            self._send()
        if self.to_send == 0 and self.free == self.parallel:
            self.ctx.exit()

    def _send(self) -> None:
        if not self.packets or self.to_send == 0 or self.free == 0:
            return
        dst, src, nbytes = self.packets.popleft()
        self.ctx.send(dst, nbytes)
        self.ctx.post_recv(src, self._received)
        self.to_send -= 1
        self.free -= 1


def binary_tree(n: int, root_max: bool) -> dict[int, tuple[int | None, list[int]]]:
    """ASTRA-sim's BinaryTree over positions 0..n-1: a complete tree of n-1 nodes numbered in order,
    under a root that holds the largest (RootMax) or the smallest (RootMin) position and has that
    tree as its only child. position → (parent, children)."""
    levels = _log2(n, "doubleBinaryTree")
    parent: dict[int, int | None] = {v: None for v in range(n)}
    children: dict[int, list[int]] = {v: [] for v in range(n)}

    def subtree(levels: int, first: int) -> int:
        root = first + 2 ** (levels - 1) - 1  # in-order: the left subtree's ids come first
        if levels > 1:
            for child in (subtree(levels - 1, first), subtree(levels - 1, root + 1)):
                parent[child], children[root] = root, children[root] + [child]
        return root

    top = n - 1 if root_max else 0
    inner = subtree(levels, 0 if root_max else 1)
    parent[inner], children[top] = top, [inner]
    return {v: (parent[v], children[v]) for v in range(n)}


class TreeAlgorithm:
    """doubleBinaryTree: an AllReduce of the whole phase buffer along one binary tree."""

    def __init__(self, ctx: PhaseContext, plan: PhasePlan, root_max: bool):
        self.ctx, self.size = ctx, plan.size_in
        self.parent, self.children = binary_tree(plan.n, root_max)[ctx.index]
        self.reduced = 0

    def start(self) -> None:
        ctx = self.ctx
        if self.parent is not None and not self.children:  # leaf
            ctx.after(ctx.endpoint_delay, self._leaf_send)
        for child in self.children:
            ctx.post_recv(child, self._from_child)

    def _leaf_send(self) -> None:
        self.ctx.send(self.parent, self.size)
        self.ctx.post_recv(self.parent, lambda: self.ctx.after(self.ctx.endpoint_delay, self.ctx.exit))

    def _bus_and_reduce(self, then: Callable[[], None]) -> None:
        self.ctx.after(self.ctx.endpoint_delay + self.ctx.reduction_ns(self.size), then)

    def _from_child(self) -> None:
        self._bus_and_reduce(self._child_reduced)

    def _child_reduced(self) -> None:
        self.reduced += 1
        if self.reduced < len(self.children):
            return
        if self.parent is None:  # root: the reduction is complete, send it back down
            self._down()
        else:
            self.ctx.send(self.parent, self.size)
            self.ctx.post_recv(self.parent, lambda: self._bus_and_reduce(self._down))

    def _down(self) -> None:
        for child in self.children:
            self.ctx.send(child, self.size)
        self.ctx.exit()


def make_algorithm(ctx: PhaseContext, plan: PhasePlan, tree_count: int) -> PacketAlgorithm | TreeAlgorithm:
    """The phase's algorithm; ``tree_count`` is how many tree phases this NPU built before on this
    dimension (ASTRA-sim alternates RootMax and RootMin trees by it)."""
    if plan.impl.name == "doubleBinaryTree":
        return TreeAlgorithm(ctx, plan, root_max=tree_count % 2 == 0)
    return PacketAlgorithm(ctx, plan)


__all__ = ["AR", "RS", "AG", "A2A", "CLOCKWISE", "ANTICLOCKWISE", "PhasePlan", "PhaseContext", "PacketAlgorithm",
           "TreeAlgorithm", "binary_tree", "make_algorithm"]
