"""The step model as an integer linear program, solved by CP-SAT or by a MIP solver.

One encoding, every linear backend: the model is written once into the toolkit's
``LinearModel`` (integer variables, linear rows, a linear objective), which CP-SAT, HiGHS and
SCIP all read (``optcoll.producers.exact.toolkit``). The z3 encoding (smt.py) is an independent
SCCL-style formulation; agreement of the two is the cross-check.

Variables for S steps: ``have[c, v, s]`` (copying node v may send chunk c from step s+1),
``x[c, e, s]`` (copies of c crossing edge e in step s: 0/1 into a copying node, a count into a
plain switch), ``r[s]`` (rounds of step s). Rows: a copying node has c after step s only if it had
it or received it in s, receives it at most once, and keeps it; it sends only what it has; a plain
switch forwards by step s at most what arrived by step s−1; an edge carries at most w·r[s] copies
in step s, a link group (port limits, problem.py) at most its capacity·r[s]; every destination
has its chunk after step S; lo ≤ Σ r ≤ hi. Objective: min Σ r.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from optcoll.producers.exact.memory import ModelSize
from optcoll.producers.exact.step.problem import StepProblem
from optcoll.producers.exact.step.solution import StepSolution
from optcoll.producers.exact.step.symmetry import Entry
from optcoll.producers.exact.toolkit.lex import Affine, lex_leq
from optcoll.producers.exact.toolkit.model import LinearModel

Terms = list[tuple[int, int]]  # (variable, coefficient)


@dataclass
class StepEncoding:
    """A ``LinearModel`` of one (S, lo ≤ R ≤ hi) question and the maps back to a solution."""

    model: LinearModel
    steps: int
    x: dict[tuple[int, int, int], int]  # (chunk, edge, step) → variable
    have: dict[tuple[int, int, int], int]  # (chunk, node, step) → variable (absent: constant)
    rounds: list[int]

    def decode(self, values) -> StepSolution:
        rows = [(c, e, s) for (c, e, s), var in self.x.items() for _ in range(int(round(values[var])))]
        return StepSolution.from_rows([int(round(values[r])) for r in self.rounds], rows)

    def set_hint(self, problem: StepProblem, solution: StepSolution) -> None:
        """A full assignment from a solution with the same number of steps."""
        if solution.steps != self.steps:
            return
        counts: dict[tuple[int, int, int], int] = defaultdict(int)
        first: dict[tuple[int, int], int] = {}
        for c, e, s in solution.rows():
            counts[c, e, s] += 1
            v = int(problem.edge_dst[e])
            first[c, v] = min(first.get((c, v), s), s)
        hint = self.model.hint
        hint.clear()
        for key, var in self.x.items():
            hint[var] = counts.get(key, 0)
        for (c, v, s), var in self.have.items():
            hint[var] = int(first.get((c, v), self.steps + 1) <= s)
        for var, r in zip(self.rounds, solution.rounds):
            hint[var] = r


def size(problem: StepProblem, steps: int) -> ModelSize:
    """What ``encode`` would create for ``steps`` steps, counted without building it: x from
    the ``may_arrive`` windows, have from the first step a chunk can reach a node; terms per x
    about five (its guard, its holder row, receive-once, capacity) plus one per later step in a
    plain switch's balance rows, per have four (its row and keeps-it row)."""
    S = int(steps)
    per_edge = problem.arrival_steps(S)
    x = int(per_edge.sum())
    plain = ~problem.copies[problem.edge_src] | ~problem.copies[problem.edge_dst]
    x_switch = int(per_edge[:, plain].sum())
    useful = (problem.dist_from > 0) & (problem.dist_from + problem.dist_to <= S) & problem.copies[None, :]
    have = int(np.where(useful, S - problem.dist_from + 1, 0).sum())
    grouped = int(sum(per_edge[:, g.edges].sum() for g in problem.groups))
    return ModelSize("step", f"for S = {S} steps", x + have + S,
                     5 * x + S * x_switch + 4 * have + 2 * S + grouped)


def encode(problem: StepProblem, steps: int, lo: int, hi: int,
           lex: list[list[tuple[Entry, Entry]]] = ()) -> StepEncoding | None:
    """The model of "S = steps and lo ≤ R ≤ hi", or None when pruning alone shows it infeasible.

    In order: the rounds, then per chunk its sends and holdings step by step, the plain
    switches' conservation, the link and group capacities per step, and the lex-leader rows."""
    S = steps
    m = LinearModel()
    rounds = [m.var(1, hi - (S - 1), f"r{s}") for s in range(1, S + 1)]
    m.row([(r, 1) for r in rounds], lo, hi)
    m.minimise([(r, 1) for r in rounds])
    enc = _Chunks(problem, m, S, hi - (S - 1))
    for c in range(problem.num_chunks):
        if not enc.chunk(c):
            return None  # a destination is unreachable in S steps
    _plain_switch_rows(problem, m, enc.x, S)
    _capacity_rows(problem, m, enc.x, enc.upper, rounds, S)
    for pairs in lex:  # arrival steps lie in 0..S+1
        lex_leq(m, Affine.of_terms([_arrival(a, S, enc.have, problem) for a, _ in pairs]),
                Affine.of_terms([_arrival(b, S, enc.have, problem) for _, b in pairs]), S + 1)
    return StepEncoding(m, S, enc.x, enc.have, rounds)


