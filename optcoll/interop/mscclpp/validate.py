"""The structural load-time checks of an MSCCL++ plan, as the executor of microsoft/mscclpp 1f5f065
would meet them (``execution_plan.cc``, ``executor.cc``, ``execution_common.hpp``).

Every check names the element; ``check_plan`` raises the first as an ``InputError`` (the executor
would throw, index out of bounds or hang) and returns notes that do not stop a run. Size-dependent
checks (alignment, chunk divisibility, message-size range) are ``geometry.sizes_for``'s.

* GPU ``id`` equal to its position (``loadExecutionPlan``: "GPU rank does not match"); thread-block
  ids 0..k-1 (they index vectors of k entries);
* channel peers and remote-buffer ranks are other GPUs of the plan; a thread block's channels and
  remote buffers exist on its GPU, at most ``MAX_CHANNEL`` (16) of each kind: the device plan
  holds 16 channel handles per type and 16 remote buffers per memory and per port channels
  (``Channels``, ``RemoteBuffers``), filled without a bound check in ``setupDeviceExecutionPlan``;
* every op: its ``channel_ids`` (at most ``MAX_CHANNEL_PER_OPERATION``, 8) in its thread block's
  list for the op's channel type, its ``buffer_id``s in the thread block's remote buffers of that
  type, its ``switch_channel_id``s in its switch channels, ``index + size`` within the buffer's
  chunks (of the GPU that owns it), its semaphores on the GPU (``semaphore_ids``, at most 16) and
  at most ``MAX_OPERATION`` (64) ops per thread block, a pipeline counting one plus its inner ops
  (``setupDeviceExecutionPlan``);
* paired channels: the executor pairs GPU u's k-th memory (port) channel to v with v's k-th to u.
  A channel without a partner is only padded at set-up (``getUnpairedChannelInfos``); a signal or
  wait on one is never matched, so a plan that signals or waits on an unpaired channel is refused.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from optcoll.errors import InputError
from optcoll.interop.mscclpp.schema import (MAX_CHANNEL, MAX_CHANNEL_PER_OPERATION, MAX_DEVICE_SEMAPHORES,
                                            MAX_OPERATION, BufRef, PlanGpu, Op, ExecutionPlan, Threadblock)

SIGNALLING = ("signal", "wait", "rlxsignal", "rlxwait", "pws", "pwsf", "flush")


@dataclass(frozen=True)
class ChannelEnd:
    """A memory or port channel of ``gpu`` to ``peer``: the ``k``-th of its type between them."""

    gpu: int
    peer: int
    kind: str
    k: int
    where: str


def channel_ends(gpu: PlanGpu, kind: str) -> list[ChannelEnd]:
    """The GPU's channels of one type, numbered as the executor numbers them."""
    seen: Counter = Counter()
    out = []
    for ch, peer in gpu.numbered(kind):
        out.append(ChannelEnd(gpu.id, peer, kind, seen[peer], ch.where))
        seen[peer] += 1
    return out


def op_channel(plan: ExecutionPlan, gpu: PlanGpu, tb: Threadblock, op: Op, i: int,
               known: dict[tuple[int, str], list[ChannelEnd]] | None = None) -> ChannelEnd:
    """The channel end an op's ``channel_ids[i]`` names (after ``check_plan``). ``known``: the
    GPUs' ``channel_ends`` by (GPU, type) as far as numbered, filled in here, for callers that
    ask for every op of a large plan (numbering them each time is quadratic in its channels)."""
    kind = op.channel_type
    if known is None:
        ends = channel_ends(gpu, kind)
    else:
        ends = known.get((gpu.id, kind)) or known.setdefault((gpu.id, kind), channel_ends(gpu, kind))
    return ends[tb.channels[kind][op.channel_ids[i]]]


def remote_of(gpu: PlanGpu, tb: Threadblock, op: Op, ref: BufRef):
    """The remote buffer (``RemoteBuffer``) a ``buffer_id`` reference names."""
    return gpu.remote_buffers[tb.buffers[op.channel_type][ref.buffer_id]]


