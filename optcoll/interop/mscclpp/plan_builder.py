"""Thread blocks, channels and semaphores of an MSCCL++ plan built from a schedule's GPU view.

Per GPU (``gpuview.View``):

* a *sender* thread block per first link its puts leave on (its port into an NVSwitch, a NIC, a
  direct link), its puts in the schedule's start order (``PUTS_PER_BLOCK`` per block, the next
  block of the link starting after the last put of the one before), each ``put`` then ``signal`` on a memory
  channel, ``pws`` (put with signal) on a port channel (a route over a NIC). One block per link
  keeps that link's order the schedule's: a memory put holds its block until its data has left;
* a *receiver* thread block per sender block that writes to the GPU, waiting for each of its
  signals in order and doing what the arrival needs locally (``re``: add the previous value to a
  reduce's arrival; ``copy``: the final value into the output); every signal is waited for once;
* an *NVLS* block per in-switch reduction on its issuer: ``glres``, then a signal to every
  other member's receiver block.

Data dependencies between blocks of one GPU are device semaphores (``sem_release`` after the
event, ``sem_acquire`` before the op that needs it): one semaphore per (producer, consumer) pair
of blocks, the k-th acquire waiting for the k-th release, so a consumer keeps only dependencies
beyond the latest it already waited for (releases are in order). Between GPUs they are the
signal/wait pairs. Channels pair one block on each side (a channel's device handle counts its
own signals and waits): channel (sender block, receiver block), listed by both GPUs in one global
order, so the executor's k-th channel of u to v is v's k-th to u (``validate.py``).

Every version of a value has its own buffer slot (``slots``), so no slot is overwritten while a
peer may still read it and no write-after-read waits are needed.

LL plans (``packets``) keep the blocks and channels and change the ops: a put is ``ppkt`` (plain
data to packets in the receiver's scratch), ``rppkt`` (forward packets received, after their
flags), or ``cpkt`` + ``ppkt`` over a port channel; the receiver polls the packets' flags instead
of waiting for a signal, and only unpacks (``upkt``) or adds (``repkt``) them where plain data is
needed (``_packet_slots``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from optcoll.errors import InputError
from optcoll.interop.mscclpp.gpuview import Nvls, Put, Version, View
from optcoll.interop.mscclpp.schema import MAX_CHANNEL, MAX_CHANNEL_PER_OPERATION, MAX_OPERATION
from optcoll.schedules.schedule import REDUCE

Slot = tuple[str, int]


@dataclass(eq=False)
class Action:
    """One step of a thread block: ``ops`` (JSON with symbolic references), the events it waits
    for (other actions) and, filled in later, the semaphores it acquires and releases."""

    ops: list[dict]
    key: tuple
    needs: list["Action"] = field(default_factory=list)
    tb: "Block | None" = None
    acquire: list[tuple] = field(default_factory=list)
    release: list[tuple] = field(default_factory=list)


@dataclass(eq=False)
class Block:
    gpu: int
    name: str
    actions: list[Action] = field(default_factory=list)
    id: int = -1
    part: int = 0  # a sender's link split over blocks: which one


#: Puts per sender block: each a put and a signal (or a pws) with a semaphore acquire and release
#: at most, and each answered by at most four ops of its receiver block (wait, re, copy, release),
#: within ``MAX_OPERATION`` (64) either way; each put names one remote buffer, so a block also
#: stays within the executor's 16 remote buffers per channel type.
PUTS_PER_BLOCK = 15


@dataclass(eq=False)
class PlannedChannel:
    """A memory or port channel: sender block ``a`` (GPU a.gpu) signals, block ``b`` waits."""

    a: Block
    b: Block
    kind: str
    order: int


@dataclass
class Built:
    blocks: dict[int, list[Block]]
    channels: list[PlannedChannel]
    switch_groups: list[tuple[tuple[int, ...], str]]  # (members, buffer type), in order
    scratch: dict[int, int]
    semaphores: dict[int, list[tuple]]  # gpu -> (producer, consumer) pairs in id order

    def channels_of(self) -> dict[int, list[PlannedChannel]]:
        """Each block's channels (by ``id`` of the block), in channel order."""
        out: dict[int, list[PlannedChannel]] = {}
        for c in self.channels:
            out.setdefault(id(c.a), []).append(c)
            if c.b is not c.a:
                out.setdefault(id(c.b), []).append(c)
        return out


