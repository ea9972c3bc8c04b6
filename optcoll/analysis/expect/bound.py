"""The physical lower bound of ``optcoll expect`` at every size, computed once per machine and
collective (docs/model.md §8: valid for every chunking C).

Two parts, each a valid bound on its own, of which the larger is reported:

* *bandwidth*: on the machine with every link latency set to 0, the timed model (serialization
  occupancy) is scale-free: a schedule of M bytes with all times multiplied by s/M is a schedule
  of s bytes at the same C, so any lower bound L of the zero-latency machine at M gives s·L/M at
  s. Latency only delays deliveries (every schedule of the real machine is one of the zero-latency
  machine with the same times), so s·L/M bounds the real machine too. L is the largest bound whose
  value is the same at C = 1, 2 and 4 (cuts and volumes: what no chunking changes), at a
  reference size;
* *latency*: the latency bound of a vanishing chunk (α of the farthest hop chain), size-free.

So the bounds code runs four times per (machine, collective), not four times per size.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from optcoll.bounds.api import lower_bounds
from optcoll.bounds.latency import latency_bound
from optcoll.collectives.builtins import make_collective
from optcoll.instances.instance import TimeModel
from optcoll.machines.machine import Machine

MODEL = TimeModel(occupancy="serialization")
#: Where the bandwidth bounds are computed (any size gives the same per-byte value).
REFERENCE_BYTES = float(1 << 30)


@dataclass(frozen=True)
class BoundCurve:
    """``per_byte``·size (the bound named ``name``) or ``latency``, whichever is larger."""

    per_byte: float
    name: str
    latency: float

    def at(self, size: float) -> tuple[float, str]:
        bandwidth = self.per_byte * size
        return (bandwidth, self.name) if bandwidth >= self.latency else (self.latency, "latency")


@lru_cache(maxsize=32)
def bound_curve(physical: Machine, kind: str) -> BoundCurve:
    """The curve of ``physical`` (module docstring); cached per machine object."""
    ranks = list(range(physical.num_npus))
    free = replace(physical, link_latency=np.zeros_like(physical.link_latency))
    values: dict[str, list[float]] = {}
    for c in (1, 2, 4):
        for b in lower_bounds(free, make_collective(kind, ranks, REFERENCE_BYTES, c), MODEL):
            values.setdefault(b.name, []).append(b.value)
    steady = {name: v[0] for name, v in values.items()
              if name != "latency" and len(v) == 3 and max(v) - min(v) <= 1e-12 * max(v)}
    name, value = max(steady.items(), key=lambda item: (item[1], item[0]), default=("none", 0.0))
    tiny = make_collective(kind, ranks, 1e-9 * len(ranks), 1)
    return BoundCurve(value / REFERENCE_BYTES, name, latency_bound(physical, tiny, MODEL).value)
