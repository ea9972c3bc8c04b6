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

import networkx as nx

from optcoll.producers.exact.step.problem import StepProblem

#: At most this many automorphisms are enumerated (any subset is sound; VF2 can be slow on large
#: very symmetric graphs) and only on graphs up to this many nodes.
MAX_AUTOMORPHISMS = 48
MAX_NODES = 64

Entry = tuple[int, int]  # (chunk, node) of the arrival-time vector T


@dataclass(frozen=True)
class Symmetry:
    """Node v ↦ nodes[v] and chunk c ↦ chunks[c]."""

    nodes: tuple[int, ...]
    chunks: tuple[int, ...]


def automorphisms(problem: StepProblem, limit: int = MAX_AUTOMORPHISMS) -> list[Symmetry]:
    """Non-identity capacity- and kind-preserving node relabellings that map the collective to
    itself, with their chunk relabellings, in VF2's deterministic order."""
    if problem.num_nodes > MAX_NODES or limit <= 0:
        return []
    graph = nx.DiGraph()
    for v in range(problem.num_nodes):
        graph.add_node(v, kind=(problem.machine.is_switch(v), bool(problem.copies[v])))
    for u, v, w in zip(problem.edge_src.tolist(), problem.edge_dst.tolist(), problem.edge_weight.tolist()):
        graph.add_edge(u, v, w=w)
    matcher = nx.algorithms.isomorphism.DiGraphMatcher(
        graph, graph, node_match=lambda a, b: a["kind"] == b["kind"],
        edge_match=lambda a, b: a["w"] == b["w"])
    signatures = _signatures(problem)
    by_signature: dict[tuple, list[int]] = {}
    for c, sig in enumerate(signatures):
        by_signature.setdefault(sig, []).append(c)
    found = []
    for mapping in islice(matcher.isomorphisms_iter(), limit + 1):
        nodes = tuple(mapping[v] for v in range(problem.num_nodes))
        if nodes == tuple(range(problem.num_nodes)):
            continue
        chunks = _chunk_map(nodes, signatures, by_signature)
        if chunks is not None:
            found.append(Symmetry(nodes, chunks))
    return found[:limit]


def interchangeable(problem: StepProblem) -> list[list[int]]:
    """Classes (in chunk order) of two or more chunks with the same holders and destinations."""
    classes: dict[tuple, list[int]] = {}
    for c, sig in enumerate(_signatures(problem)):
        classes.setdefault(sig, []).append(c)
    return [members for members in classes.values() if len(members) > 1]


def lex_constraints(problem: StepProblem, symmetries: list[Symmetry],
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


def _signatures(problem: StepProblem) -> list[tuple]:
    pre, post = problem.collective.pre, problem.collective.post
    return [(tuple(pre.of(c).tolist()), tuple(post.of(c).tolist())) for c in range(problem.num_chunks)]


def _chunk_map(nodes: tuple[int, ...], signatures: list[tuple],
               by_signature: dict[tuple, list[int]]) -> tuple[int, ...] | None:
    """The chunk relabelling induced by a node relabelling (k-th of a class to k-th), or None."""
    chunks = [0] * len(signatures)
    for sig, members in by_signature.items():
        image = tuple(tuple(sorted(nodes[v] for v in part)) for part in sig)
        targets = by_signature.get(image)
        if targets is None or len(targets) != len(members):
            return None
        for c, d in zip(members, targets):
            chunks[c] = d
    return tuple(chunks)
