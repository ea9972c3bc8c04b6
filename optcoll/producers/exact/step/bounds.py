"""Lower bounds on the rounds of a step schedule, per chunk of one rank (R/C).

The flow LP fixes the weakness of SCCL's rounds bound (FIELD-NOTES section 2): every
(chunk, destination) pair gets its own unit flow from the chunk's holders, so flow circulating in a
cycle creates no capacity; copies of one chunk to several destinations may share a link (one copy
serves them all), so a chunk's use of a link is the largest of its destinations' flows; a plain
switch forwards a chunk at most as often as it receives it. Why it is a relaxation: averaging the
paths of a schedule's C pieces of each chunk gives such flows with R/C times the link capacity.
The counting bounds (what a node must receive over its in-links, what a sole holder must send over
its out-links) are implied by the LP but reported by name because they explain the number. Link
groups (port limits) cap both: a group row in the LP, and a node's ports in the counts.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from optcoll.collectives.builtins import split_allreduce
from optcoll.collectives.collective import Collective
from optcoll.instances.instance import TimeModel
from optcoll.machines.machine import Machine
from optcoll.producers.exact.step.chunking import rechunk
from optcoll.producers.exact.step.inversion import plan
from optcoll.producers.exact.step.problem import StepProblem

#: Above this many flow variables the LP is skipped and only the counting bounds are used: the LP
#: grows as chunks × destinations × edges and HiGHS needs ~0.5 s at 15k variables (hypercube 2^4,
#: torus 4x4) but ~20 s at 48k (torus 5x5).
LP_MAX_FLOW_VARIABLES = 20_000
#: Wall-clock limit for the LP; an LP stopped early proves nothing and is reported as skipped.
LP_TIME_LIMIT = 30.0
#: Largest denominator tried when reading the LP optimum back as an exact fraction.
LP_DENOMINATOR = 10_000
#: Slack that rounding R up from C·(R/C bound) allows for the LP solver's tolerance.
ROUNDING_SLACK = 1e-6
#: The ``detail`` entry of an AllReduce's bound holding the bound of ReduceScatter then AllGather.
FAMILY = "reducescatter+allgather family"

if TYPE_CHECKING:
    from optcoll.bounds.lp import Triplets


@dataclass(frozen=True)
class RoundsBound:
    """R ≥ ``value``·C for every step schedule with C pieces per base chunk.

    ``source`` names the binding bound; ``detail`` holds every bound computed, by name.
    """

    value: Fraction
    source: str
    detail: dict[str, Fraction | float | str | None] = field(default_factory=dict)

    def rounds(self, chunks_per_rank: int) -> int:
        """The least integer R the bound allows with ``chunks_per_rank`` pieces."""
        return max(0, math.ceil(float(self.value) * chunks_per_rank - ROUNDING_SLACK))


def rounds_lower_bound(machine: Machine, collective: Collective, model: TimeModel | None = None) -> RoundsBound:
    """R/C ≥ value for ``collective`` on ``machine`` in the step model (with ``model``'s port limits).

    Combining collectives are bounded through their dual on the reversed machine; AllReduce by its
    ReduceScatter (an AllReduce schedule is also a ReduceScatter schedule), with the bound of the
    ReduceScatter-then-AllGather family in ``detail``.
    """
    if collective.kind == "allreduce":
        rs, ag = split_allreduce(collective)
        return allreduce_rounds_bound(rounds_lower_bound(machine, rs, model), rounds_lower_bound(machine, ag, model))
    return problem_rounds_bound(plan(machine, collective, model).problem)


def allreduce_rounds_bound(reducescatter: RoundsBound, allgather: RoundsBound) -> RoundsBound:
    """An AllReduce's bound from its parts' (``rounds_lower_bound``): the ReduceScatter's, with the
    ReduceScatter-then-AllGather family's sum in ``detail``."""
    return RoundsBound(reducescatter.value, "reducescatter " + reducescatter.source,
                       {**reducescatter.detail, FAMILY: reducescatter.value + allgather.value})


def problem_rounds_bound(problem: StepProblem, *, with_lp: bool = True) -> RoundsBound:
    """The bound for a step problem, computed on one piece per base chunk; ``with_lp=False``
    keeps to the counting bounds (no LP solver loaded)."""
    base = problem.with_collective(rechunk(problem.collective, 1))
    detail: dict[str, Fraction | float | str | None] = {}
    candidates: list[tuple[Fraction, str]] = [(Fraction(0), "trivial")]
    ingress = _ingress(base)
    if ingress is not None:
        candidates.append(ingress)
        detail["ingress"] = ingress[0]
    egress = _egress(base)
    if egress is not None:
        candidates.append(egress)
        detail["egress"] = egress[0]
    lp = flow_lp(base) if with_lp else None
    detail["flow LP"] = (lp if lp is not None else "skipped: too large for the time budget" if with_lp
                         else "not asked for")
    if lp is not None:
        candidates.append((lp, "multicast flow LP"))
    value, source = max(candidates, key=lambda vs: vs[0])
    return RoundsBound(value, source, detail)


def _ingress(problem: StepProblem) -> tuple[Fraction, str] | None:
    best = None
    for v in range(problem.num_nodes):
        need = sum(v in d for d in problem.needers)
        capacity, what = _capacity(problem, problem.in_edges[v], "in-links")
        if need and (best is None or need / capacity > best[0]):
            best = (need / capacity, f"ingress of {problem.machine.label(v)}: {need} chunks over {what}")
    return best


def _egress(problem: StepProblem) -> tuple[Fraction, str] | None:
    best = None
    for h in range(problem.num_nodes):
        sole = sum(holders == {h} and bool(d) for holders, d in zip(problem.holders, problem.needers))
        capacity, what = _capacity(problem, problem.out_edges[h], "out-links")
        if sole and (best is None or sole / capacity > best[0]):
            best = (sole / capacity, f"egress of {problem.machine.label(h)}: sole holder of {sole} chunks, {what}")
    return best


def _capacity(problem: StepProblem, edges: tuple[int, ...], links: str) -> tuple[Fraction, str]:
    """Chunks per round a node's in- or out-edges carry: their total weight, or less when a link
    group covering all of them (its ports) allows less, and words for it."""
    total = Fraction(int(problem.edge_weight[list(edges)].sum()))
    best = (total, f"{links} of total weight {total}")
    for group in problem.groups:
        if set(edges) <= set(group.edges.tolist()):
            ports = Fraction(group.capacity, int(group.coef.min()))
            if ports < best[0]:
                best = (ports, f"its {group.name} ({ports} chunks per round)")
    return best


def flow_lp(problem: StepProblem) -> Fraction | None:
    """min R over per-(chunk, destination) unit flows with multicast sharing (None if too big or
    not solved within ``LP_TIME_LIMIT``).

    Built as sparse arrays (chunks × destinations × edges flow variables, too many for
    expression-by-expression model building, assembled as numpy triplets) and solved by HiGHS
    through the flow bounds' LP door (``optcoll.bounds.lp``). HiGHS, not GLOP: GLOP took 2-8× longer on the torus 4×4 AllGather and
    the torus 8×8 Broadcast (though less on AlltoAll).
    """
    V, E = problem.num_nodes, problem.num_edges
    src, dst = problem.edge_src, problem.edge_dst
    useful = [np.flatnonzero(~(problem.copies[dst] & np.isin(dst, list(h)))) for h in problem.holders]
    if sum(len(useful[c]) * len(d) for c, d in enumerate(problem.needers)) > LP_MAX_FLOW_VARIABLES:
        return None
    if not any(problem.needers):
        return Fraction(0)
    ub_rows, eq_rows = _Rows(), _Rows()
    use_start = np.cumsum([0] + [len(u) for u in useful])
    num_vars = 1 + int(use_start[-1])
    for c, dests in enumerate(problem.needers):
        edges, uses = useful[c], 1 + use_start[c] + np.arange(len(useful[c]))
        free = np.ones(V, dtype=bool)
        free[list(problem.holders[c])] = False
        row_of = np.cumsum(free) - 1  # local conservation row of each non-holder node
        for d in dests:
            flows = num_vars + np.arange(len(edges))
            num_vars += len(edges)
            ub_rows.add_pairs(flows, uses)  # f ≤ u: one copy on a link serves every destination
            heads, tails = free[dst[edges]], free[src[edges]]
            base = eq_rows.reserve(int(free.sum()), rhs=np.where(np.arange(V)[free] == d, 1.0, 0.0))
            eq_rows.entries(base + row_of[dst[edges][heads]], flows[heads], 1.0)
            eq_rows.entries(base + row_of[src[edges][tails]], flows[tails], -1.0)
    use_chunk = np.repeat(np.arange(problem.num_chunks), [len(u) for u in useful])
    use_edge = np.concatenate(useful)
    use_ids = 1 + np.arange(len(use_edge))
    base = ub_rows.reserve(E, rhs=np.zeros(E))  # Σ_c u[c, e] ≤ w_e · z
    ub_rows.entries(base + use_edge, use_ids, 1.0)
    ub_rows.entries(base + np.arange(E), np.zeros(E, dtype=np.int64), -problem.edge_weight.astype(float))
    for group in problem.groups:  # Σ_{e in group} coef_e · Σ_c u[c, e] ≤ capacity · z
        coef = np.zeros(E)
        coef[group.edges] = group.coef
        hit = coef[use_edge] > 0
        base = ub_rows.reserve(1, rhs=np.zeros(1))
        ub_rows.entries(np.full(int(hit.sum()), base), use_ids[hit], coef[use_edge[hit]])
        ub_rows.entries(np.array([base]), np.array([0]), -float(group.capacity))
    plain = ~problem.copies
    if plain.any():  # a plain switch forwards a chunk at most as often as it receives it
        key = use_chunk * V
        out_rows, in_rows = key + src[use_edge], key + dst[use_edge]
        rows = np.unique(np.concatenate([out_rows[plain[src[use_edge]]], in_rows[plain[dst[use_edge]]]]))
        base = ub_rows.reserve(len(rows), rhs=np.zeros(len(rows)))
        for keys, sign in ((out_rows, 1.0), (in_rows, -1.0)):
            hit = np.isin(keys, rows)
            ub_rows.entries(base + np.searchsorted(rows, keys[hit]), use_ids[hit], sign)
    cost = np.zeros(num_vars)
    cost[0] = 1.0
    upper = np.full(num_vars, np.inf)
    upper[1 + len(use_edge):] = 1.0
    from optcoll.bounds.lp import solve_lp  # the LP door (OR-Tools MathOpt), loaded only when an LP is asked for

    ub_rhs, eq_rhs = ub_rows.rhs(), eq_rows.rhs()
    started = time.monotonic()
    result = solve_lp(cost, _Rows.stacked([ub_rows, eq_rows], num_vars),
                      np.concatenate([np.full(len(ub_rhs), -np.inf), eq_rhs]), np.concatenate([ub_rhs, eq_rhs]),
                      np.zeros(num_vars), upper, solver="highs", time_limit=LP_TIME_LIMIT)
    if not result.solved:
        if time.monotonic() - started >= LP_TIME_LIMIT:  # stopped by the limit: no proven value
            return None
        raise RuntimeError(f"the rounds-bound LP failed: {result.status}")
    return _exact(result.objective)


class _Rows:
    """Sparse constraint rows collected as coordinate triplets."""

    def __init__(self) -> None:
        self.rows: list[np.ndarray] = []
        self.cols: list[np.ndarray] = []
        self.vals: list[np.ndarray] = []
        self.rhs_parts: list[np.ndarray] = []
        self.count = 0

    def reserve(self, n: int, rhs: np.ndarray) -> int:
        base = self.count
        self.count += n
        self.rhs_parts.append(np.asarray(rhs, dtype=float))
        return base

    def entries(self, rows: np.ndarray, cols: np.ndarray, vals: float | np.ndarray) -> None:
        self.rows.append(np.asarray(rows, dtype=np.int64))
        self.cols.append(np.asarray(cols, dtype=np.int64))
        self.vals.append(np.broadcast_to(np.asarray(vals, dtype=float), self.rows[-1].shape))

    def add_pairs(self, plus: np.ndarray, minus: np.ndarray) -> None:
        """Rows plus_i − minus_i ≤ 0."""
        base = self.reserve(len(plus), rhs=np.zeros(len(plus)))
        rows = base + np.arange(len(plus))
        self.entries(rows, plus, 1.0)
        self.entries(rows, minus, -1.0)

    def rhs(self) -> np.ndarray:
        return np.concatenate(self.rhs_parts) if self.rhs_parts else np.zeros(0)

    @staticmethod
    def stacked(blocks: list["_Rows"], num_vars: int) -> "Triplets":
        """The blocks' rows one after the other as triplets, duplicate terms summed (numpy only:
        no scipy to load for a small LP)."""
        from optcoll.bounds.lp import Triplets

        offsets = np.cumsum([0] + [b.count for b in blocks])
        rows = [r + offset for b, offset in zip(blocks, offsets) for r in b.rows]
        cols = [c for b in blocks for c in b.cols]
        vals = [v for b in blocks for v in b.vals]
        if not rows:
            empty = np.zeros(0, dtype=np.int64)
            return Triplets(empty, empty, np.zeros(0), (int(offsets[-1]), num_vars))
        key = np.concatenate(rows) * num_vars + np.concatenate(cols)
        unique, inverse = np.unique(key, return_inverse=True)
        data = np.zeros(unique.size)
        np.add.at(data, inverse, np.concatenate(vals))
        row, col = np.divmod(unique, num_vars)
        return Triplets(row, col, data, (int(offsets[-1]), num_vars))


def _exact(value: float) -> Fraction:
    """The LP optimum as a fraction when one with a small denominator matches it, else rounded
    down a little (a bound must never exceed the true optimum)."""
    guess = Fraction(value).limit_denominator(LP_DENOMINATOR)
    if abs(float(guess) - value) <= 1e-9 * max(1.0, abs(value)):
        return guess
    return Fraction(value - ROUNDING_SLACK).limit_denominator(LP_DENOMINATOR * 100)
