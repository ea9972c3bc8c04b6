"""A constructive step schedule: the upper bound that makes every search terminate.

Each chunk follows a breadth-first tree from its holders to its destinations (a plain switch in a
tree receives one copy per copy it forwards); among equally short parents a node takes the edge
the trees built so far load least, which spreads chunks over parallel routes. Steps are simulated;
in each step every tree edge whose source has the chunk asks to send, the deepest subtrees first,
and each edge grants up to w·r copies (and each link group, port limits, its capacity·r). With
unlimited rounds every copy moves as soon as it can,
so the schedule takes exactly the latency bound in steps; with r rounds per step it always
progresses, so it ends. The trees may be rebalanced once against each other's load
(``reroute``); ``rarest_first`` is the other one-round-per-step heuristic (chunks chosen afresh
each step instead of along fixed trees); ``one_round_per_step`` takes the best.
"""
from __future__ import annotations

import math
from collections import defaultdict

from optcoll.producers.exact.step.problem import FAR, StepProblem
from optcoll.producers.exact.step.solution import StepSolution, cleaned


def greedy_solution(problem: StepProblem, rounds_per_step: int | None = None, *,
                    reroute: bool = False) -> StepSolution:
    """A valid solution; ``rounds_per_step=None`` lets each step take the rounds its load needs;
    ``reroute``: the trees balanced once more against each other (``_trees``)."""
    pending, depth = _trees(problem, reroute)
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


def _trees(problem: StepProblem, reroute: bool = False
           ) -> tuple[dict[tuple[int, int], int], dict[tuple[int, int], int]]:
    """Per (chunk, tree edge): copies to send and the depth of the subtree below the edge.

    ``reroute``: the trees are built longest first, then each again in that order against the
    load of all the others (the first pass saw only the chunks before it): on Ring(8) AlltoAll
    the chunks halfway round then alternate directions and every link carries the same load."""
    usage: dict[int, int] = defaultdict(int)
    chunks = list(range(problem.num_chunks))
    if reroute:
        far = [max((int(problem.dist_from[c][d]) for d in problem.needers[c]), default=0) for c in chunks]
        chunks.sort(key=lambda c: (-far[c], c))
    parents = {c: _tree(problem, c, usage) for c in chunks}
    for c in chunks if reroute else ():
        for e in parents[c].values():
            usage[e] -= 1
        parents[c] = _tree(problem, c, usage)
    pending: dict[tuple[int, int], int] = {}
    depth: dict[tuple[int, int], int] = {}
    for c, parent in sorted(parents.items()):
        dist = problem.dist_from[c]
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


def _tree(problem: StepProblem, c: int, usage: dict[int, int]) -> dict[int, int]:
    """Chunk c's breadth-first tree (node -> parent edge), each node taking among its equally
    short in-edges the one ``usage`` loads least; ``usage`` counts the tree's edges."""
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
    return parent


def one_round_per_step(problem: StepProblem, floor: int = 0) -> StepSolution:
    """The one-round-per-step schedule with the fewest steps of the heuristics here, tried in
    turn until one takes no more than ``floor`` steps (no one-round-per-step schedule has fewer
    than the step floor): fixed trees, rarest first, then the trees rebalanced. Each costs
    milliseconds on SCCL's questions (the trees 0.17 s on a torus 8×8 AllGather), and where one
    meets the floor no solver runs: the rebalanced trees settle Ring(6) and Ring(8) AlltoAll at
    their flow floors (5 and 8 steps; the others give 6 and 10, and CP-SAT then took about
    0.65 s CPU to find Ring(8)'s 8)."""
    best = greedy_solution(problem, 1)
    for make in (lambda: rarest_first(problem), lambda: greedy_solution(problem, 1, reroute=True)):
        if best.steps <= floor:
            break
        tried = make()
        if tried is not None and tried.steps < best.steps:
            best = tried
    return best


#: Largest nodes × chunks the rarest-first heuristic runs on (it compares chunk sets per link).
RAREST_FIRST_MAX = 1 << 16


def rarest_first(problem: StepProblem) -> StepSolution | None:
    """One round per step, chunks chosen afresh every step: each node in turn (most missing
    first) takes over each in-link, up to w copies, the rarest chunk its sender holds that it
    lacks and needs or brings closer to a needer (fewest holders, counting this step's choices,
    so neighbours spread different chunks). Where fixed trees leave links idle this keeps every
    link busy: torus 8×8 AllGather in 16 steps (the rounds bound) where the trees take 20.
    None when a node cannot copy (plain switches), a link group applies, the problem is over
    ``RAREST_FIRST_MAX`` or a step moves nothing."""
    V, C = problem.num_nodes, problem.num_chunks
    if not problem.copies.all() or problem.groups or V * C > RAREST_FIRST_MAX:
        return None
    held = [set() for _ in range(V)]
    for c, hs in enumerate(problem.holders):
        for h in hs:
            held[h].add(c)
    missing = [{c for c in range(C) if v in problem.needers[c]} - held[v] for v in range(V)]
    count = [len(hs) for hs in problem.holders]
    dist_to = problem.dist_to
    rows: list[tuple[int, int, int]] = []
    step = 0
    while any(missing):
        step += 1
        arrivals: list[tuple[int, int, int]] = []
        for v in sorted(range(V), key=lambda v: (-len(missing[v]), v)):
            taken: set[int] = set()
            offers = {e: {c for c in held[int(problem.edge_src[e])] - held[v]
                          if c in missing[v] or dist_to[c, v] < dist_to[c, int(problem.edge_src[e])]}
                      for e in problem.in_edges[v]}
            for e in sorted(offers, key=lambda e: (len(offers[e]), e)):
                for _ in range(int(problem.edge_weight[e])):
                    choices = offers[e] - taken
                    if not choices:
                        break
                    c = min(choices, key=lambda c: (count[c], c))
                    taken.add(c)
                    count[c] += 1
                    arrivals.append((c, e, v))
        if not arrivals:
            return None
        for c, e, v in arrivals:
            held[v].add(c)
            missing[v].discard(c)
            rows.append((c, e, step))
    return cleaned(problem, StepSolution.from_rows([1] * step, rows))  # lean: reversible when inverted
