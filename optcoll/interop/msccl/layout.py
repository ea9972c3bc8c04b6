"""Where each of optcoll's chunks lives in MSCCL's buffers, per collective.

MSCCL names data by (buffer, chunk offset) on a GPU: ``i`` the user's input, ``o`` the output,
``s`` scratch. optcoll names it by chunk id (numbering in ``optcoll.collectives.builtins``). The
layout maps one to the other, the same way msccl-tools lays its collectives out; with N GPUs
(GPU g = the g-th member of the communicator) and C chunks per rank:

=============  ===========================  ================================  =========  =========
collective     precondition slot            postcondition slot                i_chunks   o_chunks
=============  ===========================  ================================  =========  =========
allgather      g: chunk gC+j at i[j]        every g: chunk k at o[k]          C          N·C
reducescatter  every g: chunk k at i[k]     g: chunk gC+j at o[j]             N·C        C
allreduce      every g: chunk k at i[k]     every g: chunk k at o[k]          K          K
alltoall       g: chunk (gN+h)C+j at i[hC+j]  h: that chunk at o[gC+j]        N·C        N·C
broadcast      root: chunk j at i[j]        every g: chunk j at o[j]          C          C
reduce         every g: chunk j at i[j]     root: chunk j at o[j]            C          C
gather         g: chunk gC+j at i[j]        root: chunk k at o[k]             C          N·C
scatter        root: chunk k at i[k]        g: chunk gC+j at o[j]             N·C        C
custom         chunk c at i[c] where pre    chunk c at o[c] where post        K          K
=============  ===========================  ================================  =========  =========

In place, one buffer is a window of the other, as NCCL defines in-place calls: for allgather and
gather ``i[j]`` of GPU g *is* ``o[gC+j]``; for reducescatter and scatter ``o[j]`` of GPU g is
``i[gC+j]``; for the equal-sized ones ``o[k]`` is ``i[k]``. ``canonical`` resolves these aliases so
two names of one memory location compare equal. ``nchunksperloop`` is the larger buffer, as
msccl-tools writes it (alltoall: N·C, broadcast/reduce: C, the others N·C or K).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from optcoll.collectives.collective import Collective
from optcoll.errors import InputError
from optcoll.interop.msccl.ir import Ref

KINDS = ("allgather", "reducescatter", "allreduce", "alltoall", "broadcast", "reduce", "gather",
         "scatter", "custom")
ROOTED = ("broadcast", "reduce", "gather", "scatter")
COMBINING = ("reducescatter", "allreduce", "reduce")
_READ = {"reduce_scatter": "reducescatter", "all_gather": "allgather", "all_reduce": "allreduce",
         "all_to_all": "alltoall"}
_NAMES = set(KINDS) | {"reduce_scatter"}
_INPUT_IN_OUTPUT = ("allgather", "gather")  # in place: input is a window of the output
_OUTPUT_IN_INPUT = ("reducescatter", "scatter")  # in place: output is a window of the input


def kind_of(coll: str) -> str:
    """optcoll's collective kind for an XML ``coll`` name (either spelling)."""
    key = _READ.get(coll.lower(), coll.lower())
    if key not in KINDS:
        raise InputError(f"unknown collective {coll!r}; MSCCL names: {', '.join(sorted(_NAMES))}",
                         field="algo.coll")
    return key


class SlotValue(NamedTuple):
    """What a buffer slot holds while a runtime replays a schedule (MSCCL XML or an MSCCL++ plan)."""

    chunk: int
    mask: int  # contributing GPUs (combining collectives), 0 otherwise
    origin: int  # the transfer that delivered it, -1 if computed or initial


@dataclass(frozen=True, eq=False)
class BufferLayout:
    kind: str
    num_gpus: int
    num_chunks: int
    inplace: bool
    input_chunks: int
    output_chunks: int
    #: (gpu, chunk) -> canonical slot holding it at t = 0 / required to hold it at the end.
    pre: dict[tuple[int, int], Ref]
    post: dict[tuple[int, int], Ref]

    @property
    def nchunksperloop(self) -> int:
        return max(self.input_chunks, self.output_chunks)

    @property
    def per_rank(self) -> int:
        """C of ``make_collective``: K/N (alltoall K/N², broadcast and reduce K). An AllReduce
        whose K is no multiple of N has no such C (it is imported as a custom collective)."""
        n, k = self.num_gpus, self.num_chunks
        if self.kind == "alltoall":
            return k // (n * n)
        return k // n if self.kind in (*_PER_RANK, "allreduce") else k

    def canonical(self, gpu: int, ref: Ref) -> Ref:
        buf, off = ref
        if not self.inplace:
            return ref
        if self.kind in _INPUT_IN_OUTPUT:
            return ("o", gpu * self.per_rank + off) if buf == "i" else ref
        if self.kind in _OUTPUT_IN_INPUT:
            return ("i", gpu * self.per_rank + off) if buf == "o" else ref
        return ("i", off) if buf == "o" else ref


