"""Logical rings over a communicator that follow physical links where possible.

A ring algorithm is only as good as its ring: consecutive members should be neighbours. Orders
are tried in this sequence: the members in rank order (rings, and anything cabled that way);
on grids (``grid_dims``) a comb, the standard Hamiltonian cycle of a mesh with an even side, run
over dimension 0 and a reflected Gray-code path through the other dimensions, or the Gray-code
path closed by a wraparound (tori with all sides odd, hypercubes); then a randomised depth-first
search with a step budget. If all fail, rank order, whose non-adjacent hops are routed.

``disjoint_rings`` looks for several edge-disjoint Hamiltonian cycles (each usable in both
directions), which NCCL-style multi-ring/channel algorithms need: on full tori and hypercubes by
merging the cycles of the per-dimension 2-factors (``kotzig_rings``), elsewhere by repeating the
search on the cables earlier rings left unused.
"""
from __future__ import annotations

import numpy as np

from optcoll.machines.machine import Machine
from optcoll.producers.baselines.dims import grid_dims, npu_id

Edges = set[tuple[int, int]]


def _adjacency(machine: Machine, members: list[int], used: Edges, directed: bool
               ) -> dict[int, set[int]]:
    """Member → members it has a direct link to; unless ``directed``, only cables (links both
    ways), minus the cables in ``used``."""
    inside = set(members)
    pairs = set(zip(machine.link_src.tolist(), machine.link_dst.tolist()))
    adj: dict[int, set[int]] = {v: set() for v in members}
    for u, v in pairs:
        if u in inside and v in inside and (directed or ((v, u) in pairs
                                                          and (min(u, v), max(u, v)) not in used)):
            adj[u].add(v)
    return adj


def is_cycle(order: list[int], adj: dict[int, set[int]]) -> bool:
    return len(order) > 1 and all(b in adj[a] for a, b in zip(order, order[1:] + order[:1]))


def _gray_path(dims: tuple[int, ...]) -> list[list[int]]:
    """Reflected mixed-radix Gray code: consecutive coordinate vectors differ by one in one place
    (dimension 0 fastest)."""
    if not dims:
        return [[]]
    rest = _gray_path(dims[1:])
    out = []
    for i, tail in enumerate(rest):
        xs = range(dims[0]) if i % 2 == 0 else range(dims[0] - 1, -1, -1)
        out.extend([[x, *tail] for x in xs])
    return out


def _comb(a: int, b: int) -> list[tuple[int, int]]:
    """A Hamiltonian cycle of the a x b grid graph (b even): snake over columns 1..a-1 row by
    row, come back along column 0."""
    out = []
    for y in range(b):
        xs = range(1, a) if y % 2 == 0 else range(a - 1, 0, -1)
        out.extend((x, y) for x in xs)
    out.extend((0, y) for y in range(b - 1, -1, -1))
    return out


def _grid_cycles(dims: tuple[int, ...]) -> list[list[int]]:
    """Candidate Hamiltonian cycles of a grid with these dimensions (checked by the caller)."""
    if len(dims) < 2:
        return []
    path = _gray_path(dims[1:])
    a, b = dims[0], len(path)
    out = []
    if b % 2 == 0 or a % 2 == 0:
        cells = _comb(a, b) if b % 2 == 0 else [(x, y) for y, x in _comb(b, a)]
        out.append([npu_id([x, *path[y]], dims) for x, y in cells])
    out.append([npu_id(c, dims) for c in _gray_path(dims)])
    return out


def search_cycle(adj: dict[int, set[int]], start: int, rng: np.random.Generator, budget: int
            ) -> list[int] | None:
    """Randomised depth-first search for a Hamiltonian cycle through start (Warnsdorff order:
    fewest onward options first), giving up after ``budget`` steps."""
    n = len(adj)
    order, on_path = [start], {start}
    stack = [iter(_ordered(adj, start, on_path, rng))]
    steps = 0
    while stack and steps < budget:
        steps += 1
        nxt = next(stack[-1], None)
        if nxt is None:
            stack.pop()
            on_path.discard(order.pop())
            continue
        order.append(nxt)
        on_path.add(nxt)
        if len(order) == n:
            if start in adj[nxt]:
                return order
            on_path.discard(order.pop())
            continue
        stack.append(iter(_ordered(adj, nxt, on_path, rng)))
    return None


def _ordered(adj: dict[int, set[int]], v: int, on_path: set[int], rng: np.random.Generator
             ) -> list[int]:
    options = [w for w in adj[v] if w not in on_path]
    keys = [(sum(1 for x in adj[w] if x not in on_path), rng.random()) for w in options]
    return [w for _, w in sorted(zip(keys, options))]


def find_ring(machine: Machine, members: list[int], used: Edges | None = None, seed: int = 0,
              constructive: bool = True, directed: bool = False) -> list[int] | None:
    """A Hamiltonian cycle over the members through cables not in ``used`` (``directed``: through
    links, one way round), or None. ``constructive`` first tries rank order and the grid
    cycles; the search runs either way.
    """
    if len(members) < 2:
        return None
    adj = _adjacency(machine, members, used or set(), directed)
    if constructive:
        if is_cycle(list(members), adj):
            return list(members)
        if sorted(members) == list(range(machine.num_npus)):
            for order in _grid_cycles(grid_dims(machine)):
                if is_cycle(order, adj):
                    return order
    return search_cycle(adj, members[0], np.random.default_rng(seed), max(20_000, 100 * len(members)))


