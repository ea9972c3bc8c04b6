"""The first AllReduce schedule of the exact timed solver: the fastest verified schedule of the
registry's producers of AllReduce (issue 34).

The solver starts from it and returns it when nothing faster is found, so its answer at a C is
never slower than any producer it ran at that C (NCCL's algorithms, rail-exchange, inswitch,
the greedies, the classical baselines); the solver's record names the producer
(``params["start"]``). Every producer of the registry runs up to ``PORTFOLIO_MAX_CELLS``; above
it (a 512-GPU cluster, where some producers take minutes each) only those built from the
machine's structure run, and the note says so. They run within the solve's clock (the structured
ones first: they are the fastest wherever they apply); a producer the clock stops, and those after
it, are named in a note, since the answer is then only never slower than the ones that ran.
Ctrl-C under a clock ends them the same way: the starts made before it are kept.
"""
from __future__ import annotations

from dataclasses import dataclass

from optcoll.instances.clock import Clock, OutOfTime, phase, running
from optcoll.instances.instance import Instance
from optcoll.producers.registry import IMPLEMENTS, SYNTHESIZERS, run_portfolio
from optcoll.schedules.schedule import Schedule
from optcoll.units import format_time

#: Largest AllReduce (chunks × ranks) for which every producer of the registry runs: the whole
#: portfolio takes about 7 s on dgxh100-rail-16x8 at C = 1 (128 × 128), about 10 min on
#: dgxh100-rail-64x8 at C = 1 (2 shared cores).
PORTFOLIO_MAX_CELLS = 128 * 128
#: The producers that still run above it: built from the machine's structure (a switch that
#: reduces and multicasts, NVLS inside nodes and a tree across them, nodes joined by NIC rails),
#: the fastest of the portfolio wherever they apply.
STRUCTURED = ("inswitch", "nccl-nvls-tree", "rail-exchange")


@dataclass(frozen=True)
class Start:
    """The fastest producer's schedule, its verified time, and what was tried."""

    schedule: Schedule
    time: float  # verified seconds
    producer: str
    tried: tuple[str, ...]  # the producers that applied, fastest first

    def params(self) -> dict:
        return {"producer": self.producer, "time": self.time, "tried": list(self.tried)}

    def note(self) -> str:
        return (f"first AllReduce schedule: {self.producer}, {format_time(self.time)} (fastest of "
                f"{len(self.tried)} producer(s) that apply: {', '.join(self.tried)})")


def allreduce_producers(instance: Instance) -> tuple[str, ...]:
    """The producers the start runs for ``instance``, the structured ones first (module docstring)."""
    everyone = tuple(name for name in SYNTHESIZERS if "allreduce" in IMPLEMENTS[name])
    cells = instance.collective.num_chunks * instance.collective.num_ranks
    if cells > PORTFOLIO_MAX_CELLS:
        return STRUCTURED
    return (*STRUCTURED, *(name for name in everyone if name not in STRUCTURED))


def best_start(instance: Instance, clock: Clock | None = None, notes: list[str] | None = None) -> Start | None:
    """The fastest verified schedule of ``allreduce_producers`` at the instance's seed, those the
    ``clock`` leaves time for (``notes`` names the rest); None when none applies."""
    names = allreduce_producers(instance)
    found = []
    for order, name in enumerate(names):
        try:
            if clock is not None and clock.expired():
                raise OutOfTime(name)
            with running(clock), phase(clock, f"start: {name}"):
                found += [(entry.time, order, entry) for entry in run_portfolio(instance, instance.budget.seed, (name,))]
        except (OutOfTime, KeyboardInterrupt) as stopped:
            if isinstance(stopped, KeyboardInterrupt):
                if clock is None:
                    raise
                clock.interrupt()  # Ctrl-C: the starts made so far are kept
            if notes is not None:
                why = "interrupted" if clock is not None and clock.interrupted else "out of time"
                notes.append(f"start schedules {why} before {', '.join(names[order:])}: the answer is never "
                             "slower than the producers that ran only")
            break
    if not found:
        return None
    entries = [entry for _, _, entry in sorted(found, key=lambda item: item[:2])]
    first = entries[0]
    return Start(first.schedule, first.time, first.name, tuple(entry.name for entry in entries))
