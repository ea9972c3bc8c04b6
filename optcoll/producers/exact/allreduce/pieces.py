"""A lower bound for AllReduce in the timed model: the *pieces* relaxation on exact epochs
(docs/model.md §5 and §6; issue 13).

Why a relaxation. The direct model (``encoding``) keeps one partial sum per node and chunk, as the
verifier does, and reads a sender's sum after the deliveries of the epoch. In true seconds a
send may start before an arrival of the same epoch and leave it out, which the grid cannot say,
so "no direct schedule on the grid by epoch k" proves nothing about the timed model. This
relaxation R keeps more at every node, so that its grid loses nothing.

**R.** A node's *pieces* of a chunk at time t: its own contribution (ranks only) and the content
of every transfer of the chunk delivered to it at or before t. In the timed model a node's partial
sum is always a disjoint union of its pieces (a copy makes it one received piece, a reduction
adds a received piece disjoint from it), and a transfer carries the sum at its start. In R a
transfer from an NPU may carry *any* disjoint union of its sender's pieces at its start, and a
rank is done with a chunk once some disjoint union of its pieces is every contribution. A plain
switch's pieces are its arrivals; it forwards each at most once, whole, at or after its arrival
(the verifier's FIFO order is dropped). So every valid timed schedule is a schedule of R.

**Flooring.** Let every link's delay and occupancy be a whole number of epochs of q seconds
(``rounding == "exact"``). Move each start s to the epoch ⌊s/q⌋. A delay of d epochs then moves
the arrival s + dq to ⌊s/q⌋ + d = ⌊(s + dq)/q⌋, so a piece delivered at or before a send is
delivered at or before its epoch (an arrival at epoch k is usable by a send at k); a link busy
over [s1, s1 + bq) before [s2, ...) has ⌊s1/q⌋ + b ≤ ⌊s2/q⌋, so each link still carries one
transfer at a time and a group of g parallel links at most g; pieces only accumulate, so every
send's content is still there. A schedule done at T is done on the grid at ⌊T/q⌋. Hence: **if R
has no grid schedule done by epoch k, every timed schedule takes at least (k + 1)·q**. This holds
with no port limits, no reduction cost and no reducing or multicast switch (``relaxation_problem``
refuses the rest); it needs no restriction of the timed model.

**Encoding** (CP-SAT, per chunk; chunks share only link capacity, ``encoding.capacity``):
``sent[j]`` per candidate send j = (route, start epoch, slot), one slot per parallel link of the
route (two sends of one chunk may share a group and an epoch); ``content[j, i]``: j carries
contributor i; ``pick[j, p]``: j's content includes piece p of its sender (its own, or a send
delivered to it by j's start); ``content[j, i] = Σ_p pick[j, p] ∧ content[p, i]`` (disjoint union;
the products as clauses); per rank the same with a final cover equal to every contributor, at
the horizon. Sound reductions only: candidates within reach and able to reach a rank by the
horizon (``encoding.candidates``), a send's content non-empty and used by some later send or
cover (dropping unused sends keeps a schedule one of R), slots of one (route, epoch) filled in
order, chunks in lexicographic order of their first sends (``encoding.order_chunks``). No orbit
restriction (``symmetric``): a restriction proves nothing.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from optcoll.instances.clock import Clock
from optcoll.instances.instance import Instance
from optcoll.producers.base import NotApplicable
from optcoll.producers.exact.allreduce import encoding
from optcoll.producers.exact.allreduce.problem import DirectProblem, timed_problem
from optcoll.producers.exact.allreduce.solve import check_build_time
from optcoll.producers.exact.memory import ModelSize, require_fits
from optcoll.producers.exact.toolkit import run_cpsat

NAME = "allreduce-pieces"
#: Terms built per second: 3.9-5.3·10^5 measured on the 7 models of its memory calibration
#: (2 shared cores, load 1.4-2.6); half of that, for a loaded machine.
BUILD_TERMS_PER_SECOND = 2e5
#: CP-SAT without presolve probing: its proofs took half the wall time (and a quarter of the
#: deterministic time) on DGX-1 at 3 epochs (2.8 s against 6.5 s), ring8 at 6, line6 at 9 and
#: ring7 at 5 (one thread, load 1.6-2.4).
TUNING = {"cp_model_probing_level": 0}
ASSUMPTIONS = ("link delays and occupancies whole multiples of one epoch", "no port limits",
               "no reduction cost", "no reducing or multicast switch")


def relaxation_problem(instance: Instance) -> DirectProblem:
    """The instance in exact epochs, every switch a node of its own (``timed_problem``), or
    NotApplicable naming what R does not cover."""
    machine = instance.machine
    special = [v for v in range(machine.num_npus, machine.num_nodes)
               if machine.switch(v).reduce or machine.switch(v).multicast]
    if special:
        raise NotApplicable(f"the pieces relaxation covers plain switches only; node {special[0]} "
                            "reduces or multicasts")
    problem = timed_problem(instance, hop_by_hop=True)
    if problem.rounding != "exact":
        raise NotApplicable("the pieces relaxation needs exact epochs (every link delay and occupancy "
                            "a whole number of one quantum)")
    return problem


@dataclass(frozen=True, eq=False)
class Sends:
    """Candidate sends of a chunk, the same for every chunk: (route, start epoch, slot)."""

    route: np.ndarray
    start: np.ndarray
    slot: np.ndarray

    def __len__(self) -> int:
        return int(self.route.size)


@dataclass(frozen=True, eq=False)
class Layout:
    """What the encoding indexes, per chunk: the sends, what each may pick, what each rank may
    cover with at the horizon."""

    horizon: int
    cand: Sends
    sender: np.ndarray  # node per send
    support: tuple[np.ndarray, ...]  # per send: the contributors it may carry (within reach)
    feeds: tuple[tuple[int, ...], ...]  # per send: the sends delivered to its sender by its start
    final: dict[int, tuple[int, ...]]  # per rank node: the sends delivered to it by the horizon
    own: np.ndarray  # per node: its contributor index, -1 for none
    plain: np.ndarray  # per node: a plain switch


def layout(problem: DirectProblem, horizon: int, among: set[tuple[int, int]] | None = None) -> Layout:
    """The layout at ``horizon``; ``among``: only sends on these (route, start epoch) pairs (to
    pose a given schedule without the sends it does not use)."""
    base = encoding.candidates(problem, horizon)
    if among is not None:
        keep = np.array([(r, k) in among for r, k in zip(base.route.tolist(), base.start.tolist())], dtype=bool)
        base = encoding.Candidates(base.route[keep], base.start[keep])
    width = np.array([problem.group_capacity[problem.hop_group[hops.start:hops.stop]].min()
                      for hops in problem.route_hops()], dtype=np.int64)
    repeat = width[base.route]
    cand = Sends(np.repeat(base.route, repeat), np.repeat(base.start, repeat),
                 np.concatenate([np.arange(w) for w in repeat] + [np.zeros(0)]).astype(np.int64))
    sender, receiver = problem.route_src[cand.route], problem.route_dst[cand.route]
    arrive = cand.start + problem.route_delay[cand.route]
    reach = problem.reach()
    support = tuple(np.flatnonzero(reach[:, u] <= k) for u, k in zip(sender.tolist(), cand.start.tolist()))
    into: dict[int, list[int]] = {}
    for j in np.lexsort((np.arange(len(cand)), arrive)).tolist():
        into.setdefault(int(receiver[j]), []).append(j)
    feeds = tuple(tuple(p for p in into.get(u, []) if arrive[p] <= k)
                  for u, k in zip(sender.tolist(), cand.start.tolist()))
    own = problem.member_index()
    final = {v: tuple(into.get(v, [])) for v in np.flatnonzero(own >= 0).tolist()}
    plain = np.array([problem.machine.is_switch(int(n)) for n in problem.nodes])
    return Layout(int(horizon), cand, sender, support, feeds, final, own, plain)


def size(problem: DirectProblem, lay: Layout) -> ModelSize:
    """Variables and terms (literals of clauses and sums) ``build`` creates, counted from the
    layout: per chunk, each kind of variable times the terms its constraints take (``_chunk``);
    link capacity and the chunk order add a few per cent, left out."""
    sends = len(lay.cand)
    contents = sum(s.size for s in lay.support)
    own = int(np.count_nonzero(lay.own[lay.sender] >= 0))
    feeds = sum(len(f) for f in lay.feeds)
    products = sum(lay.support[p].size for f in lay.feeds for p in f)
    ranks = len(lay.final)
    finals = sum(len(ps) for ps in lay.final.values())
    final_products = sum(lay.support[p].size for ps in lay.final.values() for p in ps)
    variables = sends + contents + own + feeds + products + ranks + finals + final_products
    terms = (4 * sends + 4 * contents + 5 * own + 6 * feeds + 8 * products + ranks + 3 * finals
             + 8 * final_products + problem.num_members * ranks)
    k = int(problem.num_chunks)
    return ModelSize("allreduce pieces", f"at {lay.horizon} epochs", k * int(variables), k * int(terms))


@dataclass
class PieceModel:
    problem: DirectProblem
    layout: Layout
    cp: object
    chunks: tuple[int, ...]
    sends: dict[tuple[int, int], object] = field(default_factory=dict)  # (chunk, send) -> literal

    @property
    def cand(self) -> Sends:
        return self.layout.cand

    def sent(self, c: int, j: int):
        return self.sends[(c, j)]


def build(problem: DirectProblem, horizon: int, order_chunks: bool = True,
          among: set[tuple[int, int]] | None = None) -> PieceModel:
    """R at ``horizon`` epochs as a CP-SAT feasibility model (module docstring); without
    ``order_chunks`` every numbering of the chunks stays, and ``among`` keeps only the sends on
    those (route, start epoch) pairs (both to pose a given schedule)."""
    return assemble(problem, layout(problem, horizon, among), order_chunks)


def assemble(problem: DirectProblem, lay: Layout, order_chunks: bool = True) -> PieceModel:
    """``build`` from a layout already made."""
    from optcoll.producers.exact.toolkit.cpsat_model import CpModel

    model = PieceModel(problem, lay, CpModel(), tuple(range(problem.num_chunks)))
    for c in model.chunks:
        _chunk(model, c)
    _fill_slots_in_order(model)
    encoding.capacity(model)
    if order_chunks:
        encoding.order_chunks(model)
    return model


def _fill_slots_in_order(model: PieceModel) -> None:
    """Slots of one (route, epoch) are interchangeable: slot m + 1 only after slot m."""
    cand = model.cand
    for j in np.flatnonzero(cand.slot > 0).tolist():
        for c in model.chunks:
            model.cp.add_implication(model.sends[(c, j)], model.sends[(c, j - 1)])


def _chunk(model: PieceModel, c: int) -> None:
    """Chunk c's sends, their contents as disjoint unions of picked pieces, and every rank's cover."""
    cp, lay, n = model.cp, model.layout, len(model.layout.cand)
    sent = [cp.new_bool_var(f"x{c}_{j}") for j in range(n)]
    content = [{int(i): cp.new_bool_var(f"a{c}_{j}_{i}") for i in lay.support[j]} for j in range(n)]
    for j in range(n):
        model.sends[(c, j)] = sent[j]
        for lit in content[j].values():
            cp.add_implication(lit, sent[j])
        cp.add_bool_or([sent[j].Not(), *content[j].values()])
    taken: list[list] = [[] for _ in range(n)]  # per send: the picks that take it

    def union(node: int, arrived: tuple[int, ...], whole: dict[int, object], tag: str, enabled) -> list:
        """Picks among ``node``'s own contribution and the ``arrived`` sends, each only when
        ``enabled`` (None: always), whose contents are disjoint and make ``whole``
        (contributor -> literal, or 1); returns the picks."""
        parts: dict[int, list] = {i: [] for i in whole}
        picks = []
        if lay.own[node] >= 0:
            mine = cp.new_bool_var(f"{tag}o")
            if enabled is not None:
                cp.add_implication(mine, enabled)
            picks.append(mine)
            parts[int(lay.own[node])].append(mine)
        for p in arrived:
            pick = cp.new_bool_var(f"{tag}{p}")
            cp.add_implication(pick, sent[p])
            if enabled is not None:
                cp.add_implication(pick, enabled)
            picks.append(pick)
            taken[p].append(pick)
            for i, lit in content[p].items():  # parts[i] gets pick ∧ content[p, i]
                y = cp.new_bool_var(f"{tag}{p}_{i}")
                cp.add_implication(y, pick)
                cp.add_implication(y, lit)
                cp.add_bool_or([pick.Not(), lit.Not(), y])
                parts[i].append(y)
        for i, lit in whole.items():
            cp.add(sum(parts[i]) == lit)
        return picks

    for j in range(n):
        picks = union(int(lay.sender[j]), lay.feeds[j], content[j], f"s{c}_{j}_", sent[j])
        if lay.plain[lay.sender[j]]:
            cp.add(sum(picks) == sent[j])  # a plain switch forwards one arrival, whole
        else:
            cp.add_bool_or([sent[j].Not(), *picks])
    for v, arrived in lay.final.items():
        union(v, arrived, {i: 1 for i in range(model.problem.num_members)}, f"f{c}_{v}_", None)
    receiver = model.problem.route_dst[lay.cand.route]
    for j in range(n):
        cp.add_bool_or([sent[j].Not(), *taken[j]])  # unused sends are left out
        if lay.plain[receiver[j]]:
            cp.add(sum(taken[j]) <= 1)  # each arrival at a plain switch forwarded at most once


@dataclass(frozen=True)
class PieceOutcome:
    """One question to R: is there a grid schedule done by ``horizon`` epochs?"""

    status: str  # CP-SAT's: infeasible | feasible | unknown
    horizon: int
    quantum: float
    size: ModelSize
    wall: float
    interrupted: bool
    work: float = 0.0

    @property
    def bound(self) -> float | None:
        """Seconds every timed schedule takes at least, when R is infeasible at the horizon."""
        return (self.horizon + 1) * self.quantum if self.status == "infeasible" else None

    def witness(self) -> str:
        """The bound's source text: what R is, what was asked, what CP-SAT answered, the model's size."""
        return (f"{NAME}: relaxation in which each node keeps every piece of a chunk it received and sends "
                f"any disjoint union of them (plain switches forward each arrival once), on exact epochs of "
                f"{self.quantum * 1e3:.6g} ms: CP-SAT proved infeasible at {self.horizon} epochs "
                f"({self.size.variables} variables, {self.size.terms} terms), so every schedule takes at "
                f"least {self.horizon + 1} epochs; assumes {', '.join(ASSUMPTIONS)}")


def prove(problem: DirectProblem, horizon: int, clock: Clock) -> PieceOutcome:
    """Asks R at ``horizon`` epochs within ``clock`` (a feasibility question; infeasible:
    ``bound`` holds)."""
    lay = layout(problem, horizon)
    counted = size(problem, lay)
    require_fits(counted, "cpsat", clock.budget.threads, clock.budget.max_memory)
    check_build_time(counted, BUILD_TERMS_PER_SECOND, clock)
    began = time.perf_counter()
    model = assemble(problem, lay)
    res = run_cpsat(model.cp, clock, has_objective=False, tuning=TUNING)
    return PieceOutcome(res.status, int(horizon), problem.quantum, counted, time.perf_counter() - began,
                        res.interrupted, res.work)
