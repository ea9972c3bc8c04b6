"""MSCCL++ execution plans (JSON) as read by the executor of microsoft/mscclpp 1f5f065.

The reader follows ``src/core/executor/execution_plan.cc`` (``ExecutionPlan::Impl``): its field
names, its defaults (``buffer_alignment`` 16, ``min_message_size`` 0, ``max_message_size``
2^64 - 1, ``reuse_resources`` and ``use_double_scratch_buffer`` false) and its op names
(``getOpType``). Every element is kept with its place in the file (``where``: e.g.
``gpus[0].threadblocks[1].ops[3]``) so an error names it. Keys the executor does not read are
ignored, as it ignores them; a plan in the camelCase schema that the executor read before
microsoft/mscclpp be6a941 (v0.8.0: ``inputChunks``, ``connectedTo``, ``i_buff``, ...) is refused in
one line saying so.

Channel numbering is the executor's: the memory (port, switch) channels of a GPU are numbered in
file order over every ``connected_to`` peer (every rank group), a thread block lists the ones it
uses, and an op's ``channel_ids`` index that list; likewise ``buffer_id`` indexes the thread
block's remote buffers of the op's channel type, and ``switch_channel_id`` its switch channels.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from optcoll.errors import InputError
from optcoll.inputfiles import read_json

#: The executor's op names (``getOpType``) and what each means.
OPS = {
    "nop": "__syncthreads", "barrier": "device-wide barrier of thread blocks", "put": "write to a peer",
    "pws": "put with signal (port)", "pwsf": "put with signal and flush (port)", "get": "read from a peer",
    "copy": "local copy", "signal": "signal a peer", "wait": "wait for a peer's signal",
    "flush": "flush a port channel", "re": "local reduce", "res": "reduce, then write to peers",
    "rre": "reduce with reads from peers", "rres": "reduce with reads from peers, then write to peers",
    "ppkt": "put packets", "rppkt": "forward received packets", "respkt": "reduce packets, write to peers",
    "cpkt": "copy into packets", "upkt": "unpack packets", "repkt": "reduce packets",
    "recpkt": "reduce packets, keep a packet copy", "recspkt": "reduce packets, keep a copy, write to peers",
    "glres": "switch load-reduce, multicast store (NVLS)", "gstore": "multicast store (NVLS)",
    "gstorepkt": "multicast store of packets (NVLS)", "rlxsignal": "relaxed signal", "rlxwait": "relaxed wait",
    "pipeline": "loop over units", "sem_acquire": "acquire a semaphore", "sem_release": "release a semaphore",
}
CHANNEL_TYPES = ("memory", "port", "switch", "none")
BUFFERS = ("i", "o", "s")
PROTOCOLS = ("Simple", "LL")
#: ``execution_common.hpp`` limits.
MAX_OPERATION, MAX_CHANNEL, MAX_CHANNEL_PER_OPERATION, MAX_DEVICE_SEMAPHORES = 64, 16, 8, 16
MAX_U64 = 2**64 - 1
#: Keys of the schema the executor read before microsoft/mscclpp be6a941 (v0.8.0).
OLD_KEYS = ("inputChunks", "outputChunks", "scratchChunks", "chunkGroups", "connectedTo", "rankGroups",
            "i_buff", "o_buff", "srcbuff", "dstbuff", "i_cids", "o_cids")
OLD_SCHEMA = ("written for MSCCL++ < 0.8.0 (its camelCase plan schema, e.g. {key!r}, which the executor "
              "stopped reading in microsoft/mscclpp be6a941); regenerate it with the current DSL "
              "(python/mscclpp/language)")


@dataclass(frozen=True)
class BufRef:
    """One ``src_buff``/``dst_buff`` entry: local (``type``), a remote buffer (``buffer_id``) or a
    switch channel (``switch_channel_id``), ``size`` chunks from ``index``."""

    where: str
    index: int
    size: int
    type: str | None = None
    buffer_id: int | None = None
    switch_channel_id: int | None = None


@dataclass(frozen=True)
class Op:
    where: str
    name: str
    channel_type: str | None = None
    channel_ids: tuple[int, ...] = ()
    src: tuple[BufRef, ...] = ()
    dst: tuple[BufRef, ...] = ()
    tbg: tuple[int, int] | None = None  # (tb_id, tbg_size)
    barrier_id: int | None = None
    num_threadblocks: int | None = None
    semaphore_ids: tuple[int, ...] = ()
    unit_size: int | None = None  # pipeline
    num_chunks: int | None = None  # pipeline
    inner: tuple["Op", ...] = ()  # pipeline


@dataclass(frozen=True)
class Channel:
    where: str
    type: str
    peers: tuple[int, ...] = ()  # memory/port: connected_to
    buffer_type: str | None = None  # switch
    groups: tuple[tuple[int, tuple[int, ...]], ...] = ()  # switch: (size, ranks) per rank group


@dataclass(frozen=True)
class RemoteBuffer:
    where: str
    rank: int
    type: str
    access: tuple[str, ...]


@dataclass(frozen=True)
class Threadblock:
    where: str
    id: int
    ops: tuple[Op, ...]
    channels: dict[str, tuple[int, ...]]  # type -> the GPU's channel numbers, in order
    buffers: dict[str, tuple[int, ...]]  # channel type -> indices into the GPU's remote_buffers


@dataclass(frozen=True)
class PlanGpu:
    where: str
    id: int
    input_chunks: int
    output_chunks: int
    scratch_chunks: int
    channels: tuple[Channel, ...]
    remote_buffers: tuple[RemoteBuffer, ...]
    threadblocks: tuple[Threadblock, ...]
    semaphores: tuple[int, ...]  # initial values

    def numbered(self, kind: str) -> list[tuple[Channel, int]]:
        """The GPU's channels of one type as the executor numbers them: (entry, peer) for memory and
        port channels, (entry, rank-group index) for switch channels."""
        out = []
        for ch in self.channels:
            if ch.type == kind:
                out += [(ch, k) for k in (range(len(ch.groups)) if kind == "switch" else ch.peers)]
        return out

    def chunks(self, buf: str) -> int:
        return {"i": self.input_chunks, "o": self.output_chunks, "s": self.scratch_chunks}[buf]


@dataclass(frozen=True)
class ExecutionPlan:
    source: str
    name: str
    collective: str
    protocol: str
    inplace: bool
    gpus: tuple[PlanGpu, ...]
    buffer_alignment: int = 16
    min_message_size: int = 0
    max_message_size: int = MAX_U64
    reuse_resources: bool = False
    double_scratch: bool = False


class _Reader:
    def __init__(self, source: str):
        self.source = source

    def fail(self, where: str, message: str) -> InputError:
        return InputError(message, source=self.source, field=where)

    def get(self, obj: dict, key: str, where: str, kind: type | tuple, default: Any = ...) -> Any:
        if key not in obj:
            if default is ...:
                raise self.fail(f"{where}.{key}" if where else key, "is missing")
            return default
        value = obj[key]
        ok = isinstance(value, kind) and not (kind in (int, (int,)) and isinstance(value, bool))
        if not ok:
            name = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
            raise self.fail(f"{where}.{key}" if where else key, f"must be {name}, got {value!r}")
        return value

    def count(self, obj: dict, key: str, where: str, default: Any = ...) -> int:
        value = self.get(obj, key, where, int, default)
        if value is not None and value < 0:
            raise self.fail(f"{where}.{key}", f"must be >= 0, got {value}")
        return value

    def items(self, obj: dict, key: str, where: str, default: Any = ...) -> list[tuple[str, Any]]:
        values = self.get(obj, key, where, list, [] if default is not ... else ...)
        return [(f"{where}.{key}[{k}]" if where else f"{key}[{k}]", v) for k, v in enumerate(values)]

    def table(self, value: Any, where: str) -> dict:
        if not isinstance(value, dict):
            raise self.fail(where, f"must be an object, got {value!r}")
        return value

    def choice(self, obj: dict, key: str, where: str, allowed: tuple[str, ...], default: Any = ...) -> str:
        value = self.get(obj, key, where, str, default)
        if value is not None and value not in allowed:
            raise self.fail(f"{where}.{key}", f"unknown {key.replace('_', ' ')} {value!r}; the executor "
                                              f"reads {', '.join(allowed)}")
        return value

    def ints(self, obj: dict, key: str, where: str) -> tuple[int, ...]:
        out = []
        for w, v in self.items(obj, key, where, None):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise self.fail(w, f"must be a non-negative integer, got {v!r}")
            out.append(v)
        return tuple(out)

    # -- elements ---------------------------------------------------------------------------------

    def buf(self, value: Any, where: str) -> BufRef:
        obj = self.table(value, where)
        ref = BufRef(where, self.count(obj, "index", where), self.count(obj, "size", where),
                     self.choice(obj, "type", where, BUFFERS, None),
                     self.count(obj, "buffer_id", where, None), self.count(obj, "switch_channel_id", where, None))
        if ref.type is None and ref.buffer_id is None and ref.switch_channel_id is None:
            raise self.fail(where, "names no buffer: give type (i, o, s), buffer_id or switch_channel_id")
        return ref

    def op(self, value: Any, where: str) -> Op:
        obj = self.table(value, where)
        name = self.get(obj, "name", where, str)
        if name not in OPS:
            hint = (" (the DSL's unfused switch reduce: the executor loads it only fused with a gstore, "
                    "as glres)" if name == "glre" else "")
            raise self.fail(f"{where}.name", f"unknown op {name!r}{hint}; the executor at microsoft/mscclpp "
                                             f"1f5f065 reads {', '.join(OPS)}")
        tbg = None
        if "tbg_info" in obj:
            info = self.table(obj["tbg_info"], f"{where}.tbg_info")
            tbg = (self.count(info, "tb_id", f"{where}.tbg_info"), self.count(info, "tbg_size", f"{where}.tbg_info"))
            if not 0 <= tbg[0] < tbg[1]:
                raise self.fail(f"{where}.tbg_info", f"tb_id {tbg[0]} is not in 0..tbg_size-1 ({tbg[1]})")
        unit = chunks = None
        inner: tuple[Op, ...] = ()
        if name == "pipeline":
            ctx = self.table(self.get(obj, "iter_context", where, dict), f"{where}.iter_context")
            unit, chunks = self.count(ctx, "unit_size", f"{where}.iter_context"), self.count(ctx, "num_chunks",
                                                                                               f"{where}.iter_context")
            if unit == 0:
                raise self.fail(f"{where}.iter_context.unit_size", "must be positive")
            inner = tuple(self.op(v, w) for w, v in self.items(obj, "ops", where))
            if any(o.name == "pipeline" for o in inner):
                raise self.fail(where, "a pipeline inside a pipeline: the executor runs one level")
        return Op(where, name, self.choice(obj, "channel_type", where, CHANNEL_TYPES, None),
                  self.ints(obj, "channel_ids", where),
                  tuple(self.buf(v, w) for w, v in self.items(obj, "src_buff", where, None)),
                  tuple(self.buf(v, w) for w, v in self.items(obj, "dst_buff", where, None)),
                  tbg, self.count(obj, "barrier_id", where, None), self.count(obj, "num_threadblocks", where, None),
                  self.ints(obj, "semaphore_ids", where), unit, chunks, inner)

    def channel(self, value: Any, where: str) -> Channel:
        obj = self.table(value, where)
        kind = self.choice(obj, "channel_type", where, CHANNEL_TYPES)
        if kind != "switch":
            return Channel(where, kind, self.ints(obj, "connected_to", where))
        groups = []
        for w, g in self.items(obj, "rank_groups", where):
            g = self.table(g, w)
            groups.append((self.count(g, "size", w), self.ints(g, "ranks", w)))
        return Channel(where, kind, (), self.choice(obj, "buffer_type", where, BUFFERS), tuple(groups))

    def threadblock(self, value: Any, where: str) -> Threadblock:
        obj = self.table(value, where)
        channels: dict[str, list[int]] = {}
        for w, ch in self.items(obj, "channels", where, None):
            ch = self.table(ch, w)
            channels.setdefault(self.choice(ch, "channel_type", w, CHANNEL_TYPES), []).extend(
                self.ints(ch, "channel_ids", w))
        buffers: dict[str, list[int]] = {}
        for w, ref in self.items(obj, "remote_buffer_refs", where, None):
            ref = self.table(ref, w)
            buffers.setdefault(self.choice(ref, "access_channel_type", w, CHANNEL_TYPES), []).extend(
                self.ints(ref, "remote_buffer_ids", w))
        return Threadblock(where, self.count(obj, "id", where),
                           tuple(self.op(v, w) for w, v in self.items(obj, "ops", where)),
                           {k: tuple(v) for k, v in channels.items()}, {k: tuple(v) for k, v in buffers.items()})

    def gpu(self, value: Any, where: str) -> PlanGpu:
        obj = self.table(value, where)
        remote = []
        for w, rb in self.items(obj, "remote_buffers", where, None):
            rb = self.table(rb, w)
            access = tuple(self.choice({"t": t}, "t", f"{w}.access_channel_types[{k}]", CHANNEL_TYPES)
                           for k, t in enumerate(self.get(rb, "access_channel_types", w, list)))
            remote.append(RemoteBuffer(w, self.count(rb, "rank", w), self.choice(rb, "type", w, BUFFERS), access))
        sems = tuple(self.count(self.table(s, w), "init_value", w) for w, s in self.items(obj, "semaphores", where, None))
        return PlanGpu(where, self.count(obj, "id", where), self.count(obj, "input_chunks", where),
                   self.count(obj, "output_chunks", where), self.count(obj, "scratch_chunks", where),
                   tuple(self.channel(v, w) for w, v in self.items(obj, "channels", where, None)), tuple(remote),
                   tuple(self.threadblock(v, w) for w, v in self.items(obj, "threadblocks", where)), sems)


def _old_key(data: Any) -> str | None:
    """The first key of the old camelCase schema anywhere in the file."""
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key in OLD_KEYS:
                if key in item:
                    return key
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def parse_plan(data: Any, source: str = "plan.json") -> ExecutionPlan:
    """A plan from parsed JSON; every problem is an ``InputError`` naming ``source`` and the element."""
    r = _Reader(source)
    old = _old_key(data)
    if old is not None:
        raise InputError(OLD_SCHEMA.format(key=old), source=source)
    obj = r.table(data, "")
    gpus = tuple(r.gpu(v, w) for w, v in r.items(obj, "gpus", ""))
    if not gpus:
        raise r.fail("gpus", "lists no GPU")
    align = r.count(obj, "buffer_alignment", "", 16)
    if align == 0:
        raise r.fail("buffer_alignment", "must be positive")
    return ExecutionPlan(source, r.get(obj, "name", "", str), r.get(obj, "collective", "", str),
                r.choice(obj, "protocol", "", PROTOCOLS), r.get(obj, "inplace", "", bool), gpus, align,
                r.count(obj, "min_message_size", "", 0), r.count(obj, "max_message_size", "", MAX_U64),
                r.get(obj, "reuse_resources", "", bool, False), r.get(obj, "use_double_scratch_buffer", "", bool, False))


def read_plan(path: str | os.PathLike) -> ExecutionPlan:
    return parse_plan(read_json(path), str(path))
