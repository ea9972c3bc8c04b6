"""MSCCL-IR XML → (collective, timed schedule) on a given machine, for the shared verifier.

The file is executed as the runtime would (``execute.run``: ASAP, one FIFO per link, the k-th
send of a connection feeding its k-th receive) with optcoll's timed model supplying the times: a
channel ``c`` between GPUs u and v runs on lane ``c mod k`` of the k parallel machine links u→v,
or, when they share no link, on route ``c mod R`` of the R routes through switches between them
(``routes.py``: the GPU-only view), hop by hop, each hop a transfer of the schedule; a chunk
occupies a link for α + b/B (or b/B under ``occupancy = "serialization"``) and is delivered
α + b/B after it starts (+ γ·b when the receiver reduces). GPU g is NPU ``ranks[g]``.

A step of ``cnt`` chunks is one message in MSCCL: latency once, then cnt·b/B on the wire.
optcoll's schedules move one chunk per transfer, so it becomes cnt transfers streamed b/B apart,
each delivered α + b/B after its start: the last lands α + cnt·b/B after the first left, the time
of one message. That is valid in, and timed by, serialization occupancy (α pipelined), which is
therefore the default model of a file with any ``cnt > 1``; under link occupancy (a link held
α + b/B per chunk) the chunks would follow one another, cnt·(α + b/B).

Buffer contents are replayed over that execution to name each sent chunk: a value is (chunk id,
set of contributing GPUs), the precondition slots of the collective's layout hold each GPU's own
chunks at t = 0. Every send becomes one transfer per chunk; its op is ``reduce`` when the
receiving step reduces (rrc/rrs/rrcs), else ``copy`` — except that a chunk received by copy and
later folded into a slot holding the same chunk by a local ``re`` was, in optcoll's terms, reduced
into that GPU's value, so it becomes ``reduce`` (msccl-tools' all-pairs AllReduce receives into
scratch and reduces locally).

optcoll's model keeps one value per (chunk, NPU) and sees a delivery when it arrives; MSCCL keeps
buffers and sees it when the receiving step runs. ``problems`` lists every place where the two
part ways (a send of a value the model does not hold there, a read of an empty slot, a local
reduction of different chunks or a double count, an output slot that ends wrong): a file with
problems must be reported invalid even if the verifier accepts its schedule. Structural findings
that do not stop execution are in ``findings``; fatal ones raise ``InputError``.
"""
from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from optcoll.collectives.builtins import make_collective, make_custom
from optcoll.collectives.collective import Collective
from optcoll.errors import InputError
from optcoll.interop.msccl.execute import REDUCING_RECVS, Hop, Program, ExecutionTrace, Wire, run
from optcoll.interop.msccl.ir import RECVS, SENDS, Algo, parse_algo
from optcoll.interop.msccl.layout import (ROOTED, BufferLayout, SlotValue, chunks_from_loop, kind_of, layout_of,
                                          make_layout)
from optcoll.interop.msccl.routes import Routes, routing_view
from optcoll.interop.msccl.runtimes import Runtime, runtime_named
from optcoll.interop.msccl.validate import check, infer_root, read_for_runtime
from optcoll.instances.instance import TimeModel
from optcoll.machines.machine import Machine
from optcoll.schedules.schedule import COPY, REDUCE, Schedule, from_arrays
from optcoll.units import format_time

MAX_PROBLEMS = 50


@dataclass(frozen=True, eq=False)
class MscclImport:
    """An imported algorithm. ``completion``: when its last step finishes (seconds), which may be
    later than the schedule's verified time (local copies after the last arrival)."""

    algo: Algo
    collective: Collective
    schedule: Schedule
    ranks: tuple[int, ...]
    inplace: bool
    completion: float
    findings: tuple[str, ...]
    problems: tuple[str, ...]
    model: TimeModel = TimeModel()
    #: The machine to verify the schedule on: the given one, its switches made plain
    #: (``routes.routing_view``) when a connection crosses a switch.
    machine: Machine | None = None

    @property
    def faithful(self) -> bool:
        return not self.problems


