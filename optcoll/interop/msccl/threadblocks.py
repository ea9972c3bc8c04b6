"""Thread blocks, channels, step order, fusion and dependencies for an MSCCL export.

Rules (FIELD-NOTES.md section 5): a thread block has at most one send peer and one receive peer
on one channel, and each (peer, channel, direction) belongs to exactly one thread block. Channel
= lane: the i-th of the parallel links between two GPUs (DGX-1's double NVLinks) is channel i.
Steps of a block are ordered by when they happen in the schedule (a receive at its arrival, a
send at its start; receives first at equal times, then transfer id), so both ends of every
connection list it in the same FIFO order: each link's transfers are sequential in time.

Every connection gets a block of its own, except that a receive and the send that forwards the
same chunk at the instant it arrives, on the same channel, fuse into one ``rcs``/``rrcs`` step
and put their two connections into one block — only when the merged block still runs every step
at its scheduled time and no other block waiting on the receive would be held up by the send,
so the export never runs slower than the schedule.

Dependencies on the same block are implied by order; on another block, only the latest step of
each is kept, and one already implied by an earlier wait of the block is dropped (MSCCL flags
are monotonic). A step left with several becomes nops, one dependency each, before the step,
which keeps the last itself (the executor requires that). ``hasdep=1`` marks waited-on steps.

A runtime runs at most ``max_steps`` steps per block (the executor: 64). When a block would hold
more, the blocks are built again without fusion and every connection is cut into segments of
consecutive transfers, segment j on channel ``lane + j·links`` (``links``: parallel links between
the two GPUs, so the channel still maps to its lane), both ends cut alike; the first send of a
segment waits for the last of the one before, so the link carries them in the same order. Local
copies are cut into blocks the same way. Segments shrink until every block fits (nops count).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from optcoll.errors import InputError
from optcoll.interop.msccl.ir import Gpu, Step, ThreadBlock
from optcoll.interop.msccl.layout import BufferLayout
from optcoll.interop.msccl.plan import Event, SlotPlan, Xfer


@dataclass
class _Item:
    """One step to be: a send, a receive, a fused receive+send, or a local copy."""

    events: tuple[Event, ...]
    key: float
    cls: int  # 0: receives (and fused), 1: sends, 2: local
    order: int
    finish: float
    recv: Xfer | None = None
    send: Xfer | None = None
    local: int | None = None

    @property
    def sort(self) -> tuple:
        return (self.key, self.cls, self.order)


@dataclass
class _Block:
    send: int
    recv: int
    chan: int
    items: list[_Item] = field(default_factory=list)


def assign(xfers: list[Xfer], p: SlotPlan, layout: BufferLayout, combining: bool, fuse: bool, eps: float,
           max_steps: int, links: dict[tuple[int, int], int]) -> list[Gpu]:
    """The GPUs' thread blocks, every block within ``max_steps`` (see the module docstring)."""
    gpus = [_emit(g, blocks, p, layout) for g, blocks in _blocks(xfers, p, layout, combining, fuse, eps).items()]
    if _longest(gpus) <= max_steps:
        return gpus
    plain = _blocks(xfers, p, layout, combining, False, eps)
    size = max_steps
    while size >= 1:
        deps = {event: list(ds) for event, ds in p.deps.items()}
        split = {g: _split(g, blocks, size, links, deps) for g, blocks in plain.items()}
        chained = replace(p, deps=deps)
        gpus = [_emit(g, blocks, chained, layout) for g, blocks in split.items()]
        if _longest(gpus) <= max_steps:
            return gpus
        size = min(size - 1, size * max_steps // _longest(gpus))
    raise InputError(f"a thread block needs more than {max_steps} steps however its connections are cut",
                     field="schedule")


def _longest(gpus: list[Gpu]) -> int:
    return max((len(t.steps) for g in gpus for t in g.tbs), default=0)


def _split(g: int, blocks: list[_Block], size: int, links: dict[tuple[int, int], int],
           deps: dict[Event, list[Event]]) -> list[_Block]:
    out = []
    for b in blocks:
        b.items.sort(key=lambda it: it.sort)
        pair = (g, b.send) if b.send >= 0 else (b.recv, g)
        stride = links.get(pair, 1)
        segments = [b.items[k:k + size] for k in range(0, len(b.items), size)]
        for j, items in enumerate(segments):
            local = b.send < 0 and b.recv < 0
            out.append(_Block(b.send, b.recv, b.chan if local else b.chan + j * stride, list(items)))
            if j and b.send >= 0:
                deps[items[0].events[0]].append(segments[j - 1][-1].events[0])
    return out


def _blocks(xfers: list[Xfer], p: SlotPlan, layout: BufferLayout, combining: bool, fuse: bool, eps: float
            ) -> dict[int, list[_Block]]:
    blocks: dict[int, list[_Block]] = {g: [] for g in range(layout.num_gpus)}
    conns: dict[tuple[int, int, int], list[Xfer]] = {}  # (src, dst, lane): one link, in order
    for x in sorted(xfers, key=lambda x: (x.start, x.id)):
        conns.setdefault((x.u, x.v, x.lane), []).append(x)
    dependents: dict[Event, list[Event]] = {}
    for event, deps in p.deps.items():
        for d in deps:
            dependents.setdefault(d, []).append(event)
    taken: set[tuple[str, tuple[int, int, int]]] = set()
    if fuse:
        for g, block in _fusions(xfers, p, conns, dependents, combining, eps):
            blocks[g].append(block)
            taken.add(("s", (g, block.send, block.chan)))
            taken.add(("r", (block.recv, g, block.chan)))
    for conn, xs in sorted(conns.items()):
        if ("s", conn) not in taken:
            blocks[conn[0]].append(_Block(conn[1], -1, conn[2], [_send(x) for x in xs]))
        if ("r", conn) not in taken:
            blocks[conn[1]].append(_Block(-1, conn[0], conn[2], [_recv(x) for x in xs]))
    local_blocks: dict[int, _Block] = {}
    for local in p.locals:
        if local.gpu not in local_blocks:
            local_blocks[local.gpu] = _Block(-1, -1, 0)
            blocks[local.gpu].append(local_blocks[local.gpu])
        local_blocks[local.gpu].items.append(
            _Item((("l", local.gpu, local.index),), local.key, 2, local.index, local.key,
                  local=local.index))
    return blocks


def _send(x: Xfer) -> _Item:
    return _Item((("s", x.id),), x.start, 1, x.id, x.release, send=x)


def _recv(x: Xfer) -> _Item:
    return _Item((("r", x.id),), x.arrive, 0, x.id, x.arrive, recv=x)


def _fusions(xfers, p: SlotPlan, conns, dependents, combining: bool, eps: float):
    """Blocks that each join one receive connection and one send connection of a GPU."""
    candidates: dict[tuple, dict[int, list[Xfer]]] = {}  # (recv conn, send conn) -> recv -> sends
    into: dict[tuple[int, int, int], list[Xfer]] = {}  # (gpu, chunk, lane) -> receives
    for x in xfers:
        into.setdefault((x.v, x.chunk, x.lane), []).append(x)
    for y in sorted(xfers, key=lambda x: (x.start, x.id)):
        for x in into.get((y.u, y.chunk, y.lane), ()):
            if abs(x.arrive - y.start) > eps or p.write[x.id] != p.read[y.id] and combining:
                continue
            if combining and p.deps[("s", y.id)] != [("r", x.id)]:
                continue
            pair = ((x.u, x.v, x.lane), (y.u, y.v, y.lane))
            candidates.setdefault(pair, {}).setdefault(x.id, []).append(y)
    used: set[tuple[str, tuple]] = set()
    ranked = sorted(candidates.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    for (rconn, sconn), options in ranked:
        if ("r", rconn) in used or ("s", sconn) in used:
            continue
        block = _try_merge(rconn, sconn, options, p, conns[sconn], conns[rconn], dependents, eps)
        if block is not None:
            used.update({("r", rconn), ("s", sconn)})
            yield rconn[1], block


def _try_merge(rconn, sconn, options, p: SlotPlan, sends: list[Xfer], recvs: list[Xfer], dependents,
               eps: float) -> _Block | None:
    paired: dict[int, Xfer] = {}
    taken: set[int] = set()
    for x in recvs:
        y = next((y for y in options.get(x.id, ()) if y.id not in taken), None)
        if y is not None:
            paired[x.id] = y
            taken.add(y.id)
    items = []
    for x in recvs:
        if x.id in paired:
            y = paired[x.id]
            items.append(_Item((("r", x.id), ("s", y.id)), x.arrive, 0, x.id, y.release, recv=x, send=y))
        else:
            items.append(_recv(x))
    items += [_send(y) for y in sends if y.id not in taken]
    items.sort(key=lambda it: it.sort)
    ready = 0.0
    members = {e for it in items for e in it.events}
    for it in items:
        if ready > it.key + eps:
            return None  # merging would hold this step up
        ready = max(ready, it.finish)
        if it.send is not None and it.recv is not None:
            for e in dependents.get(("r", it.recv.id), ()):
                if e not in members and p.key[e] < it.finish - eps:
                    return None  # another block needs the receive before the send is done
    return _Block(sconn[1], rconn[0], sconn[2], items)


def _emit(g: int, blocks: list[_Block], p: SlotPlan, layout: BufferLayout) -> Gpu:
    blocks.sort(key=lambda b: (b.send == -1 and b.recv == -1, b.send, b.recv, b.chan))
    where: dict[Event, tuple[int, int]] = {}  # event -> (block, ordinal)
    for t, b in enumerate(blocks):
        b.items.sort(key=lambda it: it.sort)
        for k, it in enumerate(b.items):
            for e in it.events:
                where[e] = (t, k)
    waits: list[list[list[tuple[int, int]]]] = []  # block -> item -> [(block, ordinal)]
    for t, b in enumerate(blocks):
        done: dict[int, int] = {}
        per_item = []
        for k, it in enumerate(b.items):
            latest: dict[int, int] = {}
            for e in it.events:
                for d in p.deps.get(e, ()):
                    tb, ordinal = where[d]
                    if tb == t:
                        assert ordinal < k or d in it.events, "a dependency ordered after its step"
                        continue
                    latest[tb] = max(latest.get(tb, -1), ordinal)
            need = sorted((tb, o) for tb, o in latest.items() if o > done.get(tb, -1))
            for tb, o in need:
                done[tb] = o
            per_item.append(need)
        waits.append(per_item)
    index = [[0] * len(b.items) for b in blocks]  # ordinal -> step index after nops
    for t, b in enumerate(blocks):
        s = 0
        for k in range(len(b.items)):
            s += max(len(waits[t][k]) - 1, 0)
            index[t][k] = s
            s += 1
    signalled = {(tb, index[tb][o]) for per in waits for need in per for tb, o in need}
    tbs = []
    for t, b in enumerate(blocks):
        steps: list[Step] = []
        for k, it in enumerate(b.items):
            need = [(tb, index[tb][o]) for tb, o in waits[t][k]]
            for tb, s in need[:-1]:
                steps.append(Step(len(steps), "nop", "i", -1, "o", -1, 0, tb, s, 0))
            depid, deps = need[-1] if need else (-1, -1)
            steps.append(_step(it, len(steps), depid, deps, int((t, len(steps)) in signalled), p))
        tbs.append(ThreadBlock(t, b.send, b.recv, b.chan, tuple(steps)))
    return Gpu(g, layout.input_chunks, layout.output_chunks, p.scratch.get(g, 0), tuple(tbs))


def _step(it: _Item, s: int, depid: int, deps: int, hasdep: int, p: SlotPlan) -> Step:
    def make(kind: str, src, dst) -> Step:
        return Step(s, kind, src[0], src[1], dst[0], dst[1], 1, depid, deps, hasdep)

    x, y = it.recv, it.send
    if it.local is not None:
        local = p.locals[it.local]
        return make("cpy", local.src, local.dst)
    if x is None:  # plain send: dst names where the receiver puts it
        return make("s", p.read[y.id], p.write[y.id])
    reduces = p.recv_type[x.id] == "rrc"
    src = p.recv_src[x.id] if reduces else p.read[x.id]  # r/rcs: src names the sender's slot
    kind = ("rrc" if reduces else "r") if y is None else ("rrcs" if reduces else "rcs")
    return make(kind, src, p.write[x.id])