def switch_of(gpu: PlanGpu, tb: Threadblock, ref: BufRef) -> tuple[str, tuple[int, ...], int]:
    """(buffer type, member GPUs, chunks) of the switch channel a ``switch_channel_id`` names."""
    channel, group = gpu.numbered("switch")[tb.channels["switch"][ref.switch_channel_id]]
    size, ranks = channel.groups[group]
    return channel.buffer_type, ranks, size


class _Checker:
    def __init__(self, plan: ExecutionPlan):
        self.plan = plan
        self.notes: list[str] = []

    def fail(self, where: str, message: str) -> InputError:
        return InputError(message, source=self.plan.source, field=where)

    def run(self) -> list[str]:
        n = len(self.plan.gpus)
        for k, gpu in enumerate(self.plan.gpus):
            if gpu.id != k:
                raise self.fail(f"{gpu.where}.id", f"is {gpu.id}; the executor reads GPU k at position k")
            for ch in gpu.channels:
                for peer in ch.peers:
                    if not 0 <= peer < n or peer == k:
                        raise self.fail(f"{ch.where}.connected_to", f"peer {peer} is not another GPU of the plan "
                                                                     f"(0..{n - 1}, not {k})")
                for size, ranks in ch.groups:
                    if k not in ranks or any(not 0 <= r < n for r in ranks) or len(set(ranks)) != len(ranks):
                        raise self.fail(f"{ch.where}.rank_groups", f"ranks {list(ranks)} must be distinct GPUs of "
                                                                   f"the plan including GPU {k}")
            for rb in gpu.remote_buffers:
                if not 0 <= rb.rank < n or rb.rank == k:
                    raise self.fail(f"{rb.where}.rank", f"{rb.rank} is not another GPU of the plan")
            ids = sorted(tb.id for tb in gpu.threadblocks)
            if ids != list(range(len(ids))):
                raise self.fail(f"{gpu.where}.threadblocks", f"ids {ids} are not 0..{len(ids) - 1}")
            for tb in gpu.threadblocks:
                self.threadblock(gpu, tb)
        self.pairs()
        return self.notes

    def threadblock(self, gpu: PlanGpu, tb: Threadblock) -> None:
        for kind, numbers in tb.channels.items():
            have = len(gpu.numbered(kind)) if kind != "none" else 0
            for c in numbers:
                if c >= have:
                    raise self.fail(f"{tb.where}.channels", f"{kind} channel {c} does not exist (GPU {gpu.id} has "
                                                            f"{have})")
            if len(numbers) > MAX_CHANNEL:
                raise self.fail(f"{tb.where}.channels", f"{len(numbers)} {kind} channels; the executor holds "
                                                        f"{MAX_CHANNEL} per thread block")
        for kind, buffers in tb.buffers.items():
            if len(buffers) > MAX_CHANNEL:
                raise self.fail(f"{tb.where}.remote_buffer_refs", f"{len(buffers)} remote buffers for {kind} channels; "
                                                                  f"the executor holds {MAX_CHANNEL} per thread block and "
                                                                  "channel type (RemoteBuffers in execution_common.hpp)")
            for b in buffers:
                if b >= len(gpu.remote_buffers) or kind not in gpu.remote_buffers[b].access:
                    raise self.fail(f"{tb.where}.remote_buffer_refs", f"remote buffer {b} does not exist on GPU "
                                                                      f"{gpu.id} with {kind} access")
        count = sum(1 + len(op.inner) for op in tb.ops)
        if count > MAX_OPERATION:
            raise self.fail(f"{tb.where}.ops", f"{count} operations; the executor holds {MAX_OPERATION} per thread "
                                               "block (a pipeline counts one plus its inner ops)")
        for op in tb.ops:
            for o in (op, *op.inner):
                self.op(gpu, tb, o)

    def op(self, gpu: PlanGpu, tb: Threadblock, op: Op) -> None:
        listed = tb.channels.get(op.channel_type or "", ())
        if len(op.channel_ids) > MAX_CHANNEL_PER_OPERATION:
            raise self.fail(f"{op.where}.channel_ids", f"{len(op.channel_ids)} channels; an op holds "
                                                       f"{MAX_CHANNEL_PER_OPERATION}")
        for c in op.channel_ids:
            if c >= len(listed):
                raise self.fail(f"{op.where}.channel_ids", f"channel {c} is out of range: thread block {tb.id} lists "
                                                           f"{len(listed)} {op.channel_type} channel(s)")
        if op.name in SIGNALLING and op.channel_type not in ("memory", "port"):
            raise self.fail(f"{op.where}.channel_type", f"{op.name} needs a memory or port channel")
        for ref in op.src + op.dst:
            self.ref(gpu, tb, op, ref)
        if len(op.semaphore_ids) > MAX_DEVICE_SEMAPHORES:
            raise self.fail(f"{op.where}.semaphore_ids", f"more than {MAX_DEVICE_SEMAPHORES} semaphores")
        for s in op.semaphore_ids:
            if s >= len(gpu.semaphores):
                raise self.fail(f"{op.where}.semaphore_ids", f"semaphore {s} does not exist (GPU {gpu.id} has "
                                                             f"{len(gpu.semaphores)})")
        if op.name == "barrier" and (op.barrier_id is None or op.num_threadblocks is None):
            raise self.fail(op.where, "a barrier needs barrier_id and num_threadblocks")

    def ref(self, gpu: PlanGpu, tb: Threadblock, op: Op, ref: BufRef) -> None:
        if ref.switch_channel_id is not None:
            listed = tb.channels.get("switch", ())
            if ref.switch_channel_id >= len(listed):
                raise self.fail(f"{ref.where}.switch_channel_id", f"switch channel {ref.switch_channel_id} is out "
                                                                  f"of range: thread block {tb.id} lists {len(listed)}")
            buf, ranks, size = switch_of(gpu, tb, ref)
            owners = [self.plan.gpus[r] for r in ranks]
        elif ref.buffer_id is not None:
            listed = tb.buffers.get(op.channel_type or "", ())
            if ref.buffer_id >= len(listed):
                raise self.fail(f"{ref.where}.buffer_id", f"remote buffer {ref.buffer_id} is out of range: thread "
                                                          f"block {tb.id} lists {len(listed)} for {op.channel_type} "
                                                          "channels")
            rb = remote_of(gpu, tb, op, ref)
            buf, owners = rb.type, [self.plan.gpus[rb.rank]]
        else:
            buf, owners = ref.type, [gpu]
        for owner in owners:
            have = owner.chunks(buf)
            if ref.index + ref.size > have:
                raise self.fail(f"{ref.where}.index", f"chunks {ref.index}..{ref.index + ref.size - 1} are out of "
                                                      f"range: buffer {buf} of GPU {owner.id} has {have} chunk(s)")

    def pairs(self) -> None:
        known = {(g.id, kind): channel_ends(g, kind) for g in self.plan.gpus for kind in ("memory", "port")}
        ends = {(e.gpu, e.peer, e.kind, e.k): e for numbered in known.values() for e in numbered}
        for gpu in self.plan.gpus:
            for tb in gpu.threadblocks:
                for op in (o for top in tb.ops for o in (top, *top.inner)):
                    if op.name not in SIGNALLING:
                        continue
                    for i in range(len(op.channel_ids)):
                        e = op_channel(self.plan, gpu, tb, op, i, known)
                        if (e.peer, e.gpu, e.kind, e.k) not in ends:
                            have = sum(1 for k in ends if k[:3] == (e.peer, e.gpu, e.kind))
                            raise self.fail(e.where, f"{e.kind} channel to GPU {e.peer} has no partner (GPU {e.peer} "
                                                     f"lists {have} {e.kind} channel(s) to GPU {e.gpu}), so the {op.name} "
                                                     f"at {op.where} is never matched")


def check_plan(plan: ExecutionPlan) -> list[str]:
    """Raises the first structural problem (``InputError`` naming the element); returns notes."""
    return _Checker(plan).run()