def ring_order(machine: Machine, members: list[int], directed: bool = False) -> list[int]:
    """The members in a physical ring order if one is found (``directed``: following links one
    way round; otherwise through cables usable both ways); else, on a grid, the Gray-code path
    (only the closing hop is routed); else rank order."""
    ring = find_ring(machine, members, directed=directed)
    if ring is not None:
        return ring
    if sorted(members) == list(range(machine.num_npus)):
        dims = grid_dims(machine)
        if len(dims) > 1:
            return [npu_id(c, dims) for c in _gray_path(dims)]
    return list(members)


def disjoint_rings(machine: Machine, members: list[int], tries: int = 8) -> list[list[int]]:
    """Edge-disjoint Hamiltonian cycles over the members (module docstring), the most found in
    ``tries`` attempts (the first starts from the constructive ring, the others from random
    searches); at least one order (possibly rank order) is always returned."""
    best: list[list[int]] = []
    if sorted(members) == list(range(machine.num_npus)):
        best = kotzig_rings(machine)
    for attempt in range(tries if len(best) < 2 else 0):
        used: Edges = set()
        rings: list[list[int]] = []
        while True:
            ring = find_ring(machine, members, used, seed=1000 * attempt + len(rings),
                             constructive=attempt == 0)
            if ring is None:
                break
            rings.append(ring)
            used |= {(min(a, b), max(a, b)) for a, b in zip(ring, ring[1:] + ring[:1])}
        if len(rings) > len(best):
            best = rings
    return best or [ring_order(machine, members)]


def _dimension_factors(machine: Machine) -> list[list[list[int]]] | None:
    """The cables of a full torus or hypercube as 2-factors, one per dimension of size > 2 (its
    rings) and one per pair of size-2 dimensions (its squares): ``factor[v]`` = v's two
    neighbours. None when the machine is not such a grid (a mesh, say)."""
    dims = grid_dims(machine)
    n = machine.num_npus
    if len(dims) < 2:
        return None
    adj = _adjacency(machine, list(range(n)), set(), False)
    big = [[d] for d, size in enumerate(dims) if size > 2]
    small = [d for d, size in enumerate(dims) if size == 2]
    groups = big + [small[i:i + 2] for i in range(0, len(small) - 1, 2)]
    strides = [int(np.prod(dims[:d])) for d in range(len(dims))]

    def dim_of(u: int, v: int) -> int:
        return next(d for d in range(len(dims)) if (u // strides[d]) % dims[d] != (v // strides[d]) % dims[d])

    factors = []
    for group in groups:
        factor = [[w for w in sorted(adj[v]) if dim_of(v, w) in group] for v in range(n)]
        if any(len(nbrs) != 2 for nbrs in factor):
            return None
        factors.append(factor)
    return factors if len(factors) >= 2 else None


def _cycles(factor: list[list[int]]) -> tuple[list[int], int]:
    """Cycle id of every node of a 2-factor, and the number of cycles."""
    cid = [-1] * len(factor)
    count = 0
    for start in range(len(factor)):
        if cid[start] >= 0:
            continue
        prev, v = -1, start
        while cid[v] < 0:
            cid[v] = count
            a, b = factor[v]
            prev, v = v, (b if a == prev else a)
        count += 1
    return cid, count


def _tour(factor: list[list[int]], start: int) -> list[int]:
    order, prev, v = [start], start, factor[start][0]
    while v != start:
        order.append(v)
        a, b = factor[v]
        prev, v = v, (b if a == prev else a)
    return order


def _switch(fp: list[list[int]], fq: list[list[int]], a: int, b: int, c: int, d: int) -> None:
    """Square a-b-c-d with ab, cd in fp and bc, da in fq: afterwards bc, da are in fp and ab, cd
    in fq (the same call on b, c, d, a undoes it)."""
    for f, gone, added in ((fp, ((a, b), (c, d)), ((b, c), (d, a))),
                           (fq, ((b, c), (d, a)), ((a, b), (c, d)))):
        for x, y in gone:
            f[x][f[x].index(y)] = -1
            f[y][f[y].index(x)] = -1
        for x, y in added:
            f[x][f[x].index(-1)] = y
            f[y][f[y].index(-1)] = x


def kotzig_rings(machine: Machine, seed: int = 0, budget: int | None = None) -> list[list[int]]:
    """Edge-disjoint Hamiltonian cycles of a full torus or hypercube by merging the cycles of its
    dimension 2-factors: a square a-b-c-d with ab, cd in factor p and bc, da in factor q is
    switched (ab, cd move to q, bc, da to p), which keeps both 2-factors and merges or splits
    their cycles (Kotzig's transformation); switches that do not add cycles are kept. Returns
    the factors that became single cycles (possibly none)."""
    factors = _dimension_factors(machine)
    if factors is None:
        return []
    rng = np.random.default_rng(seed)
    n = machine.num_npus
    state = [_cycles(f) for f in factors]
    budget = budget or 400 * n
    for _ in range(budget):
        if all(count == 1 for _, count in state):
            break
        p, q = (int(x) for x in rng.choice(len(factors), 2, replace=False))
        fp, fq = factors[p], factors[q]
        a = int(rng.integers(n))
        b, d = fp[a][int(rng.integers(2))], fq[a][int(rng.integers(2))]
        options = [c for c in fq[b] if c in fp[d] and c != a]
        if not options or b == d:
            continue
        c = options[0]
        before = state[p][1] + state[q][1]
        _switch(fp, fq, a, b, c, d)
        after_p, after_q = _cycles(fp), _cycles(fq)
        if after_p[1] + after_q[1] <= before:
            state[p], state[q] = after_p, after_q
        else:
            _switch(fp, fq, b, c, d, a)  # undo
    return [_tour(f, 0) for f, (_, count) in zip(factors, state) if count == 1]
