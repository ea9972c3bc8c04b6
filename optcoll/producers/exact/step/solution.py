"""A solved step schedule in edge form, and what every backend does with one.

``StepSolution`` lists one row per chunk copy crossing an aggregated edge in a step. ``cleaned``
drops copies that serve nothing (a lean schedule is what inversion needs: every partial sent in the
reversed schedule then carries a real contribution), ``split_step`` turns an S-step solution into
an (S+1)-step one with the same rounds (a warm start one step later), and ``to_schedule`` assigns
copies to concrete parallel links and builds the shared ``Schedule``.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import groupby

import numpy as np

from optcoll.producers.exact.step.problem import StepProblem
from optcoll.producers.forwarding import forwarded_by
from optcoll.verify.problem import plain_switches
from optcoll.schedules.schedule import COPY, REDUCE, Schedule, from_arrays


@dataclass(frozen=True, eq=False)
class StepSolution:
    rounds: tuple[int, ...]
    chunk: np.ndarray
    edge: np.ndarray
    step: np.ndarray

    @staticmethod
    def from_rows(rounds: Iterable[int], rows: Iterable[tuple[int, int, int]]) -> "StepSolution":
        """From (chunk, edge, step) rows, one per copy, stored in (step, edge, chunk) order."""
        ordered = sorted(rows, key=lambda r: (r[2], r[1], r[0]))
        cols = list(zip(*ordered)) if ordered else [(), (), ()]
        return StepSolution(tuple(int(r) for r in rounds), *(np.array(col, dtype=np.int64) for col in cols))

    @property
    def steps(self) -> int:
        return len(self.rounds)

    @property
    def total_rounds(self) -> int:
        return sum(self.rounds)

    def rows(self) -> list[tuple[int, int, int]]:
        return list(zip(self.chunk.tolist(), self.edge.tolist(), self.step.tolist()))


def cleaned(problem: StepProblem, solution: StepSolution) -> StepSolution:
    """The solution without copies that reach no destination (validity and cost are kept).

    Repeats until nothing changes: a copying node keeps only its first arrival of a chunk, and only
    if it needs the chunk or sends it on; a plain switch keeps its earliest arrivals of a chunk, as
    many as it forwards (earliest arrivals feed every forward the full set fed).
    """
    rows = solution.rows()
    while True:
        keep = _useful(problem, rows)
        if all(keep):
            return StepSolution.from_rows(solution.rounds, rows)
        rows = [row for row, k in zip(rows, keep) if k]


def _useful(problem: StepProblem, rows: list[tuple[int, int, int]]) -> list[bool]:
    sends: dict[tuple[int, int], int] = defaultdict(int)
    arrivals: dict[tuple[int, int], list[int]] = defaultdict(list)
    for i, (c, e, s) in enumerate(rows):
        sends[c, int(problem.edge_src[e])] += 1
        arrivals[c, int(problem.edge_dst[e])].append(i)
    keep = [False] * len(rows)
    for (c, v), idx in arrivals.items():
        idx.sort(key=lambda i: (rows[i][2], rows[i][1]))
        if problem.copies[v]:
            if v not in problem.holders[c] and (v in problem.needers[c] or sends[c, v]):
                keep[idx[0]] = True
        else:
            for i in idx[:sends[c, v]]:
                keep[i] = True
    return keep


def split_step(problem: StepProblem, solution: StepSolution) -> StepSolution | None:
    """The same copies over one more step: the longest step's rounds shared by two steps.

    Valid because every copy of the split step had its chunk at the source before the step; None
    when every step has one round (then S+1 steps need one more round) or when the copies do not
    pack into the two halves within the link groups' capacities.
    """
    longest = max(range(solution.steps), key=lambda i: (solution.rounds[i], -i))
    r = solution.rounds[longest]
    if r < 2:
        return None
    first = r // 2
    s_split = longest + 1
    rows = []
    for (e, s), group in groupby(sorted(solution.rows(), key=lambda x: (x[1], x[2], x[0])),
                                 key=lambda x: (x[1], x[2])):
        group = list(group)
        if s < s_split:
            rows += group
        elif s > s_split:
            rows += [(c, e, s + 1) for c, _, _ in group]
        else:
            cap = int(problem.edge_weight[e]) * first
            rows += [(c, e, s if k < cap else s + 1) for k, (c, _, _) in enumerate(group)]
    rounds = (*solution.rounds[:longest], first, r - first, *solution.rounds[longest + 1:])
    if problem.groups and not within_groups(problem, rounds, rows):
        return None
    return StepSolution.from_rows(rounds, rows)


def within_groups(problem: StepProblem, rounds: tuple[int, ...], rows: list[tuple[int, int, int]]) -> bool:
    """Whether the copies of every step fit every link group's capacity × the step's rounds."""
    load: dict[tuple[int, int], int] = defaultdict(int)
    per_edge: dict[tuple[int, int], int] = defaultdict(int)
    for _, e, s in rows:
        per_edge[e, s] += 1
    for g, group in enumerate(problem.groups):
        for e, k in zip(group.edges.tolist(), group.coef.tolist()):
            for s in range(1, len(rounds) + 1):
                load[g, s] += k * per_edge.get((e, s), 0)
    return all(n <= problem.groups[g].capacity * rounds[s - 1] for (g, s), n in load.items())


def to_schedule(problem: StepProblem, solution: StepSolution, *, reverse: bool = False,
                **meta) -> Schedule:
    """The shared ``Schedule``: copies assigned to parallel links up to w·r each, in link-id order.

    ``reverse`` runs the solution backwards (step s → S+1−s): the inversion of a combining
    collective's dual, whose links are the original machine's with the same ids. Each transfer
    reduces into its receiver, except into a switch that cannot reduce (a plain switch in the
    dual), which only queues the partial and forwards it once, naming the arrival it forwards.
    """
    steps = solution.steps
    chunk, link, step, op = [], [], [], []
    for (s, e), group in groupby(sorted(solution.rows(), key=lambda x: (x[2], x[1], x[0])),
                                 key=lambda x: (x[2], x[1])):
        slots = [l for l in problem.edge_links[e]
                 for _ in range(int(problem.link_weight[l]) * solution.rounds[s - 1])]
        group = list(group)
        if len(group) > len(slots):
            raise ValueError(f"solution overloads edge {e} in step {s}: {len(group)} copies, "
                             f"capacity {len(slots)}")
        for (c, _, _), l in zip(group, slots):
            chunk.append(c)
            link.append(l)
            step.append(steps + 1 - s if reverse else s)
            op.append(REDUCE if reverse and problem.copies[problem.edge_src[e]] else COPY)
    rounds = solution.rounds[::-1] if reverse else solution.rounds
    via = None
    if reverse:  # a plain switch's departures name the arrivals they forward (``forwarding``)
        c, e = np.array(chunk, dtype=np.int64), np.array(link, dtype=np.int64)
        dual_step = steps + 1 - np.array(step, dtype=float)
        via = forwarded_by(c, problem.machine.link_src[e], problem.machine.link_dst[e], dual_step,
                           dual_step + 0.5, plain_switches(problem.machine))
    return from_arrays(chunk, link, op=np.array(op, dtype=np.uint8), step=step, rounds=list(rounds),
                       via=via, **meta).sorted()


def stretched(problem: StepProblem, solution: StepSolution, steps: int) -> StepSolution:
    """The solution over ``steps`` ≥ its own steps: split long steps first (no extra rounds), then
    append empty one-round steps."""
    while solution.steps < steps:
        longer = split_step(problem, solution)
        if longer is None:
            extra = steps - solution.steps
            return StepSolution(solution.rounds + (1,) * extra, solution.chunk, solution.edge, solution.step)
        solution = longer
    return solution
