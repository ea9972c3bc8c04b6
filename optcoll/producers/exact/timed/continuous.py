"""The exact continuous-time CP-SAT model (FIELD-NOTES section 3, last bullet): no epochs.

Times are integers in a fine unit that makes every duration exact (e.g. 1/6 µs for 800.5 µs and
533.83 µs). With integral durations some optimal schedule has integral starts (start everything
as early as its inputs allow), so the model's optimum is the true optimum.

Every possible transfer (chunk c, link e, sender slot a, receiver slot b) is an optional interval
of the link's occupancy; NoOverlap per link, Cumulative per NPU port. A copy node has one slot:
at most one incoming transfer per chunk (exactly one where the chunk is needed), any number out.
A plain switch has several slots per chunk, each taking one arrival and forwarding it exactly
once. A send starts no earlier than its slot's arrival. It is a job-shop-like model, so it is
given the best known schedule as a hint and the horizon it sets.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from optcoll.instances.clock import Clock
from optcoll.producers.exact.memory import ModelSize
from optcoll.producers.exact.timed.grid import Grid
from optcoll.producers.exact.toolkit.backends import Progress, SolveResult, run_cpsat
from optcoll.producers.exact.timed.listsched import Transfers
from optcoll.producers.exact.timed.problem import TimedProblem
from optcoll.producers.exact.timed.reach import reach


@dataclass(frozen=True)
class _Candidate:
    chunk: int
    link: int
    src_slot: int
    dst_slot: int
    lo: int
    hi: int


@dataclass
class ContinuousModel:
    problem: TimedProblem
    grid: Grid
    horizon: int
    cp: object
    candidates: list[_Candidate]
    present: list  # BoolVar per candidate
    start: list  # IntVar per candidate
    makespan: object

    def decode(self, values: np.ndarray) -> Transfers:
        on = [i for i, p in enumerate(self.present) if values[p.index]]
        return Transfers(np.array([self.candidates[i].chunk for i in on], dtype=np.int64),
                         np.array([self.candidates[i].link for i in on], dtype=np.int64),
                         np.array([values[self.start[i].index] for i in on], dtype=float))


def _slots(problem: TimedProblem, held: np.ndarray, reachable: np.ndarray) -> np.ndarray:
    """Slots per (chunk, node): 1 at copy nodes; at a plain switch, one per copy node that could
    still receive the chunk (each arrival's forwarding chain ends in a distinct first delivery)."""
    copy_receivers = (~held & problem.copy[None, :] & reachable).sum(axis=1)
    slots = np.ones(held.shape, dtype=np.int64)
    plain = ~problem.copy
    slots[:, plain] = copy_receivers[:, None]
    return slots


def size(problem: TimedProblem, grid: Grid, horizon: int) -> ModelSize:
    """What ``build`` would create, counted without building it: per optional transfer a
    presence literal, a start, an interval and about ten constraint terms (its delivery time,
    its causality, its slot and its link's NoOverlap); per arrival slot two variables."""
    r = reach(problem, grid.delay)
    held = problem.holds_at_start()
    slots = _slots(problem, held, np.isfinite(r.earliest))
    src, dst = problem.src, problem.dst
    ok = r.windows(problem, grid.delay, int(horizon))[2]
    per_pair = np.where(held[:, src], 1, slots[:, src]) * slots[:, dst]
    candidates = int(per_pair[ok].sum())
    arrival_slots = int(np.where(~held & np.isfinite(r.earliest), slots, 0).sum())
    return ModelSize("continuous", f"with horizon {int(horizon)} units", 2 * candidates + 2 * arrival_slots + 1,
                     10 * candidates + 4 * arrival_slots)


def build(problem: TimedProblem, grid: Grid, horizon: int, floor: int) -> ContinuousModel:
    from ortools.sat.python import cp_model

    cp = cp_model.CpModel()
    r = reach(problem, grid.delay)
    held, need = problem.holds_at_start(), problem.needed()
    slots = _slots(problem, held, np.isfinite(r.earliest))
    H = int(horizon)
    candidates: list[_Candidate] = []
    for c in range(problem.num_chunks):
        for e in range(problem.num_links):
            u, v = int(problem.src[e]), int(problem.dst[e])
            if held[c, v] or not np.isfinite(r.earliest[c, u]) or not np.isfinite(r.togo[c, v]):
                continue
            lo = int(r.earliest[c, u])
            hi = int(H - r.togo[c, v] - grid.delay[e])
            if hi < lo:
                continue
            src_slots = 1 if held[c, u] else int(slots[c, u])
            for a in range(src_slots):
                for b in range(int(slots[c, v])):
                    candidates.append(_Candidate(c, e, a, b, lo, hi))
    present = [cp.new_bool_var(f"p{i}") for i in range(len(candidates))]
    start = [cp.new_int_var(k.lo, k.hi, f"s{i}") for i, k in enumerate(candidates)]
    makespan = cp.new_int_var(max(0, int(floor)), H, "makespan")

    # Arrival slots: at most one incoming transfer each, its delivery time is the slot's time.
    incoming: dict[tuple[int, int, int], list[int]] = {}
    outgoing: dict[tuple[int, int, int], list[int]] = {}
    for i, k in enumerate(candidates):
        incoming.setdefault((k.chunk, int(problem.dst[k.link]), k.dst_slot), []).append(i)
        outgoing.setdefault((k.chunk, int(problem.src[k.link]), k.src_slot), []).append(i)
    filled: dict[tuple[int, int, int], object] = {}
    arrival: dict[tuple[int, int, int], object] = {}
    for key, ids in incoming.items():
        c, v, b = key
        got = cp.new_bool_var(f"r{c}_{v}_{b}")
        cp.add(sum(present[i] for i in ids) == got)
        t = cp.new_int_var(int(r.earliest[c, v]), H, f"h{c}_{v}_{b}")
        for i in ids:
            cp.add(t == start[i] + int(grid.delay[candidates[i].link])).only_enforce_if(present[i])
        filled[key], arrival[key] = got, t
        if need[c, v]:
            cp.add(got == 1)
            cp.add(makespan >= t)
    for c, v in zip(problem.need_chunk.tolist(), problem.need_node.tolist()):
        if (c, v, 0) not in filled:
            cp.add_bool_or([])  # a needed delivery with no candidate: infeasible by this horizon
    for key, ids in outgoing.items():
        c, u, a = key
        if held[c, u]:
            continue
        got = filled.get(key)
        if got is None:
            for i in ids:
                cp.add(present[i] == 0)
            continue
        for i in ids:
            cp.add(start[i] >= arrival[key]).only_enforce_if(present[i])
            cp.add_implication(present[i], got)
        if not problem.copy[u]:
            cp.add(sum(present[i] for i in ids) == got)  # each arrival forwarded exactly once
    # Interchangeable slots of a plain switch are used in order of arrival.
    for (c, v, b), got in filled.items():
        nxt = filled.get((c, v, b + 1))
        if nxt is not None:
            cp.add_implication(nxt, got)
            cp.add(arrival[(c, v, b)] <= arrival[(c, v, b + 1)])

    per_link: dict[int, list] = {}
    port_send: dict[int, list] = {}
    port_recv: dict[int, list] = {}
    for i, k in enumerate(candidates):
        e = k.link
        if grid.busy[e] > 0:
            per_link.setdefault(e, []).append(
                cp.new_optional_fixed_size_interval_var(start[i], int(grid.busy[e]), present[i], f"L{i}"))
        width = int(grid.port_hi[e] - grid.port_lo[e])
        if width > 0:
            for limit, node, table in ((problem.send_ports, int(problem.src[e]), port_send),
                                       (problem.recv_ports, int(problem.dst[e]), port_recv)):
                if limit is not None and problem.port_limited[node]:
                    table.setdefault(node, []).append(cp.new_optional_fixed_size_interval_var(
                        start[i] + int(grid.port_lo[e]), width, present[i], f"P{i}"))
    for intervals in per_link.values():
        if len(intervals) > 1:
            cp.add_no_overlap(intervals)
    for limit, table in ((problem.send_ports, port_send), (problem.recv_ports, port_recv)):
        for intervals in table.values():
            if len(intervals) > limit:
                cp.add_cumulative(intervals, [1] * len(intervals), limit)
    cp.minimize(makespan)
    return ContinuousModel(problem, grid, H, cp, candidates, present, start, makespan)


def hint(model: ContinuousModel, transfers: Transfers) -> bool:
    """Hints a schedule on the model's grid (plain-switch arrivals matched first come, first
    forwarded). False if some transfer is not a candidate of the model."""
    p, g = model.problem, model.grid
    def ranks(order: np.ndarray, node: np.ndarray) -> dict[int, int]:
        """Rank of each transfer among those of its (chunk, plain switch) in ``order``."""
        seen: dict[tuple[int, int], int] = {}
        out = {}
        for i in order.tolist():
            key = (int(transfers.chunk[i]), int(node[i]))
            out[i] = 0 if p.copy[key[1]] else seen.get(key, 0)
            seen[key] = out[i] + 1
        return out

    arrive = transfers.start + g.delay[transfers.link]
    dst_slot = ranks(np.lexsort((transfers.chunk, transfers.link, arrive)), p.dst[transfers.link])
    src_slot = ranks(np.lexsort((transfers.chunk, transfers.link, transfers.start)), p.src[transfers.link])
    index = {(k.chunk, k.link, k.src_slot, k.dst_slot): i for i, k in enumerate(model.candidates)}
    chosen = {}
    for i in range(len(transfers)):
        j = index.get((int(transfers.chunk[i]), int(transfers.link[i]), src_slot[i], dst_slot[i]))
        if j is None:
            return False
        chosen[j] = int(round(transfers.start[i]))
    for j, var in enumerate(model.present):
        model.cp.add_hint(var, j in chosen)
        if j in chosen:
            model.cp.add_hint(model.start[j], chosen[j])
    model.cp.add_hint(model.makespan, int(round(transfers.makespan(g))))
    return True


def solve(model: ContinuousModel, clock: Clock, *, progress: Progress | None = None) -> SolveResult:
    return run_cpsat(model.cp, clock, progress=progress, has_objective=True)