def import_msccl_xml(source: str | os.PathLike, machine: Machine, *, size: float | None = None,
                     collective: Collective | None = None, ranks: Sequence[int] | None = None,
                     root: int | None = None, inplace: bool | None = None,
                     model: TimeModel | None = None, runtime: str | Runtime | None = None
                     ) -> MscclImport:
    """Reads the XML at ``source`` (path or text) as a schedule on ``machine``.

    ``size``: M in bytes (nccl-tests' convention) for a built-in ``coll``; or pass ``collective``
    (required for ``coll="custom"``). ``ranks``: NPU of each GPU id (default 0..ngpus-1).
    ``root``: GPU id of a rooted collective's root (default: inferred from who only sends or
    only receives). ``inplace``: which buffer layout to run (default: out-of-place when the file
    allows it). ``model``: default link occupancy, serialization when a step has ``cnt > 1`` (see
    the module docstring). ``runtime``: "executor" or "msccl" refuses what that runtime's loader
    refuses; None applies only what execution needs.
    """
    rules = None if runtime is None else runtime_named(runtime)
    algo, parsed, name = parse_algo(source) if rules is None else read_for_runtime(source)
    findings = check(algo, parsed, runtime=rules, root=root)
    for f in findings:
        if f.fatal or f.refused:
            raise InputError(f.message, source=name)
    messages = any(s.cnt > 1 and s.type in SENDS for g in algo.gpus for t in g.tbs for s in t.steps)
    if model is None:
        model = TimeModel(occupancy="serialization") if messages else TimeModel()
    notes = [f.message for f in findings]
    if messages:
        notes.append("sends of cnt > 1 chunks are one message each (α once, then cnt·b/B; serialization "
                     "occupancy)" if model.occupancy == "serialization" else "sends of cnt > 1 chunks "
                     "move them one after another (link occupancy holds a link α + b/B per chunk)")
    program = Program(algo)
    use_inplace = bool(algo.inplace and not algo.outofplace) if inplace is None else bool(inplace)
    coll, rank_map, layout = _resolve(algo, program, machine, name, size, collective, ranks, root,
                                      use_inplace)
    wires = _wires(program, machine, rank_map, coll.chunk_bytes, model, name)
    trace = run(program, lambda g, peer, chan: wires[(g, peer, chan)],
                model.reduce_cost * coll.chunk_bytes)
    if trace.stuck:
        raise InputError(f"deadlock: {program.name(trace.stuck[0])} never runs", source=name)
    replay = _Replay(program, trace, layout, coll.combining)
    replay.run()
    schedule = replay.schedule(source=name, algo=algo.name, inplace=use_inplace)
    replay.check_model(schedule, machine, model, coll.chunk_bytes)
    completion = max((t for t in trace.finish if not math.isnan(t)), default=0.0)
    problems = replay.problems
    if len(problems) > MAX_PROBLEMS:
        problems = problems[:MAX_PROBLEMS] + [f"... and {len(problems) - MAX_PROBLEMS} more problems"]
    routed = any(w.after for w in wires.values())
    return MscclImport(algo, coll, schedule, tuple(rank_map), use_inplace, completion,
                       tuple(notes), tuple(problems), model, routing_view(machine) if routed else machine)


# -- set-up ----------------------------------------------------------------------------------------


def _resolve(algo: Algo, program: Program, machine: Machine, name: str, size: float | None,
             collective: Collective | None, ranks: Sequence[int] | None, root: int | None,
             inplace: bool) -> tuple[Collective, list[int], BufferLayout]:
    """The collective, the NPU of each GPU and the buffer layout the file runs."""
    kind, n = kind_of(algo.coll), algo.ngpus
    if collective is not None:
        coll, rank_map = _given(collective, kind, n, ranks, name)
        layout = layout_of(coll, inplace)
        if layout.num_chunks != chunks_from_loop(layout.kind, n, algo.nchunksperloop):
            raise InputError(f"nchunksperloop={algo.nchunksperloop} does not fit the given "
                             f"{coll.kind} of {coll.num_chunks} chunks", source=name,
                             field="algo.nchunksperloop")
        return coll, rank_map, layout
    if kind == "custom":  # before its layout, which only the collective gives
        raise InputError("coll=\"custom\" carries no pre/postcondition: pass the collective",
                         source=name, field="algo.coll")
    rank_map = _ranks(ranks, n, machine, name)
    root_gpu = None
    if kind in ROOTED:
        root_gpu = root if root is not None else infer_root(program, n, kind)
        if root_gpu is None:
            raise InputError(f"cannot tell the root of this {kind}; pass root", source=name)
    layout = make_layout(kind, n, chunks_from_loop(kind, n, algo.nchunksperloop), inplace, root_gpu)
    return _collective(kind, layout, rank_map, root_gpu, size, name), rank_map, layout


