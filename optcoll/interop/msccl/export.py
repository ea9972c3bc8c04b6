"""A verified timed schedule → MSCCL-IR XML that the MSCCL executor (or RCCL) loads.

The XML is written for one runtime (``runtimes.py``: the MSCCL executor by default, the first
MSCCL runtime, or RCCL): its ``coll`` spelling, and thread blocks cut to its steps-per-block limit
(``threadblocks.py``), or a refusal naming what does not fit. GPU g of the XML is NPU
``collective.ranks[g]``. Only ranks exist in MSCCL-IR: on a switched or multi-node machine the
schedule is first seen in the GPU-only view of ``routes.py`` (each chain of hops through switches
from one GPU to another becomes one send on the channel that names its route; NIC paths are
network peers the same way), a schedule that reduces into a switch or relays through an NPU
outside the communicator is refused, and sends that leave a GPU on one shared link (its port into
a switch) for different peers wait for one another in the schedule's order, so the runtime keeps
that port's order. The buffer layout is ``layout.py``'s, slots and dependencies ``plan.py``'s,
thread blocks, channels and step order ``threadblocks.py``'s. Every step moves one chunk
(``cnt = 1``): a timed schedule never puts two chunks on one link at one instant, so there is
nothing contiguous to batch.

``export_msccl`` checks its own output by default: the XML is imported back on the same machine
(routes re-expanded hop by hop, verified with switches that only route) under the runtime's rules,
and must be clean, faithful and valid; on direct links it must also be no slower than the
schedule. Through switches the runtime, not the schedule, orders each switch port, and MSCCL
cannot multicast (each branch is a send of its own), so there the re-imported time is measured
and stated next to the schedule's; when it comes back slower, the schedule's sends into switches
are reissued (``issue.py``: in the order they leave the switch; a multicast as one copy per
branch, in rotation, ``branches.py``) and the fastest verified XML is kept: every machines-suite
schedule without in-switch reduction that fits the runtime's limits then re-imports at its own
time.
"""
from __future__ import annotations

import os
from dataclasses import dataclass


from optcoll.collectives.collective import Collective
from optcoll.errors import InputError
from optcoll.interop.msccl import issue
from optcoll.interop.msccl.importer import import_msccl_xml
from optcoll.interop.msccl.ir import PROTOCOLS, Algo, to_xml
from optcoll.interop.msccl.layout import layout_of
from optcoll.interop.msccl.plan import SlotPlan, Xfer, plan
from optcoll.interop.msccl.routes import Collapsed, Routes, collapse, connections
from optcoll.interop.msccl.runtimes import Runtime, runtime_named
from optcoll.interop.msccl.threadblocks import assign
from optcoll.fileio import write_text_atomic
from optcoll.instances.instance import TimeModel
from optcoll.machines.machine import Machine
from optcoll.schedules.schedule import Schedule
from optcoll.units import format_size, format_time
from optcoll.verify import step_to_timed, verify
from optcoll.verify.problem import ABSOLUTE_TOLERANCE, RELATIVE_TOLERANCE

REDOPS = ("sum", "prod", "max", "min", "avg")
#: Largest message (bytes, the buffer M) written with the LL protocol when the protocol follows the
#: size: RCCL's production MSCCL algorithms (ROCm/rccl 0cbce2a, tools/msccl-algorithms/) use LL up to
#: 512 KiB and Simple above, for AllReduce and AlltoAll alike.
LL_UP_TO = 512 * 1024


def protocol_for_size(size: float) -> str:
    """The protocol an export of a schedule solved for ``size`` bytes asks for (``LL_UP_TO``):
    LL (low latency, half the bandwidth) for small messages, Simple for the rest."""
    return "LL" if size <= LL_UP_TO else "Simple"


def message_bytes(collective: Collective) -> int:
    """The message size a runtime compares with ``minBytes``/``maxBytes``: count × type size ×
    its size multiplier (RCCL and the executor, ``msccl_parser.cc``: ngpus for allgather,
    reducescatter and alltoall, else 1), which is M for every collective but gather and scatter,
    whose count is one rank's share."""
    share = collective.num_ranks if collective.kind in ("gather", "scatter") else 1
    return int(round(collective.size_bytes / share))


