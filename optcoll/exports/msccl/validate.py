"""Structural validation of MSCCL-IR XML (ours or anyone's) against the format's rules.

Every rule a runtime enforces or silently relies on, each finding naming the element (gpu id, tb
id, step index) and the attribute: required ``algo`` attributes; GPU and thread-block ids; one
thread block per (peer, channel, direction); sends and receives matched in FIFO order with equal
counts; local buffer offsets inside the declared buffers; buffer sizes that hold the collective's
layout; dependencies on existing steps that signal (``hasdep``); nop chains the executor accepts;
runtime limits; and, when the structure is sound, that every step can actually run (no deadlock).

``fatal`` findings make the file impossible to execute; the importer refuses those and passes
the others on. Runtime limits differ between executor builds (steps per thread block: 64 in some
msccl-executor-nccl builds, 256 in the first MSCCL runtime), hence ``RuntimeLimits``.
"""
from __future__ import annotations

import os
from collections import Counter
from itertools import islice
from dataclasses import dataclass

from optcoll.errors import InputError
from optcoll.exports.msccl.execute import BROKEN, Program, Wire, run
from optcoll.exports.msccl.ir import (ALGO_ATTRS, BUFFERS, LOCAL_DST, LOCAL_SRC, PROTOCOLS, RECVS,
                                      SENDS, STEP_TYPES, Algo, Finding, Step, parse_algo, where_step)
from optcoll.exports.msccl.layout import (COMBINING, CURRENT_RUNTIME_COLLS, ROOTED, chunks_from_loop,
                                          kind_of, make_layout)
from optcoll.limits import refusal, within

REDOPS = ("sum", "prod", "max", "min", "avg")
RUNTIMES = ("current", "legacy")


@dataclass(frozen=True)
class RuntimeLimits:
    max_steps: int = 256  # per thread block
    max_count: int = 72  # cnt must stay below
    max_channels: int = 32
    max_peers_per_channel: int = 32  # thread blocks sending (and receiving) on one channel


def validate_msccl_xml(source: str | os.PathLike, *, runtime: str = "current",
                       limits: RuntimeLimits = RuntimeLimits(), root: int | None = None) -> list[str]:
    """Every structural finding about the XML at ``source`` (a path or the text); [] when clean.

    ``runtime``: "current" (the MSCCL executor: needs outofplace/minBytes/maxBytes and the new
    ``coll`` names) or "legacy". ``root``: GPU id of a rooted collective's root (default: inferred).
    """
    algo, parsed, _ = parse_algo(source)
    return [f.message for f in check(algo, parsed, runtime=runtime, limits=limits, root=root)]


def check(algo: Algo, parsed: list[Finding], *, runtime: str = "current",
          limits: RuntimeLimits = RuntimeLimits(), root: int | None = None) -> list[Finding]:
    if runtime not in RUNTIMES:
        raise InputError(f"unknown runtime {runtime!r}; use {' or '.join(RUNTIMES)}", field="runtime")
    out = list(parsed)
    kind = _check_algo(algo, runtime, out)
    program = Program(algo)
    _check_gpus(algo, limits, out)
    _check_steps(algo, program, limits, out)
    _check_connections(program, out)
    if kind is not None and algo.ngpus >= 1 and algo.nchunksperloop >= 1 \
            and within("layout_slots", algo.ngpus * algo.nchunksperloop):
        _check_layout(algo, program, kind, root, out)
    if not any(f.fatal for f in out):
        _check_progress(program, out)
    return out


def _add(out: list[Finding], message: str, fatal: bool = True) -> None:
    out.append(Finding(message, fatal))