def _ranks(ranks: Sequence[int] | None, n: int, machine: Machine, name: str) -> list[int]:
    rank_map = list(range(n)) if ranks is None else [int(r) for r in ranks]
    if len(rank_map) != n or len(set(rank_map)) != n:
        raise InputError(f"ranks must name {n} distinct NPUs (ngpus={n}), got {rank_map}", source=name,
                         field="ranks")
    bad = [r for r in rank_map if not 0 <= r < machine.num_npus]
    if bad:
        raise InputError(f"the XML has {n} GPUs but machine {machine.name!r} has NPUs 0.."
                         f"{machine.num_npus - 1} (NPU {bad[0]} does not exist)", source=name,
                         field="algo.ngpus")
    return rank_map


def _given(collective: Collective, kind: str, n: int, ranks: Sequence[int] | None, name: str
           ) -> tuple[Collective, list[int]]:
    if collective.num_ranks != n:
        raise InputError(f"the XML has ngpus={n} but the collective has {collective.num_ranks} ranks",
                         source=name, field="algo.ngpus")
    if kind != "custom" and collective.kind != kind:
        raise InputError(f"the XML's coll is {kind} but the collective is {collective.kind}",
                         source=name, field="algo.coll")
    if ranks is not None and list(ranks) != list(collective.ranks):
        raise InputError("ranks disagree with the collective's ranks", source=name, field="ranks")
    return collective, list(collective.ranks)


def _collective(kind: str, layout: BufferLayout, rank_map: list[int], root_gpu: int | None,
                size: float | None, name: str) -> Collective:
    if size is None:
        raise InputError("pass size (the buffer M in bytes, as nccl-tests counts it)", source=name,
                         field="size")
    n, k = layout.num_gpus, layout.num_chunks
    root = rank_map[root_gpu] if root_gpu is not None else None
    if kind == "allreduce" and k % n:
        # msccl-tools writes AllReduce with any chunk count (a tree AllReduce has one chunk):
        # the same pre/postconditions over K chunks of M/K bytes.
        everyone = [list(rank_map)] * k
        return make_custom(rank_map, everyone, everyone, size / k, combining=True, name="allreduce")
    return make_collective(kind, rank_map, size, layout.per_rank, root)


def _wires(program: Program, machine: Machine, rank_map: list[int], chunk_bytes: float,
           model: TimeModel, name: str) -> dict[tuple[int, int, int], Wire]:
    timing = model.link_timing(machine, chunk_bytes)
    duration, occupancy = timing.delay, timing.busy
    routes = Routes(machine)
    wires = {}
    for g, tid, send, recv, chan in program.tbs:
        for src, dst, role in ((g, send, f"send={send}"), (recv, g, f"recv={recv}")):
            if src < 0 or dst < 0:
                continue
            ids = routes.between(rank_map[src], rank_map[dst])
            if not ids:
                raise InputError(f"gpu {g} tb {tid} ({role}, chan={chan}): machine {machine.name!r} "
                                 f"has no link from NPU {rank_map[src]} to NPU {rank_map[dst]}, nor a "
                                 "route through switches only", source=name)
            first, *rest = ids[chan % len(ids)]
            wires[(src, dst, chan)] = Wire(first, float(occupancy[first]), float(duration[first]),
                                           tuple(Hop(e, float(occupancy[e]), float(duration[e])) for e in rest))
    return wires


# -- replaying buffer contents ---------------------------------------------------------------------