def build(view: View, n: int, pre: dict[tuple[int, int], Slot], post: dict[tuple[int, int], Slot],
          combining: bool, packets: bool = False) -> Built:
    """The plan's blocks, channels and semaphores; ``packets``: write LL packets (``packets.py``)."""
    scratch = {g: 0 for g in range(n)}
    if packets:
        staged = _packet_slots(view, pre, post, combining, scratch)
    else:
        _slots(view, pre, post, combining, scratch, n)
    plan = _Blocks(view, n, post)
    for p in sorted((p for p in view.puts if not p.covered), key=lambda p: (p.start, p.id)):
        s, chained = plan.sender(p)
        r, ch = plan.receiver(p.v, s, "port" if p.port else "memory")
        if packets:
            plan.packet_put(p, s, r, ch, chained, staged.get(id(p)))
        else:
            plan.plain_put(p, s, r, ch, chained)
    for e in sorted(view.nvls, key=lambda e: (e.start, e.id)):
        _nvls(e, plan.block(e.issuer, f"NVLS reduction of chunk {e.chunk}"), plan.receiver, plan.made_by, post)
    plan.local_copies(combining)
    plan.resolve()
    return Built(plan.blocks, plan.channels, _switch_groups(view), scratch, _semaphores(plan.blocks))