class _Chunks:
    """The x (chunk c on edge e in step s) and have (c held at node v after step s) variables of
    one chunk after another, with the rows that tie them."""

    def __init__(self, problem: StepProblem, m: LinearModel, S: int, max_r: int):
        self.problem, self.m, self.S, self.max_r = problem, m, S, max_r
        self.upper: dict[int, int] = {}  # x variable -> its upper bound
        self.x: dict[tuple[int, int, int], int] = {}
        self.have: dict[tuple[int, int, int], int] = {}
        self.copiers = [v for v in range(problem.num_nodes) if problem.copies[v]]

    def holds(self, c: int, v: int, s: int) -> tuple[int | None, int]:
        """have[c, v, s] as (variable, 0) or (None, constant)."""
        if v in self.problem.holders[c]:
            return None, 1
        var = self.have.get((c, v, s))
        return (var, 0) if var is not None else (None, 0)

    def chunk(self, c: int) -> bool:
        """Chunk c's variables and rows; False when a destination cannot have it by step S."""
        problem = self.problem
        lacking = sum(1 for v in self.copiers if v not in problem.holders[c])
        received: dict[int, list[int]] = defaultdict(list)  # copying node → its x variables
        stocked: set[int] = set()  # plain switches that may have received c by the previous step
        for s in range(1, self.S + 1):
            arrived_plain = self.sends(c, s, lacking, stocked, received)
            self.holdings(c, s)
            stocked |= arrived_plain
        if any((c, v, self.S) not in self.have for v in problem.needers[c]):
            return False
        for into in received.values():
            if len(into) > 1:
                self.m.row([(i, 1) for i in into], None, 1)  # received at most once
        return True

    def sends(self, c: int, s: int, lacking: int, stocked: set[int], received: dict[int, list[int]]) -> set[int]:
        """x[c, e, s] for every edge that may carry c in step s; the plain switches it reaches."""
        problem, m = self.problem, self.m
        arrived_plain = set()
        for e in range(problem.num_edges):
            u, v = int(problem.edge_src[e]), int(problem.edge_dst[e])
            if not problem.may_arrive(c, e, s, self.S):
                continue
            guard = None  # have[c, u, s−1] when the sender's holding is a variable
            if problem.copies[u]:
                guard, held = self.holds(c, u, s - 1)
                if guard is None and not held:
                    continue
            elif u not in stocked:
                continue
            bound = 1 if problem.copies[v] else min(int(problem.edge_weight[e]) * self.max_r, lacking)
            var = self.x[c, e, s] = m.var(0, bound, f"x{c}_{e}_{s}")
            self.upper[var] = bound
            if guard is not None:
                m.row([(var, 1), (guard, -bound)], None, 0)  # sends only what it has
            if problem.copies[v]:
                received[v].append(var)
            else:
                arrived_plain.add(v)
        return arrived_plain

    def holdings(self, c: int, s: int) -> None:
        """have[c, v, s] for every copying node that may hold c after step s."""
        problem, m = self.problem, self.m
        for v in self.copiers:
            if v in problem.holders[c]:
                continue
            incoming = [self.x[c, e, s] for e in problem.in_edges[v] if (c, e, s) in self.x]
            prev, _ = self.holds(c, v, s - 1)
            if not incoming and prev is None:
                continue
            need = s == self.S and v in problem.needers[c]
            var = self.have[c, v, s] = m.var(int(need), 1, f"h{c}_{v}_{s}")
            terms = [(var, 1)] + [(i, -1) for i in incoming]
            if prev is not None:
                terms.append((prev, -1))
                m.row([(prev, 1), (var, -1)], None, 0)  # keeps what it has
            m.row(terms, None, 0)


def _capacity_rows(problem: StepProblem, m: LinearModel, x: dict, upper: dict[int, int], rounds: list[int],
                   S: int) -> None:
    """Per step, what an edge (and a group of edges) carries is at most its weight times the
    step's rounds; rows its variables' bounds already imply are left out."""
    weight = problem.edge_weight
    by_edge_step: dict[tuple[int, int], list[int]] = defaultdict(list)
    for (c, e, s), var in x.items():
        by_edge_step[e, s].append(var)
    for (e, s), vars_ in by_edge_step.items():
        if sum(upper[v] for v in vars_) > int(weight[e]):
            m.row([(v, 1) for v in vars_] + [(rounds[s - 1], -int(weight[e]))], None, 0)
    for group in problem.groups:
        for s in range(1, S + 1):
            terms = [(v, int(k)) for e, k in zip(group.edges.tolist(), group.coef.tolist())
                     for v in by_edge_step.get((e, s), ())]
            if sum(k * upper[v] for v, k in terms) > group.capacity:
                m.row(terms + [(rounds[s - 1], -group.capacity)], None, 0)


def _plain_switch_rows(problem: StepProblem, m: LinearModel, x: dict, S: int) -> None:
    """Σ_{t≤s} copies out of switch k ≤ Σ_{t≤s−1} copies into k, per chunk and step."""
    out_of: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    into: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    for (c, e, s), var in x.items():
        u, v = int(problem.edge_src[e]), int(problem.edge_dst[e])
        if not problem.copies[u]:
            out_of[c, u].append((s, var))
        if not problem.copies[v]:
            into[c, v].append((s, var))
    for (c, k), sends in out_of.items():
        for s in sorted({t for t, _ in sends}):
            m.row([(var, 1) for t, var in sends if t <= s]
                  + [(var, -1) for t, var in into[c, k] if t <= s - 1], None, 0)


def _arrival(entry: Entry, S: int, have: dict, problem: StepProblem) -> tuple[Terms, int]:
    """T(c, v) = S + 1 − Σ_{s=0..S} have[c, v, s] as (terms, constant)."""
    c, v = entry
    if v in problem.holders[c]:
        return [], 0
    return [(have[c, v, s], -1) for s in range(1, S + 1) if (c, v, s) in have], S + 1
