"""A verified timed schedule → MSCCL-IR XML that the MSCCL executor loads.

The XML is written for one runtime (``runtimes.py``: the MSCCL executor by default, or the first
MSCCL runtime): its ``coll`` spelling, and thread blocks cut to its steps-per-block limit
(``threadblocks.py``), or a refusal naming what does not fit. GPU g of the XML is NPU
``collective.ranks[g]``. Only ranks exist in MSCCL-IR, so a schedule that
relays through a switch or through an NPU outside the communicator cannot be written (NVSwitch
machines are exported by scheduling on a direct GPU-to-GPU model of them instead). The buffer
layout is ``layout.py``'s, slots and dependencies ``plan.py``'s, thread blocks, channels and step
order ``threadblocks.py``'s. Every step moves one chunk (``cnt = 1``): a timed schedule never puts
two chunks on one link at one instant, so there is nothing contiguous to batch.

``export_msccl_xml`` checks its own output by default: the XML is imported back on the same
machine under the runtime's rules and verified, and must be clean, faithful and no slower than
the schedule.
"""
from __future__ import annotations

import os

import numpy as np

from optcoll.collectives.collective import Collective
from optcoll.errors import InputError
from optcoll.interop.msccl.importer import import_msccl_xml
from optcoll.interop.msccl.ir import PROTOCOLS, Algo, to_xml
from optcoll.interop.msccl.layout import layout_of
from optcoll.interop.msccl.plan import Xfer, plan
from optcoll.interop.msccl.runtimes import Runtime, runtime_named
from optcoll.interop.msccl.threadblocks import assign
from optcoll.fileio import write_text_atomic
from optcoll.instances.instance import TimeModel
from optcoll.machines.machine import Machine
from optcoll.schedules.schedule import Schedule
from optcoll.units import format_time
from optcoll.verify import step_to_timed, verify
from optcoll.verify.problem import ABSOLUTE_TOLERANCE, RELATIVE_TOLERANCE

REDOPS = ("sum", "prod", "max", "min", "avg")


def build_msccl_algo(machine: Machine, collective: Collective, schedule: Schedule, *,
                     model: TimeModel = TimeModel(), name: str | None = None, proto: str = "Simple",
                     runtime: str | Runtime = "executor", inplace: bool = False, min_bytes: int = 0,
                     max_bytes: int = 0, redop: str = "sum", fuse: bool = True) -> tuple[Algo, float]:
    """The MSCCL algorithm of a schedule, and the schedule's verified time.

    ``runtime``: "executor" (coll allgather, reducescatter, ...; 64 steps per thread block) or
    "msccl" (reduce_scatter, custom; 256). ``inplace``: lay buffers out for in-place calls (else
    out-of-place). ``fuse``: fuse receive-then-forward into rcs/rrcs where that is exact.
    ``min_bytes``/``max_bytes``: the message sizes a runtime may pick it for (0 = no limit).
    ``redop`` is written for combining collectives (no runtime reads it; tools may).
    """
    rt = runtime_named(runtime)
    if proto not in PROTOCOLS:
        raise InputError(f"unknown protocol {proto!r}; use {', '.join(PROTOCOLS)}", field="proto")
    if redop not in REDOPS:
        raise InputError(f"unknown reduction {redop!r}; use {', '.join(REDOPS)}", field="redop")
    if min_bytes < 0 or max_bytes < 0 or (max_bytes and max_bytes < min_bytes):
        raise InputError(f"need 0 <= minBytes <= maxBytes (0 = no limit), got {min_bytes}, {max_bytes}",
                         field="max_bytes")
    if schedule.rounds is not None:
        schedule = step_to_timed(machine, collective, schedule)
    result = verify(machine, collective, schedule, model)
    if not result.valid:
        raise InputError(f"refusing to export an invalid schedule: {result.violation.message}",
                         field="schedule")
    layout = layout_of(collective, inplace)
    coll = rt.coll_for(layout.kind)
    xfers = _transfers(machine, collective, schedule, result.arrivals, model)
    scale = max([x.arrive for x in xfers] + [1e-30])
    eps = RELATIVE_TOLERANCE * scale + ABSOLUTE_TOLERANCE
    p = plan(xfers, layout, collective.combining, eps)
    links = {(gu, gv): len(machine.links_between(u, v)) for gu, u in enumerate(collective.ranks)
             for gv, v in enumerate(collective.ranks) if u != v}
    gpus = assign(xfers, p, layout, collective.combining, fuse, eps, rt.max_steps, links)
    nchannels = max((t.chan for g in gpus for t in g.tbs), default=0) + 1
    blocks = max(len(g.tbs) for g in gpus)
    if nchannels > rt.max_channels or blocks > rt.max_blocks:
        raise InputError(f"the schedule needs {nchannels} channels and {blocks} thread blocks on one GPU; the "
                         f"{rt.name} runtime has {rt.max_channels} channels and {rt.max_blocks} blocks",
                         field="schedule")
    algo = Algo(name or f"optcoll_{collective.kind}_{machine.name}", proto, nchannels,
                layout.nchunksperloop, collective.num_ranks, coll, int(inplace), int(not inplace),
                int(min_bytes), int(max_bytes), redop if collective.combining else None, tuple(gpus))
    return algo, result.time


