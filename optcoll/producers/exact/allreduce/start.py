"""The first AllReduce schedule of the exact timed solver: the fastest verified schedule of the
registry's producers of AllReduce (issue 34).

The solver starts from it and returns it when nothing faster is found, so its answer at a C is
never slower than any producer it ran at that C (NCCL's algorithms, rail-exchange, inswitch,
the greedies, the classical baselines); the solver's record names the producer
(``params["start"]``). Every producer of the registry runs up to ``PORTFOLIO_MAX_CELLS``; above
it (a 512-GPU cluster, where some producers take minutes each) only those built from the
machine's structure run, and the note says so.
"""
from __future__ import annotations

from dataclasses import dataclass

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
    """The producers the start runs for ``instance`` (module docstring)."""
    everyone = tuple(name for name in SYNTHESIZERS if "allreduce" in IMPLEMENTS[name])
    cells = instance.collective.num_chunks * instance.collective.num_ranks
    return everyone if cells <= PORTFOLIO_MAX_CELLS else STRUCTURED


def best_start(instance: Instance) -> Start | None:
    """The fastest verified schedule of ``allreduce_producers`` at the instance's seed; None when
    none applies."""
    entries = run_portfolio(instance, instance.budget.seed, allreduce_producers(instance))
    if not entries:
        return None
    first = entries[0]
    return Start(first.schedule, first.time, first.name, tuple(entry.name for entry in entries))
