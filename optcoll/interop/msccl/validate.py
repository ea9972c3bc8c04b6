"""Structural validation of MSCCL-IR XML (ours or anyone's) against a runtime's loader.

Every rule a runtime's loader enforces (``runtimes.py``: the MSCCL executor, or the first MSCCL
runtime) and every rule an execution silently relies on, each finding naming the element (gpu id,
tb id, step index) and the attribute: the file as the runtime's own XML reader sees it
(``reader.py``: spacing, quoting, declarations, integers read by ``strtol``); required ``algo``
attributes; GPU and thread-block ids; one thread block per (peer, channel, direction); sends and
receives matched in FIFO order with equal counts; local buffer offsets inside the declared
buffers; buffer sizes that hold the collective's layout; dependencies on existing steps that
signal (``hasdep``); nop chains the loader accepts; the runtime's limits; and, when the structure
is sound, that every step can actually run (no deadlock).

Each finding says whether the runtime refuses the file (``refused``) and whether it makes the file
impossible to execute at all (``fatal``: the importer refuses those, whatever the runtime).
"""
from __future__ import annotations

import os
from collections import Counter
from functools import lru_cache
from itertools import islice

from optcoll.errors import InputError
from optcoll.interop.msccl.execute import BROKEN, Program, Wire, run
from optcoll.interop.msccl.ir import (BUFFERS, LOCAL_DST, LOCAL_SRC, PROTOCOLS, RECVS, SENDS, Algo,
                                      Gpu, IrFinding, Step, parse_algo, where_step)
from optcoll.interop.msccl.layout import ROOTED, chunks_from_loop, kind_of, make_layout
from optcoll.interop.msccl.reader import ReaderError
from optcoll.interop.msccl.runtimes import EXECUTOR, Runtime, runtime_named
from optcoll.limits import refusal, within


def validate_msccl_xml(source: str | os.PathLike, *, runtime: str | Runtime = "executor",
                       root: int | None = None) -> list[str]:
    """Every finding about the XML at ``source`` (a path or the text) for ``runtime``
    ("executor" or "msccl"); [] when the runtime loads it and it runs. ``root``: GPU id of a rooted
    collective's root (default: inferred)."""
    runtime = runtime_named(runtime)
    algo, parsed, _ = read_for_runtime(source)
    return [f.message for f in check(algo, parsed, runtime=runtime, root=root)]


def read_for_runtime(source: str | os.PathLike) -> tuple[Algo, list[IrFinding], str]:
    """The algorithm as the runtimes' reader sees it; if that reader stops, a refused finding
    saying where, and the algorithm as an XML parser reads it (to find everything else).

    A file is read once per content: the runtime-faithful reader is slow (about 1 s for one of
    RCCL's files) and ``expect`` imports the same shipped files at every size."""
    if isinstance(source, os.PathLike) or not str(source).lstrip().startswith("<"):
        try:
            stat = os.stat(source)
        except OSError:
            return _read(source)  # the reader names the file in its one-line error
        algo, parsed, name = _read_file(os.fspath(source), stat.st_mtime_ns, stat.st_size)
        return algo, list(parsed), name
    return _read(source)


@lru_cache(maxsize=64)
def _read_file(path: str, mtime_ns: int, size: int) -> tuple[Algo, tuple[IrFinding, ...], str]:
    algo, parsed, name = _read(path)
    return algo, tuple(parsed), name


def _read(source: str | os.PathLike) -> tuple[Algo, list[IrFinding], str]:
    try:
        return parse_algo(source, like_runtime=True)
    except ReaderError as exc:
        algo, parsed, name = parse_algo(source)
        return algo, [IrFinding(f"the runtimes' XML reader stops at {exc}", False, True)] + parsed, name


def check(algo: Algo, parsed: list[IrFinding], *, runtime: Runtime | None = EXECUTOR,
          root: int | None = None) -> list[IrFinding]:
    """``runtime=None``: only what execution itself needs (no loader rules)."""
    out = list(parsed)
    rules = runtime or _NO_RUNTIME
    kind = _check_algo(algo, rules, runtime is not None, out)
    program = Program(algo)
    _check_gpus(algo, rules, out)
    _check_steps(algo, program, rules, out)
    _check_connections(program, out)
    if kind is not None and algo.ngpus >= 1 and algo.nchunksperloop >= 1 \
            and within("layout_slots", algo.ngpus * algo.nchunksperloop):
        _check_layout(algo, program, kind, root, out)
    if not any(f.fatal for f in out):
        _check_progress(program, out)
    return out if runtime is not None else [f for f in out if not f.refused or f.fatal]