class _Blocks:
    """The thread blocks and channels of a plan as they are written, and which action makes each
    value usable (by ``id(version)``), so readers can wait for it once every action is placed."""

    def __init__(self, view: View, n: int, post: dict[tuple[int, int], Slot]):
        self.view, self.n, self.post = view, n, post
        self.blocks: dict[int, list[Block]] = {g: [] for g in range(n)}
        self.channels: list[PlannedChannel] = []
        self.made_by: dict[int, Action] = {}  # id(version) -> the action after which it is usable
        self.senders: dict[tuple[int, int], Block] = {}
        self.receivers: dict[tuple[int, int], tuple[Block, PlannedChannel]] = {}  # (gpu, id(sender block))
        self.pending: list[tuple[Action, Version, str]] = []  # (consumer, version it reads, what)

    def block(self, g: int, name: str) -> Block:
        b = Block(g, name)
        self.blocks[g].append(b)
        return b

    def receiver(self, g: int, sender: Block, kind: str) -> tuple[Block, PlannedChannel]:
        key = (g, id(sender))
        if key not in self.receivers:
            block = self.block(g, f"receive from GPU {sender.gpu} ({sender.name})")
            self.channels.append(PlannedChannel(sender, block, kind, len(self.channels)))
            self.receivers[key] = block, self.channels[-1]
        return self.receivers[key]

    def sender(self, p) -> tuple[Block, Action | None]:
        """The block that sends ``p`` on its first link, and the action it must follow: a full
        block hands its link on to the next, which starts once the last put has left."""
        key = (p.u, p.route[0])
        s = self.senders.get(key)
        if s is not None and len(s.actions) != PUTS_PER_BLOCK:
            return s, None
        self.senders[key] = self.block(p.u, f"send on link {p.route[0]}" + (f" (part {s.part + 2})" if s else ""))
        self.senders[key].part = s.part + 1 if s else 0
        return self.senders[key], s.actions[-1] if s else None

    def packet_put(self, p, s: Block, r: Block, ch: PlannedChannel, chained: Action | None, staged: Slot | None
                   ) -> None:
        send, recv = _packet_actions(p, ch, staged, _previous(self.view, p.made), s, r)
        send.needs += [chained] if chained else []
        s.actions.append(send)
        if p.src.packets is None or staged is not None:
            self.pending.append((send, p.src, f"put of chunk {p.chunk} from GPU {p.u}"))
        if recv is not None:
            r.actions.append(recv)
            self.made_by[id(p.made)] = recv
            if recv.ops[0]["name"] == "repkt":
                self.pending.append((recv, _previous(self.view, p.made), f"reduction of chunk {p.chunk} at GPU {p.v}"))

    def plain_put(self, p, s: Block, r: Block, ch: PlannedChannel, chained: Action | None) -> None:
        src = _ref(p.src.slot)
        dst = {"remote": (p.v, p.made.slot[0], ch.kind), "index": p.made.slot[1], "size": 1}
        if p.port:
            ops = [{"name": "pws", "src_buff": [src], "dst_buff": [dst], "channel": ch, "channel_type": "port"}]
        else:
            ops = [{"name": "put", "src_buff": [src], "dst_buff": [dst], "channel_type": "memory"},
                   {"name": "signal", "channel": ch, "channel_type": "memory"}]
        send = Action(ops, (p.start, p.id), tb=s, needs=[chained] if chained else [])
        s.actions.append(send)
        self.pending.append((send, p.src, f"put of chunk {p.chunk} from GPU {p.u}"))
        recv_ops = [{"name": "wait", "channel": ch, "channel_type": ch.kind}]
        recv = Action(recv_ops, (len(s.actions), p.arrive), tb=r)
        r.actions.append(recv)
        if p.op == REDUCE:
            prev = _previous(self.view, p.made)
            if prev is not None:
                recv_ops.append({"name": "re", "src_buff": [_ref(prev.slot), _ref(p.made.slot)],
                                 "dst_buff": [_ref(p.made.slot)], "reduce_op": "sum"})
                self.pending.append((recv, prev, f"reduction of chunk {p.chunk} at GPU {p.v}"))
        self.made_by[id(p.made)] = recv
        _finish(recv, p.made, self.post)

    def local_copies(self, combining: bool) -> None:
        """A value a GPU holds from the start in another slot than its output: one local copy."""
        post = self.post
        for (g, c), vs in sorted(self.view.versions.items()):
            if vs[0].maker == "pre" and post.get((g, c)) is not None and _final(vs, combining) is vs[0] \
                    and vs[0].slot != post[(g, c)]:
                local = next((b for b in self.blocks[g] if b.name == "local copies"), None) or \
                    self.block(g, "local copies")
                local.actions.append(Action([_copy(vs[0].slot, post[(g, c)])], (0.0, c), tb=local))

    def resolve(self) -> None:
        """Every reader waits for the action that made what it reads; blocks numbered per GPU."""
        for consumer, version, what in self.pending:
            if version.maker == "pre":
                continue
            producer = self.made_by.get(id(version))
            if producer is None:
                raise InputError(f"the {what} reads the NVLS sum at its issuer before the switch has written it "
                                 "back; MSCCL++'s glres gives the issuer no earlier copy", field="schedule")
            consumer.needs.append(producer)
        for g in range(self.n):
            for k, b in enumerate(self.blocks[g]):
                b.id = k