_PER_RANK = ("allgather", "reducescatter", "gather", "scatter")


def _split(kind: str, n: int, k: int) -> int:
    """C from the chunk count K; K must be a whole multiple of what the collective needs."""
    unit = {"alltoall": n * n}.get(kind, n if kind in _PER_RANK else 1)
    if k < unit or k % unit:
        raise InputError(f"{kind} on {n} GPUs needs a multiple of {unit} chunks, got {k}",
                         field="algo.nchunksperloop")
    return k // unit


Slots = dict[tuple[int, int], Ref]  # (GPU, chunk) -> the buffer slot it is in


def make_layout(kind: str, num_gpus: int, num_chunks: int, inplace: bool, root: int | None = None,
                custom: Collective | None = None) -> BufferLayout:
    """The layout of a built-in collective (``custom`` takes the collective for its pre/post)."""
    n, k = num_gpus, num_chunks
    c = _split(kind, n, k)
    if kind in ROOTED and not (root is not None and 0 <= root < n):
        raise InputError(f"{kind} needs a root GPU in 0..{n - 1}, got {root}", field="root")
    if kind in ("allgather", "gather"):
        pre, post, sizes = _gathered(n, k, c, range(n) if kind == "allgather" else [root])
    elif kind in ("reducescatter", "scatter"):
        pre, post, sizes = _scattered(n, k, c, range(n) if kind == "reducescatter" else [root])
    elif kind == "alltoall":
        pre, post, sizes = _alltoall(n, c)
    elif kind == "custom":
        assert custom is not None, "a custom layout needs its collective"
        pre, post, sizes = _custom(custom, k)
    else:  # allreduce, broadcast, reduce: slot k holds chunk k
        holders = [root] if kind == "broadcast" else range(n)
        dests = [root] if kind == "reduce" else range(n)
        pre = {(g, x): ("i", x) for g in holders for x in range(k)}
        post = {(g, x): ("o", x) for g in dests for x in range(k)}
        sizes = (k, k)
    layout = BufferLayout(kind, n, k, inplace, *sizes, {}, {})
    return BufferLayout(kind, n, k, inplace, *sizes,
                        {key: layout.canonical(key[0], ref) for key, ref in pre.items()},
                        {key: layout.canonical(key[0], ref) for key, ref in post.items()})


def _gathered(n: int, k: int, c: int, dests) -> tuple[Slots, Slots, tuple[int, int]]:
    """GPU g's C chunks in its input, every chunk in the output of each of ``dests``."""
    pre = {(g, g * c + j): ("i", j) for g in range(n) for j in range(c)}
    return pre, {(g, x): ("o", x) for g in dests for x in range(k)}, (c, k)


def _scattered(n: int, k: int, c: int, holders) -> tuple[Slots, Slots, tuple[int, int]]:
    """Every chunk in the input of each of ``holders``, GPU g's C chunks in its output."""
    pre = {(g, x): ("i", x) for g in holders for x in range(k)}
    return pre, {(g, g * c + j): ("o", j) for g in range(n) for j in range(c)}, (k, c)


def _alltoall(n: int, c: int) -> tuple[Slots, Slots, tuple[int, int]]:
    pre: Slots = {}
    post: Slots = {}
    for g in range(n):
        for h in range(n):
            for j in range(c):
                chunk = (g * n + h) * c + j
                pre[(g, chunk)] = ("i", h * c + j)
                post[(h, chunk)] = ("o", g * c + j)
    return pre, post, (n * c, n * c)


def _custom(custom: Collective, k: int) -> tuple[Slots, Slots, tuple[int, int]]:
    """Slot k holds chunk k wherever the collective's pre- and postconditions put it."""
    slot = {v: g for g, v in enumerate(custom.ranks)}
    pre: Slots = {}
    post: Slots = {}
    for which, sets, buf in ((pre, custom.pre, "i"), (post, custom.post, "o")):
        for chunk, node in zip(*(a.tolist() for a in sets.pairs())):
            which[(slot[node], chunk)] = (buf, chunk)
    return pre, post, (k, k)


def layout_of(collective: Collective, inplace: bool) -> BufferLayout:
    """The layout of a collective about to be exported (GPU g = ``collective.ranks[g]``)."""
    kind = collective.kind
    if kind not in KINDS:
        kind = "custom"
    root = collective.ranks.index(collective.root) if collective.root is not None else None
    return make_layout(kind, collective.num_ranks, collective.num_chunks, inplace, root,
                       collective if kind == "custom" else None)


def chunks_from_loop(kind: str, num_gpus: int, nchunksperloop: int) -> int:
    """K, the collective's chunk count, from an XML's ``nchunksperloop``."""
    return nchunksperloop * num_gpus if kind == "alltoall" else nchunksperloop
