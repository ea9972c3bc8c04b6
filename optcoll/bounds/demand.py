"""What a collective asks of the network, in the shapes the bounds reason about.

Every bound rests on one of two facts about a needed (chunk, destination) pair:
non-combining — the destination needs one copy from *some* holder; combining — the destination
needs the data of *every* contributor (so each contributor's partial must leave it). The helpers
here count, per node, what must arrive and what must leave, and recognise the structures for
which the cut bound can be maximised exactly.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from optcoll.collectives.collective import Collective
from optcoll.errors import InputError
from optcoll.machines.machine import Machine


def check_fits(machine: Machine, collective: Collective) -> None:
    """The collective's ranks and chunk holders must be NPUs of this machine."""
    bad = [r for r in collective.ranks if not 0 <= r < machine.num_npus]
    if bad:
        raise InputError(f"ranks {bad} are not NPUs of machine {machine.name!r} "
                         f"(it has NPUs 0..{machine.num_npus - 1})", field="collective.ranks")
    for name, sets in (("pre", collective.pre), ("post", collective.post)):
        if sets.nodes.size and not (0 <= sets.nodes.min() and sets.nodes.max() < machine.num_npus):
            raise InputError(f"a chunk names a node outside NPUs 0..{machine.num_npus - 1}",
                             field=f"collective.{name}")
    if not collective.chunk_bytes > 0:
        raise InputError(f"chunk bytes must be positive, got {collective.chunk_bytes}",
                         field="collective.chunk_bytes")


def need_counts_per_chunk(collective: Collective) -> np.ndarray:
    chunk, _ = collective.needs
    return np.bincount(chunk, minlength=collective.num_chunks)


def ingress_counts(collective: Collective, num_nodes: int) -> np.ndarray:
    """k_v: how many chunks node v must receive at least once."""
    _, node = collective.needs
    return np.bincount(node, minlength=num_nodes)


def egress_counts(collective: Collective, num_nodes: int) -> np.ndarray:
    """How many chunks node u must send at least once.

    Non-combining: chunks u alone holds that someone needs. Combining: chunks u contributes to
    and some *other* node needs (u's partial has to leave u).
    """
    needs = need_counts_per_chunk(collective)
    chunk, node = collective.pre.pairs()
    if not collective.combining:
        sole = collective.pre.counts()[chunk] == 1
        return np.bincount(node[sole & (needs[chunk] > 0)], minlength=num_nodes)
    need_chunk, need_node = collective.needs
    only = np.full(collective.num_chunks, -1, dtype=np.int64)  # the single needer, if one
    single = needs[need_chunk] == 1
    only[need_chunk[single]] = need_node[single]
    elsewhere = (needs[chunk] >= 2) | ((needs[chunk] == 1) & (only[chunk] != node))
    return np.bincount(node[elsewhere], minlength=num_nodes)


@dataclass(frozen=True, eq=False)
class RatioProblem:
    """max over S of (Σ_{v∈S} weights_v) / B⁺(S) among S that miss at least one sink.

    ``reverse``: the problem lives on the reversed machine (B⁺ there is bandwidth *into* S).
    ``note`` says in words how the collective was reduced to it.
    """

    weights: np.ndarray  # int64 chunks per node
    sinks: np.ndarray  # int64 node ids
    reverse: bool
    note: str


def _needy(collective: Collective) -> np.ndarray:
    return np.flatnonzero(need_counts_per_chunk(collective) > 0)


def _same_sets(sets, chunks: np.ndarray) -> np.ndarray | None:
    """The common node set of ``chunks`` in ``sets`` (a ChunkSets), or None if they differ."""
    counts = sets.counts()[chunks]
    if counts.size == 0 or np.any(counts != counts[0]):
        return None
    starts = sets.indptr[chunks]
    table = sets.nodes[starts[:, None] + np.arange(counts[0])[None, :]]
    return table[0] if np.all(table == table[0]) else None


def ratio_problem(collective: Collective, num_nodes: int) -> RatioProblem | None:
    """The cut rule as a weighted max-ratio problem, when the collective's shape allows it.

    Non-combining, every needed chunk held by one node h:
      * all those chunks share one postcondition set D (AllGather, Broadcast, Gather): a chunk
        held in S must leave S iff D ⊄ S, so weights = chunks per holder, sinks = D;
      * one common holder r and one needer per chunk (Scatter): time reversal turns it into the
        previous shape with D = {r} on the reversed graph (weights = chunks per needer).
    Combining collectives with one needer per chunk are the time reversal of their dual
    (ReduceScatter ↔ AllGather, Reduce ↔ Broadcast) on the reversed graph. Otherwise None.
    """
    needy = _needy(collective)
    if needy.size == 0:
        return None
    need_chunk, need_node = collective.needs
    needers = need_counts_per_chunk(collective)
    if collective.combining:
        if np.any(needers[needy] != 1):
            return None
        weights = np.bincount(need_node, minlength=num_nodes).astype(np.int64)
        sinks = _same_sets(collective.pre, needy)
        if sinks is None:
            return None
        return RatioProblem(weights, sinks, True, "time reversal of the dual collective (each "
                            "destination's reduction is a broadcast run backwards)")
    holders = collective.pre.counts()[needy]
    if np.any(holders != 1):
        return None
    holder = collective.pre.nodes[collective.pre.indptr[needy]]
    common = _same_sets(collective.post, needy)
    if common is not None:
        return RatioProblem(np.bincount(holder, minlength=num_nodes).astype(np.int64), common, False,
                            "each chunk is held by one node and needed by one common set")
    if np.all(needers[needy] == 1) and np.all(holder == holder[0]):
        return RatioProblem(np.bincount(need_node, minlength=num_nodes).astype(np.int64),
                            holder[:1].copy(), True,
                            "time reversal: one holder, one destination per chunk")
    return None


def allreduce_set(collective: Collective) -> np.ndarray | None:
    """X when every needed chunk is contributed by X and needed by all of X (AllReduce-shaped):
    then every chunk must cross every cut that splits X, in both directions."""
    needy = _needy(collective)
    if not collective.combining or needy.size == 0:
        return None
    pre, post = _same_sets(collective.pre, needy), _same_sets(collective.post, needy)
    if pre is None or post is None or pre.size < 2 or not np.array_equal(pre, post):
        return None
    return pre


def unicast_pairs(collective: Collective) -> tuple[np.ndarray, np.ndarray] | None:
    """(chunk, destination) when every needed chunk has exactly one destination, non-combining:
    then no copy can serve two destinations and per-pair path lengths add up."""
    if collective.combining:
        return None
    needy = _needy(collective)
    if needy.size == 0 or np.any(need_counts_per_chunk(collective)[needy] != 1):
        return None
    return collective.needs
