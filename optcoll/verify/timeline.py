"""Replaying a verified schedule for people: a timeline table, link utilisation, a Gantt chart."""
from __future__ import annotations

import io
import os
from dataclasses import dataclass

import numpy as np

from optcoll.collectives.collective import Collective
from optcoll.fileio import write_text_atomic
from optcoll.machines.machine import Machine
from optcoll.schedules.schedule import OP_NAMES, Schedule
from optcoll.units import format_time
from optcoll.verify.result import LinkStats, Verification


@dataclass(frozen=True)
class TimelineRow:
    transfer: int
    chunk: int
    src: int
    dst: int
    link: int
    start: float  # seconds
    end: float  # seconds: the delivery
    op: str


def _well_formed(schedule: Schedule, verification: Verification) -> np.ndarray:
    if verification.arrivals.shape[0] != len(schedule):
        raise ValueError("the verification does not belong to this schedule")
    return np.flatnonzero(np.isfinite(verification.arrivals))


def timeline(machine: Machine, collective: Collective, schedule: Schedule,
             verification: Verification) -> list[TimelineRow]:
    """Every well-formed transfer in (start, transfer id) order, with its delivery time."""
    del collective  # the rows need nothing from it; kept for a uniform call signature
    rows = _well_formed(schedule, verification)
    order = rows[np.lexsort((rows, verification.starts[rows]))]
    src, dst = machine.link_src[schedule.link[order]], machine.link_dst[schedule.link[order]]
    return [TimelineRow(int(i), int(c), int(u), int(v), int(e), float(s), float(a), OP_NAMES[int(o)])
            for i, c, u, v, e, s, a, o in zip(order, schedule.chunk[order], src, dst,
                                               schedule.link[order], verification.starts[order],
                                               verification.arrivals[order], schedule.op[order])]


def utilisation(verification: Verification, *, used_only: bool = True) -> list[LinkStats]:
    """Links by decreasing utilisation (busy time over the makespan), ties by link id."""
    stats = [s for s in verification.link_stats if s.transfers or not used_only]
    return sorted(stats, key=lambda s: (-s.utilisation, s.link))


def draw_gantt(machine: Machine, schedule: Schedule, verification: Verification,
               path: str | os.PathLike, max_links: int = 64) -> None:
    """An SVG Gantt chart: one row per link (the ``max_links`` busiest), a bar per transfer.

    Bars span the link occupancy start → delivery and are coloured by chunk.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.collections import PolyCollection

    rows = _well_formed(schedule, verification)
    busiest = [s.link for s in utilisation(verification)[:max_links]]
    shown = sorted(busiest)
    row_of = np.full(machine.num_links, -1)
    row_of[shown] = np.arange(len(shown))
    rows = rows[row_of[schedule.link[rows]] >= 0] if shown else rows[:0]
    scale, unit = _time_unit(verification.makespan)
    x0 = verification.starts[rows] / scale
    x1 = verification.arrivals[rows] / scale
    y = row_of[schedule.link[rows]].astype(float)
    boxes = np.stack([np.stack([x0, y - 0.4], 1), np.stack([x0, y + 0.4], 1),
                      np.stack([x1, y + 0.4], 1), np.stack([x1, y - 0.4], 1)], 1)
    colours = plt.get_cmap("tab20")(schedule.chunk[rows] % 20)
    height = max(2.5, 0.25 * len(shown) + 1.2)
    fig, ax = plt.subplots(figsize=(10, height))
    ax.add_collection(PolyCollection(boxes, facecolors=colours, edgecolors="black", linewidths=0.2))
    ax.set_xlim(0, max(verification.makespan / scale, 1e-12))
    ax.set_ylim(-0.8, max(len(shown), 1) - 0.2)
    ax.set_yticks(range(len(shown)))
    ax.set_yticklabels([f"{e} {machine.label(int(machine.link_src[e]))}->"
                        f"{machine.label(int(machine.link_dst[e]))}" for e in shown], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel(f"time ({unit})")
    used = sum(1 for s in verification.link_stats if s.transfers)
    title = (f"{machine.name}: {len(schedule)} transfers, time {format_time(verification.time)}"
             if verification.valid else f"{machine.name}: INVALID ({verification.violation.kind})")
    ax.set_title(title + (f" — {len(shown)} of {used} used links" if len(shown) < used else ""),
                 fontsize=9)
    fig.tight_layout()
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg")
    plt.close(fig)
    write_text_atomic(path, buffer.getvalue())


def _time_unit(seconds: float) -> tuple[float, str]:
    for unit, factor in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= factor:
            return factor, unit
    return 1e-9, "ns"
