"""Running an MSCCL++ plan on a machine, as early as the executor's rules allow, in optcoll's timed
model: the transfers it makes, and what its buffers hold.

Every thread block runs its ops in order (``executionKernel``); an op starts when the previous one
has finished and, for these, when what it waits for has happened:

* ``wait``/``rlxwait``: the partner's matching signal (the k-th wait on a channel takes the k-th
  signal on its partner, ``validate.py``); ``barrier``: every thread block it names;
  ``sem_acquire``: a release beyond the semaphore's initial value;
* reading packets (``upkt``, ``repkt``, ``recpkt``, ``recspkt``, ``respkt``, ``rppkt``,
  ``gstorepkt``): the packets of this launch in the slots read (LL flags).

Data moves one unit (an optcoll chunk, ``geometry.py``) at a time along the machine's route from
the GPU that holds it to the GPU that receives it, through switches only (``routes.py``), each hop
timed by ``TimeModel.link_timing``, one transfer at a time per link in issue order. A memory
channel ``put``/``res``/``ppkt`` keeps its thread block until its units have left the first link,
a ``get``/``rre`` until they have arrived; a port channel's puts are the proxy's and leave the
thread block free. A ``signal`` reaches its partner when everything the thread block wrote before
it has arrived (its fence) and not before the route's latency; a relaxed one after the latency
only. ``glres`` is NVLS: every member's unit into the group's switch (reduced there), the sum to
the issuing GPU (``multimem.ld_reduce``), back into the switch and multicast to every member, the
issuer included (``multimem.st``); ``gstore`` is the last two moves. Local copies and reductions
cost nothing (docs/model.md §5, rule 5). LL packets carry a flag with every 4 bytes of data: a
plan of packets runs on the machine ``importer.packet_view`` gives, whose links carry half their
rate in data.

Values are (chunk, contributing GPUs), written at arrival and read at the op's start, as in the
MSCCL importer; ``problems`` names every read of an empty slot, reduction of different chunks, double
count and output slot that ends wrong.
"""
from __future__ import annotations

import bisect
import heapq
import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from optcoll.instances.instance import TimeModel
from optcoll.interop.mscclpp.geometry import Piece, UnrolledOp
from optcoll.interop.mscclpp.routes import PeerPaths
from optcoll.interop.mscclpp.schema import PlanGpu, ExecutionPlan, Threadblock
from optcoll.interop.mscclpp.validate import ChannelEnd, op_channel, remote_of, switch_of
from optcoll.interop.msccl.layout import BufferLayout, SlotValue
from optcoll.machines.machine import Machine
from optcoll.schedules.schedule import COPY, REDUCE
from optcoll.units import format_time
from optcoll.verify.problem import plain_switches

PACKET_READS = {"upkt": 0, "repkt": 1, "recpkt": 1, "recspkt": 1, "respkt": 1, "rppkt": 0, "gstorepkt": 0}
Slot = tuple[int, str, int]  # (gpu, canonical buffer, unit)


@dataclass
class Run:
    """What a plan did: transfers (chunk, link, start, op, via) and its buffer problems."""

    rows: list[list] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    finish: float = 0.0
    stuck: list[str] = field(default_factory=list)