def _packet_slots(view: View, pre: dict, post: dict, combining: bool, scratch: dict[int, int]) -> dict[int, Slot]:
    """LL slots (module docstring): each put's packets land in a scratch slot of its receiver,
    ``Version.packets``; a version is plain data (``Version.slot``) only where plain data is read:
    the output for the final one, scratch for a partial sum or a value a reduction adds to. A
    port put of plain data first copies it into packets in a scratch slot of the sender (the
    returned slots, by ``id(put)``). The executor keeps scratch chunk i's packets in bytes
    [2i, 2i + 2) chunks (``size << 1``), so plain scratch slots come after every packet slot."""
    if view.nvls:
        raise InputError("the schedule reduces in a switch (NVLS): optcoll writes glres in Simple plans only; export "
                         "it with protocol Simple", field="protocol")
    for (g, c), vs in view.versions.items():
        _final(vs, combining).final = True
        for k, v in enumerate(vs):
            if v.maker == "pre":
                v.slot = pre[(g, c)]
    puts = sorted((p for p in view.puts if not p.covered), key=lambda p: (p.arrive, p.id))
    added = {id(p.made): p.op == REDUCE and _previous(view, p.made) is not None for p in puts}
    for p in puts:  # a sum's packets are its addend; a copy's (or a first value's) are the value
        p.landed = ("s", scratch[p.v])
        scratch[p.v] += 1
        p.made.packets = None if added[id(p.made)] else p.landed
    staged: dict[int, Slot] = {}
    for p in sorted(puts, key=lambda p: (p.start, p.id)):
        if p.port and p.src.packets is None:
            staged[id(p)] = ("s", scratch[p.u])
            scratch[p.u] += 1
    plain = {g: 2 * k for g, k in scratch.items()}
    packed = {id(p.src) for p in puts if id(p) in staged}
    for (g, c), vs in sorted(view.versions.items()):
        for k, v in enumerate(vs):
            if v.maker == "pre":
                continue
            reduced_onto = k + 1 < len(vs) and added[id(vs[k + 1])]
            if v.final and (g, c) in post:
                v.slot = post[(g, c)]
            elif added[id(v)] or reduced_onto or id(v) in packed:
                v.slot = ("s", plain[g])
                plain[g] += 1
    for g in scratch:
        scratch[g] = plain[g] if plain[g] > 2 * scratch[g] else scratch[g]
    return staged


def _packet_actions(p: Put, ch: PlannedChannel, staged: Slot | None, prev: Version | None, s: Block, r: Block
                    ) -> tuple[Action, Action | None]:
    """The LL send of one put and what its receiver does: the sender writes packets into the
    receiver's scratch (``ppkt`` from plain data, ``rppkt`` forwarding packets it received, which
    waits for their flags; over a port channel packets only, so plain data is first copied into
    packets, ``cpkt``); the receiver needs no signal, it unpacks (``upkt``) or adds (``repkt``) the
    packets where plain data is wanted, and nothing else."""
    landed = p.landed
    dst = {"remote": (p.v, landed[0], ch.kind), "index": landed[1], "size": 1}
    if staged is not None:
        ops = [{"name": "cpkt", "src_buff": [_ref(p.src.slot)], "dst_buff": [_ref(staged)]},
               {"name": "ppkt", "src_buff": [_ref(staged)], "dst_buff": [dst], "channel": ch, "channel_type": "port"}]
    elif p.src.packets is not None:
        ops = [{"name": "rppkt", "src_buff": [_ref(p.src.packets)], "dst_buff": [dst], "channel": ch,
                "channel_type": ch.kind}]
    else:
        ops = [{"name": "ppkt", "src_buff": [_ref(p.src.slot)], "dst_buff": [dst], "channel": ch,
                "channel_type": ch.kind}]
    send = Action(ops, (p.start, p.id), tb=s)
    if p.made.slot is None:
        return send, None
    if p.made.packets is None:  # added to what the receiver held
        op = {"name": "repkt", "src_buff": [_ref(prev.slot), _ref(landed)], "dst_buff": [_ref(p.made.slot)],
              "reduce_op": "sum"}
    else:
        op = {"name": "upkt", "src_buff": [_ref(landed)], "dst_buff": [_ref(p.made.slot)]}
    return send, Action([op], (len(s.actions), p.arrive), tb=r)


def add_handshake(built: Built) -> None:
    """A start handshake in every thread block that has channels, as the DSL's Simple plans begin:
    a relaxed signal on each of its channels, then a relaxed wait on each, so no GPU writes into a
    peer before the peer's kernel runs (``MAX_CHANNEL_PER_OPERATION`` channels per op). On each
    channel the first signal and the first wait are then the handshake's."""
    channels = built.channels_of()
    for tbs in built.blocks.values():
        for tb in tbs:
            mine = channels.get(id(tb), [])
            ops = []
            for name in ("rlxsignal", "rlxwait"):
                for kind in ("memory", "port"):
                    of_kind = [c for c in mine if c.kind == kind]
                    for k in range(0, len(of_kind), MAX_CHANNEL_PER_OPERATION):
                        ops.append({"name": name, "channels": of_kind[k:k + MAX_CHANNEL_PER_OPERATION],
                                    "channel_type": kind})
            if ops:
                tb.actions.insert(0, Action(ops, (-1.0,), tb=tb))


