"""MSCCL++ execution plan → (collective, timed schedule) on a machine, for the shared verifier.

The plan is read (``schema.py``), checked as its executor loads it (``validate.py``, and at the
given M ``geometry.sizes_for``), run on the machine (``simulate.py``: GPU g is NPU ``ranks[g]``)
and its transfers become a schedule over the units the run cuts its buffers into: optcoll's chunks
are those units, laid out as MSCCL lays out buffers (``optcoll.interop.msccl.layout``; an in-place
plan's input and output alias as NCCL defines in-place calls).

LL packets (``ppkt``, ``rppkt``, ``respkt``, ``recspkt``, ``gstorepkt``: the ops of an LL plan that
write a peer) carry a flag with every 4 bytes of data: the executor's default ``LL16Packet``
(microsoft/mscclpp 1f5f065 ``include/mscclpp/packet_device.hpp``) puts 8 bytes of payload in 16,
and its packet ops write ``size << 1`` bytes into the peer's scratch (``execution_kernel.hpp``).
So a plan whose transfers are packets is run and verified on ``packet_view(machine)``, the
machine whose links carry half their rate in data; a plan mixing packet and plain transfers is
refused (a schedule has one chunk size per chunk, not per transfer).
"""
from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass

from optcoll.collectives.builtins import make_collective, make_custom
from optcoll.collectives.collective import Collective
from optcoll.errors import InputError
from optcoll.instances.instance import TimeModel
from optcoll.interop.mscclpp.geometry import sizes_for, steps_of, unit_bytes
from optcoll.interop.mscclpp.schema import Op, ExecutionPlan, read_plan
from optcoll.interop.mscclpp.simulate import Simulator
from optcoll.interop.mscclpp.validate import check_plan
from optcoll.interop.msccl.layout import COMBINING, make_layout
from optcoll.interop.msccl.routes import routing_view
from optcoll.machines.machine import Machine
from optcoll.schedules.schedule import Schedule, from_arrays

MAX_PROBLEMS = 50
#: Ops that write a peer's buffer with LL packets, and the plain ones that write or read a peer.
PACKET_SENDS = ("ppkt", "rppkt", "respkt", "recspkt", "gstorepkt")
PLAIN_SENDS = ("put", "pws", "pwsf", "get", "res", "rre", "rres", "glres", "gstore")
#: Bytes on the wire per byte of data in an LL packet (LL16Packet: 8 of 16 bytes are flags).
PACKET_WIRE = 2


@dataclass(frozen=True, eq=False)
class MscclppImport:
    plan: ExecutionPlan
    collective: Collective
    schedule: Schedule
    ranks: tuple[int, ...]
    completion: float  # when the last op finished (seconds)
    notes: tuple[str, ...]
    problems: tuple[str, ...]
    model: TimeModel = TimeModel()
    #: What the schedule is timed on: without switch channels (NVLS) the machine's switches only
    #: route (``msccl.routes.routing_view``); the packet view of that for LL packets.
    machine: Machine | None = None

    @property
    def faithful(self) -> bool:
        return not self.problems


def import_mscclpp_plan(source: str | os.PathLike | ExecutionPlan, machine: Machine, *, size: int,
                        ranks: Sequence[int] | None = None, model: TimeModel = TimeModel()) -> MscclppImport:
    """Reads the plan (a path or a parsed ``ExecutionPlan``) as a schedule of a collective of M = ``size``
    bytes on ``machine``; ``ranks``: the NPU of each GPU (default 0..N-1)."""
    plan = source if isinstance(source, ExecutionPlan) else read_plan(source)
    notes = check_plan(plan)
    sizes = sizes_for(plan, int(size))
    n = len(plan.gpus)
    rank_map = list(range(n)) if ranks is None else [int(r) for r in ranks]
    if len(rank_map) != n or len(set(rank_map)) != n or any(not 0 <= r < machine.num_npus for r in rank_map):
        raise InputError(f"the plan has {n} GPUs; ranks must name {n} distinct NPUs of machine {machine.name!r} "
                         f"(0..{machine.num_npus - 1}), got {rank_map}", source=plan.source, field="ranks")
    kind = plan.collective
    packets = _packet_transfers(plan)
    if not any(ch.type == "switch" for g in plan.gpus for ch in g.channels):
        machine = routing_view(machine)  # no NVLS op: every switch only routes the puts
    if packets:
        machine = packet_view(machine)
    tbs = [(g, t, steps_of(g, t.ops, sizes, plan)) for g in plan.gpus for t in sorted(g.threadblocks, key=lambda t: t.id)]
    unit = unit_bytes([s for _, _, s in tbs], sizes, plan)
    units = (sizes.output if kind == "allgather" else sizes.input) // unit * (n if kind == "alltoall" else 1)
    layout = make_layout(kind, n, units, plan.inplace)
    sim = Simulator(plan, machine, rank_map, tbs, unit, layout, kind in COMBINING, model)
    run = sim.run()
    if run.stuck:
        raise InputError(f"deadlock: {run.stuck[0]} never runs", source=plan.source)
    collective = _collective(kind, layout.per_rank, units, rank_map, size)
    rows = run.rows
    schedule = from_arrays([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], [r[3] for r in rows],
                           via=[r[4] for r in rows], producer="mscclpp-plan", source=plan.source, plan=plan.name)
    problems = run.problems
    if len(problems) > MAX_PROBLEMS:
        problems = problems[:MAX_PROBLEMS] + [f"... and {len(problems) - MAX_PROBLEMS} more problems"]
    notes = list(notes) + [f"{len(plan.gpus)} GPUs, buffers cut into units of {sim.unit} B (optcoll's chunks)"]
    if packets:
        notes.append(f"LL packets: {PACKET_WIRE * 8} bytes on the wire per 8 of data (LL16Packet), so the schedule is "
                     f"timed on {machine.name}, every link carrying half its rate in data")
    return MscclppImport(plan, collective, schedule, tuple(rank_map), run.finish, tuple(notes), tuple(problems), model,
                         machine)


def packet_view(machine: Machine) -> Machine:
    """The machine as LL packets use it: each link's data rate divided by ``PACKET_WIRE``."""
    return dataclasses.replace(machine, name=f"{machine.name} (LL packets)",
                               link_bandwidth=machine.link_bandwidth / PACKET_WIRE,
                               sources=(*machine.sources, "LL packets: 8 bytes of data per 16 on the wire "
                                                          "(microsoft/mscclpp LL16Packet)"))


def _packet_transfers(plan: ExecutionPlan) -> bool:
    """Whether the plan's transfers between GPUs are LL packets; refuses a plan with both kinds."""
    first: dict[bool, Op] = {}
    for gpu in plan.gpus:
        for tb in gpu.threadblocks:
            for op in (o for top in tb.ops for o in (top, *top.inner)):
                if op.name in PACKET_SENDS or op.name in PLAIN_SENDS:
                    first.setdefault(op.name in PACKET_SENDS, op)
    if len(first) == 2:
        raise InputError(f"{first[True].name} at {first[True].where} sends LL packets (16 bytes per 8 of data) and "
                         f"{first[False].name} at {first[False].where} plain data; optcoll times all transfers of a "
                         "plan at one size per byte of data", source=plan.source, field=first[False].where)
    return bool(first.get(True))


def _collective(kind: str, per_rank: int, units: int, ranks: list[int], size: float) -> Collective:
    n = len(ranks)
    if kind == "allreduce" and units % n:
        everyone = [list(ranks)] * units
        return make_custom(ranks, everyone, everyone, size / units, combining=True, name="allreduce")
    return make_collective(kind, ranks, size, per_rank)
