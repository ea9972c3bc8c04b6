"""Shortest store-and-forward times from the holders of each chunk to every node.

Each hop over link e costs τ_e = α_e + b/B_e (the chunk cannot be forwarded before it has fully
arrived), so the delivery time of a (chunk, destination) pair is at least the τ-weighted distance
from the nearest holder (non-combining) or from the farthest contributor (combining).
Chunks are grouped by their holder set, so an AllGather over 1024 ranks runs one shortest-path
search per rank and an AllReduce runs N plus one reduction, never one per chunk. The searches are
``optcoll.graphs.shortest``'s (numpy on small machines: a small command need not load scipy).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from optcoll.collectives.collective import ChunkSets
from optcoll.graphs.shortest import distances, fewest_hops
from optcoll.machines.machine import Machine


def holder_groups(sets: ChunkSets, chunks: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """Group ``chunks`` by identical holder set: (group id per chunk, holder array per group)."""
    counts = sets.counts()[chunks]
    group = np.empty(chunks.size, dtype=np.int64)
    members: list[np.ndarray] = []
    for size in np.unique(counts).tolist():
        pick = np.flatnonzero(counts == size)
        starts = sets.indptr[chunks[pick]]
        table = sets.nodes[starts[:, None] + np.arange(size)[None, :]]
        if size == 1:  # the common case (one holder each): a 1-D unique is far faster
            nodes, inverse = np.unique(table[:, 0], return_inverse=True)
            rows = nodes[:, None]
        else:
            rows, inverse = np.unique(table, axis=0, return_inverse=True)
        group[pick] = len(members) + inverse.reshape(-1)
        members.extend(rows)
    return group, members


@dataclass(frozen=True, eq=False)
class PairDistances:
    """Per needed pair: the bounding distance and the holder that realises it."""

    value: np.ndarray  # seconds (or hops), inf when unreachable
    source: np.ndarray  # the nearest holder / farthest contributor


def pair_distances(machine: Machine, sets: ChunkSets, chunk: np.ndarray, dest: np.ndarray,
                   weights: np.ndarray, farthest: bool, *, unweighted: bool = False) -> PairDistances:
    """For each pair (chunk[i], dest[i]): min (or max, ``farthest``) over the chunk's holders h
    of the shortest ``weights`` distance h → dest[i]."""
    if chunk.size == 0:
        return PairDistances(np.zeros(0), np.zeros(0, dtype=np.int64))
    chunks, pair_chunk = np.unique(chunk, return_inverse=True)
    group, members = holder_groups(sets, chunks)
    sources = np.unique(np.concatenate(members))
    row = np.full(machine.num_nodes, -1, dtype=np.int64)
    row[sources] = np.arange(sources.size)
    lengths = np.ones(machine.num_links) if unweighted else weights
    dist = distances(machine.num_nodes, machine.link_src, machine.link_dst, lengths, sources)
    reduce = np.argmax if farthest else np.argmin
    best = np.empty((len(members), machine.num_nodes), dtype=np.int64)  # winning holder per dest
    for g, holders in enumerate(members):
        best[g] = holders[reduce(dist[row[holders]], axis=0)]
    source = best[group[pair_chunk], dest]
    return PairDistances(dist[row[source], dest], source)


def path_hops(machine: Machine, weights: np.ndarray, source: int, dest: int) -> int:
    """The fewest hops on a shortest ``weights`` path source → dest (for witness sentences)."""
    dist = distances(machine.num_nodes, machine.link_src, machine.link_dst, weights, np.array([source]))[0]
    return int(fewest_hops(machine.num_nodes, machine.link_src, machine.link_dst, weights, source, dist)[dest])