def _nvls(e: Nvls, tb: Block, receiver, made_by: dict[int, Action], post: dict) -> None:
    src = e.sources[0].slot
    dst = e.made[e.issuer].slot
    ops = [{"name": "glres", "src_buff": [{"switch": (tuple(sorted(e.members)), src[0]), "index": src[1], "size": 1}],
            "dst_buff": [{"switch": (tuple(sorted(e.members)), dst[0]), "index": dst[1], "size": 1}],
            "channel_type": "switch", "reduce_op": "sum"}]
    act = Action(ops, (e.start, e.id), tb=tb)
    tb.actions.append(act)
    made_by[id(e.made[e.issuer])] = None  # the issuer's copy comes back through the switch: no event
    mine = e.made[e.issuer]
    if mine.final and post.get((mine.gpu, mine.chunk)) not in (None, mine.slot):
        raise InputError(f"the sum of chunk {e.chunk} must end in GPU {e.issuer}'s output, but glres writes it "
                         "where every member keeps it and the issuer learns of no arrival to copy it after",
                         field="schedule")
    for m in sorted(e.members):
        if m == e.issuer:
            continue
        r, ch = receiver(m, tb, "memory")
        ops.append({"name": "signal", "channel": ch, "channel_type": "memory"})
        got = Action([{"name": "wait", "channel": ch, "channel_type": "memory"}], (len(tb.actions), 0.0), tb=r)
        r.actions.append(got)
        made_by[id(e.made[m])] = got
        _finish(got, e.made[m], post)
    _merge_signals(ops)


def _merge_signals(ops: list[dict]) -> None:
    """Signals after a glres, up to ``MAX_CHANNEL_PER_OPERATION`` channels per op."""
    signals = [o for o in ops if o["name"] == "signal"]
    del ops[1:]
    for k in range(0, len(signals), MAX_CHANNEL_PER_OPERATION):
        ops.append({"name": "signal", "channels": [o["channel"] for o in signals[k:k + MAX_CHANNEL_PER_OPERATION]],
                    "channel_type": "memory"})


def _finish(act: Action, v: Version, post: dict) -> None:
    """The final value into its output slot, when it was made elsewhere."""
    want = post.get((v.gpu, v.chunk))
    if v.final and want is not None and v.slot != want:
        act.ops.append(_copy(v.slot, want))


def _copy(a: Slot, b: Slot) -> dict:
    return {"name": "copy", "src_buff": [_ref(a)], "dst_buff": [_ref(b)]}


def _ref(slot: Slot) -> dict:
    return {"type": slot[0], "index": slot[1], "size": 1}


def _previous(view: View, v: Version) -> Version | None:
    vs = view.versions[(v.gpu, v.chunk)]
    k = vs.index(v)
    return vs[k - 1] if k else None


def _final(vs: list[Version], combining: bool) -> Version:
    """The version that must end in the output: the last (combining), else the first (a copy
    never changes, later arrivals only repeat it)."""
    return vs[-1] if combining else vs[0]


