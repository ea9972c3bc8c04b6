"""Heuristic families of cuts for collectives whose cut bound has no exact algorithm here
(AlltoAll, custom patterns). Every S gives a valid bound, so the family only decides how tight.

The family: every single node, every "all but one node", and every prefix (and suffix) of a few
node orderings that tend to put bottlenecks between prefix and rest: the spectral (Fiedler)
ordering of the bandwidth-weighted graph, the drawing coordinates when the machine has them
(half-torus and half-mesh bisections), and hop distance from a peripheral node (balls).
A prefix sweep is evaluated in O(chunks + links) with difference arrays, not per set.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from optcoll.bounds.demand import egress_counts, ingress_counts
from optcoll.collectives.collective import Collective
from optcoll.machines.machine import Machine

#: Above this many nodes the dense eigen-solve for the spectral ordering is skipped.
SPECTRAL_MAX_NODES = 1500
#: Most bandwidth levels a bound that groups nodes by link speed tries (regions, entry groups):
#: a machine whose every link has its own bandwidth must not cost one pass per link.
BANDWIDTH_LEVELS = 8


def bandwidth_levels(levels: np.ndarray, most: int = BANDWIDTH_LEVELS) -> np.ndarray:
    """At most ``most`` of the sorted distinct ``levels``, evenly spread, the first and last kept
    (every level gives a valid grouping; these only decide how tight)."""
    if levels.size <= most:
        return levels
    return levels[np.unique(np.linspace(0, levels.size - 1, most).round().astype(np.int64))]


def orderings(machine: Machine) -> list[tuple[str, np.ndarray]]:
    """(name, node order) pairs; ties broken by node id so results are deterministic."""
    from scipy.linalg import eigh  # the cut families only: loaded when a cut bound is asked
    from scipy.sparse import csr_array
    from scipy.sparse.csgraph import shortest_path

    n = machine.num_nodes
    ids = np.arange(n)
    sym = csr_array((machine.link_bandwidth / machine.link_bandwidth.max(),
                     (machine.link_src, machine.link_dst)), shape=(n, n))
    sym = csr_array(sym + sym.T)
    found: list[tuple[str, np.ndarray]] = []
    if 2 < n <= SPECTRAL_MAX_NODES:
        dense = sym.toarray()
        laplacian = np.diag(dense.sum(axis=1)) - dense
        fiedler = eigh(laplacian, subset_by_index=[1, 1])[1][:, 0]
        found.append(("spectral ordering", np.lexsort((ids, np.round(fiedler, 12)))))
    if machine.positions is not None:
        xy = np.asarray(machine.positions, dtype=float)
        found.append(("x coordinate", np.lexsort((ids, xy[:, 0]))))
        found.append(("y coordinate", np.lexsort((ids, xy[:, 1]))))
    adjacency = csr_array((sym > 0).astype(float))
    hops = shortest_path(adjacency, unweighted=True, directed=False, indices=[0])[0]
    far = int(np.argmax(np.where(np.isfinite(hops), hops, -1)))
    ball = shortest_path(adjacency, unweighted=True, directed=False, indices=[far])[0]
    found.append((f"hop distance from {machine.label(far)}", np.lexsort((ids, ball))))
    return found


def _prefix_counts(collective: Collective, pos: np.ndarray, n: int) -> np.ndarray:
    """Chunks that must leave each prefix {order[0..k-1]}, for k = 0..n (cut rule)."""
    held = pos[collective.pre.nodes]
    starts = collective.pre.indptr[:-1]
    # Non-combining: all holders inside  <=> k > max pos; combining: some contributor <=> k > min.
    source = (np.minimum if collective.combining else np.maximum).reduceat(held, starts)
    chunk, node = collective.needs
    last_need = np.full(collective.num_chunks, -1, dtype=np.int64)
    np.maximum.at(last_need, chunk, pos[node])  # some needer outside <=> k <= its max pos
    live = last_need > source
    diff = np.zeros(n + 2, dtype=np.int64)
    np.add.at(diff, source[live] + 1, 1)
    np.add.at(diff, last_need[live] + 1, -1)
    return np.cumsum(diff)[: n + 1]


def _prefix_bandwidth(machine: Machine, pos: np.ndarray, n: int) -> np.ndarray:
    """B⁺ of each prefix: link u→v leaves prefix k iff pos[u] < k <= pos[v]."""
    ps, pd = pos[machine.link_src], pos[machine.link_dst]
    forward = ps < pd
    diff = np.zeros(n + 2)
    np.add.at(diff, ps[forward] + 1, machine.link_bandwidth[forward])
    np.add.at(diff, pd[forward] + 1, -machine.link_bandwidth[forward])
    return np.cumsum(diff)[: n + 1]


@dataclass(frozen=True, eq=False)
class FamilyCut:
    chunks: int
    inside: np.ndarray  # bool mask
    bandwidth_out: float
    how: str  # which member of the family, in words


def best_family_cut(machine: Machine, collective: Collective) -> FamilyCut:
    """The member of the family with the largest chunks / B⁺(S) (inf when B⁺ = 0)."""
    n = machine.num_nodes
    b_out = np.bincount(machine.link_src, weights=machine.link_bandwidth, minlength=n)
    b_in = np.bincount(machine.link_dst, weights=machine.link_bandwidth, minlength=n)
    options: list[tuple[np.ndarray, np.ndarray, list]] = [
        (egress_counts(collective, n), b_out, [("node", v) for v in range(n)]),
        (ingress_counts(collective, n), b_in, [("all but", v) for v in range(n)]),
    ]
    for name, order in orderings(machine):
        for label, seq in ((name, order), (f"reversed {name}", order[::-1])):
            pos = np.empty(n, dtype=np.int64)
            pos[seq] = np.arange(n)
            counts, bws = _prefix_counts(collective, pos, n), _prefix_bandwidth(machine, pos, n)
            options.append((counts[1:n], bws[1:n], [(label, seq, k) for k in range(1, n)]))
    best: tuple[float, int, tuple | None, float] = (0.0, 0, None, 0.0)
    for counts, bws, keys in options:
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(counts > 0, counts / bws, 0.0)
        if ratio.size and ratio.max() > best[0]:
            i = int(np.argmax(ratio))
            best = (float(ratio[i]), int(counts[i]), keys[i], float(bws[i]))
    _, chunks, key, _ = best
    inside = np.zeros(n, dtype=bool)
    if key is None:
        return FamilyCut(0, inside, 0.0, "no cut separates a chunk from a node needing it")
    if key[0] == "node":
        inside[key[1]], how = True, f"the single node {machine.label(key[1])}"
    elif key[0] == "all but":
        inside[:], how = True, f"every node but {machine.label(key[1])}"
        inside[key[1]] = False
    else:
        inside[key[1][: key[2]]], how = True, f"the first {key[2]} nodes in {key[0]}"
    bandwidth = float(machine.link_bandwidth[inside[machine.link_src] & ~inside[machine.link_dst]].sum())
    return FamilyCut(chunks, inside, bandwidth, how)
