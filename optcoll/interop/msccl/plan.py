"""Buffer slots and data dependencies for exporting a timed schedule to MSCCL.

Each transfer has a send *event* at its source GPU (at its start) and a receive event at its
destination (at its arrival). Per (chunk, GPU) the events are walked in time order (an arrival
at t comes before a send at t, as in the verifier) to decide:

* where a received chunk is written: its postcondition slot, else scratch;
* which slot each send reads, and what it must wait for (read after write);
* for combining collectives, where reads and writes of one slot must keep their order: a new
  partial result overwrites a slot only after every send reading the old one has left the wire
  (optcoll's model snapshots a send at its start, MSCCL reads the buffer while sending), and if
  that would delay it the result goes to a fresh scratch slot instead, so the export never runs
  slower than the schedule;
* a reduce that lands on a value already there is ``rrc`` (src = the current value), else ``r``;
* a final local copy where the last value is not in its output slot (out-of-place own chunks).

Non-combining data never changes once written, so its sends read the precondition slot when
there is one and otherwise wait only for the first arrival.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from optcoll.interop.msccl.ir import Ref
from optcoll.interop.msccl.layout import BufferLayout
from optcoll.schedules.schedule import REDUCE

Event = tuple  # ("s", transfer) | ("r", transfer) | ("l", gpu, index)


@dataclass(frozen=True)
class Xfer:
    id: int
    chunk: int
    u: int  # source GPU id
    v: int  # destination GPU id
    lane: int
    start: float
    arrive: float
    release: float  # start + link occupancy
    op: int
    port: int = -1  # the link it leaves its GPU on (the first hop of its route)


@dataclass(frozen=True)
class Local:
    gpu: int
    index: int
    key: float
    src: Ref
    dst: Ref


@dataclass
class SlotPlan:
    read: dict[int, Ref] = field(default_factory=dict)  # transfer -> slot its sender reads
    write: dict[int, Ref] = field(default_factory=dict)  # transfer -> slot its receiver writes
    recv_type: dict[int, str] = field(default_factory=dict)  # "r" or "rrc"
    recv_src: dict[int, Ref] = field(default_factory=dict)  # rrc: the value it reduces with
    deps: dict[Event, list[Event]] = field(default_factory=dict)
    locals: list[Local] = field(default_factory=list)
    scratch: dict[int, int] = field(default_factory=dict)  # gpu -> scratch chunks used
    key: dict[Event, float] = field(default_factory=dict)  # when the event happens
    finish: dict[Event, float] = field(default_factory=dict)  # when it releases its thread block

    def new_scratch(self, gpu: int) -> Ref:
        k = self.scratch.get(gpu, 0)
        self.scratch[gpu] = k + 1
        return ("s", k)


@dataclass
class _Slot:
    writer: Event | None = None
    reads: list[Event] = field(default_factory=list)
    busy: float = 0.0  # when the last read of the current content leaves the wire


def plan(xfers: list[Xfer], layout: BufferLayout, combining: bool, eps: float) -> SlotPlan:
    p = SlotPlan()
    for x in xfers:
        p.key[("s", x.id)], p.finish[("s", x.id)] = x.start, x.release
        p.key[("r", x.id)], p.finish[("r", x.id)] = x.arrive, x.arrive
    writes: dict[tuple[int, int], list[Xfer]] = {}
    reads: dict[tuple[int, int], list[Xfer]] = {}
    for x in sorted(xfers, key=lambda x: (x.arrive, x.id)):
        writes.setdefault((x.chunk, x.v), []).append(x)
    for x in sorted(xfers, key=lambda x: (x.start, x.id)):
        reads.setdefault((x.chunk, x.u), []).append(x)
    occupant = {(g, ref): c for (g, c), ref in layout.pre.items()}
    keys = sorted(set(writes) | set(reads) | {(c, g) for g, c in layout.post})
    for c, g in keys:
        ws, rs = writes.get((c, g), []), reads.get((c, g), [])
        other = occupant.get((g, layout.post.get((g, c))), c)
        if combining:
            assert other == c, "a combining layout shares a slot between chunks"
            _walk_combining(p, layout, c, g, ws, rs, eps)
        else:
            _walk_copies(p, layout, c, g, ws, rs, eps, None if other == c else reads.get((other, g), []))
    return p


def _merge(ws: list[Xfer], rs: list[Xfer], eps: float):
    """Writes and reads of one (chunk, GPU) in time order, arrivals first at equal times."""
    i = 0
    for r in rs:
        while i < len(ws) and ws[i].arrive <= r.start + eps:
            yield "w", ws[i]
            i += 1
        yield "r", r
    for w in ws[i:]:
        yield "w", w


def _walk_copies(p: SlotPlan, layout: BufferLayout, c: int, g: int, ws: list[Xfer], rs: list[Xfer],
                 eps: float, evicts: list[Xfer] | None) -> None:
    """``evicts``: sends of another chunk that starts in this chunk's output slot (in-place
    AlltoAll); then arrivals wait in scratch and move in once those sends have left."""
    pre, post = layout.pre.get((g, c)), layout.post.get((g, c))
    home = post if post is not None and evicts is None else (p.new_scratch(g) if ws else None)
    first: Event | None = None
    for kind, x in _merge(ws, rs, eps):
        if kind == "w":
            p.write[x.id], p.recv_type[x.id] = home, "r"
            p.deps[("r", x.id)] = []
            first = first or ("r", x.id)
        else:
            assert pre is not None or first is not None, f"chunk {c} sent by GPU {g} before it holds it"
            p.read[x.id] = pre if pre is not None else home
            p.deps[("s", x.id)] = [] if pre is not None else [first]
    final = home if ws else pre  # where the chunk is at the end
    if post is not None and final != post:
        assert final is not None, f"GPU {g} never holds chunk {c}"
        deps = ([first] if ws else []) + [("s", x.id) for x in evicts or ()]
        _local(p, g, max((p.finish[d] for d in deps), default=0.0), final, post, deps)


def _walk_combining(p: SlotPlan, layout: BufferLayout, c: int, g: int, ws: list[Xfer], rs: list[Xfer],
                    eps: float) -> None:
    pre, post = layout.pre.get((g, c)), layout.post.get((g, c))
    slots: dict[Ref, _Slot] = {}
    order: list[Ref] = []  # candidate slots for new values: the output slot first, then scratch
    if post is not None:
        order.append(post)
    current = pre
    if pre is not None:
        slots[pre] = _Slot()
    for kind, x in _merge(ws, rs, eps):
        if kind == "w":
            target = next((s for s in order if slots.setdefault(s, _Slot()).busy <= x.arrive + eps), None)
            if target is None:
                target = p.new_scratch(g)
                order.append(target)
                slots[target] = _Slot()
            state = slots[target]
            deps = ([state.writer] if state.writer else []) + state.reads
            if x.op == REDUCE and current is not None:
                p.recv_type[x.id], p.recv_src[x.id] = "rrc", current
                deps += [slots[current].writer] if slots[current].writer else []
            else:
                p.recv_type[x.id] = "r"
            p.write[x.id] = target
            p.deps[("r", x.id)] = _unique(deps)
            slots[target] = _Slot(("r", x.id))
            current = target
        else:
            assert current is not None, f"chunk {c} sent by GPU {g} before it holds it"
            state = slots[current]
            p.read[x.id] = current
            p.deps[("s", x.id)] = [state.writer] if state.writer else []
            state.reads.append(("s", x.id))
            state.busy = max(state.busy, x.release)
    if post is not None and current != post:
        assert current is not None, f"GPU {g} never holds chunk {c}"
        dest = slots.setdefault(post, _Slot())
        deps = _unique(([slots[current].writer] if slots[current].writer else []) +
                       ([dest.writer] if dest.writer else []) + dest.reads)
        _local(p, g, max((p.finish[d] for d in deps), default=0.0), current, post, deps)


def _local(p: SlotPlan, g: int, key: float, src: Ref, dst: Ref, deps: list[Event]) -> None:
    step = Local(g, len(p.locals), key, src, dst)
    p.locals.append(step)
    event = ("l", g, step.index)
    p.key[event] = p.finish[event] = key
    p.deps[event] = deps


def _unique(events: list[Event]) -> list[Event]:
    return list(dict.fromkeys(events))