def _check_algo(algo: Algo, runtime: str, out: list[Finding]) -> str | None:
    required = ALGO_ATTRS if runtime == "current" else tuple(
        a for a in ALGO_ATTRS if a not in ("outofplace", "minBytes", "maxBytes"))
    for a in required:
        if a not in algo.present and a not in ("ngpus", "nchunksperloop", "coll"):  # parse reported those
            _add(out, f"algo: missing attribute {a!r}" + (" (the current MSCCL executor refuses files "
                      "without it)" if a in ("outofplace", "minBytes", "maxBytes") else ""), False)
    kind = None
    try:
        kind = kind_of(algo.coll) if algo.coll else None
    except InputError as exc:
        _add(out, f"algo: attribute coll={algo.coll!r}: {exc.detail}")
    if kind is not None and runtime == "current" and algo.coll not in CURRENT_RUNTIME_COLLS:
        _add(out, f"algo: coll={algo.coll!r} is the legacy spelling; the current MSCCL executor only "
                  f"loads {', '.join(sorted(CURRENT_RUNTIME_COLLS))}", False)
    if "proto" in algo.present and algo.proto not in PROTOCOLS:
        _add(out, f"algo: attribute proto={algo.proto!r} is not one of {', '.join(PROTOCOLS)}", False)
    if "ngpus" in algo.present and algo.ngpus < 1:
        _add(out, f"algo: attribute ngpus={algo.ngpus} must be at least 1")
    if "nchunksperloop" in algo.present and algo.nchunksperloop < 1:
        _add(out, f"algo: attribute nchunksperloop={algo.nchunksperloop} must be at least 1")
    if not within("layout_slots", algo.ngpus * algo.nchunksperloop):  # a typo, not memory
        _add(out, "algo: " + refusal("layout_slots", f"ngpus={algo.ngpus} x nchunksperloop="
                                     f"{algo.nchunksperloop} buffer slots", "optcoll lays out").detail)
    for a in ("inplace", "outofplace"):
        if a in algo.present and getattr(algo, a) not in (0, 1):
            _add(out, f"algo: attribute {a}={getattr(algo, a)} must be 0 or 1", False)
    if {"inplace", "outofplace"} <= algo.present and not (algo.inplace or algo.outofplace):
        _add(out, "algo: inplace=0 and outofplace=0: no call can ever use this algorithm", False)
    for a, value in (("minBytes", algo.min_bytes), ("maxBytes", algo.max_bytes)):
        if value < 0:
            _add(out, f"algo: attribute {a}={value} must not be negative", False)
    if algo.max_bytes and algo.max_bytes < algo.min_bytes:
        _add(out, f"algo: maxBytes={algo.max_bytes} is below minBytes={algo.min_bytes} (0 means no limit)",
             False)
    if kind in COMBINING:
        if algo.redop is None:
            _add(out, f"algo: missing attribute 'redop' ({kind} combines data)", False)
        elif algo.redop not in REDOPS:
            _add(out, f"algo: attribute redop={algo.redop!r} is not one of {', '.join(REDOPS)}", False)
    chans = [t.chan for g in algo.gpus for t in g.tbs]
    used = max(chans, default=-1) + 1
    if "nchannels" in algo.present and algo.nchannels != used:
        _add(out, f"algo: nchannels={algo.nchannels} but the thread blocks use channels 0..{used - 1} "
                  f"(nchannels must be the largest chan + 1 = {used})", False)
    return kind


