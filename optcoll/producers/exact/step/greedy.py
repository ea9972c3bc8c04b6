"""A constructive step schedule: the upper bound that makes every search terminate.

Each chunk follows a breadth-first tree from its holders to its destinations (a plain switch in a
tree receives one copy per copy it forwards); among equally short parents a node takes the edge
the trees built so far load least, which spreads chunks over parallel routes. Steps are simulated;
in each step every tree edge whose source has the chunk asks to send, the deepest subtrees first,
and each edge grants up to w·r copies (and each link group, port limits, its capacity·r). With
unlimited rounds every copy moves as soon as it can,
so the schedule takes exactly the latency bound in steps; with r rounds per step it always
progresses, so it ends.
"""
from __future__ import annotations

import math
from collections import defaultdict

from optcoll.producers.exact.step.problem import FAR, StepProblem
from optcoll.producers.exact.step.solution import StepSolution


def greedy_solution(problem: StepProblem, rounds_per_step: int | None = None) -> StepSolution:
    """A valid solution; ``rounds_per_step=None`` lets each step take the rounds its load needs."""
    pending, depth = _trees(problem)
    order = sorted(pending, key=lambda ce: (-depth[ce], ce))
    ready = {(c, h): 0 for c, hs in enumerate(problem.holders) for h in hs}  # copying nodes
    stock: dict[tuple[int, int], int] = defaultdict(int)  # plain switches: arrived, not yet sent
    rows: list[tuple[int, int, int]] = []
    rounds: list[int] = []
    groups_of: dict[int, list[tuple[int, int]]] = defaultdict(list)  # edge -> [(group, coef)]
    for g, group in enumerate(problem.groups):
        for e, k in zip(group.edges.tolist(), group.coef.tolist()):
            groups_of[e].append((g, k))
    while any(pending.values()):
        step = len(rounds) + 1
        load: dict[int, int] = defaultdict(int)
        group_load: dict[int, int] = defaultdict(int)
        arrived: list[tuple[int, int, int]] = []
        for c, e in order:
            n = pending[c, e]
            u, v = int(problem.edge_src[e]), int(problem.edge_dst[e])
            if problem.copies[u]:
                n = n if ready.get((c, u), math.inf) <= step - 1 else 0
            else:
                n = min(n, stock[c, u])
            if rounds_per_step is not None:
                n = min(n, int(problem.edge_weight[e]) * rounds_per_step - load[e],
                        *((problem.groups[g].capacity * rounds_per_step - group_load[g]) // k
                          for g, k in groups_of[e]))
            if n <= 0:
                continue
            load[e] += n
            for g, k in groups_of[e]:
                group_load[g] += k * n
            pending[c, e] -= n
            if not problem.copies[u]:
                stock[c, u] -= n
            rows += [(c, e, step)] * n
            arrived.append((c, v, n))
        if not load:
            raise RuntimeError("greedy step schedule made no progress (a bug)")
        for c, v, n in arrived:
            if problem.copies[v]:
                ready.setdefault((c, v), step)
            else:
                stock[c, v] += n
        rounds.append(rounds_per_step if rounds_per_step is not None else
                      max([-(-n // int(problem.edge_weight[e])) for e, n in load.items()]
                          + [-(-n // problem.groups[g].capacity) for g, n in group_load.items()]))
    return StepSolution.from_rows(rounds, rows)


def _trees(problem: StepProblem) -> tuple[dict[tuple[int, int], int], dict[tuple[int, int], int]]:
    """Per (chunk, tree edge): copies to send and the depth of the subtree below the edge."""
    pending: dict[tuple[int, int], int] = {}
    depth: dict[tuple[int, int], int] = {}
    usage: dict[int, int] = defaultdict(int)
    for c in range(problem.num_chunks):
        dist = problem.dist_from[c]
        parent: dict[int, int] = {}
        for d in problem.needers[c]:
            v = d
            while v not in problem.holders[c] and v not in parent:
                parent[v] = min((e for e in problem.in_edges[v]
                                 if dist[problem.edge_src[e]] == dist[v] - 1 < FAR),
                                key=lambda e: (usage[e] / problem.edge_weight[e], e))
                usage[parent[v]] += 1
                v = int(problem.edge_src[parent[v]])
        copies: dict[int, int] = {}
        height: dict[int, int] = defaultdict(int)
        below: dict[int, int] = defaultdict(int)
        for v in sorted(parent, key=lambda x: (-dist[x], x)):
            copies[v] = 1 if problem.copies[v] else below[v]
            u = int(problem.edge_src[parent[v]])
            below[u] += copies[v]
            height[u] = max(height[u], height[v] + 1)
            pending[c, parent[v]] = copies[v]
            depth[c, parent[v]] = height[v] + 1
    return pending, depth
