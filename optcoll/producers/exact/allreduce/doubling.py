"""Recursive doubling as a direct AllReduce schedule: where it takes no more steps than the hop
bound, the least-steps search needs no solver question.

With 2^d contributors labelled 0..2^d-1, in step k = 0..d-1 the contributor labelled i sends its
partial sum, over a direct link, to the one labelled i XOR 2^k and reduces the one it receives
into its own: the
two partials cover disjoint halves of the contributions, so every arrival is a disjoint
reduction and SCCL's reduce-only rules hold too. After d steps every contributor holds the full
sum. The labels tried are the rank order (a hypercube's own) and the reflected Gray code of it
(a ring of 4 is then the square 0-1-3-2). Ring(4) and hypercubes take d steps, their hop bound:
then the schedule is optimal and CP-SAT (0.06 s of CPU to load, more to ask) is never asked. It
is a candidate only: the caller verifies it in the instance's model before taking it (link
capacities, ports, chunk counts).
"""
from __future__ import annotations

import numpy as np

from optcoll.producers.exact.allreduce.problem import DirectProblem
from optcoll.producers.exact.allreduce.transfers import RouteTransfers
from optcoll.schedules.schedule import REDUCE


def recursive_doubling(problem: DirectProblem) -> RouteTransfers | None:
    """Recursive doubling over one-hop routes, every chunk in every step, under the first
    labelling whose partners all have a one-hop route each way; None when there is none, the
    contributors are not a power of two or a step's chunks overfill a link group."""
    n = problem.num_members
    if n < 2 or n & (n - 1) or problem.restrictions:
        return None
    mine = problem.member_index()
    at = np.full(n, -1, dtype=np.int64)  # contributor -> its stateful node
    at[mine[mine >= 0]] = np.flatnonzero(mine >= 0)
    ends = zip(problem.route_src.tolist(), problem.route_dst.tolist(), problem.route_delay.tolist())
    one_hop = {(s, d): r for r, (s, d, delay) in enumerate(ends) if delay == 1}
    ranks = np.arange(n)
    for label in (ranks, ranks ^ (ranks >> 1)):  # contributor -> label: rank order, Gray code
        node = np.empty(n, dtype=np.int64)
        node[label] = at  # label -> stateful node
        routes = [[one_hop.get((int(node[i]), int(node[i ^ (1 << k)]))) for i in range(n)]
                  for k in range(n.bit_length() - 1)]
        if all(r is not None for step in routes for r in step):
            return _transfers(routes, problem.num_chunks) if _fits(problem, routes) else None
    return None


def _fits(problem: DirectProblem, routes: list[list[int | None]]) -> bool:
    """Whether every step's chunks fit the link groups' capacity per epoch (the SCCL questions'
    C = N chunks on Ring(4) do not: 4 chunks a step on one link)."""
    first_hop = np.full(problem.num_routes, -1, dtype=np.int64)
    first_hop[problem.hop_route[::-1]] = np.arange(problem.hop_route.size)[::-1]
    for step in routes:
        groups = problem.hop_group[first_hop[np.array(step, dtype=np.int64)]]
        load = np.bincount(groups, minlength=problem.group_capacity.size) * problem.num_chunks
        if np.any(load > problem.group_capacity):
            return False
    return True


def _transfers(routes: list[list[int | None]], chunks: int) -> RouteTransfers:
    """Every chunk over every route of step k, from epoch k, reduced into the receiver."""
    route = np.array([r for step in routes for r in step for _ in range(chunks)], dtype=np.int64)
    start = np.repeat(np.arange(len(routes)), len(routes[0]) * chunks)
    chunk = np.tile(np.arange(chunks), route.size // chunks)
    return RouteTransfers(chunk.astype(np.int64), route, start.astype(np.int64),
                          np.full(route.size, REDUCE, dtype=np.uint8))
