"""What a collective asks for: chunks, who holds each at t = 0, who must hold each at the end.

Chunk → node sets are kept as CSR arrays (``ChunkSets``) so an AlltoAll over a thousand ranks
(a million chunks) stays a few arrays rather than a million Python sets.

For a *combining* collective (ReduceScatter, Reduce, AllReduce) ``pre`` lists the contributors of
each chunk (each holds its own partial at t = 0) and ``post`` the ranks that must end holding the
reduction of *every* contributor.

Chunks are equal (``chunk_bytes`` each) except in AlltoAllv, whose chunks carry their own sizes
(``chunk_sizes``); there ``chunk_bytes`` is the smallest of them, so every rule that counts
chunks times ``chunk_bytes`` stays a valid lower bound.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from optcoll.units import format_size


@dataclass(frozen=True, eq=False)
class ChunkSets:
    """For each chunk c, the nodes ``nodes[indptr[c]:indptr[c+1]]`` (sorted, unique)."""

    indptr: np.ndarray
    nodes: np.ndarray

    @staticmethod
    def from_pairs(num_chunks: int, chunks: np.ndarray, nodes: np.ndarray) -> "ChunkSets":
        chunks = np.asarray(chunks, dtype=np.int64)
        nodes = np.asarray(nodes, dtype=np.int64)
        order = np.lexsort((nodes, chunks))
        chunks, nodes = chunks[order], nodes[order]
        if chunks.size:
            keep = np.ones(chunks.size, dtype=bool)
            keep[1:] = (chunks[1:] != chunks[:-1]) | (nodes[1:] != nodes[:-1])
            chunks, nodes = chunks[keep], nodes[keep]
        indptr = np.searchsorted(chunks, np.arange(num_chunks + 1)).astype(np.int64)
        return ChunkSets(indptr, nodes)

    @staticmethod
    def from_lists(sets: list[list[int]] | list[tuple[int, ...]]) -> "ChunkSets":
        chunks = np.repeat(np.arange(len(sets)), [len(s) for s in sets])
        nodes = np.array([v for s in sets for v in s], dtype=np.int64)
        return ChunkSets.from_pairs(len(sets), chunks, nodes)

    @property
    def num_chunks(self) -> int:
        return int(self.indptr.shape[0] - 1)

    def of(self, chunk: int) -> np.ndarray:
        return self.nodes[self.indptr[chunk]:self.indptr[chunk + 1]]

    def pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """(chunk, node) arrays, one entry per membership."""
        return np.repeat(np.arange(self.num_chunks), np.diff(self.indptr)), self.nodes

    def as_lists(self) -> list[list[int]]:
        return [self.of(c).tolist() for c in range(self.num_chunks)]

    def counts(self) -> np.ndarray:
        return np.diff(self.indptr)


@dataclass(frozen=True, eq=False)
class Collective:
    """A collective over a communicator of NPUs (non-members and switches may relay)."""

    kind: str
    ranks: tuple[int, ...]
    pre: ChunkSets
    post: ChunkSets
    chunk_bytes: float
    size_bytes: float
    chunks_per_rank: int
    combining: bool
    root: int | None = None
    #: Bytes of each chunk when they differ (AlltoAllv); None when every chunk has ``chunk_bytes``.
    chunk_sizes: np.ndarray | None = None

    @property
    def num_chunks(self) -> int:
        return self.pre.num_chunks

    @property
    def equal_chunks(self) -> bool:
        return self.chunk_sizes is None

    def sizes(self) -> np.ndarray:
        """Bytes of every chunk."""
        if self.chunk_sizes is not None:
            return self.chunk_sizes
        return np.full(self.num_chunks, self.chunk_bytes)

    @property
    def num_ranks(self) -> int:
        return len(self.ranks)

    @cached_property
    def needs(self) -> tuple[np.ndarray, np.ndarray]:
        """(chunk, node) pairs that need at least one delivery.

        Non-combining: a destination that does not start with the chunk. Combining: every
        destination except a sole contributor (it already holds the whole reduction).
        """
        post_c, post_v = self.post.pairs()
        pre_c, pre_v = self.pre.pairs()
        width = int(max(pre_v.max(initial=0), post_v.max(initial=0))) + 1
        held = np.isin(post_c * width + post_v, pre_c * width + pre_v)
        if self.combining:
            held &= self.pre.counts()[post_c] == 1
        return post_c[~held], post_v[~held]

    def describe(self) -> str:
        root = f"(root {self.root})" if self.root is not None else ""
        of = format_size(self.chunk_bytes)
        if self.chunk_sizes is not None:
            of = f"{format_size(self.chunk_bytes)} to {format_size(float(self.chunk_sizes.max()))}"
        return (f"{self.kind}{root} over {self.num_ranks} ranks, {self.num_chunks} chunks of "
                f"{of} (C = {self.chunks_per_rank}, M = {format_size(self.size_bytes)})")