class Simulator:
    def __init__(self, plan: ExecutionPlan, machine: Machine, ranks: list[int],
                 tbs: list[tuple[PlanGpu, Threadblock, list[UnrolledOp]]],
                 unit: int, layout: BufferLayout, combining: bool, model: TimeModel):
        self.plan, self.machine, self.ranks, self.layout, self.combining = plan, machine, ranks, layout, combining
        self.tbs, self.unit = tbs, unit
        timing = model.link_timing(machine, float(self.unit))
        self.delay, self.busy = timing.delay, timing.busy
        self.reduce_extra = float(model.reduce_cost * self.unit)
        self.routes = PeerPaths(machine)
        self.ends: dict[tuple[int, str], list[ChannelEnd]] = {}  # numbered once (validate.op_channel)
        self.plain = plain_switches(machine).tolist()
        self.out = Run()
        self.buf: dict[Slot, SlotValue] = {}
        self.packets: set[Slot] = set()
        self.full: dict[int, int] = {}
        for (g, c), (b, off) in layout.pre.items():
            mine = 1 << g if combining else 0
            self.buf[(g, b, off)] = SlotValue(c, mine, -1)
            self.full[c] = self.full.get(c, 0) | mine
        self.free: dict[int, list[tuple[float, float]]] = defaultdict(list)  # busy intervals, sorted
        self.signals: dict[tuple, list[float]] = defaultdict(list)
        self.waited: dict[tuple, int] = defaultdict(int)
        self.written: list[float] = [0.0] * len(self.tbs)  # when each tb's writes have all landed
        self.sem: dict[tuple[int, int], list[float]] = defaultdict(list)
        self.acquired: dict[tuple[int, int], int] = defaultdict(int)
        self.barriers: dict[tuple[int, int], list[int]] = defaultdict(list)
        self.pc = [0] * len(self.tbs)
        self.waiting: list[int] = []
        self.heap: list[tuple[float, int, int, Callable[[], None]]] = []
        self.seq = 0

    # -- event queue: deliveries (0) before op starts (1) at one instant ------------------------------

    def at(self, t: float, prio: int, action: Callable[[], None]) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (t, prio, self.seq, action))

    def run(self) -> Run:
        for k in range(len(self.tbs)):
            self.at(0.0, 1, lambda k=k: self.try_step(k, 0.0))
        while self.heap:
            t, _, _, action = heapq.heappop(self.heap)
            self.now = t
            action()
        for k, (g, tb, steps) in enumerate(self.tbs):
            if self.pc[k] < len(steps):
                self.out.stuck.append(f"{steps[self.pc[k]].op.where} ({steps[self.pc[k]].op.name})")
        self.final_check()
        return self.out

    def retry(self) -> None:
        waiting, self.waiting = self.waiting, []
        for k in waiting:
            self.at(self.now, 1, lambda k=k: self.try_step(k, self.now))

    # -- values ---------------------------------------------------------------------------------------

    def slots(self, gpu: int, buf: str, piece: Piece) -> list[Slot]:
        return [(gpu, *self.layout.canonical(gpu, (buf, u))) for u in range(piece.start // self.unit,
                                                                            piece.end // self.unit)]

    def read(self, slot: Slot, where: str) -> SlotValue | None:
        value = self.buf.get(slot)
        if value is None:
            self.out.problems.append(f"{where} reads {slot[1]}[unit {slot[2]}] of GPU {slot[0]}, which holds "
                                     f"nothing at {format_time(self.now)}")
        return value

    def combine(self, values: list[SlotValue | None], where: str) -> SlotValue | None:
        if any(v is None for v in values):
            return None
        if not self.combining:
            self.out.problems.append(f"{where} reduces, but {self.layout.kind} does not combine")
            return None
        first = values[0]
        mask = 0
        # a value a transfer landed that is folded into another is, in optcoll, a reduction; when
        # every part landed so, the first source is the one the op adds to (the GPU's holding)
        holding = values[0] if all(v.origin >= 0 for v in values) else None
        for v in values:
            if v.chunk != first.chunk:
                self.out.problems.append(f"{where} reduces chunk {first.chunk} with chunk {v.chunk}")
                return None
            if mask & v.mask:
                self.out.problems.append(f"{where} counts GPUs {mask & v.mask:b} (bits) twice in chunk {v.chunk}")
            mask |= v.mask
            if v.origin >= 0 and v is not holding:
                self.out.rows[v.origin][3] = REDUCE
        return SlotValue(first.chunk, mask, -1)

    def write(self, slot: Slot, value: SlotValue | None, packet: bool = False) -> None:
        if value is None:
            self.buf.pop(slot, None)
        else:
            self.buf[slot] = value
        if packet:
            self.packets.add(slot)

    # -- moving data ----------------------------------------------------------------------------------

    def send(self, value: SlotValue | None, src: int, dst: int, t: float, op: int, lane: int = 0
             ) -> tuple[float, float]:
        """One unit from GPU ``src`` to GPU ``dst`` (or a switch node, as a machine node) along the
        route; returns (when it left the first link, when it arrived). Records the transfers, each
        hop out of a plain switch naming the hop it forwards (``via``: a switch carrying several
        arrivals of one chunk at once forwards each on its own route, whatever their order)."""
        path = self.routes.path(self.node(src), self.node(dst), lane)
        left = arrive = t
        for h, e in enumerate(path):
            start = self.reserve(e, arrive)
            last = h == len(path) - 1
            if value is not None:
                via = len(self.out.rows) - 1 if h and self.plain[int(self.machine.link_src[e])] else -1
                self.out.rows.append([value.chunk, e, start, op if last else COPY, via])
            arrive = start + float(self.delay[e]) + (self.reduce_extra if last and op == REDUCE else 0.0)
            left = start + float(self.busy[e]) if h == 0 else left
        return left, arrive

    def reserve(self, e: int, ready: float) -> float:
        """The earliest start at or after ``ready`` when link ``e`` is free for one transfer (a link
        carries one transfer at a time; a later request may use an earlier gap)."""
        length = float(self.busy[e])
        busy = self.free[e]
        start = ready
        i = bisect.bisect_left(busy, (start, -math.inf))
        if i and busy[i - 1][1] > start:
            start = busy[i - 1][1]
        while i < len(busy) and busy[i][0] < start + length:
            start = max(start, busy[i][1])
            i += 1
        busy.insert(i, (start, start + length))
        return start

    def node(self, gpu_or_node: int) -> int:
        return self.ranks[gpu_or_node] if gpu_or_node >= 0 else -1 - gpu_or_node

    def deliver(self, slot: Slot, value: SlotValue | None, t: float, packet: bool = False, local: bool = False) -> None:
        """``value`` written at ``t``: by the transfer just recorded, or (``local``) by a local op,
        which keeps the transfer it came by (none for a reduction's result)."""
        row = value.origin if local and value is not None else len(self.out.rows) - 1
        landed = SlotValue(value.chunk, value.mask, row) if value is not None else None
        self.at(t, 0, lambda: (self.write(slot, landed, packet), self.retry()))

    # -- thread blocks --------------------------------------------------------------------------------

    def try_step(self, k: int, t: float) -> None:
        g, tb, steps = self.tbs[k]
        if self.pc[k] >= len(steps):
            return
        step = steps[self.pc[k]]
        start = self.ready(k, g, tb, step, t)
        if start is None:
            self.waiting.append(k)
            return
        if start > t:
            self.at(start, 1, lambda: self.try_step(k, start))
            return
        finish = self.execute(k, g, tb, step, t)
        self.pc[k] += 1
        self.out.finish = max(self.out.finish, finish)
        self.at(finish, 1, lambda: self.try_step(k, finish))
        self.retry()

    def ready(self, k: int, g: PlanGpu, tb: Threadblock, step: UnrolledOp, t: float) -> float | None:
        """When the step may start (None: not known yet, something must happen first)."""
        op = step.op
        if op.name in ("wait", "rlxwait"):
            latest = t
            for i in range(len(op.channel_ids)):
                e = op_channel(self.plan, g, tb, op, i, self.ends)
                key = (e.peer, e.gpu, e.kind, e.k)
                got = self.signals[key]
                n = self.waited[key]
                if len(got) <= n:
                    return None
                latest = max(latest, got[n])
            return latest
        if op.name in PACKET_READS:
            for piece in step.src[PACKET_READS[op.name]:]:
                if any(s not in self.packets for s in self.slots(g.id, piece.ref.type or "s", piece)):
                    return None
        if op.name == "sem_acquire":
            for s in op.semaphore_ids:
                need = self.acquired[(g.id, s)] - g.semaphores[s]
                released = self.sem[(g.id, s)]
                if need >= 0 and len(released) <= need:
                    return None
        if op.name == "barrier":
            key = (g.id, op.barrier_id)
            if k not in self.barriers[key]:
                self.barriers[key].append(k)
            if len(self.barriers[key]) < op.num_threadblocks:
                return None
        return t

    def execute(self, k: int, g: PlanGpu, tb: Threadblock, step: UnrolledOp, t: float) -> float:
        op, name = step.op, step.op.name
        where = op.where + (f" (iteration {step.iteration})" if step.iteration is not None else "")
        if name in ("wait", "rlxwait"):
            for i in range(len(op.channel_ids)):
                e = op_channel(self.plan, g, tb, op, i, self.ends)
                self.waited[(e.peer, e.gpu, e.kind, e.k)] += 1
            return t
        if name in ("signal", "rlxsignal", "pws", "pwsf"):
            end = self.move(k, g, tb, step, t, where) if name in ("pws", "pwsf") else t
            for i in range(len(op.channel_ids)):
                e = op_channel(self.plan, g, tb, op, i, self.ends)
                lat = self.routes.latency(self.node(g.id), self.node(e.peer))
                when = t + lat if name == "rlxsignal" else max(t + lat, self.written[k])
                self.signals[(e.gpu, e.peer, e.kind, e.k)].append(when)
            return end
        if name == "sem_release":
            for s in op.semaphore_ids:
                self.sem[(g.id, s)].append(t)
            return t
        if name == "sem_acquire":
            for s in op.semaphore_ids:
                self.acquired[(g.id, s)] += 1
            return t
        if name == "barrier":
            if len(self.barriers[(g.id, op.barrier_id)]) >= op.num_threadblocks:
                self.barriers[(g.id, op.barrier_id)] = []
            return t
        if name in ("nop", "flush"):
            return t
        return self.move(k, g, tb, step, t, where)

    # -- data ops -------------------------------------------------------------------------------------

    def local(self, g: PlanGpu, piece: Piece) -> list[Slot]:
        return self.slots(g.id, piece.ref.type, piece)

    def remote(self, g: PlanGpu, tb: Threadblock, step: UnrolledOp, piece: Piece) -> tuple[int, list[Slot]]:
        rb = remote_of(g, tb, step.op, piece.ref)
        return rb.rank, self.slots(rb.rank, rb.type, piece)

    def move(self, k: int, g: PlanGpu, tb: Threadblock, step: UnrolledOp, t: float, where: str) -> float:
        op, name = step.op, step.op.name
        port = op.channel_type == "port"
        if name in ("glres", "gstore", "gstorepkt"):
            return self.nvls(k, g, tb, step, t, where)
        if name == "get":
            end = t
            for src, dst in zip(step.src, step.dst):
                peer, slots = self.remote(g, tb, step, src)
                for s, d in zip(slots, self.local(g, dst)):
                    value = self.read(s, where)
                    _, arrive = self.send(value, peer, g.id, t, COPY)
                    self.deliver(d, value, arrive)
                    end = max(end, arrive)
            return end
        # the value(s) each op computes locally, unit by unit
        first = step.src[0]
        locals_in = [p for p in step.src[1:] if p.ref.buffer_id is None]
        remote_in = [p for p in step.src[1:] if p.ref.buffer_id is not None]
        units = first.end // self.unit - first.start // self.unit
        end = t
        arrivals = [t] * units
        values: list[SlotValue | None] = []
        for u in range(units):
            parts = [self.read(self.local(g, first)[u], where)]
            if name in ("re", "res", "repkt", "respkt", "recpkt", "recspkt", "rre", "rres"):
                parts += [self.read(self.slots(g.id, p.ref.type, p)[u], where) for p in locals_in]
                for p in remote_in:
                    peer, slots = self.remote(g, tb, step, p)
                    value = self.read(slots[u], where)
                    _, arrive = self.send(value, peer, g.id, t, REDUCE)
                    arrivals[u] = max(arrivals[u], arrive)
                    parts.append(None if value is None else SlotValue(value.chunk, value.mask, -1))
                values.append(self.combine(parts, where) if len(parts) > 1 else parts[0])
            else:
                values.append(parts[0])
        # local outputs: dst[0] (and recpkt/recspkt's packet copy dst[1]); the rest go to peers
        n_local = {"recpkt": 2, "recspkt": 2, "re": 1, "res": 1, "rre": 1, "rres": 1, "repkt": 1, "respkt": 1,
                   "copy": 1, "cpkt": 1, "upkt": 1}.get(name, 0)
        for j, d in enumerate(step.dst[:n_local]):
            packet = name == "cpkt" or (j == 1 and name in ("recpkt", "recspkt"))
            for u, slot in enumerate(self.local(g, d)):
                self.deliver(slot, values[u], arrivals[u], packet, local=not remote_in)
                end = max(end, arrivals[u])
        packets = name in ("ppkt", "rppkt", "respkt", "recspkt")
        for d in step.dst[n_local:]:
            peer, slots = self.remote(g, tb, step, d)
            for u, slot in enumerate(slots):
                value = values[u % len(values)]
                left, arrive = self.send(value, g.id, peer, arrivals[u], COPY)
                self.deliver(slot, value, arrive, packets)
                self.written[k] = max(self.written[k], arrive)
                if not port:
                    end = max(end, left)
        return end

    def nvls(self, k: int, g: PlanGpu, tb: Threadblock, step: UnrolledOp, t: float, where: str) -> float:
        dst = step.dst[0]
        buf_out, members, _ = switch_of(g, tb, dst.ref)
        switch = self.routes.switch_of([self.node(m) for m in members])
        s = -1 - switch  # a switch as a send() endpoint
        end = t
        for u in range(dst.end // self.unit - dst.start // self.unit):
            if step.op.name == "glres":
                buf_in, _, _ = switch_of(g, tb, step.src[0].ref)
                parts, at_switch = [], t
                for m in members:
                    value = self.read(self.slots(m, buf_in, step.src[0])[u], where)
                    _, arrive = self.send(value, m, s, t, REDUCE)
                    parts.append(value)
                    at_switch = max(at_switch, arrive)
                value = self.combine(parts, where)
                _, back = self.send(value, s, g.id, at_switch, COPY)
            else:
                value = self.read(self.local(g, step.src[0])[u], where)
                back = t
            left, at_switch = self.send(value, g.id, s, back, COPY)
            end = max(end, left)
            for m in members:
                _, arrive = self.send(value, s, m, at_switch, COPY)
                self.deliver(self.slots(m, buf_out, dst)[u], value, arrive, step.op.name == "gstorepkt")
                self.written[k] = max(self.written[k], arrive)
        return end

    def final_check(self) -> None:
        for (g, c), (b, off) in sorted(self.layout.post.items()):
            value = self.buf.get((g, b, off))
            want = self.full.get(c, 0)
            if value is None or value.chunk != c or value.mask != want:
                have = "nothing" if value is None else f"chunk {value.chunk} over GPUs {value.mask:b} (bits)"
                self.out.problems.append(f"GPU {g} {b}[unit {off}] ends holding {have}; it must hold chunk {c}"
                                         + (f" over GPUs {want:b} (bits)" if self.combining else ""))