_NO_RUNTIME = Runtime("any", "", (), frozenset(), EXECUTOR.step_types + ("ra",), max_steps=2**31,
                      max_blocks=2**31, max_channels=2**31, max_count=2**31, max_peers_per_channel=2**31)


def _add(out: list[IrFinding], message: str, fatal: bool = True, refused: bool = False) -> None:
    out.append(IrFinding(message, fatal, refused))


def _refuse(out: list[IrFinding], rt: Runtime, message: str, fatal: bool = False) -> None:
    """A rule of the runtime's loader: it refuses the file."""
    _add(out, f"{message} (the {rt.name} runtime refuses it)" if rt.source else message, fatal, True)


def _check_algo(algo: Algo, rt: Runtime, named: bool, out: list[IrFinding]) -> str | None:
    for a in rt.required:
        if a not in algo.present and a not in ("ngpus", "nchunksperloop", "coll"):  # parse reported those
            _refuse(out, rt, f"algo: missing attribute {a!r}")
    kind = None
    try:
        kind = kind_of(algo.coll) if algo.coll else None
    except InputError as exc:
        _add(out, f"algo: attribute coll={algo.coll!r}: {exc.detail}")
    if kind is not None and named and algo.coll not in rt.colls:
        _refuse(out, rt, f"algo: coll={algo.coll!r} is not one of {', '.join(sorted(rt.colls))}")
    if "proto" in algo.present and algo.proto not in PROTOCOLS:
        _refuse(out, rt, f"algo: attribute proto={algo.proto!r} is not one of {', '.join(PROTOCOLS)}")
    if "ngpus" in algo.present and algo.ngpus < 1:
        _add(out, f"algo: attribute ngpus={algo.ngpus} must be at least 1")
    if "nchunksperloop" in algo.present and algo.nchunksperloop < 1:
        _add(out, f"algo: attribute nchunksperloop={algo.nchunksperloop} must be at least 1")
    if not within("layout_slots", algo.ngpus * algo.nchunksperloop):  # a typo, not memory
        _add(out, "algo: " + refusal("layout_slots", f"ngpus={algo.ngpus} x nchunksperloop="
                                     f"{algo.nchunksperloop} buffer slots", "optcoll lays out").detail)
    if {"inplace", "outofplace"} <= algo.present and not (algo.inplace or algo.outofplace):
        _add(out, "algo: inplace=0 and outofplace=0: no call can ever use this algorithm", False)
    if rt.chunks_match_loop:  # the first runtime: no negative sizes, maxBytes 128 MiB by default
        high = algo.max_bytes if "maxBytes" in algo.present else 2**27
        if algo.min_bytes < 0 or high < 0 or algo.min_bytes > high:
            _refuse(out, rt, f"algo: need 0 <= minBytes <= maxBytes, got {algo.min_bytes} and {high}")
    elif algo.max_bytes and algo.max_bytes < algo.min_bytes:
        _add(out, f"algo: maxBytes={algo.max_bytes} is below minBytes={algo.min_bytes}: no message size "
                  "selects it (0 means no limit)")
    chans = [t.chan for g in algo.gpus for t in g.tbs]
    used = max(chans, default=-1) + 1
    if "nchannels" in algo.present and algo.nchannels != used:
        _add(out, f"algo: nchannels={algo.nchannels} but the thread blocks use channels 0..{used - 1} "
                  f"(nchannels must be the largest chan + 1 = {used})", False)
    return kind


def _check_gpus(algo: Algo, rt: Runtime, out: list[IrFinding]) -> None:
    """The <gpu> elements: ids, then per GPU its chunk counts, thread block ids and peers."""
    _check_gpu_ids(algo, out)
    for g in algo.gpus:
        _check_chunk_counts(algo, g, rt, out)
        _check_tb_ids(g, rt, out)
        _check_tb_peers(algo, g, rt, out)


