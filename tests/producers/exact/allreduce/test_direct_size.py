"""The direct model's size is counted without listing its candidates, and its reach is found by
shortest paths (issue 34: listing the candidates, and a members × routes table per relaxation
round, took 18 GiB on dgxh100-rail-64x8 before the memory guard could refuse the model); both
equal what the first, listing implementations gave."""
from __future__ import annotations

import numpy as np
import pytest

from optcoll.collectives.builtins import make_collective
from optcoll.instances.instance import Instance
from optcoll.machines import generators as G
from optcoll.machines.catalog import load_machine
from optcoll.producers.exact.allreduce import encoding
from optcoll.producers.exact.allreduce.problem import timed_problem


def _listed_size(problem, horizon: int) -> tuple[int, int]:
    """(variables, terms) counted over every listed candidate, as the count was first written."""
    cand = encoding.candidates(problem, horizon)
    reach = problem.reach()
    sender = problem.route_src[cand.route]
    ordered = np.sort(reach, axis=0)
    carries = sum(int(np.searchsorted(ordered[:, u], cand.start[sender == u], side="right").sum())
                  for u in np.unique(sender).tolist())
    holds = int(np.clip(horizon - reach + 1, 0, None).sum())
    k = problem.num_chunks
    return (k * (2 * len(cand) + carries + holds) + horizon,
            k * (encoding._TERMS_PER_CARRY * carries + encoding._TERMS_PER_HOLD * holds + 4 * len(cand)))


@pytest.mark.parametrize("machine,chunks", [(G.ring(8, 1e9, 1e-6), 1), (load_machine("dgx1"), 2),
                                            (load_machine("cluster2x8"), 1), (load_machine("trn2"), 2)],
                         ids=["ring8", "dgx1-c2", "cluster2x8", "trn2-c2"])
@pytest.mark.parametrize("horizon", [3, 9, 40])
def test_counted_size_equals_the_listed_one(machine, chunks, horizon):
    n = machine.num_npus
    problem = timed_problem(Instance("s", machine, make_collective("allreduce", range(n), 2.0**30, chunks)))
    size = encoding.size(problem, horizon)
    assert (size.variables, size.terms) == _listed_size(problem, horizon)
    cand = encoding.candidates(problem, horizon)  # every route's starts, in route order
    assert np.all(np.diff(cand.route) >= 0) and len(set(zip(cand.route.tolist(), cand.start.tolist()))) == len(cand)


def _dijkstra(problem, reverse: bool = False, **options) -> np.ndarray:
    """Shortest route paths by scipy's Dijkstra: an independent method (``reach`` and ``togo``
    relax routes with numpy alone, so that a small solve starts without scipy)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import dijkstra

    n = problem.num_nodes
    src, dst = (problem.route_dst, problem.route_src) if reverse else (problem.route_src, problem.route_dst)
    least: dict[tuple[int, int], float] = {}  # per joined pair its least delay (coo would sum them)
    for u, v, d in zip(src.tolist(), dst.tolist(), problem.route_delay.tolist()):
        least[u, v] = min(d, least.get((u, v), np.inf))
    u, v = np.array([k[0] for k in least], dtype=int), np.array([k[1] for k in least], dtype=int)
    graph = coo_matrix((np.array(list(least.values()), dtype=float), (u, v)), shape=(n, n)).tocsr()
    return dijkstra(graph, directed=True, **options)


@pytest.mark.parametrize("name", ["dgxh100-rail-2x8", "dgxh100", "cluster2x8", "trn2", "star4_sharp", "ring8", "dgx1"])
def test_reach_and_togo_are_the_shortest_route_paths(name):
    machine = load_machine(name)
    n = machine.num_npus
    problem = timed_problem(Instance("s", machine, make_collective("allreduce", range(n), 2.0**30, 1)))
    mine = problem.member_index()
    at = np.empty(problem.num_members, dtype=np.int64)
    at[mine[mine >= 0]] = np.flatnonzero(mine >= 0)
    assert np.array_equal(problem.reach(), np.atleast_2d(_dijkstra(problem, indices=at)))
    ranks = np.flatnonzero(mine >= 0)
    assert np.array_equal(problem.togo(), _dijkstra(problem, reverse=True, indices=ranks, min_only=True))


