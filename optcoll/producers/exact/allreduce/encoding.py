"""The direct AllReduce model for CP-SAT: partial sums as contribution sets (issue 13).

Data: a ``DirectProblem`` (stateful nodes, routes, link groups, epochs) and a horizon H.

Variables, per chunk c (chunks only share link capacity):

* ``reduce[j]``, ``copy[j]``: route transfer j = (route r, start epoch k) carries c and is
  delivered as a reduction into, or a copy replacing, the receiver's partial sum;
* ``holds[v, t, i]``: after the deliveries of epoch t, stateful node v's partial sum of c
  contains contributor i's share (epoch 0: each rank holds its own);
* ``carries[j, i]``: transfer j's partial sum contains i's share, i.e. it is sent and its sender
  holds i at its start (a sender reads its sum after the deliveries of that epoch, as the
  verifier does);
* with an objective, ``late[t]``: some rank does not hold the whole sum of some chunk at t.

Constraints (the verifier's rules): a reduction is delivered only to a node that reduces and only
disjoint from what the receiver holds (each contribution counted exactly once); at one epoch a node
receives either reductions or a single copy (never both: their order would be ambiguous); a copy
replaces the receiver's sum; only a node holding a partial sum sends (a switch reducing without
multicast sends a chunk at most as often as it received it); every link group carries at most its
capacity at each epoch; every rank holds every contribution of every chunk at H (and from
``makespan`` on, with the objective). Objective: the least makespan, as floor + Σ late[t].

Variables exist only inside reachability windows: a transfer only from where some contribution can
be, and only if its delivery leaves time to reach a rank by H; ``holds[v, t, i]`` only once i can
have reached v.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from optcoll.instances.clock import check_current
from optcoll.producers.exact.allreduce.problem import DirectProblem
from optcoll.producers.exact.memory import ModelSize

if TYPE_CHECKING:  # symmetric.py builds on this module
    from optcoll.producers.exact.allreduce.symmetric import Orbit

#: Terms per variable in the size estimate below (a carried bit's three rows and its share of the
#: receiver's; a holding bit's five rows; counted on built models: ring8, DGX-1 C = 1 and 2,
#: torus 4×4, estimates within 10 % of the built protos' terms).
_TERMS_PER_CARRY = 13
_TERMS_PER_HOLD = 22


@dataclass(frozen=True, eq=False)
class Candidates:
    """The (route, start epoch) pairs a chunk may use within horizon H (the same for every chunk:
    every chunk has the same contributors and destinations)."""

    route: np.ndarray
    start: np.ndarray

    def __len__(self) -> int:
        return int(self.route.size)


def _windows(problem: DirectProblem, horizon: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The routes with a candidate and each one's first and last start epoch."""
    lo = problem.reach().min(axis=0)[problem.route_src]
    hi = horizon - problem.route_delay - problem.togo()[problem.route_dst]
    live = np.flatnonzero(np.isfinite(lo) & np.isfinite(hi) & (hi >= lo))
    return live, lo[live].astype(np.int64), hi[live].astype(np.int64)


