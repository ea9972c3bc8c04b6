"""Symmetries of a step problem and the lex-leader constraints they make sound.

A symmetry is a relabelling of nodes that keeps every edge's capacity and every node's kind, with
the relabelling of chunks it induces on the collective (a chunk's holders and destinations map to
another chunk's). Chunks with equal holders and destinations (the C pieces of one rank's buffer)
are interchangeable as well. Both act on solutions and on the arrival-time vector T(c, v) of the
copying nodes, listed chunk-major. A solution exists iff one exists whose T is lexicographically
no larger than its image under every symmetry, so the encodings may require T ≤lex g(T) for any
set of group elements g — here the automorphisms found (capped) and transpositions of
interchangeable chunks — and may cut each requirement to a prefix (a weaker consequence).
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import islice

import numpy as np

from optcoll.graphs.automorphisms import ColouredGraph
from optcoll.producers.exact.step.problem import StepProblem
from optcoll.producers.exact.toolkit.symmetry import ChunkRoles, find_automorphisms

#: At most this many automorphisms are enumerated (any subset is sound).
MAX_AUTOMORPHISMS = 48

Entry = tuple[int, int]  # (chunk, node) of the arrival-time vector T


@dataclass(frozen=True)
class StepSymmetry:
    """Node v ↦ nodes[v] and chunk c ↦ chunks[c]."""

    nodes: tuple[int, ...]
    chunks: tuple[int, ...]


def _roles(problem: StepProblem) -> ChunkRoles:
    held = np.zeros((problem.num_chunks, problem.num_nodes), dtype=bool)
    need = np.zeros_like(held)
    for c, (holders, needers) in enumerate(zip(problem.holders, problem.needers)):
        held[c, list(holders)] = True
        need[c, list(needers)] = True
    return ChunkRoles(held, need)


def automorphisms(problem: StepProblem, limit: int = MAX_AUTOMORPHISMS) -> list[StepSymmetry]:
    """Non-identity capacity- and kind-preserving node relabellings that map the collective to
    itself, with their chunk relabellings (the toolkit's finder, in its deterministic order)."""
    if limit <= 0:
        return []
    roles = _roles(problem)
    colours = [(problem.machine.is_switch(v), bool(problem.copies[v]), *counts)
               for v, counts in enumerate(roles.node_colours())]
    edges = {(u, v): w for u, v, w in zip(problem.edge_src.tolist(), problem.edge_dst.tolist(),
                                           problem.edge_weight.tolist())}
    identity = np.arange(problem.num_nodes)
    found = []
    for node in islice(find_automorphisms(ColouredGraph.labelled(colours, edges)), limit + 1):
        if np.array_equal(node, identity):
            continue
        chunks = roles.chunk_map(node)
        if chunks is not None:
            found.append(StepSymmetry(tuple(node.tolist()), tuple(chunks.tolist())))
    return found[:limit]


def interchangeable(problem: StepProblem) -> list[list[int]]:
    """Classes (in chunk order) of two or more chunks with the same holders and destinations."""
    return _roles(problem).interchangeable()


def lex_constraints(problem: StepProblem, symmetries: list[StepSymmetry],
                    prefix: int) -> list[list[tuple[Entry, Entry]]]:
    """Each constraint T ≤lex g(T) as the sequence of (T entry, g(T) entry) pairs to compare.

    Pairs that are equal by construction (the same entry, or two holders at T = 0) are left out.
    Interchangeable chunks c < c' give block(c) ≤lex block(c'); automorphisms give their first
    ``prefix`` pairs.
    """
    nodes = [v for v in range(problem.num_nodes) if problem.copies[v]]

    def trivial(a: Entry, b: Entry) -> bool:
        return a == b or (a[1] in problem.holders[a[0]] and b[1] in problem.holders[b[0]])

    out: list[list[tuple[Entry, Entry]]] = []
    for members in interchangeable(problem):
        for c, c2 in zip(members, members[1:]):
            pairs = [((c, v), (c2, v)) for v in nodes if not trivial((c, v), (c2, v))]
            if pairs:
                out.append(pairs)
    for g in symmetries:
        inv_node = {w: v for v, w in enumerate(g.nodes)}
        inv_chunk = {d: c for c, d in enumerate(g.chunks)}
        pairs = []
        for c in range(problem.num_chunks):
            for v in nodes:
                a, b = (c, v), (inv_chunk[c], inv_node[v])
                if not trivial(a, b):
                    pairs.append((a, b))
            if len(pairs) >= prefix:
                break
        if pairs:
            out.append(pairs[:prefix])
    return out
