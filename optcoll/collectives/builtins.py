"""The built-in collectives and custom ones, as pre/postconditions over chunks.

Chunk numbering is fixed and documented because schedules, MSCCL exports and recorded ground
truth all refer to chunk ids:

* AllGather / ReduceScatter / AllReduce / Gather / Scatter: chunk ``i*C + j`` is the j-th piece
  of rank-slot i (the i-th member of the communicator); chunk bytes = M / (N·C).
* AlltoAll: chunk ``(i*N + k)*C + j`` is piece j of what member i sends to member k;
  M is each rank's send buffer, so chunk bytes = M / (N·C).
* AlltoAllv: the pairs (i, k) with bytes to move, in row-major order, each cut into C equal
  pieces (chunk ``p*C + j`` is piece j of the p-th pair); chunks carry their own sizes and M is
  the mean bytes a rank sends.
* Broadcast / Reduce: chunk j (0..C-1) of the root's buffer; chunk bytes = M / C.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from optcoll.collectives.collective import ChunkSets, Collective
from optcoll.errors import InputError

#: name → (combining, needs a root)
KINDS: dict[str, tuple[bool, bool]] = {
    "allgather": (False, False),
    "reducescatter": (True, False),
    "allreduce": (True, False),
    "broadcast": (False, True),
    "reduce": (True, True),
    "gather": (False, True),
    "scatter": (False, True),
    "alltoall": (False, False),
    "alltoallv": (False, False),
}
ALIASES = {"reduce_scatter": "reducescatter", "all_gather": "allgather", "all_reduce": "allreduce",
           "all_to_all": "alltoall", "reduce-scatter": "reducescatter", "all-gather": "allgather",
           "all-reduce": "allreduce", "all-to-all": "alltoall",
           "all_to_allv": "alltoallv", "all-to-allv": "alltoallv"}


def canonical_kind(name: str) -> str:
    key = ALIASES.get(name.lower(), name.lower())
    if key not in KINDS and key != "custom":
        raise InputError(f"unknown collective {name!r}; known: {', '.join([*KINDS, 'custom'])}")
    return key


def make_collective(kind: str, ranks: Sequence[int], size_bytes: float, chunks_per_rank: int = 1,
                    root: int | None = None) -> Collective:
    """A built-in collective over ``ranks`` (NPU ids) for a buffer of ``size_bytes`` (M)."""
    kind = canonical_kind(kind)
    if kind == "custom":
        raise InputError("a custom collective needs explicit pre/postconditions (use make_custom)")
    if kind == "alltoallv":
        raise InputError("alltoallv needs the bytes of every pair (use make_alltoallv)")
    ranks = tuple(int(r) for r in ranks)
    n, c = len(ranks), int(chunks_per_rank)
    if n < 1 or len(set(ranks)) != n:
        raise InputError(f"ranks must be distinct and non-empty, got {list(ranks)}")
    if kind == "allreduce" and n < 2:
        raise InputError(f"an allreduce over one rank ({ranks[0]}) reduces nothing: give it at least 2 ranks")
    if c < 1:
        raise InputError(f"chunks_per_rank must be at least 1, got {chunks_per_rank}")
    if not size_bytes > 0:
        raise InputError(f"size must be positive, got {size_bytes}")
    combining, rooted = KINDS[kind]
    if rooted:
        if root is None:
            raise InputError(f"{kind} needs a root")
        if root not in ranks:
            raise InputError(f"root {root} is not one of the ranks {list(ranks)}")
    elif root is not None:
        raise InputError(f"{kind} takes no root")
    everyone = list(ranks)
    slot = [[r] for r in ranks for _ in range(c)]  # chunk i*C+j belongs to ranks[i]
    if kind in ("allgather", "reducescatter", "allreduce"):
        pre, post = {"allgather": (slot, [everyone] * (n * c)),
                     "reducescatter": ([everyone] * (n * c), slot),
                     "allreduce": ([everyone] * (n * c), [everyone] * (n * c))}[kind]
        chunk_bytes = size_bytes / (n * c)
    elif kind in ("gather", "scatter"):
        at_root = [[root]] * (n * c)
        pre, post = (slot, at_root) if kind == "gather" else (at_root, slot)
        chunk_bytes = size_bytes / (n * c)
    elif kind in ("broadcast", "reduce"):
        pre, post = ([[root]] * c, [everyone] * c) if kind == "broadcast" else ([everyone] * c, [[root]] * c)
        chunk_bytes = size_bytes / c
    else:  # alltoall: chunk (i·n + j)·C + k goes from ranks[i] to ranks[j], one node each, built as
        # arrays (lists of n²·C sets took 30 s at 4096 ranks)
        one = np.arange(n * n * c + 1)
        src = np.repeat(np.asarray(ranks, dtype=np.int64), n * c)
        dst = np.tile(np.repeat(np.asarray(ranks, dtype=np.int64), c), n)
        return Collective(kind, ranks, ChunkSets(one, src), ChunkSets(one.copy(), dst), size_bytes / (n * c),
                          float(size_bytes), c, combining, root)
    return Collective(kind, ranks, ChunkSets.from_lists(pre), ChunkSets.from_lists(post),
                      chunk_bytes, float(size_bytes), c, combining, root)


def make_alltoallv(ranks: Sequence[int], sizes: np.ndarray, chunks_per_pair: int = 1) -> Collective:
    """AlltoAllv over ``ranks``: member i sends ``sizes[i][k]`` bytes to member k, cut into
    ``chunks_per_pair`` equal pieces (chunk numbering in the module docstring)."""
    ranks = tuple(int(r) for r in ranks)
    n, c = len(ranks), int(chunks_per_pair)
    sizes = np.asarray(sizes, dtype=float)
    if n < 1 or len(set(ranks)) != n:
        raise InputError(f"ranks must be distinct and non-empty, got {list(ranks)}")
    if c < 1:
        raise InputError(f"chunks_per_rank must be at least 1, got {chunks_per_pair}")
    if sizes.shape != (n, n):
        raise InputError(f"the size matrix is {sizes.shape}, expected {n} x {n}")
    if not (np.all(np.isfinite(sizes)) and np.all(sizes >= 0) and np.all(np.diag(sizes) == 0)):
        raise InputError("sizes must be finite, non-negative, and 0 on the diagonal")
    src, dst = np.nonzero(sizes)
    if src.size == 0:
        raise InputError("every size is 0: nothing to exchange")
    members = np.asarray(ranks, dtype=np.int64)
    holder = np.repeat(members[src], c)
    dest = np.repeat(members[dst], c)
    chunk = np.arange(holder.size)
    pieces = np.repeat(sizes[src, dst] / c, c)
    return Collective("alltoallv", ranks, ChunkSets.from_pairs(chunk.size, chunk, holder),
                      ChunkSets.from_pairs(chunk.size, chunk, dest), float(pieces.min()),
                      float(sizes.sum() / n), c, False, None, pieces)


def make_custom(ranks: Sequence[int], pre: Sequence[Sequence[int]], post: Sequence[Sequence[int]],
                chunk_bytes: float, *, combining: bool = False, name: str = "custom") -> Collective:
    """A collective with explicit per-chunk holders (``pre``) and destinations (``post``).

    Example: MSCCL's AllToNext on N ranks is ``pre = [[i] for i in range(N-1)]``,
    ``post = [[i+1] for i in range(N-1)]``.
    """
    if len(pre) != len(post):
        raise InputError(f"pre lists {len(pre)} chunks but post lists {len(post)}")
    if not pre:
        raise InputError("a custom collective needs at least one chunk")
    for c, holders in enumerate(pre):
        if not holders:
            raise InputError(f"chunk {c} has no holder at t = 0", field=f"pre[{c}]")
    if not chunk_bytes > 0:
        raise InputError(f"chunk bytes must be positive, got {chunk_bytes}")
    members = tuple(int(r) for r in ranks)
    for c, nodes in enumerate([*pre, *post]):
        for v in nodes:
            if v not in members:
                raise InputError(f"chunk {c % len(pre)} names node {v}, which is not one of the ranks")
    return Collective(name, members, ChunkSets.from_lists([list(p) for p in pre]),
                      ChunkSets.from_lists([list(p) for p in post]), float(chunk_bytes),
                      float(chunk_bytes) * len(pre), 1, combining)


def dual(collective: Collective) -> Collective:
    """The non-combining collective whose time-reversal on the reversed graph is this one.

    ReduceScatter ↔ AllGather and Reduce ↔ Broadcast (SCCL's inversion): swap pre and post.
    AllReduce has no such dual (it is ReduceScatter then AllGather).
    """
    if not collective.combining:
        raise ValueError(f"{collective.kind} is not combining; it has no dual")
    if collective.kind == "allreduce":
        raise ValueError("allreduce has no single dual; compose reducescatter and allgather")
    names = {"reducescatter": "allgather", "reduce": "broadcast"}
    return Collective(names.get(collective.kind, collective.kind + "~dual"), collective.ranks,
                      collective.post, collective.pre, collective.chunk_bytes,
                      collective.size_bytes, collective.chunks_per_rank, False, collective.root)


def split_allreduce(collective: Collective) -> tuple[Collective, Collective]:
    """AllReduce = ReduceScatter then AllGather over the same ranks, size and C."""
    if collective.kind != "allreduce":
        raise ValueError("split_allreduce takes an allreduce")
    args = (collective.ranks, collective.size_bytes, collective.chunks_per_rank)
    return make_collective("reducescatter", *args), make_collective("allgather", *args)