def export_msccl_xml(machine: Machine, collective: Collective, schedule: Schedule, *,
                     model: TimeModel = TimeModel(), check: bool = True,
                     runtime: str | Runtime = "executor", **options) -> str:
    """The MSCCL-IR XML text of a verified schedule (options: see ``build_msccl_algo``).

    ``check``: import the text back, and refuse (``InputError``) unless the runtime loads it and it
    is faithful, valid and no slower than the schedule.
    """
    if not collective.equal_chunks:
        raise InputError(f"MSCCL-IR XML cuts buffers into equal chunks; {collective.kind}'s chunks "
                         "differ in size", field="collective")
    algo, time = build_msccl_algo(machine, collective, schedule, model=model, runtime=runtime, **options)
    text = to_xml(algo, f"optcoll export for the {runtime_named(runtime).name} runtime: "
                        f"{collective.describe()} on {machine.name}, verified time {format_time(time)} "
                        f"(timed model, {model.occupancy} occupancy)")
    if check:
        _check_round_trip(text, machine, collective, model, time, bool(algo.inplace), runtime)
    return text


def save_msccl_xml(path: str | os.PathLike, machine: Machine, collective: Collective,
                   schedule: Schedule, **options) -> None:
    write_text_atomic(path, export_msccl_xml(machine, collective, schedule, **options))


def _transfers(machine: Machine, collective: Collective, schedule: Schedule, arrivals: np.ndarray,
               model: TimeModel) -> list[Xfer]:
    gpu = {npu: g for g, npu in enumerate(collective.ranks)}
    occupancy = model.link_timing(machine, collective.chunk_bytes).busy
    out = []
    for j in range(len(schedule)):
        e = int(schedule.link[j])
        u, v = int(machine.link_src[e]), int(machine.link_dst[e])
        for node in (u, v):
            if node not in gpu:
                what = (f"switch {machine.label(node)!r}" if machine.is_switch(node) else
                        f"NPU {machine.label(node)!r}, which is not a rank of the collective")
                raise InputError(f"transfer {j} (chunk {int(schedule.chunk[j])} on link {e} "
                                 f"{machine.label(u)}->{machine.label(v)}) goes through {what}; "
                                 f"MSCCL-IR XML has only ranks, so this schedule cannot be exported",
                                 field="schedule")
        start = float(schedule.start[j])
        out.append(Xfer(j, int(schedule.chunk[j]), gpu[u], gpu[v], machine.links_between(u, v).index(e),
                        start, float(arrivals[j]), start + float(occupancy[e]), int(schedule.op[j])))
    return out


def _check_round_trip(text: str, machine: Machine, collective: Collective, model: TimeModel,
                      time: float, inplace: bool, runtime: str | Runtime) -> None:
    try:
        back = import_msccl_xml(text, machine, collective=collective, inplace=inplace, model=model,
                                runtime=runtime)
    except InputError as exc:
        raise InputError(f"the exported XML fails its check: {exc.detail}", field="schedule") from None
    result = verify(machine, back.collective, back.schedule, model)
    trouble = (list(back.findings[:1]) + list(back.problems[:1]) +
               ([] if result.valid else [result.violation.message]))
    if not trouble and result.time > time * (1 + 1e-9) + ABSOLUTE_TOLERANCE:
        trouble = [f"it runs in {format_time(result.time)}, slower than the schedule's "
                   f"{format_time(time)}"]
    if trouble:
        raise InputError(f"the exported XML fails its check: {trouble[0]}", field="schedule")
