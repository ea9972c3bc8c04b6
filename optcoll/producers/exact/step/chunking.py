"""Re-cutting a collective's buffer into C pieces per base chunk (the C of an (S, R, C) point).

Built-in collectives number chunk ``k*C + j`` as piece j of base chunk k (builtins.py), so cutting
every base chunk into C equal pieces reproduces ``make_collective(..., chunks_per_rank=C)``; the
same rule applies to custom collectives, whose C is 1. Cutting each of those pieces ``f`` times
finer makes chunk c the pieces ``c*f .. c*f + f - 1``, which is how ``refine`` renames a schedule.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from optcoll.collectives.collective import ChunkSets, Collective
from optcoll.errors import InputError
from optcoll.schedules.schedule import Schedule


def rechunk(collective: Collective, chunks_per_rank: int) -> Collective:
    """The same collective with ``chunks_per_rank`` pieces per base chunk."""
    if isinstance(chunks_per_rank, bool) or not isinstance(chunks_per_rank, int) or chunks_per_rank < 1:
        raise InputError(f"must be a positive integer, got {chunks_per_rank!r}", field="chunks_per_rank")
    c0 = collective.chunks_per_rank
    if chunks_per_rank == c0:
        return collective
    base = np.arange(0, collective.num_chunks, c0)
    pre, post = (_pieces(sets, base, chunks_per_rank) for sets in (collective.pre, collective.post))
    return replace(collective, pre=pre, post=post, chunks_per_rank=chunks_per_rank,
                   chunk_bytes=collective.chunk_bytes * c0 / chunks_per_rank)


def _pieces(sets: ChunkSets, base: np.ndarray, pieces: int) -> ChunkSets:
    return ChunkSets.from_lists([sets.of(int(k)).tolist() for k in base for _ in range(pieces)])


def refine(schedule: Schedule, factor: int) -> Schedule:
    """A step schedule for the buffer cut ``factor`` times finer: each transfer carries each of
    its chunk's ``factor`` pieces in the same step, so every step has ``factor`` times the rounds
    of ``factor`` times smaller chunks, and costs the same."""
    if factor == 1:
        return schedule
    chunk = (schedule.chunk[:, None] * factor + np.arange(factor)).ravel()
    link, start, op, step = (np.repeat(column, factor) for column in
                             (schedule.link, schedule.start, schedule.op, schedule.step))
    via = None if schedule.via is None else np.where(
        np.repeat(schedule.via, factor) >= 0, (schedule.via[:, None] * factor + np.arange(factor)).ravel(), -1)
    return Schedule(chunk, link, start, op, step, tuple(r * factor for r in schedule.rounds or ()),
                    schedule.meta, via)