def _bits(mask: int) -> str:
    return "{" + ", ".join(str(g) for g in range(mask.bit_length()) if mask >> g & 1) + "}"


class _Replay:
    def __init__(self, program: Program, trace: ExecutionTrace, layout: BufferLayout, combining: bool):
        self.p, self.trace, self.layout, self.combining = program, trace, layout, combining
        self.buf: dict[tuple[int, str, int], SlotValue] = {}
        self.full: dict[int, int] = {}
        for (g, c), (b, off) in layout.pre.items():
            mine = 1 << g if combining else 0
            self.buf[(g, b, off)] = SlotValue(c, mine, -1)
            self.full[c] = self.full.get(c, 0) | mine
        self.sent: dict[int, list[SlotValue | None]] = {}
        # transfers: chunk, wire key (link), start, op, src gpu, dst gpu, mask, send step, via
        self.rows: list[list] = []
        self.problems: list[str] = []

    def slot(self, g: int, ref: tuple[str, int], k: int) -> tuple[int, str, int]:
        return (g, *self.layout.canonical(g, (ref[0], ref[1] + k)))

    def read(self, i: int, ref: tuple[str, int], k: int) -> SlotValue | None:
        g = self.p.gpu_of(i)
        key = self.slot(g, ref, k)
        value = self.buf.get(key)
        if value is None:
            self.problems.append(f"{self.p.name(i)} reads {key[1]}[{key[2]}] on gpu {g}, which holds "
                                 f"nothing at {format_time(self.trace.start[i])}")
        return value

    def combine(self, i: int, a: SlotValue | None, b: SlotValue | None, flip: bool) -> SlotValue | None:
        if a is None or b is None:
            return None
        if not self.combining:
            self.problems.append(f"{self.p.name(i)} reduces, but {self.layout.kind} does not combine")
            return None
        if a.chunk != b.chunk:
            self.problems.append(f"{self.p.name(i)} reduces chunk {a.chunk} with chunk {b.chunk}")
            return None
        if a.mask & b.mask:
            self.problems.append(f"{self.p.name(i)} counts GPUs {_bits(a.mask & b.mask)} twice in "
                                 f"chunk {a.chunk}")
        if flip:  # a copy folded into a value of the same chunk is, in the model, a reduction
            for v in (a, b):
                if v.origin >= 0:
                    self.rows[v.origin][3] = REDUCE
        return SlotValue(a.chunk, a.mask | b.mask, -1)

    def run(self) -> None:
        p = self.p
        for i in self.trace.order:
            step, g = p.steps[i], p.gpu_of(i)
            cnt = max(step.cnt, 1)
            got = self.sent.get(p.match[i], []) if step.type in RECVS else []
            got = got + [None] * (cnt - len(got))
            out: list[SlotValue | None] = []
            t = step.type
            for k in range(cnt):
                if t == "s":
                    out.append(self.read(i, step.src, k))
                elif t in ("r", "rcs"):
                    self.write(g, step.dst, k, got[k])
                    out.append(got[k])
                elif t in ("rrs", "rrc", "rrcs"):
                    value = self.combine(i, got[k], self.read(i, step.src, k), False)
                    if t != "rrs":
                        self.write(g, step.dst, k, value)
                    out.append(value)
                elif t == "cpy":
                    self.write(g, step.dst, k, self.read(i, step.src, k))
                elif t == "re":
                    self.write(g, step.dst, k, self.combine(i, self.read(i, step.dst, k),
                                                            self.read(i, step.src, k), True))
            if t in SENDS:
                self.emit(i, out)

    def write(self, g: int, ref: tuple[str, int], k: int, value: SlotValue | None) -> None:
        key = self.slot(g, ref, k)
        if value is None:
            self.buf.pop(key, None)
        else:
            self.buf[key] = value

    def emit(self, i: int, values: list[SlotValue | None]) -> None:
        """One row per chunk and link: a route through switches gives a row per hop, only the
        first naming the sending GPU and only the last the receiving one (and the reduce), each
        later hop naming the row it forwards (``via``: a switch carrying several arrivals of one
        chunk at once forwards each to its own connection's next hop, whatever their order)."""
        p = self.p
        r = p.send_match[i]
        op = REDUCE if r >= 0 and p.steps[r].type in REDUCING_RECVS else COPY
        wire = self.trace.wires[i]
        links = (wire.key, *(h.key for h in wire.after))
        dst = p.gpu_of(r) if r >= 0 else -1
        delivered: list[SlotValue | None] = []
        for value, starts in zip(values, self.trace.hops[i]):
            if value is None:
                delivered.append(None)  # reading nothing was reported; nothing real travels
                continue
            last = len(links) - 1
            for h, (link, start) in enumerate(zip(links, starts)):
                self.rows.append([value.chunk, link, start, op if h == last else COPY,
                                  p.gpu_of(i) if h == 0 else -1, dst if h == last else -1, value.mask, i,
                                  len(self.rows) - 1 if h else -1])
            delivered.append(SlotValue(value.chunk, value.mask, len(self.rows) - 1))
        self.sent[i] = delivered

    def schedule(self, **meta) -> Schedule:
        rows = self.rows
        return from_arrays([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows],
                           [r[3] for r in rows], via=[r[8] for r in rows], producer="msccl-xml", **meta)

    def check_model(self, schedule: Schedule, machine: Machine, model: TimeModel,
                    chunk_bytes: float) -> None:
        """Replays optcoll's one-value-per-chunk model over the transfers and reports where it
        parts from the buffers: at every send, and for every output slot at the end."""
        timing = model.link_timing(machine, chunk_bytes)
        link, start, op = schedule.link, schedule.start, schedule.op
        arrive = start + timing.delay[link] + np.where(op == REDUCE, timing.reduce_extra, 0.0)
        eps = 1e-9 * float(max(arrive.max(initial=0.0), 1e-12))
        held: dict[tuple[int, int], int] = {}
        for (g, c) in self.layout.pre:
            held[(g, c)] = 1 << g if self.combining else 0
        deliveries = sorted(range(len(self.rows)), key=lambda j: (arrive[j], j))
        sends = sorted(range(len(self.rows)), key=lambda j: (start[j], j))
        ptr = 0
        for j in sends:
            while ptr < len(deliveries) and arrive[deliveries[ptr]] <= start[j] + eps:
                d = deliveries[ptr]
                c, dst, mask = self.rows[d][0], self.rows[d][5], self.rows[d][6]
                if dst >= 0:
                    held[(dst, c)] = held.get((dst, c), 0) | mask if op[d] == REDUCE else mask
                ptr += 1
            c, src, mask = self.rows[j][0], self.rows[j][4], self.rows[j][6]
            if self.combining and held.get((src, c)) is not None and held[(src, c)] != mask:
                self.problems.append(
                    f"{self.p.name(self.rows[j][7])} sends chunk {c} with the contributions of GPUs "
                    f"{_bits(mask)}, but in optcoll's model (one value per chunk per GPU) gpu {src} "
                    f"holds {_bits(held[(src, c)])} at {format_time(start[j])} (a dependency missing, "
                    f"or partial results of one chunk kept apart): the schedule cannot represent it")
        for d in deliveries[ptr:]:
            c, dst, mask = self.rows[d][0], self.rows[d][5], self.rows[d][6]
            if dst >= 0:
                held[(dst, c)] = held.get((dst, c), 0) | mask if op[d] == REDUCE else mask
        for (g, c), (b, off) in sorted(self.layout.post.items()):
            value = self.buf.get((g, b, off))
            want = self.full.get(c, 0)
            if value is None or value.chunk != c or value.mask != want:
                have = "nothing" if value is None else f"chunk {value.chunk}" + (
                    f" over GPUs {_bits(value.mask)}" if self.combining else "")
                need = f"chunk {c}" + (f" over all of {_bits(want)}" if self.combining else "")
                self.problems.append(f"gpu {g} {b}[{off}] ends holding {have}; it must hold {need}")
            elif self.combining and held.get((g, c)) != want:
                self.problems.append(f"gpu {g} {b}[{off}] ends complete, but optcoll's model of gpu {g} "
                                     f"holds chunk {c} over {_bits(held.get((g, c), 0))} only")
