"""AxoNN's 4D grid (X, Y, Z tensor dimensions × D data parallel) and its process groups.

Placement follows AxoNN (``axonn/communication.py``): a GPU's global rank is its coordinate in a
mixed-radix number whose fastest digit is the column dimension X (``G_intra_c``, the "inner"
group), then the row dimension Y (``G_intra_r``), then the depth dimension Z (``G_intra_d``),
then data parallelism D (pipelining, ``G_inter``, is 1 here). With the launcher filling nodes
with consecutive ranks, X groups land inside a node first. ``order`` lets a caller try other
placements; it lists the dimensions fastest first.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from optcoll.errors import InputError

DIMS = ("X", "Y", "Z", "D")
AXONN_ORDER = "XYZD"


def _check_order(order: str) -> str:
    if sorted(order) != sorted(DIMS):
        raise InputError(f"must list X, Y, Z and D once each, fastest first; got {order!r}",
                         field="order")
    return order


@dataclass(frozen=True)
class ParallelGrid:
    """A 4D configuration: group sizes along X, Y, Z and D, and the rank order (fastest first)."""

    x: int
    y: int
    z: int
    d: int
    order: str = AXONN_ORDER

    def __post_init__(self) -> None:
        for dim, size in zip(DIMS, self.shape):
            if isinstance(size, bool) or not isinstance(size, int) or size < 1:
                raise InputError(f"{dim} must be a positive integer, got {size!r}", field="shape")
        _check_order(self.order)

    @property
    def shape(self) -> tuple[int, int, int, int]:
        return (self.x, self.y, self.z, self.d)

    @property
    def gpus(self) -> int:
        return self.x * self.y * self.z * self.d

    def size(self, dim: str) -> int:
        return self.shape[DIMS.index(dim)]

    def stride(self, dim: str) -> int:
        """Rank distance between neighbours along ``dim``: the product of the faster dimensions."""
        faster = self.order[:self.order.index(dim)]
        return int(np.prod([self.size(f) for f in faster], dtype=np.int64))

    def label(self) -> str:
        return "x".join(str(s) for s in self.shape)

    @cached_property
    def _ranks(self) -> np.ndarray:
        """Ranks laid out with one array axis per dimension, in ``DIMS`` order."""
        slow_first = self.order[::-1]
        cube = np.arange(self.gpus, dtype=np.int64).reshape([self.size(dim) for dim in slow_first])
        return np.transpose(cube, [slow_first.index(dim) for dim in DIMS])

    def coords(self, rank: int) -> tuple[int, int, int, int]:
        """(x, y, z, d) of a global rank."""
        if not 0 <= rank < self.gpus:
            raise InputError(f"rank {rank} is outside 0..{self.gpus - 1}", field="rank")
        where = np.argwhere(self._ranks == rank)[0]
        return tuple(int(c) for c in where)  # type: ignore[return-value]

    def groups(self, dim: str) -> tuple[tuple[int, ...], ...]:
        """Every process group along ``dim``: members ordered by their coordinate along ``dim``,
        groups ordered by their first member. Together they partition the ranks."""
        if dim not in DIMS:
            raise InputError(f"unknown dimension {dim!r}; use one of {', '.join(DIMS)}", field="dim")
        axis = DIMS.index(dim)
        rows = np.moveaxis(self._ranks, axis, -1).reshape(-1, self.size(dim))
        rows = rows[np.argsort(rows[:, 0], kind="stable")]
        return tuple(tuple(int(r) for r in row) for row in rows)


def parse_shape(text: str, order: str = AXONN_ORDER) -> ParallelGrid:
    """``"X,Y,Z,D"`` (e.g. ``"4,2,2,4"``) as a ``ParallelGrid``."""
    parts = [p.strip() for p in str(text).split(",")]
    if len(parts) != 4 or not all(p.isdigit() for p in parts):
        raise InputError(f"must be four positive integers X,Y,Z,D, got {text!r}", field="shape")
    x, y, z, d = (int(p) for p in parts)
    return ParallelGrid(x, y, z, d, order)


def configurations(gpus: int, order: str = AXONN_ORDER) -> list[ParallelGrid]:
    """Every grid with X·Y·Z·D = ``gpus``, in lexicographic (X, Y, Z, D) order."""
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise InputError(f"must be a positive integer, got {gpus!r}", field="gpus")
    divisors = [k for k in range(1, gpus + 1) if gpus % k == 0]
    grids = []
    for x in divisors:
        for y in divisors:
            if gpus % (x * y):
                continue
            for z in divisors:
                if gpus % (x * y * z) == 0:
                    grids.append(ParallelGrid(x, y, z, gpus // (x * y * z), order))
    return grids