def _check_gpus(algo: Algo, limits: RuntimeLimits, out: list[Finding]) -> None:
    ids = Counter(g.id for g in algo.gpus)
    for gid, count in sorted(ids.items()):
        if count > 1:
            _add(out, f"gpu {gid}: appears {count} times")
        if not 0 <= gid < algo.ngpus:
            _add(out, f"gpu {gid}: id outside 0..{algo.ngpus - 1} (ngpus={algo.ngpus})")
    present = {g for g in ids if 0 <= g < algo.ngpus}
    if len(present) < algo.ngpus:  # listed lazily: ngpus may be absurdly large
        first = list(islice((g for g in range(algo.ngpus) if g not in present), 10))
        more = algo.ngpus - len(present) - len(first)
        _add(out, f"algo: ngpus={algo.ngpus} but no <gpu> element for id(s) {', '.join(map(str, first))}"
                  + (f" and {more} more" if more else ""))
    for g in algo.gpus:
        for a, value in (("i_chunks", g.i_chunks), ("o_chunks", g.o_chunks), ("s_chunks", g.s_chunks)):
            if value < 0:
                _add(out, f"gpu {g.id}: attribute {a}={value} must not be negative")
        tids = Counter(t.id for t in g.tbs)
        for tid, count in sorted(tids.items()):
            if count > 1:
                _add(out, f"gpu {g.id} tb {tid}: id used by {count} thread blocks")
        if tids and sorted(tids) != list(range(len(tids))):
            _add(out, f"gpu {g.id}: thread block ids {_list(sorted(tids))} are not dense 0..{len(tids) - 1} "
                      f"(the executor refuses gaps)", False)
        owners: dict[tuple[str, int, int], int] = {}
        per_channel: Counter[tuple[str, int]] = Counter()  # (direction, channel) -> peers
        for t in g.tbs:
            where = f"gpu {g.id} tb {t.id}"
            for a, peer in (("send", t.send), ("recv", t.recv)):
                per_channel[(a, t.chan)] += peer >= 0
                if peer == g.id or not -1 <= peer < algo.ngpus:
                    _add(out, f"{where}: attribute {a}={peer} must be -1 or another GPU id in 0..{algo.ngpus - 1}")
                elif peer >= 0:
                    key = (a, peer, t.chan)
                    if key in owners:
                        side = "send to" if a == "send" else "receive from"
                        _add(out, f"{where}: tb {owners[key]} and tb {t.id} both {side} gpu {peer} on "
                                  f"channel {t.chan} (one thread block per peer, channel and direction)")
                    owners.setdefault(key, t.id)
            if t.chan < 0:  # harmless to simulate on a block without peers, but the executor refuses it
                _add(out, f"{where}: attribute chan={t.chan} must not be negative", t.send >= 0 or t.recv >= 0)
            elif t.chan >= limits.max_channels:
                _add(out, f"{where}: chan={t.chan} exceeds the runtime's {limits.max_channels} channels", False)
            if len(t.steps) > limits.max_steps:
                _add(out, f"{where}: {len(t.steps)} steps exceed the runtime limit of {limits.max_steps} "
                          f"per thread block", False)
        for (a, chan), count in sorted(per_channel.items()):
            if count > limits.max_peers_per_channel:
                verb = {"send": "sending", "recv": "receiving"}[a]
                _add(out, f"gpu {g.id}: {count} thread blocks {verb} on channel {chan}, more than the "
                          f"runtime's {limits.max_peers_per_channel} per channel and direction", False)


def _check_steps(algo: Algo, program: Program, limits: RuntimeLimits, out: list[Finding]) -> None:
    by_id = {g.id: g for g in algo.gpus}
    waited: set[int] = set()
    for k, (gid, tid, send, recv, _) in enumerate(program.tbs):
        gpu = by_id[gid]
        rng = program.tb_steps(k)
        nops = 0
        for pos, i in enumerate(rng):
            step, where = program.steps[i], where_step(gid, tid, pos)
            if step.s != pos:
                _add(out, f"{where}: attribute s={step.s} but this is step {pos} of the thread block "
                          f"(indices must be dense 0, 1, 2, ... in order)", False)
            if step.type not in STEP_TYPES:
                _add(out, f"{where}: unknown type={step.type!r} (known: {', '.join(STEP_TYPES)})")
                continue
            _check_step_refs(step, where, gpu, limits, out)
            if step.type in SENDS and send < 0:
                _add(out, f"{where}: type={step.type!r} sends, but tb {tid} has send=-1")
            if step.type in RECVS and recv < 0:
                _add(out, f"{where}: type={step.type!r} receives, but tb {tid} has recv=-1")
            if step.hasdep not in (0, 1):
                _add(out, f"{where}: attribute hasdep={step.hasdep} must be 0 or 1", False)
            d = program.dep[i]
            if step.depid < 0 and step.deps >= 0:
                _add(out, f"{where}: deps={step.deps} without depid (the dependency is ignored)", False)
            elif d == BROKEN:
                _add(out, f"{where}: depends on tb {step.depid} step {step.deps}, which does not exist "
                          f"on gpu {gid}")
            elif d >= 0:
                waited.add(d)
                if step.depid == tid:
                    _add(out, f"{where}: depends on its own thread block (depid={tid}); order within a "
                              f"thread block is implicit", False)
            if step.type == "nop":
                nops += 1
                if step.depid < 0:
                    _add(out, f"{where}: nop without a dependency does nothing", False)
            else:
                if nops and step.depid < 0:
                    _add(out, f"{where}: follows {nops} nop step(s) but has no dependency of its own; the "
                              f"executor refuses this (the last dependency belongs on the real step)", False)
                nops = 0
        if nops:
            _add(out, f"gpu {gid} tb {tid}: ends with {nops} nop step(s) whose dependencies guard nothing",
                 False)
    for d in sorted(waited):
        if program.steps[d].hasdep != 1:
            _add(out, f"{program.name(d)}: other thread blocks wait on this step but it has "
                      f"hasdep={program.steps[d].hasdep} (the runtime never signals it)", False)