def _slots(view: View, pre: dict, post: dict, combining: bool, scratch: dict[int, int], n: int) -> None:
    """A slot per version: the input for the precondition, the output for the final one (when
    no other version is there first), scratch for the rest; an NVLS sum at one index on every
    member (the output when it is final everywhere, else scratch)."""

    def fresh(g: int) -> Slot:
        scratch[g] += 1
        return ("s", scratch[g] - 1)

    for (g, c), vs in view.versions.items():
        final = _final(vs, combining)
        final.final = True
        for v in vs:
            if v.maker == "pre":
                v.slot = pre[(g, c)]
            elif isinstance(v.maker, Put):
                v.slot = post[(g, c)] if v is final and (g, c) in post else fresh(g)
    for e in sorted(view.nvls, key=lambda e: (e.start, e.id)):
        slots = {s.slot for s in e.sources}
        if len(slots) != 1 or any(s.maker != "pre" for s in e.sources):
            raise InputError(f"the in-switch reduction of chunk {e.chunk} adds values from different buffer slots "
                             "or partial sums; MSCCL++'s glres reduces one slot of every member's input",
                             field="schedule")
        members = sorted(e.members)
        for m in members:
            if m not in e.made:
                e.made[m] = Version(m, e.chunk, e.mask, e, 0.0)
        outs = {post.get((m, e.chunk)) for m in members}
        if all(e.made[m].final for m in members) and len(outs) == 1 and None not in outs:
            slot = outs.pop()
        else:
            index = max(scratch[m] for m in members)
            for m in members:
                scratch[m] = index + 1
            slot = ("s", index)
        for m in members:
            e.made[m].slot = slot


def _switch_groups(view: View) -> list[tuple[tuple[int, ...], str]]:
    out: list[tuple[tuple[int, ...], str]] = []
    for e in sorted(view.nvls, key=lambda e: (e.start, e.id)):
        members = tuple(sorted(e.members))
        for buf in (e.sources[0].slot[0], e.made[e.issuer].slot[0]):
            if (members, buf) not in out:
                out.append((members, buf))
    return out


def _semaphores(blocks: dict[int, list[Block]]) -> dict[int, list[tuple]]:
    """Dependencies within a GPU across blocks as semaphores (module docstring)."""
    out: dict[int, list[tuple]] = {}
    for g, tbs in blocks.items():
        pairs: list[tuple] = []
        for tb in tbs:
            latest: dict[int, int] = {}  # producer block id -> latest position waited for
            for act in tb.actions:
                for need in act.needs:
                    if need.tb is tb:
                        if tb.actions.index(need) >= tb.actions.index(act):
                            raise InputError(f"GPU {g}: {tb.name} would wait for its own later step (arrivals "
                                             "reordered on one route)", field="schedule")
                        continue
                    pos = need.tb.actions.index(need)
                    if pos <= latest.get(need.tb.id, -1):
                        continue
                    latest[need.tb.id] = pos
                    pair = (need.tb.id, tb.id)
                    if pair not in pairs:
                        pairs.append(pair)
                    need.release.append(pair)
                    act.acquire.append(pair)
        out[g] = pairs
    return out


def check_limits(built: Built) -> None:
    """The executor's per-block limits (``execution_common.hpp``), named when exceeded."""
    channels = built.channels_of()
    for g, tbs in built.blocks.items():
        for tb in tbs:
            count = sum(len(a.ops) + bool(a.acquire) + bool(a.release) for a in tb.actions)
            if count > MAX_OPERATION:
                raise InputError(f"GPU {g}'s thread block '{tb.name}' needs {count} operations; the MSCCL++ "
                                 f"executor holds {MAX_OPERATION} per thread block", field="schedule")
            chans = channels.get(id(tb), [])
            if len(chans) > MAX_CHANNEL:
                raise InputError(f"GPU {g}'s thread block '{tb.name}' uses {len(chans)} channels; the MSCCL++ "
                                 f"executor holds {MAX_CHANNEL} per thread block", field="schedule")
            remote = {ref["remote"] for a in tb.actions for o in a.ops for ref in o.get("dst_buff", ()) if "remote" in ref}
            for kind in ("memory", "port"):
                count = sum(1 for _, _, k in remote if k == kind)
                if count > MAX_CHANNEL:
                    raise InputError(f"GPU {g}'s thread block '{tb.name}' writes {count} remote buffers over {kind} "
                                     f"channels; the MSCCL++ executor holds {MAX_CHANNEL} per thread block and channel "
                                     "type", field="schedule")
