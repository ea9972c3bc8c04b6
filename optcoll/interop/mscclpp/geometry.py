"""Bytes of an MSCCL++ plan at one message size: the executor's load-time size checks, and every
op's buffer ranges cut into the equal *units* that become optcoll's chunks.

Followed: microsoft/mscclpp 1f5f065 ``src/core/executor/execution_plan.cc``:

* ``checkMessageSize``: input and output bytes multiples of ``buffer_alignment``, their
  alignment units divisible by ``input_chunks``/``output_chunks``, and the message (AllGather: the
  output, else the input) within ``min_message_size``..``max_message_size``;
* ``getSizeAndChunks``: with both chunk counts nonzero, input/input_chunks must equal
  output/output_chunks (integer division), and the chunk size is that quotient;
* ``calcOffset``: chunk k of n starts at (k·⌊e/n⌋ + min(k, e mod n))·alignment (e = alignment
  units); an op's ``size`` chunks from ``index``; a thread-block group member ``tb_id`` of
  ``tbg_size`` takes its ``calcOffset`` slice of them; a pipeline runs ⌈num_chunks·chunk/unit_size⌉
  iterations, iteration i covering ``unit_size`` bytes from i·unit_size of each inner op's range.

Per GPU the sizes come from the collective's M (docs/model.md §4, nccl-tests' size): AllReduce
and AlltoAll M in and out, AllGather M/N in and M out, ReduceScatter M in and M/N out.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from optcoll.errors import InputError
from optcoll.interop.mscclpp.schema import BufRef, PlanGpu, Op, ExecutionPlan

#: Collectives optcoll gives pre/postconditions to, and the per-GPU (input, output) byte counts.
SIZES = {"allreduce": lambda m, n: (m, m), "allgather": lambda m, n: (m // n, m),
         "reducescatter": lambda m, n: (m, m // n), "alltoall": lambda m, n: (m, m)}
#: Units an imported plan may cut each GPU's buffers into (optcoll chunks of a collective).
MAX_UNITS = 2**14


@dataclass(frozen=True)
class Sizes:
    input: int
    output: int
    chunk: int  # bytes per plan chunk (input or output chunk, scratch chunks alike)


def sizes_for(plan: ExecutionPlan, size: int) -> Sizes:
    """The per-GPU sizes of a collective of M = ``size`` bytes, after the executor's checks."""
    n = len(plan.gpus)
    if plan.collective not in SIZES:
        known = ", ".join(SIZES)
        raise InputError(f"collective {plan.collective!r} has no pre/postcondition in optcoll (it runs "
                         f"{known})", source=plan.source, field="collective")
    if size <= 0 or size % n and plan.collective in ("allgather", "reducescatter"):
        raise InputError(f"M = {size} B is not a positive multiple of the {n} GPUs", field="size")
    i, o = SIZES[plan.collective](int(size), n)
    a = plan.buffer_alignment
    chunk = None
    for gpu in plan.gpus:
        for what, total, chunks in (("input", i, gpu.input_chunks), ("output", o, gpu.output_chunks)):
            if chunks == 0:
                continue
            if total % a or (total // a) % chunks:
                raise InputError(f"{what} of {total} B is not {chunks} chunks of whole {a}-byte alignment units "
                                 f"(the executor's checkMessageSize refuses it)", source=plan.source,
                                 field=f"{gpu.where}.{what}_chunks")
        if gpu.input_chunks == 0 and gpu.output_chunks == 0:
            raise InputError("input_chunks and output_chunks are both 0; the executor needs one of them",
                             source=plan.source, field=gpu.where)
        if gpu.input_chunks and gpu.output_chunks and i // gpu.input_chunks != o // gpu.output_chunks:
            raise InputError(f"chunk sizes differ: {i} B / {gpu.input_chunks} input chunks vs {o} B / "
                             f"{gpu.output_chunks} output chunks (getSizeAndChunks refuses it)",
                             source=plan.source, field=gpu.where)
        per = i // gpu.input_chunks if gpu.input_chunks else o // gpu.output_chunks
        if chunk is not None and per != chunk:
            raise InputError(f"chunk size {per} B differs from the first GPU's {chunk} B", source=plan.source,
                             field=gpu.where)
        chunk = per
    message = o if plan.collective == "allgather" else i
    if not plan.min_message_size <= message <= plan.max_message_size:
        raise InputError(f"a message of {message} B is outside the plan's range {plan.min_message_size}.."
                         f"{plan.max_message_size} B (min_message_size, max_message_size)", source=plan.source,
                         field="max_message_size" if message > plan.max_message_size else "min_message_size")
    if plan.reuse_resources and any(g.scratch_chunks for g in plan.gpus):
        raise InputError("reuse_resources with scratch chunks puts scratch in a shared ring whose offsets wrap; "
                         "optcoll does not model it", source=plan.source, field="reuse_resources")
    return Sizes(i, o, chunk)


def calc_offset(size: int, index: int, slices: int, align: int) -> int:
    """``ExecutionPlan::Impl::calcOffset``."""
    n = size // align
    return (index * (n // slices) + min(index, n % slices)) * align


@dataclass(frozen=True)
class Piece:
    """The bytes one buffer reference of one executed op touches: ``[start, end)`` of its buffer."""

    ref: BufRef
    start: int
    end: int


@dataclass(frozen=True)
class UnrolledOp:
    """One op as a thread block executes it: a pipeline is unrolled into its iterations."""

    op: Op
    src: tuple[Piece, ...]
    dst: tuple[Piece, ...]
    iteration: int | None = None


def _pieces(refs: tuple[BufRef, ...], op: Op, sizes: Sizes, plan: ExecutionPlan, window: tuple[int, int] | None
            ) -> tuple[Piece, ...]:
    out = []
    a = plan.buffer_alignment
    for ref in refs:
        start, end = ref.index * sizes.chunk, (ref.index + ref.size) * sizes.chunk
        if op.tbg is not None:
            tb_id, group = op.tbg
            length = end - start
            start, end = start + calc_offset(length, tb_id, group, a), start + calc_offset(length, tb_id + 1, group, a)
        if window is not None:
            lo = start + window[0]
            if lo >= end:
                raise InputError(f"pipeline iteration at byte {window[0]} is past this op's {end - start} B (the "
                                 "kernel's unsigned size would wrap)", source=plan.source, field=op.where)
            start, end = lo, min(end, lo + window[1])
        out.append(Piece(ref, start, end))
    return tuple(out)


def steps_of(gpu: PlanGpu, tb_ops: tuple[Op, ...], sizes: Sizes, plan: ExecutionPlan) -> list[UnrolledOp]:
    """A thread block's ops as it executes them, with their byte ranges."""
    steps = []
    for op in tb_ops:
        if op.name != "pipeline":
            steps.append(UnrolledOp(op, _pieces(op.src, op, sizes, plan, None), _pieces(op.dst, op, sizes, plan, None)))
            continue
        upper = math.ceil(sizes.chunk / plan.buffer_alignment) * plan.buffer_alignment
        iterations = -(-(op.num_chunks * upper) // op.unit_size)
        for i in range(iterations):
            window = (i * op.unit_size, op.unit_size)
            steps += [UnrolledOp(inner, _pieces(inner.src, inner, sizes, plan, window),
                           _pieces(inner.dst, inner, sizes, plan, window), i) for inner in op.inner]
    return steps


def unit_bytes(all_steps: list[list[UnrolledOp]], sizes: Sizes, plan: ExecutionPlan) -> int:
    """The largest unit every buffer boundary and range of the run is a whole number of."""
    g = math.gcd(sizes.input, sizes.output, sizes.chunk)
    for steps in all_steps:
        for step in steps:
            for piece in step.src + step.dst:
                g = math.gcd(g, piece.start, piece.end)
    units = max(sizes.input, sizes.output) // g
    if units > MAX_UNITS:
        raise InputError(f"at this size the plan's ranges cut a buffer into {units} pieces of {g} B (thread-block "
                         f"groups, pipeline units); optcoll imports at most {MAX_UNITS}: pick a size whose chunks "
                         "divide evenly", source=plan.source, field="size")
    return g