def _check_gpu_ids(algo: Algo, out: list[IrFinding]) -> None:
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


def _check_chunk_counts(algo: Algo, g: Gpu, rt: Runtime, out: list[IrFinding]) -> None:
    in_mult = algo.ngpus if algo.coll == "allgather" else 1
    out_mult = algo.ngpus if algo.coll == "reduce_scatter" else 1
    for a, value in (("i_chunks", g.i_chunks), ("o_chunks", g.o_chunks), ("s_chunks", g.s_chunks)):
        if value < 0:
            _add(out, f"gpu {g.id}: attribute {a}={value} must not be negative", refused=True)
    if rt.chunks_match_loop and (g.i_chunks > 0 and g.i_chunks * in_mult != algo.nchunksperloop
                                 or g.o_chunks > 0 and g.o_chunks * out_mult != algo.nchunksperloop):
        _refuse(out, rt, f"gpu {g.id}: i_chunks={g.i_chunks} / o_chunks={g.o_chunks} disagree with "
                         f"nchunksperloop={algo.nchunksperloop} for coll={algo.coll!r}")


def _check_tb_ids(g: Gpu, rt: Runtime, out: list[IrFinding]) -> None:
    tids = Counter(t.id for t in g.tbs)
    for tid, count in sorted(tids.items()):
        if count > 1:
            _refuse(out, rt, f"gpu {g.id} tb {tid}: id used by {count} thread blocks", True)
        if not 0 <= tid < rt.max_blocks:
            _refuse(out, rt, f"gpu {g.id} tb {tid}: ids must be in 0..{rt.max_blocks - 1}")
    if tids and sorted(tids) != list(range(len(tids))):
        _refuse(out, rt, f"gpu {g.id}: thread block ids {_list(sorted(tids))} are not dense "
                         f"0..{len(tids) - 1}")


def _check_tb_peers(algo: Algo, g: Gpu, rt: Runtime, out: list[IrFinding]) -> None:
    """Each thread block's send and recv peers, channel and step count, then how many thread
    blocks send and receive on each channel."""
    owners: dict[tuple[str, int, int], int] = {}
    per_channel: Counter[tuple[str, int]] = Counter()  # (direction, channel) -> peers
    for t in g.tbs:
        where = f"gpu {g.id} tb {t.id}"
        for a, peer in (("send", t.send), ("recv", t.recv)):
            per_channel[(a, t.chan)] += peer >= 0
            _check_peer(algo, g, rt, out, where, a, peer, t.chan, t.id, owners)
        if not 0 <= t.chan < rt.max_channels:
            _refuse(out, rt, f"{where}: attribute chan={t.chan} must be in 0..{rt.max_channels - 1}",
                    t.chan < 0 and (t.send >= 0 or t.recv >= 0))
        if len(t.steps) > rt.max_steps:
            _refuse(out, rt, f"{where}: {len(t.steps)} steps, more than its {rt.max_steps} per thread block")
    for (a, chan), count in sorted(per_channel.items()):
        if count > rt.max_peers_per_channel:
            verb = {"send": "sending", "recv": "receiving"}[a]
            _refuse(out, rt, f"gpu {g.id}: {count} thread blocks {verb} on channel {chan}, more than "
                             f"{rt.max_peers_per_channel}")


def _check_peer(algo: Algo, g: Gpu, rt: Runtime, out: list[IrFinding], where: str, a: str, peer: int, chan: int,
                tid: int, owners: dict[tuple[str, int, int], int]) -> None:
    """One thread block's ``send`` or ``recv`` peer (``a``); ``owners`` records which thread
    block holds each (direction, peer, channel)."""
    if peer == g.id or peer < -1:
        _refuse(out, rt, f"{where}: attribute {a}={peer} must be -1 or another GPU id", True)
    elif peer >= algo.ngpus:
        message = f"{where}: attribute {a}={peer} is not a GPU id in 0..{algo.ngpus - 1}"
        if rt.peers_below_ngpus:
            _refuse(out, rt, message, True)
        else:
            _add(out, message)
    elif peer >= 0:
        key = (a, peer, chan)
        if key in owners:
            side = "send to" if a == "send" else "receive from"
            _add(out, f"{where}: tb {owners[key]} and tb {tid} both {side} gpu {peer} on "
                      f"channel {chan} (one thread block per peer, channel and direction)")
        owners.setdefault(key, tid)