def _check_step_refs(step: Step, where: str, gpu, limits: RuntimeLimits, out: list[Finding]) -> None:
    if step.type == "nop":
        return
    if step.cnt < 1:
        _add(out, f"{where}: attribute cnt={step.cnt} must be at least 1")
    elif step.cnt >= limits.max_count:
        _add(out, f"{where}: cnt={step.cnt} is not below the runtime limit {limits.max_count}", False)
    for side, local in (("src", step.type in LOCAL_SRC), ("dst", step.type in LOCAL_DST)):
        buf, off = getattr(step, side)
        if buf not in BUFFERS:
            _add(out, f"{where}: attribute {side}buf={buf!r} is not one of i, o, s", local)
            continue
        if not local:
            continue
        size = gpu.chunks(buf)
        if off < 0 or off + max(step.cnt, 1) > size:
            _add(out, f"{where}: {side}buf={buf} {side}off={off} cnt={step.cnt} is outside the buffer "
                      f"({buf}_chunks={size})")


def _ordinal(k: int) -> str:
    return f"{k}{'th' if 10 <= k % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(k % 10, 'th')}"


def _check_connections(program: Program, out: list[Finding]) -> None:
    steps = program.steps
    for conn in sorted(set(program.sender) | set(program.receiver)):
        u, v, chan = conn
        name = f"connection gpu {u} -> gpu {v} channel {chan}"
        stb, rtb = program.sender.get(conn), program.receiver.get(conn)
        sends = [i for i in program.tb_steps(stb) if steps[i].type in SENDS] if stb is not None else []
        recvs = [i for i in program.tb_steps(rtb) if steps[i].type in RECVS] if rtb is not None else []
        if rtb is None:
            _add(out, f"{name}: gpu {u} tb {program.tbs[stb][1]} sends to gpu {v}, but gpu {v} has no thread "
                      f"block receiving from gpu {u} on channel {chan}", bool(sends))
            continue
        if stb is None:
            _add(out, f"{name}: gpu {v} tb {program.tbs[rtb][1]} receives from gpu {u}, but gpu {u} has no "
                      f"thread block sending to gpu {v} on channel {chan}", bool(recvs))
            continue
        if len(sends) != len(recvs):
            _add(out, f"{name}: gpu {u} tb {program.tbs[stb][1]} sends {len(sends)} time(s) but gpu {v} "
                      f"tb {program.tbs[rtb][1]} receives {len(recvs)} time(s)")
        for k, (s, r) in enumerate(zip(sends, recvs), 1):
            a, b = steps[s], steps[r]
            if a.cnt != b.cnt:
                _add(out, f"{name}: FIFO order mismatch at the {_ordinal(k)} transfer: {program.name(s)} "
                          f"sends cnt={a.cnt} but {program.name(r)} receives cnt={b.cnt}")
            elif a.type == "s" and b.type in LOCAL_DST and a.dstoff >= 0 and a.dst != b.dst:
                _add(out, f"{name}: FIFO order mismatch at the {_ordinal(k)} transfer: {program.name(s)} "
                          f"names remote {a.dstbuf}[{a.dstoff}] but {program.name(r)} writes "
                          f"{b.dstbuf}[{b.dstoff}]", False)
            elif b.type == "r" and a.type in ("s", "rcs") and b.srcoff >= 0:
                sent = a.src if a.type == "s" else a.dst
                if sent != b.src:
                    _add(out, f"{name}: FIFO order mismatch at the {_ordinal(k)} transfer: {program.name(r)} "
                              f"names remote {b.srcbuf}[{b.srcoff}] but {program.name(s)} sends "
                              f"{sent[0]}[{sent[1]}]", False)


