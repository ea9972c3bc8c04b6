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


def _relaxed_reach(problem) -> np.ndarray:
    """Bellman-Ford over the routes, as ``reach`` was first written (a members × routes table per
    round: gigabytes on a 512-GPU cluster)."""
    dist = np.full((problem.num_members, problem.num_nodes), np.inf)
    mine = problem.member_index()
    dist[mine[mine >= 0], np.flatnonzero(mine >= 0)] = 0.0
    for _ in range(problem.num_nodes):
        better = np.full_like(dist, np.inf)
        np.minimum.at(better.T, problem.route_dst, (dist[:, problem.route_src] + problem.route_delay[None, :]).T)
        new = np.minimum(dist, better)
        if np.array_equal(new, dist):
            break
        dist = new
    return dist


@pytest.mark.parametrize("name", ["dgxh100-rail-2x8", "dgxh100", "cluster2x8", "trn2", "star4_sharp"])
def test_reach_and_togo_are_the_shortest_route_paths(name):
    machine = load_machine(name)
    n = machine.num_npus
    problem = timed_problem(Instance("s", machine, make_collective("allreduce", range(n), 2.0**30, 1)))
    reach = _relaxed_reach(problem)
    assert np.array_equal(problem.reach(), reach)
    assert np.array_equal(problem.togo(), _relaxed_reach_back(problem))


def _relaxed_reach_back(problem) -> np.ndarray:
    dist = np.where(problem.member_index() >= 0, 0.0, np.inf)
    for _ in range(problem.num_nodes):
        new = dist.copy()
        np.minimum.at(new, problem.route_src, problem.route_delay + dist[problem.route_dst])
        if np.array_equal(new, dist):
            break
        dist = new
    return dist