def _check_steps(algo: Algo, program: Program, rt: Runtime, out: list[IrFinding]) -> None:
    by_id = {g.id: g for g in algo.gpus}
    waited: set[int] = set()
    for k, (gid, tid, send, recv, _) in enumerate(program.tbs):
        gpu = by_id[gid]
        rng = program.tb_steps(k)
        nops = 0
        for pos, i in enumerate(rng):
            step, where = program.steps[i], where_step(gid, tid, pos)
            if not 0 <= step.s < rt.max_steps:
                _refuse(out, rt, f"{where}: attribute s={step.s} must be in 0..{rt.max_steps - 1}")
            elif step.s != pos:
                _add(out, f"{where}: attribute s={step.s} but this is step {pos} of the thread block "
                          f"(indices must be dense 0, 1, 2, ... in order)", False)
            if step.type not in rt.step_types:
                _refuse(out, rt, f"{where}: unknown type={step.type!r} (known: {', '.join(rt.step_types)})",
                        True)
                continue
            _check_step_refs(step, where, gpu, rt, out)
            if step.type in SENDS and send < 0:
                _refuse(out, rt, f"{where}: type={step.type!r} sends, but tb {tid} has send=-1", True)
            if step.type in RECVS and recv < 0:
                _refuse(out, rt, f"{where}: type={step.type!r} receives, but tb {tid} has recv=-1", True)
            if step.hasdep not in (0, 1) and step.type != "nop":
                _refuse(out, rt, f"{where}: attribute hasdep={step.hasdep} must be 0 or 1")
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
                    _refuse(out, rt, f"{where}: follows {nops} nop step(s) but has no dependency of its "
                                     f"own (the last dependency of a chain belongs on the real step)")
                nops = 0
        if nops:
            _add(out, f"gpu {gid} tb {tid}: ends with {nops} nop step(s) whose dependencies guard nothing",
                 False)
    for d in sorted(waited):
        if program.steps[d].hasdep != 1:
            _add(out, f"{program.name(d)}: other thread blocks wait on this step but it has "
                      f"hasdep={program.steps[d].hasdep} (the runtime never signals it)", False)


def _check_step_refs(step: Step, where: str, gpu, rt: Runtime, out: list[IrFinding]) -> None:
    for side in ("src", "dst"):
        if getattr(step, side)[0] not in BUFFERS:  # read for every step, nops too
            _refuse(out, rt, f"{where}: attribute {side}buf={getattr(step, side)[0]!r} is not one of i, o, s",
                    step.type in (LOCAL_SRC if side == "src" else LOCAL_DST))
    if step.type == "nop":
        return
    if step.cnt < 1:
        if step.cnt < rt.min_count:
            _refuse(out, rt, f"{where}: attribute cnt={step.cnt} must be at least {rt.min_count}", True)
        else:
            _add(out, f"{where}: attribute cnt={step.cnt} moves nothing")
    elif step.cnt >= rt.max_count:
        _refuse(out, rt, f"{where}: cnt={step.cnt} is not below {rt.max_count}")
    for side, local in (("src", step.type in LOCAL_SRC), ("dst", step.type in LOCAL_DST)):
        buf, off = getattr(step, side)
        if not local or buf not in BUFFERS:
            continue
        size = gpu.chunks(buf)
        if off < -1 or off >= size:
            _refuse(out, rt, f"{where}: {side}buf={buf} {side}off={off} is outside the buffer "
                             f"({buf}_chunks={size})", True)
        elif off < 0 or off + max(step.cnt, 1) > size:
            _add(out, f"{where}: {side}buf={buf} {side}off={off} cnt={step.cnt} is outside the buffer "
                      f"({buf}_chunks={size})")


def _ordinal(k: int) -> str:
    return f"{k}{'th' if 10 <= k % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(k % 10, 'th')}"


def _check_connections(program: Program, out: list[IrFinding]) -> None:
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


def _check_layout(algo: Algo, program: Program, kind: str, root: int | None, out: list[IrFinding]) -> None:
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


def _check_progress(program: Program, out: list[IrFinding]) -> None:
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