def infer_root(program: Program, ngpus: int, kind: str) -> int | None:
    """A rooted collective's root: the one GPU that only sends (broadcast, scatter) or only
    receives (reduce, gather); None when that is not unique."""
    sends, recvs = set(), set()
    for i, step in enumerate(program.steps):
        if step.type in SENDS:
            sends.add(program.gpu_of(i))
        if step.type in RECVS:
            recvs.add(program.gpu_of(i))
    if kind in ("broadcast", "scatter"):
        found = [g for g in range(ngpus) if g in sends and g not in recvs]
    else:
        found = [g for g in range(ngpus) if g in recvs and g not in sends]
    return found[0] if len(found) == 1 else None


def _check_layout(algo: Algo, program: Program, kind: str, root: int | None, out: list[Finding]) -> None:
    if kind == "custom":
        return  # a custom collective's layout is not in the file
    if kind in ROOTED and root is None:
        root = infer_root(program, algo.ngpus, kind)
        if root is None:
            _add(out, f"algo: cannot tell the root of this {kind} (pass it explicitly)", False)
            return
    try:
        layout = make_layout(kind, algo.ngpus, chunks_from_loop(kind, algo.ngpus, algo.nchunksperloop),
                             bool(algo.inplace and not algo.outofplace), root)
    except InputError as exc:
        _add(out, f"algo: nchunksperloop={algo.nchunksperloop}: {exc.detail}")
        return
    sizes = {g.id: g for g in algo.gpus}
    need: dict[tuple[int, str], int] = {}
    for (g, _), (buf, off) in [*layout.pre.items(), *layout.post.items()]:
        need[(g, buf)] = max(need.get((g, buf), 0), off + 1)
    for (g, buf), n in sorted(need.items()):
        have = sizes[g].chunks(buf) if g in sizes else n
        if have < n:
            _add(out, f"gpu {g}: {buf}_chunks={have}, but the {kind} layout with nchunksperloop="
                      f"{algo.nchunksperloop} needs {n} {buf} chunks")


def _check_progress(program: Program, out: list[Finding]) -> None:
    trace = run(program, lambda g, peer, chan: Wire((g, peer, chan), 1.0, 1.0))
    for i in trace.stuck[:20]:
        step = program.steps[i]
        d = program.dep[i]
        if d >= 0 and trace.finish[d] != trace.finish[d]:  # NaN: never finished
            why = f"waits for {program.name(d)}, which never runs"
        elif step.type in RECVS and program.match[i] >= 0:
            why = f"waits for data from {program.name(program.match[i])}, which never runs"
        else:
            why = "waits for data that is never sent"
        _add(out, f"deadlock: {program.name(i)} never runs: {why}")
    if len(trace.stuck) > 20:
        _add(out, f"deadlock: and {len(trace.stuck) - 20} more thread blocks never finish")


def _list(values: list[int]) -> str:
    return ", ".join(map(str, values[:10])) + (f" and {len(values) - 10} more" if len(values) > 10 else "")