@dataclass(frozen=True)
class MscclExport:
    """An exported XML: its text, the schedule's verified time, the time the XML takes when
    imported back (None when not checked), how many sends it needs beyond the schedule's because
    MSCCL cannot multicast (0: none), whether a connection crosses a switch (then the runtime,
    not the schedule, orders each switch port: a chunk takes the earliest free slot on each hop,
    in the order the sends are issued, so the time may differ from the schedule's), and how many
    sends into switches the XML issues at times the schedule does not (``issue.fastest``)."""

    text: str
    time: float
    reimported: float | None
    multicast: int
    routed: bool = False
    reissued: int = 0

    def summary(self) -> str:
        words = f"schedule {format_time(self.time)}"
        if self.reimported is not None:
            words += f", re-imported {format_time(self.reimported)}"
        if self.multicast:
            words += (f"; MSCCL has no multicast: {self.multicast} more sends than the schedule, "
                      "each crossing its sender's port again")
        if self.reissued:
            how = ("at times of their own (one send per branch of each multicast, each GPU's copies in rotation "
                   "over their receivers)" if self.multicast else "in another order than the schedule's")
            words += (f"; {self.reissued} sends into switches issued {how}, so that the runtime's switches "
                      "serve them in time")
        return words


def build_msccl_algo(machine: Machine, collective: Collective, schedule: Schedule, *,
                     model: TimeModel = TimeModel(), name: str | None = None, proto: str | None = None,
                     runtime: str | Runtime = "executor", inplace: bool = False,
                     min_bytes: int | None = None, max_bytes: int | None = None, redop: str = "sum",
                     fuse: bool = True) -> tuple[Algo, float]:
    """The MSCCL algorithm of a schedule and the schedule's verified time.

    ``runtime``: "executor" (coll allgather, reducescatter, ...; 64 steps per thread block),
    "msccl" (reduce_scatter, custom; 256) or "rccl". ``inplace``: lay buffers out for in-place
    calls (else out-of-place). ``fuse``: fuse receive-then-forward into rcs/rrcs where that is
    exact. ``min_bytes``/``max_bytes``: the message sizes a runtime may pick it for (0 = no
    limit; default: the size it was verified at, both ends). ``proto``: default from that size
    (``protocol_for_size``). ``redop`` is written for combining collectives (no runtime reads it;
    tools may).
    """
    algo, time, _ = _build(machine, collective, schedule, model=model, name=name, proto=proto,
                           runtime=runtime, inplace=inplace, min_bytes=min_bytes, max_bytes=max_bytes,
                           redop=redop, fuse=fuse)
    return algo, time


def _build(machine: Machine, collective: Collective, schedule: Schedule, *, model: TimeModel,
           name: str | None, proto: str | None, runtime: str | Runtime, inplace: bool,
           min_bytes: int | None, max_bytes: int | None, redop: str, fuse: bool
           ) -> tuple[Algo, float, Collapsed]:
    """``build_msccl_algo``, and the schedule in the GPU-only view."""
    rt = runtime_named(runtime)
    size = message_bytes(collective)
    proto = protocol_for_size(size) if proto is None else proto
    min_bytes = size if min_bytes is None else min_bytes
    max_bytes = size if max_bytes is None else max_bytes
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
    scale = max(float(result.arrivals.max(initial=0.0)), 1e-30)
    eps = RELATIVE_TOLERANCE * scale + ABSOLUTE_TOLERANCE
    routes = Routes(machine)
    busy = model.link_timing(machine, collective.chunk_bytes).busy
    seen = collapse(machine, collective, schedule, result.arrivals, busy, eps, routes)
    ranks = collective.ranks
    xfers, lanes = connections(seen.xfers, lambda u, v: len(routes.between(ranks[u], ranks[v])),
                               rt.max_peers_per_channel)
    p = plan(xfers, layout, collective.combining, eps)
    _keep_port_order(xfers, p)
    gpus = assign(xfers, p, layout, collective.combining, fuse, eps, rt.max_steps, lanes)
    nchannels = max((t.chan for g in gpus for t in g.tbs), default=0) + 1
    blocks = max(len(g.tbs) for g in gpus)
    if nchannels > rt.max_channels or blocks > rt.max_blocks:
        raise InputError(f"the schedule needs {nchannels} channels and {blocks} thread blocks on one GPU; the "
                         f"{rt.name} runtime has {rt.max_channels} channels and {rt.max_blocks} blocks",
                         field="schedule")
    algo = Algo(name or f"optcoll_{collective.kind}_{machine.name}", proto, nchannels,
                layout.nchunksperloop, collective.num_ranks, coll, int(inplace), int(not inplace),
                int(min_bytes), int(max_bytes), redop if collective.combining else None, tuple(gpus))
    return algo, result.time, seen


def _keep_port_order(xfers: list[Xfer], p: SlotPlan) -> None:
    """Sends that leave a GPU on one link (its port into a switch) for different connections wait
    for one another in the schedule's order: the runtime would otherwise pick an order of its own."""
    by_port: dict[int, list[Xfer]] = {}
    for x in sorted(xfers, key=lambda x: (x.start, x.arrive, x.id)):
        by_port.setdefault(x.port, []).append(x)
    for xs in by_port.values():
        for a, b in zip(xs, xs[1:]):
            if (a.v, a.lane) != (b.v, b.lane):
                deps = p.deps.setdefault(("s", b.id), [])
                if ("s", a.id) not in deps:
                    deps.append(("s", a.id))