def candidates(problem: DirectProblem, horizon: int) -> Candidates:
    """Transfers whose sender can hold a partial sum by their start and whose delivery can still
    reach a rank by ``horizon``."""
    routes, lo, hi = _windows(problem, horizon)
    if not routes.size:
        return Candidates(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
    count = hi - lo + 1
    first = np.repeat(np.cumsum(count) - count, count)
    return Candidates(np.repeat(routes, count).astype(np.int64), np.repeat(lo, count) + np.arange(count.sum()) - first)


def size(problem: DirectProblem, horizon: int, chunks: int | None = None) -> ModelSize:
    """What ``build`` would create for ``chunks`` modelled chunks (default: all), counted without
    building it, and without listing its candidates (billions of them on a 512-GPU cluster)."""
    routes, lo, hi = _windows(problem, horizon)
    reach = problem.reach()
    k = problem.num_chunks if chunks is None else chunks
    # Contributors that can be at each candidate's sender by its start, counted per sender on the
    # sorted reach: a contributor there by epoch a counts in every start from max(a, lo) to hi.
    sender = problem.route_src[routes]
    carries = 0
    for u in np.flatnonzero(np.bincount(sender)).tolist():  # the senders (np.unique would load numpy.ma: 10 ms)
        check_current()  # under a solver's clock: a 512-GPU cluster has 1,000 senders, seconds in all
        at = np.sort(reach[:, u])
        at = at[np.isfinite(at)].astype(np.int64)
        prefix = np.r_[0, np.cumsum(at)]
        first, last = lo[sender == u], hi[sender == u]
        before = np.searchsorted(at, first, side="right")  # there by the first start
        during = np.searchsorted(at, last, side="right")
        carries += int(((last - first + 1) * before).sum()
                       + ((last + 1) * (during - before) - (prefix[during] - prefix[before])).sum())
    n_cand = int((hi - lo + 1).sum())
    holds = int(np.clip(horizon - reach + 1, 0, None).sum())
    variables = k * (2 * n_cand + carries + holds) + horizon
    return ModelSize("direct allreduce", f"at {horizon} epochs", variables,
                     k * (_TERMS_PER_CARRY * carries + _TERMS_PER_HOLD * holds + 4 * n_cand))


def least_size(problem: DirectProblem, horizon: int) -> ModelSize:
    """A lower bound of ``size`` counted from the problem's dimensions alone (no reach: seconds
    on a 512-GPU cluster): every rank holds its own contribution to every chunk at every epoch,
    so there are at least chunks × ranks × (horizon + 1) hold variables."""
    holds = problem.num_chunks * problem.num_members * (horizon + 1)
    return ModelSize("direct allreduce", f"at {horizon} epochs (its ranks' own holds alone)", holds + horizon,
                     _TERMS_PER_HOLD * holds)


@dataclass
class DirectModel:
    problem: DirectProblem
    horizon: int
    floor: int
    cp: object
    cand: Candidates
    chunks: tuple[int, ...]  # the chunks modelled (all, or orbit representatives)
    reduce: dict[tuple[int, int], object] = field(default_factory=dict)  # (chunk, candidate) -> literal
    copy: dict[tuple[int, int], object] = field(default_factory=dict)
    holds: dict[tuple[int, int, int, int], object] = field(default_factory=dict)  # (chunk, node, epoch, i)
    carries: dict[tuple[int, int, int], object] = field(default_factory=dict)  # (chunk, candidate, i)
    makespan: object | None = None

    def sent(self, c: int, j: int):
        """The linear expression "transfer j of chunk c happens"."""
        terms = [lit for lit in (self.reduce.get((c, j)), self.copy.get((c, j))) if lit is not None]
        return sum(terms) if terms else 0


@dataclass(frozen=True, eq=False)
class _Index:
    """Data the constraints look up: candidates by sender and by (receiver, delivery epoch)."""

    sending: list[list[int]]
    arriving: dict[tuple[int, int], list[int]]
    reach: np.ndarray
    member: np.ndarray


def build(problem: DirectProblem, horizon: int, floor: int | None = None,
          orbit: "Orbit | None" = None) -> DirectModel:
    """The model of the module docstring at horizon ``horizon``; with ``floor`` < horizon it
    minimises the makespan down to ``floor``. ``orbit`` restricts it to schedules invariant under a
    symmetry (``symmetric.Orbit``): only representative chunks get variables."""
    from optcoll.producers.exact.toolkit.cpsat_model import CpModel

    # data
    H = int(horizon)
    cand = candidates(problem, H)
    index = _Index([[] for _ in range(problem.num_nodes)], {}, problem.reach(), problem.member_index())
    for j, (r, k) in enumerate(zip(cand.route.tolist(), cand.start.tolist())):
        index.sending[int(problem.route_src[r])].append(j)
        index.arriving.setdefault((int(problem.route_dst[r]), k + int(problem.route_delay[r])), []).append(j)
    chunks = tuple(range(problem.num_chunks)) if orbit is None else orbit.representatives
    model = DirectModel(problem, H, H if floor is None else int(floor), CpModel(), cand, chunks)
    for c in chunks:
        _variables(model, index, c)
        _carrying(model, index, c)
        _delivering(model, index, c)
        _credit(model, index, c)
        _postcondition(model, index, c)
    capacity(model, orbit)
    if problem.ports != (None, None):
        if orbit is not None:
            raise ValueError("port limits under a symmetry quotient are not modelled")
        _ports(model)
    if orbit is None:
        order_chunks(model)
    if model.floor < H:
        _objective(model)
    return model


def _variables(model: DirectModel, index: _Index, c: int) -> None:
    """holds[v, t, i] once i can have reached v (epoch 0: each rank its own), reduce and copy per
    candidate (reduce only into a node that reduces), carries[j, i] once i can be at j's sender."""
    problem, cp, cand = model.problem, model.cp, model.cand
    for v in range(problem.num_nodes):
        for i in range(problem.num_members):
            model.holds[(c, v, 0, i)] = 1 if index.member[v] == i else 0
            for t in range(1, model.horizon + 1):
                model.holds[(c, v, t, i)] = cp.new_bool_var(f"h{c}_{v}_{t}_{i}") if index.reach[i, v] <= t else 0
    for j, (r, k) in enumerate(zip(cand.route.tolist(), cand.start.tolist())):
        if problem.can_reduce[problem.route_dst[r]]:
            model.reduce[(c, j)] = cp.new_bool_var(f"r{c}_{j}")
        model.copy[(c, j)] = cp.new_bool_var(f"c{c}_{j}")
        u = int(problem.route_src[r])
        for i in range(problem.num_members):
            if index.reach[i, u] <= k:
                model.carries[(c, j, i)] = cp.new_bool_var(f"a{c}_{j}_{i}")


def _carrying(model: DirectModel, index: _Index, c: int) -> None:
    """carries[j, i] = sent(j) ∧ holds[sender, start, i]; only a node holding a partial sum sends."""
    cp, cand = model.cp, model.cand
    for j, (r, k) in enumerate(zip(cand.route.tolist(), cand.start.tolist())):
        u = int(model.problem.route_src[r])
        sent = model.sent(c, j)
        cp.add(sent <= 1)
        bits = []
        for i in range(model.problem.num_members):
            a = model.carries.get((c, j, i))
            if a is None:
                continue
            h = model.holds[(c, u, k, i)]
            cp.add(a <= sent)
            cp.add(a <= h)
            cp.add(sent + h - a <= 1)
            bits.append(h)
        if index.member[u] < 0:
            cp.add(sent <= sum(bits))


def _delivering(model: DirectModel, index: _Index, c: int) -> None:
    """At each (node, epoch): reductions or one copy, never both; a copy replaces the partial sum,
    a reduction adds a disjoint one (no contribution counted twice); nothing arriving keeps it.
    With ``reduce_only`` (SCCL's rules) a copy may only fill an empty partial."""
    cp, holds = model.cp, model.holds
    for v in range(model.problem.num_nodes):
        for t in range(1, model.horizon + 1):
            into = index.arriving.get((v, t), [])
            if not into:
                for i in range(model.problem.num_members):
                    _same(cp, holds[(c, v, t, i)], holds[(c, v, t - 1, i)])
                continue
            cin = sum(model.copy[(c, j)] for j in into)
            cp.add(cin <= 1)
            for j in into:
                if (c, j) in model.reduce:
                    cp.add(model.reduce[(c, j)] + cin <= 1)
            for i in range(model.problem.num_members):
                got = sum(model.carries[(c, j, i)] for j in into if (c, j, i) in model.carries)
                now, before = holds[(c, v, t, i)], holds[(c, v, t - 1, i)]
                cp.add(now >= got)
                cp.add(now >= before - cin)
                cp.add(now <= before + got)
                cp.add(now <= got + 1 - cin)
                cp.add(before + got <= 1 + cin)
                if model.problem.reduce_only:
                    cp.add(before + cin <= 1)


def _credit(model: DirectModel, index: _Index, c: int) -> None:
    """A switch that reduces without multicast sends a chunk at most as often as it received it."""
    for v in np.flatnonzero(model.problem.credit).tolist():
        came_by: list[list[int]] = [[] for _ in range(model.horizon + 1)]
        for (w, when), js in index.arriving.items():
            if w == v:
                came_by[when] += js
        for t in range(model.horizon):
            out = [model.sent(c, j) for j in index.sending[v] if model.cand.start[j] <= t]
            if out:
                model.cp.add(sum(out) <= sum(model.sent(c, j) for when in range(t + 1) for j in came_by[when]))


def _postcondition(model: DirectModel, index: _Index, c: int) -> None:
    """Every rank holds every contribution of the chunk at the horizon."""
    for v in np.flatnonzero(index.member >= 0).tolist():
        for i in range(model.problem.num_members):
            model.cp.add(model.holds[(c, v, model.horizon, i)] == 1)


#: Chunks are ordered by this many of their first transfers (``order_chunks``).
ORDER_PREFIX = 64


def chunk_order_key(cand: Candidates) -> np.ndarray:
    """The candidates in the order chunks are compared by: earliest start first, then route."""
    return np.lexsort((cand.route, cand.start))[:ORDER_PREFIX]


def order_chunks(model) -> None:
    """(For any model with ``cp``, ``cand``, ``chunks`` and ``sent(c, j)``: this one and
    ``pieces``.) Chunks are interchangeable (same contributors, same destinations), so any solution with its
    chunks renumbered is one too: keep only those whose chunks' first transfers (which were sent,
    in ``chunk_order_key`` order) are lexicographically non-increasing with the chunk number.
    Sound: sorting any solution's chunks by that vector gives such a solution. (Left out under a
    symmetry quotient: on DGX-1 with two chunks per GPU the quotient found the optimum without it,
    and not in 10 minutes with it; one run each.)"""
    cp = model.cp
    prefix = chunk_order_key(model.cand).tolist()
    for c, d in zip(model.chunks[:-1], model.chunks[1:]):
        equal = []  # enforcement: the prefixes are equal so far (empty: the empty prefix)
        for n, j in enumerate(prefix):
            a, b = model.sent(c, j), model.sent(d, j)
            cp.add(a >= b).only_enforce_if(equal)
            if n + 1 == len(prefix):
                break
            same = cp.new_bool_var(f"eq{c}_{n}")  # equal so far and a == b (given a >= b: 1 - a + b)
            cp.add(a == b).only_enforce_if(same)
            cp.add(same >= 1 - a + b).only_enforce_if(equal)
            if equal:
                cp.add_implication(same, equal[0])
            equal = [same]


def _same(cp, a, b) -> None:
    if isinstance(a, int) and isinstance(b, int):
        if a != b:
            cp.add_bool_or([])  # contradiction (cannot happen: reach only grows)
        return
    cp.add(a == b)


def capacity(model, orbit=None) -> None:
    """(For any model with ``problem``, ``cp``, ``cand``, ``chunks`` and ``sent(c, j)``.) Per link
    group and epoch, the transfers holding it at most its capacity. Under a symmetry
    quotient a representative's transfer stands for its images on the images of its links."""
    problem, cand, cp = model.problem, model.cand, model.cp
    load: dict[tuple[int, int], list] = {}
    hops_of = problem.route_hops()
    for c in model.chunks:
        for j, (r, k) in enumerate(zip(cand.route.tolist(), cand.start.tolist())):
            sent = model.sent(c, j)
            for h in hops_of[r]:
                groups = [int(problem.hop_group[h])] if orbit is None else orbit.group_images(int(problem.hop_group[h]))
                for g in groups:
                    for t in range(k + int(problem.hop_lo[h]), k + int(problem.hop_hi[h])):
                        load.setdefault((g, t), []).append(sent)
    for (g, _), terms in load.items():
        if len(terms) > problem.group_capacity[g]:
            cp.add(sum(terms) <= int(problem.group_capacity[g]))


def _ports(model: DirectModel) -> None:
    """Per NPU and epoch, the transfers it starts at most its send ports and those it receives
    at most its receive ports (routes are single hops here: ``step_problem`` refuses port limits
    with plain switches)."""
    problem, cand, cp = model.problem, model.cand, model.cp
    for limit, end in zip(problem.ports, (problem.route_src, problem.route_dst)):
        if limit is None:
            continue
        load: dict[tuple[int, int], list] = {}
        for c in model.chunks:
            for j, (r, k) in enumerate(zip(cand.route.tolist(), cand.start.tolist())):
                load.setdefault((int(end[r]), k), []).append(model.sent(c, j))
        for terms in load.values():
            if len(terms) > limit:
                cp.add(sum(terms) <= int(limit))


def _objective(model: DirectModel) -> None:
    """late[t] for t in [floor, H): some rank misses some contribution of some chunk at t."""
    cp, problem = model.cp, model.problem
    member = problem.member_index()
    late = [cp.new_bool_var(f"late{t}") for t in range(model.floor, model.horizon)]
    for later, earlier in zip(late[1:], late[:-1]):
        cp.add(later <= earlier)
    for n, t in enumerate(range(model.floor, model.horizon)):
        for c in model.chunks:
            for v in np.flatnonzero(member >= 0).tolist():
                for i in range(problem.num_members):
                    h = model.holds[(c, v, t, i)]
                    if isinstance(h, int):
                        if h == 0:
                            cp.add(late[n] == 1)
                    else:
                        cp.add(late[n] >= 1 - h)
    model.makespan = model.floor + sum(late)
    cp.minimize(model.makespan)
