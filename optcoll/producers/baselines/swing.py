"""Swing (De Sensi, Bonato, Saam, Hoefler, NSDI'24): the bandwidth-optimal AllReduce on tori.

Peers. In step s of one dimension of size d a node at coordinate x talks to x + ρ(s) (x even) or
x − ρ(s) (x odd), mod d, with ρ(s) = Σ_{i=0..s} (−2)^i = 1, −1, 3, −5, 11, … : the distance
|ρ(s)| < 2^s swings between the two directions. A dimension takes ⌈log2 d⌉ steps. On a
D-dimensional torus the steps visit the dimensions round robin (a dimension drops out when its
steps are done), and Swing runs 2D collectives at once, one per *port*, each on 1/(2D) of the
vector: port p starts at dimension p mod D, and ports D..2D−1 mirror the direction. Peers pair
up (x even ↔ odd), so every dimension size must be even; a power of two is not needed.

Blocks (the authors' libswing, ``getBitmapsMatrix``). In ReduceScatter step s node r sends its
peer q the blocks of q and of every node q reaches in the later steps (recursively), minus r's
own; a node reached in several steps counts only in the latest. AllGather mirrors it: in its step
t, for s = S−1−t, r sends q the blocks q sent r in ReduceScatter step s. This module emits that
AllGather with one stage per step (each rank waits for its previous step, as a loop of
``MPI_Sendrecv`` does); ``compose`` reverses it into the ReduceScatter and runs the AllReduce as
ReduceScatter then AllGather, which is the paper's bandwidth-optimal AllReduce (libswing's
``swing_coll`` with ``SWING_REDUCE_SCATTER`` then ``SWING_ALLGATHER``). The latency-optimal
variant (whole vectors each step) is not expressible: a partial cannot pass through an NPU
unchanged in the timed model.

Chunks: chunk c belongs to port c mod 2D: slot j of every buffer on port j when 2D divides C, as
Swing splits each vector, and the same load per port otherwise (with C = 1, whole blocks). Dimensions are the machine's grid (``dims.grid_dims``) when the communicator is every NPU,
else the communicator in rank order as one dimension. Messages between non-neighbours are routed
store and forward (``listsched``): a relay keeps what passes through, so later messages that
would bring it the same block are skipped and the volume on multi-hop tori is at most the paper's.
"""
from __future__ import annotations

from functools import lru_cache

from optcoll.producers.base import NotApplicable
from optcoll.producers.baselines.algorithms import Messages, owner_chunks, require_shape
from optcoll.producers.baselines.dims import coordinates, grid_dims, npu_id
from optcoll.producers.spread import SpreadProblem


def rho(step: int) -> int:
    """Σ_{i=0..step} (−2)^i."""
    return (1 - (-2) ** (step + 1)) // 3


def steps_per_dim(dims: tuple[int, ...]) -> list[int]:
    return [max(d - 1, 0).bit_length() for d in dims]


@lru_cache(maxsize=64)
def swing_peers(dims: tuple[int, ...], port: int = 0) -> tuple[tuple[int, ...], ...]:
    """``peers[r][s]``: rank r's peer in step s on this port (module docstring); ranks are
    grid ids, dimension 0 fastest."""
    ndim = len(dims)
    budget = steps_per_dim(dims)
    order: list[tuple[int, int]] = []  # (dimension, step within it)
    done = [0] * ndim
    d = port % ndim
    while len(order) < sum(budget):
        if done[d] < budget[d]:
            order.append((d, done[d]))
            done[d] += 1
        d = (d + 1) % ndim
    mirror = -1 if port >= ndim else 1
    n = 1
    for size in dims:
        n *= size
    peers = []
    for r in range(n):
        x = coordinates(r, dims)
        row = []
        for dim, k in order:
            y = list(x)
            sign = -1 if x[dim] % 2 else 1
            y[dim] = (x[dim] + mirror * sign * rho(k)) % dims[dim]
            row.append(npu_id(y, dims))
        peers.append(tuple(row))
    return tuple(peers)


def reduce_scatter_blocks(peers: tuple[tuple[int, ...], ...]) -> list[list[frozenset[int]]]:
    """``blocks[r][s]``: the ranks whose blocks r sends in ReduceScatter step s (module docstring)."""
    n, steps = len(peers), len(peers[0]) if peers else 0

    @lru_cache(maxsize=None)
    def reach(x: int, s: int) -> frozenset[int]:
        out: set[int] = set()
        for k in range(s, steps):
            q = peers[x][k]
            out.add(q)
            out |= reach(q, k + 1)
        return frozenset(out)

    table = []
    for r in range(n):
        latest: dict[int, int] = {}
        for s in range(steps):
            q = peers[r][s]
            for v in {q} | reach(q, s + 1):
                if v != r:
                    latest[v] = s
        table.append([frozenset(v for v, k in latest.items() if k == s) for s in range(steps)])
    return table


def butterfly_allgather(problem: SpreadProblem, name: str, order: list[int],
                        dims: tuple[int, ...], ports: int) -> Messages:
    """The Swing AllGather on ``ports`` ports (module docstring); ``order[i]`` is the member at
    grid position i (dimension 0 fastest)."""
    require_shape(problem, name, "allgather")
    if any(d % 2 for d in dims) or len(order) < 2:
        raise NotApplicable(f"{name} pairs even with odd coordinates, so every dimension must have "
                            f"an even size; got dimensions {list(dims)}")
    pos = {v: i for i, v in enumerate(problem.ranks)}
    owned = owner_chunks(problem)
    out = Messages()
    total = sum(steps_per_dim(dims))
    for port in range(ports):
        peers = swing_peers(dims, port)
        blocks = reduce_scatter_blocks(peers)
        for t in range(total):
            s = total - 1 - t
            for r, member in enumerate(order):
                q = peers[r][s]
                for owner in sorted(blocks[q][s]):
                    for c in owned[pos[order[owner]]]:
                        if c % ports == port:
                            out.add(c, member, order[q], t)
    out.notes.update(dims=list(dims), ports=ports, steps=total)
    return _by_stage(out)


def _by_stage(messages: Messages) -> Messages:
    """The same messages sorted by stage (ports interleaved), as ``list_schedule`` needs."""
    assert messages.stage is not None
    order = sorted(range(len(messages.chunk)), key=lambda i: messages.stage[i])
    out = Messages(notes=messages.notes)
    for i in order:
        out.add(messages.chunk[i], messages.src[i], messages.dst[i], messages.stage[i])
    return out


def swing(problem: SpreadProblem) -> Messages:
    """Swing on the machine's torus (or the communicator as a ring), 2D ports."""
    machine = problem.machine
    if sorted(problem.ranks) == list(range(machine.num_npus)):
        dims = grid_dims(machine)
        return butterfly_allgather(problem, "swing", list(range(machine.num_npus)), dims,
                                   2 * len(dims))
    ranks = list(problem.ranks)
    return butterfly_allgather(problem, "swing", ranks, (len(ranks),), 2)