def export_msccl(machine: Machine, collective: Collective, schedule: Schedule, *,
                 model: TimeModel = TimeModel(), check: bool = True,
                 runtime: str | Runtime = "executor", **options) -> MscclExport:
    """The MSCCL-IR XML of a verified schedule (options: see ``build_msccl_algo``).

    ``check``: import the text back on ``machine`` (routes re-expanded), and refuse
    (``InputError``) unless the runtime loads it and it is faithful, valid and no slower than the
    schedule where every connection is a direct link (``MscclExport`` says why not elsewhere).
    """
    if not collective.equal_chunks:
        raise InputError(f"MSCCL-IR XML cuts buffers into equal chunks; {collective.kind}'s chunks "
                         "differ in size", field="collective")
    options = {"name": None, "proto": None, "inplace": False, "min_bytes": None, "max_bytes": None,
               "redop": "sum", "fuse": True, **options}
    if schedule.rounds is not None:
        schedule = step_to_timed(machine, collective, schedule)
    algo, time, seen = _build(machine, collective, schedule, model=model, runtime=runtime, **options)
    routed = any(len(route) > 1 for route in seen.routes.values())
    text = _text(algo, machine, collective, model, time, runtime)
    again, reissued = None, 0
    if check:
        again, _ = _check_round_trip(text, machine, collective, model, time, bool(algo.inplace), runtime,
                                     strict=not routed)
        if routed and issue.late(again, time):
            text, again, reissued = _issue_in_time(machine, collective, schedule, model, time, runtime, options,
                                                   (text, again, 0))
    return MscclExport(text, time, again, seen.multicast, routed, reissued)


def _text(algo: Algo, machine: Machine, collective: Collective, model: TimeModel, time: float,
          runtime: str | Runtime) -> str:
    sizes = "any size" if not algo.min_bytes and not algo.max_bytes else (
        f"messages of {format_size(algo.min_bytes)} to "
        f"{format_size(algo.max_bytes) if algo.max_bytes else 'any size'}")
    return to_xml(algo, f"optcoll export for the {runtime_named(runtime).name} runtime: "
                        f"{collective.describe()} on {machine.name}, verified time {format_time(time)} "
                        f"(timed model, {model.occupancy} occupancy); selected for {sizes}, {algo.proto}")


def _issue_in_time(machine: Machine, collective: Collective, schedule: Schedule, model: TimeModel, time: float,
                   runtime: str | Runtime, options: dict, best: tuple[str, float, int]) -> tuple[str, float, int]:
    """The fastest XML of ``best`` and the schedule's sends into switches reissued (``issue.fastest``)."""
    def round_trip(on: Machine, target: Schedule) -> tuple[str, float, Schedule]:
        algo, _, _ = _build(on, collective, target, model=model, runtime=runtime, **options)
        text = _text(algo, on, collective, model, time, runtime)
        again, back = _check_round_trip(text, on, collective, model, time, bool(algo.inplace), runtime,
                                        strict=False)
        return text, again, back

    return issue.fastest(machine, collective, schedule, model, time, round_trip, best)


def export_msccl_xml(machine: Machine, collective: Collective, schedule: Schedule, **options) -> str:
    """The MSCCL-IR XML text of a verified schedule (see ``export_msccl``)."""
    return export_msccl(machine, collective, schedule, **options).text


def save_msccl_xml(path: str | os.PathLike, machine: Machine, collective: Collective,
                   schedule: Schedule, **options) -> MscclExport:
    exported = export_msccl(machine, collective, schedule, **options)
    write_text_atomic(path, exported.text)
    return exported


def _check_round_trip(text: str, machine: Machine, collective: Collective, model: TimeModel,
                      time: float, inplace: bool, runtime: str | Runtime, strict: bool) -> tuple[float, Schedule]:
    """The re-imported XML's verified time and schedule; refuses what the runtime would not load, what does
    not replay faithfully or verify, and (``strict``: every connection a direct link, where the
    export keeps every transfer's time) anything slower than the schedule."""
    try:
        back = import_msccl_xml(text, machine, collective=collective, inplace=inplace, model=model,
                                runtime=runtime)
    except InputError as exc:
        raise InputError(f"the exported XML fails its check: {exc.detail}", field="schedule") from None
    result = verify(back.machine, back.collective, back.schedule, model)
    trouble = (list(back.findings[:1]) + list(back.problems[:1]) +
               ([] if result.valid else [result.violation.message]))
    if not trouble and strict and result.time > time * (1 + 1e-9) + ABSOLUTE_TOLERANCE:
        trouble = [f"it runs in {format_time(result.time)}, slower than the schedule's "
                   f"{format_time(time)}"]
    if trouble:
        raise InputError(f"the exported XML fails its check: {trouble[0]}", field="schedule")
    return result.time, back.schedule
