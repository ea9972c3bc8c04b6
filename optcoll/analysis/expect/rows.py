"""A row of ``optcoll expect``: the physical bound, the best verified schedule and the runtime's own
choice at one size, in the calibrated model (docs/model.md §8).

The runtime's choice is NCCL's (``predict.nccl_choice``) unless the machine's runtime runs MSCCL
algorithms by default (RCCL on MI300X: ``rccl.rccl_choice``, the file RCCL runs at that size)."""
from __future__ import annotations

from dataclasses import dataclass

from optcoll.analysis.expect.predict import Choice, Context, best_choice, nccl_best, nccl_choice, physical_bound
from optcoll.analysis.expect.rccl import rccl_choice


def runtime_choice(ctx: Context, kind: str, size: int, algorithm: str | None = None) -> Choice:
    """What the machine's runtime runs at ``size`` and its calibrated time: RCCL's MSCCL file where
    one applies (unless ``algorithm`` forces one of NCCL's), else NCCL's pick."""
    if algorithm is None and ctx.generation.msccl:
        own = rccl_choice(ctx, kind, size)
        if own is not None:
            return own
    return nccl_choice(ctx, kind, size, algorithm)


@dataclass(frozen=True)
class Row:
    size: int
    bound: float
    bound_name: str
    best: Choice
    nccl: Choice
    measured: float | None = None
    #: The fastest of what NCCL runs (``nccl_best``), when asked for (a tuner table's entry).
    tuned: Choice | None = None
    #: The measuring harness's floor (``predict.host_floor``), seconds; 0 when none applies.
    host_floor: float = 0.0

    @property
    def headroom(self) -> float:
        return self.nccl.seconds / self.best.seconds

    @property
    def predicted(self) -> float:
        """What the measurement should show: NCCL's time, never below the harness's floor."""
        return max(self.nccl.seconds, self.host_floor)

    def to_dict(self) -> dict:
        out = {"size": self.size, "bound": self.bound, "bound_name": self.bound_name,
               "best": self.best.to_dict(), "nccl": self.nccl.to_dict(), "headroom": self.headroom,
               "measured": self.measured}
        if self.tuned is not None:
            out["nccl_tuned"] = self.tuned.to_dict()
        if self.host_floor:
            out["host_floor"] = self.host_floor
            out["predicted"] = self.predicted
        if self.measured is not None:
            out["measured_of_best"] = self.best.seconds / self.measured
            out["measured_of_bound"] = self.bound / self.measured
        return out


def row(ctx: Context, kind: str, size: int, algorithm: str | None = None,
        measured: float | None = None, tuned: bool = False, host_floor: float = 0.0) -> Row:
    """One size of ``optcoll expect``; ``tuned`` adds ``nccl_best`` (for tuner tables);
    ``host_floor`` the measuring harness's (``predict.host_floor``)."""
    bound, name = physical_bound(ctx.physical, kind, size)
    return Row(size, bound, name, best_choice(ctx, kind, size), runtime_choice(ctx, kind, size, algorithm), measured,
               nccl_best(ctx, kind, size) if tuned else None, host_floor)
