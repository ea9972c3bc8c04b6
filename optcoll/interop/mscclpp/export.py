"""A verified schedule → an MSCCL++ execution plan (JSON, the schema of microsoft/mscclpp 1f5f065).

GPU g of the plan is NPU ``collective.ranks[g]``; buffers are laid out as MSCCL lays them out,
out of place (``optcoll.interop.msccl.layout``), one plan chunk per optcoll chunk. The schedule is
seen as puts and NVLS reductions (``gpuview.py``) and turned into thread blocks, channels and
semaphores (``plan_builder.py``). The plan is written for the size the schedule was verified at:
``min_message_size`` = ``max_message_size`` = M unless given, and the protocol by M as for MSCCL
(``protocol_for_size``: LL up to 512 KiB, RCCL's production choice; Simple with NVLS): Simple plans are puts,
signals and waits, every thread block opening with the DSL's handshake (a relaxed signal and wait
on each of its channels) unless told not to, and the check compares with the schedule's time
plus the handshake's (the slowest channel's signal latency); LL plans are packets
(``plan_builder``), which need neither handshake nor signals and carry 8 bytes of data in 16.

``export_mscclpp`` checks its own output: the plan is validated as the executor loads it
(``validate.py``, ``geometry.sizes_for``), imported back on the same machine (``importer.py``) and
verified; it must be faithful and valid, and its time is reported next to the schedule's with the
reasons they may differ (``_reasons``). A plan that comes back slower is rebuilt from
the schedule with its sends into switches reissued as for MSCCL (``msccl.issue.fastest``; a
multicast as one put per branch, in rotation), and the fastest verified plan is kept.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass

import numpy as np

from optcoll.collectives.collective import Collective
from optcoll.errors import InputError
from optcoll.fileio import write_text_atomic
from optcoll.instances.instance import TimeModel
from optcoll.interop.mscclpp.geometry import SIZES, sizes_for
from optcoll.interop.mscclpp.gpuview import Put, View, gpu_view
from optcoll.interop.mscclpp.importer import import_mscclpp_plan
from optcoll.interop.mscclpp.plan_builder import Block, Built, add_handshake, build, check_limits
from optcoll.interop.mscclpp.routes import PeerPaths
from optcoll.interop.mscclpp.schema import PROTOCOLS, ExecutionPlan, parse_plan
from optcoll.interop.mscclpp.validate import check_plan
from optcoll.interop.msccl import issue
from optcoll.interop.msccl.export import protocol_for_size
from optcoll.interop.msccl.layout import layout_of
from optcoll.machines.machine import Machine
from optcoll.schedules.schedule import Schedule
from optcoll.units import format_time
from optcoll.verify import step_to_timed, verify
from optcoll.verify.problem import ABSOLUTE_TOLERANCE, RELATIVE_TOLERANCE


@dataclass(frozen=True)
class MscclppExport:
    """An exported plan (``data``: the JSON object), the schedule's verified time, the plan's
    verified time when imported back (None unless checked), notes on what differs, and how long
    its start handshake takes (0: none; the slowest channel's signal latency)."""

    data: dict
    time: float
    reimported: float | None
    notes: tuple[str, ...]
    handshake: float = 0.0

    @property
    def expected(self) -> float:
        """The time the plan should take: the schedule's, after its start handshake."""
        return self.time + self.handshake

    @property
    def text(self) -> str:
        return json.dumps(self.data, indent=1) + "\n"

    def summary(self) -> str:
        words = f"schedule {format_time(self.time)}"
        if self.reimported is not None:
            after = f" plus its start handshake ({format_time(self.handshake)})" if self.handshake else ""
            same = abs(self.reimported - self.expected) <= RELATIVE_TOLERANCE * self.expected + ABSOLUTE_TOLERANCE
            words += (f", plan re-imported at the same time{after}" if same else
                      f", plan re-imported {format_time(self.reimported)} ("
                      f"{'+' if self.reimported > self.expected else '-'}"
                      f"{format_time(abs(self.reimported - self.expected))} against the schedule{after})")
        return words


def export_mscclpp(machine: Machine, collective: Collective, schedule: Schedule, *,
                   model: TimeModel = TimeModel(), name: str | None = None, min_bytes: int | None = None,
                   max_bytes: int | None = None, check: bool = True, handshake: bool = True,
                   protocol: str | None = None) -> MscclppExport:
    """The MSCCL++ plan of a verified schedule (module docstring); ``handshake``: begin every thread
    block of a Simple plan with the DSL's relaxed signal/wait on its channels
    (``plan_builder.add_handshake``); ``protocol``: Simple or LL (default: by M, ``protocol_for_size``)."""
    kind = collective.kind
    if kind not in SIZES:
        raise InputError(f"MSCCL++ plans name {', '.join(SIZES)}; {kind} has no plan collective", field="collective")
    if not collective.equal_chunks:
        raise InputError(f"an MSCCL++ plan cuts buffers into equal chunks; {kind}'s chunks differ", field="collective")
    if schedule.rounds is not None:
        schedule = step_to_timed(machine, collective, schedule)
    result = verify(machine, collective, schedule, model)
    if not result.valid:
        raise InputError(f"refusing to export an invalid schedule: {result.violation.message}", field="schedule")
    message = int(round(collective.size_bytes))
    lo = message if min_bytes is None else int(min_bytes)
    hi = message if max_bytes is None else int(max_bytes)
    if not 0 <= lo <= hi:
        raise InputError(f"need 0 <= min_message_size <= max_message_size, got {lo} and {hi}", field="max_bytes")
    planned = _planned(machine, collective, schedule, result.arrivals, name, lo, hi, handshake, protocol)
    data, view, wait = planned.data, planned.view, planned.wait
    notes = []
    if view.multicast:
        notes.append(f"a switch multicasts {view.multicast} arrival(s) in the schedule; MSCCL++ puts have no "
                     "multicast, so each branch is a put of its own, crossing its sender's link again")
    again, reissued = None, 0
    if check:
        again, _ = _round_trip(planned.plan, machine, collective, model, message)
        if issue.late(again, result.time + wait):
            def round_trip(on: Machine, target: Schedule) -> tuple[_Planned, float, Schedule]:
                arrivals = verify(on, collective, target, model).arrivals
                made = _planned(on, collective, target, arrivals, name, lo, hi, handshake, planned.protocol)
                return (made, *_round_trip(made.plan, on, collective, model, message))

            planned, again, reissued = issue.fastest(machine, collective, schedule, model, result.time + wait,
                                                     round_trip, (planned, again, 0))
            data, wait = planned.data, planned.wait
        if reissued:
            how = ("at times of their own: one put per branch of each multicast, each GPU's puts in rotation over "
                   "their receivers" if view.multicast else
                   "in another order than the schedule's, at the same times on their ports")
            notes.append(f"{reissued} sends into switches issued {how}, as the executor books each hop when a put "
                         "is issued")
        notes += _reasons(planned.view, machine, model, again, result.time, wait, planned.protocol)
    return MscclppExport(data, result.time, again, tuple(notes), wait)


@dataclass(frozen=True)
class _Planned:
    """One schedule's plan: its JSON, the parsed and load-checked plan, the GPU view it was built
    from, its protocol and its start handshake's length."""

    data: dict
    plan: ExecutionPlan
    view: View
    protocol: str
    wait: float


def _planned(machine: Machine, collective: Collective, schedule: Schedule, arrivals: np.ndarray,
             name: str | None, lo: int, hi: int, handshake: bool, protocol: str | None) -> _Planned:
    """The plan of a verified schedule (``arrivals``: its verified arrivals), checked as the
    executor loads it (``export_mscclpp``)."""
    kind, message = collective.kind, int(round(collective.size_bytes))
    eps = RELATIVE_TOLERANCE * max(float(arrivals.max(initial=0.0)), 1e-30) + ABSOLUTE_TOLERANCE
    view = gpu_view(machine, collective, schedule, arrivals, eps)
    if protocol is None:  # LL packets carry no glres here: a schedule with NVLS stays Simple
        protocol = "Simple" if view.nvls else protocol_for_size(message)
    if protocol not in PROTOCOLS:
        raise InputError(f"unknown protocol {protocol!r}; MSCCL++ plans are {' or '.join(PROTOCOLS)}", field="protocol")
    layout = layout_of(collective, inplace=False)
    built = build(view, collective.num_ranks, layout.pre, layout.post, collective.combining, protocol == "LL")
    wait = 0.0
    if handshake and protocol == "Simple":
        add_handshake(built)
        routes, ranks = PeerPaths(machine), collective.ranks
        wait = max((routes.latency(ranks[x.gpu], ranks[y.gpu])
                    for c in built.channels for x, y in ((c.a, c.b), (c.b, c.a))), default=0.0)
    check_limits(built)
    data = _plan_json(built, name or f"optcoll_{kind}_{machine.name}", kind, layout.input_chunks,
                      layout.output_chunks, lo, hi, protocol)
    plan = parse_plan(data, "exported plan")
    check_plan(plan)
    sizes_for(plan, message)
    return _Planned(data, plan, view, protocol, wait)


def save_mscclpp_plan(path: str | os.PathLike, machine: Machine, collective: Collective, schedule: Schedule,
                      **options) -> MscclppExport:
    exported = export_mscclpp(machine, collective, schedule, **options)
    write_text_atomic(path, exported.text)
    return exported


def _round_trip(plan: ExecutionPlan, machine: Machine, collective: Collective, model: TimeModel,
                message: int) -> tuple[float, Schedule]:
    """The plan imported back and verified: its time and schedule (refused when not faithful or valid)."""
    try:
        back = import_mscclpp_plan(plan, machine, size=message, ranks=collective.ranks, model=model)
    except InputError as exc:
        raise InputError(f"the exported plan fails its check: {exc.detail}", field="schedule") from None
    result = verify(back.machine, back.collective, back.schedule, model)
    trouble = list(back.problems[:1]) + ([] if result.valid else [result.violation.message])
    if trouble:
        raise InputError(f"the exported plan fails its check: {trouble[0]}", field="schedule")
    return result.time, back.schedule


def _reasons(view, machine: Machine, model: TimeModel, again: float, time: float, handshake: float,
             protocol: str) -> list[str]:
    """Why the plan's time differs from the schedule's (after the handshake), for what the export
    can name."""
    if abs(again - time - handshake) <= RELATIVE_TOLERANCE * (time + handshake) + ABSOLUTE_TOLERANCE:
        return []
    words = [f"the plan runs {format_time(again)}, the schedule {format_time(time)}"
             + (f" plus a start handshake of up to {format_time(handshake)}" if handshake else "")]
    if protocol == "LL":
        words.append("LL packets carry 8 bytes of data in 16 (LL16Packet), so every hop's b/B doubles; a forward "
                     "needs no signal")
    if handshake and again < time + handshake:
        words.append("thread blocks whose channels have shorter routes finish their handshake earlier than the "
                     "slowest channel's")
    if any(len(e.made) > 1 and sum(1 for v in e.made.values() if v.time) > 1 for e in view.nvls):
        words.append("the schedule multicasts a switch's sum straight back to the members; MSCCL++ has no op for "
                     "that: glres brings the sum to its issuer and stores it back through the switch (two more "
                     "hops per chunk, and every member's input is read when the glres is issued)")
    forwards = sum(1 for p in view.puts if not p.covered and isinstance(p.src.maker, Put))
    if forwards and model.occupancy == "link" and protocol == "Simple":
        words.append(f"{forwards} put(s) forward what their GPU received: a receiver learns of an arrival from "
                     "the sender's signal, which leaves once the put has freed its first link (link occupancy "
                     "α + b/B) and takes the route's latency, so a forward can start up to α later than in the "
                     "schedule (with occupancy = serialization the signal arrives with the data)")
    if len(words) == 1:
        words.append("the executor issues each put when its data is ready and books every hop of its route then, "
                     "so transfers of different GPUs can take a shared link in another order than the schedule's")
    return ["; ".join(words)]


def _plan_json(built: Built, name: str, kind: str, input_chunks: int, output_chunks: int, lo: int, hi: int,
               protocol: str) -> dict:
    n = len(built.blocks)
    gpus = []
    for g in range(n):
        # the GPU's channels: every channel with one end here, in the global order
        mine = [c for c in built.channels if g in (c.a.gpu, c.b.gpu)]
        number = {}
        counts = {"memory": 0, "port": 0}
        entries = []
        for c in mine:
            number[id(c)] = counts[c.kind]
            counts[c.kind] += 1
            entries.append({"channel_type": c.kind, "connected_to": [c.b.gpu if c.a.gpu == g else c.a.gpu]})
        switch = {}
        for members, buf in built.switch_groups:
            if g in members:
                switch[(members, buf)] = len(switch)
                size = input_chunks if buf == "i" else output_chunks if buf == "o" else built.scratch[g]
                entries.append({"channel_type": "switch", "buffer_type": buf,
                                "rank_groups": [{"size": size, "ranks": list(members)}]})
        remote: list[tuple] = []
        sems = {pair: k for k, pair in enumerate(built.semaphores[g])}
        tbs = [_block_json(tb, number, switch, remote, sems) for tb in built.blocks[g]]
        gpus.append({"id": g, "input_chunks": input_chunks, "output_chunks": output_chunks,
                     "scratch_chunks": built.scratch[g], "threadblocks": tbs, "channels": entries,
                     "remote_buffers": [{"rank": r, "type": b, "access_channel_types": [k]} for r, b, k in remote],
                     "semaphores": [{"init_value": 0} for _ in built.semaphores[g]]})
    return {"name": name, "collective": kind, "protocol": protocol, "inplace": False, "reuse_resources": False,
            "gpus": gpus, "num_threads_per_block": 1024, "use_double_scratch_buffer": False,
            "buffer_alignment": 16, "min_message_size": lo, "max_message_size": hi}


def _block_json(tb: Block, number: dict, switch: dict, remote: list[tuple], sems: dict) -> dict:
    chans: dict[str, list[int]] = {}
    bufs: dict[str, list[int]] = {}

    def channel(c, kind: str) -> int:
        ids = chans.setdefault(kind, [])
        if number[id(c)] not in ids:
            ids.append(number[id(c)])
        return ids.index(number[id(c)])

    def buffer(ref: tuple) -> int:
        if ref not in remote:
            remote.append(ref)
        ids = bufs.setdefault(ref[2], [])
        k = remote.index(ref)
        if k not in ids:
            ids.append(k)
        return ids.index(k)

    def sw(key) -> int:
        ids = chans.setdefault("switch", [])
        if switch[key] not in ids:
            ids.append(switch[key])
        return ids.index(switch[key])

    def resolve(op: dict) -> dict:
        out = {}
        for k, v in op.items():
            if k == "channel":
                out["channel_ids"] = [channel(v, op["channel_type"])]
            elif k == "channels":
                out["channel_ids"] = [channel(c, op["channel_type"]) for c in v]
            elif k in ("src_buff", "dst_buff"):
                out[k] = [_buf(r, buffer, sw) for r in v]
            else:
                out[k] = v
        return out

    ops = []
    for act in tb.actions:
        if act.acquire:
            ops.append({"name": "sem_acquire", "semaphore_ids": [sems[p] for p in act.acquire]})
        ops += [resolve(o) for o in act.ops]
        if act.release:
            ops.append({"name": "sem_release", "semaphore_ids": [sems[p] for p in act.release]})
    return {"id": tb.id, "ops": ops,
            "channels": [{"channel_type": k, "channel_ids": v} for k, v in chans.items()],
            "remote_buffer_refs": [{"access_channel_type": k, "remote_buffer_ids": v} for k, v in bufs.items()]}


def _buf(ref: dict, buffer, sw) -> dict:
    if "remote" in ref:
        return {"buffer_id": buffer(ref["remote"]), "index": ref["index"], "size": ref["size"]}
    if "switch" in ref:
        return {"switch_channel_id": sw(ref["switch"]), "index": ref["index"], "size": ref["size"]}
    return dict(ref)
