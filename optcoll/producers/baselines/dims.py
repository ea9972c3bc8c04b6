"""Finding a machine's grid dimensions from its links alone (no trust in names).

Multi-dimensional algorithms (ASTRA-sim's hierarchical collectives, snake rings) need the sizes
(d0, d1, ...) with NPU id = x0 + d0·(x1 + d1·(x2 + ...)), dimension 0 fastest: the convention of
optcoll's generators, TACOS and ASTRA-sim. ``grid_dims`` returns the factorisation of N with the
most dimensions in which every pair of NPUs that talk directly (one link, or two links through a
switch) differs in exactly one coordinate, and every dimension is used by some pair. A 2D torus
8x8 gives (8, 8), a hypercube 2^6 gives (2,)*6, ASTRA-sim's Ring(4) x Switch(8) gives (4, 8); a
machine with no such structure gives a single dimension (N,).
"""
from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from optcoll.machines.machine import Machine


def npu_pairs(machine: Machine) -> tuple[np.ndarray, np.ndarray]:
    """NPU pairs (u < v) joined by a link or by two links through one switch."""
    n = machine.num_npus
    src, dst = machine.link_src, machine.link_dst
    direct = (src < n) & (dst < n)
    us, vs = [src[direct]], [dst[direct]]
    for s in range(n, machine.num_nodes):
        inside = np.unique(src[(dst == s) & (src < n)])
        outside = np.unique(dst[(src == s) & (dst < n)])
        if inside.size and outside.size:
            a, b = np.meshgrid(inside, outside, indexing="ij")
            us.append(a.ravel())
            vs.append(b.ravel())
    u, v = np.concatenate(us), np.concatenate(vs)
    keep = u != v
    lo, hi = np.minimum(u[keep], v[keep]), np.maximum(u[keep], v[keep])
    pairs = np.unique(lo * n + hi)
    return pairs // n, pairs % n


def _factorisations(n: int) -> Iterator[tuple[int, ...]]:
    """Ordered factorisations of n into factors ≥ 2."""
    if n == 1:
        yield ()
        return
    for f in [d for d in range(2, n + 1) if n % d == 0]:
        for rest in _factorisations(n // f):
            yield (f, *rest)


def _fits(dims: tuple[int, ...], u: np.ndarray, v: np.ndarray) -> bool:
    differ = np.zeros(u.size, dtype=np.int64)
    used = []
    a, b = u.copy(), v.copy()
    for size in dims:
        step = (a % size) != (b % size)
        differ += step
        used.append(bool(step.any()))
        a //= size
        b //= size
    return bool(np.all(differ == 1)) and all(used)


def grid_dims(machine: Machine) -> tuple[int, ...]:
    """The machine's dimensions, dimension 0 fastest (module docstring)."""
    n = machine.num_npus
    u, v = npu_pairs(machine)
    if u.size == 0 or n < 4:
        return (n,)
    best: tuple[int, ...] = (n,)
    for dims in _factorisations(n):
        if len(dims) > len(best) and _fits(dims, u, v):
            best = dims
    return best


def coordinates(v: int, dims: tuple[int, ...]) -> list[int]:
    out = []
    for size in dims:
        v, x = divmod(v, size)
        out.append(x)
    return out


def npu_id(coords: list[int], dims: tuple[int, ...]) -> int:
    v, stride = 0, 1
    for x, size in zip(coords, dims):
        v += x * stride
        stride *= size
    return v
