"""The step model in SMT, SCCL-style (FIELD-NOTES section 2), solved with z3.

An independent formulation of the question linear.py answers, for the cross-check. Variables:
``time[c, v]`` the step at which copying node v first holds chunk c (0 for holders, S+1 for
never), ``sent[c, e]`` whether v = dst(e) receives c over e (at step ``time[c, v]``), and per
step s a one-hot choice ``rounds_is[s][i]`` of its rounds r_s = i. A copying node that holds c at
some step ≤ S received it over exactly one in-edge, from a node that held it earlier; a
destination holds its chunk by S.

Capacity is pseudo-Boolean with constant bounds, as SCCL writes it: the copies crossing an edge
(or a link group: port limits) in step s plus w·(r_max − i) for the chosen i stay within w·r_max,
which is "copies ≤ w·r_s" for the one i that holds. z3 propagates such constraints directly; the
earlier form (an integer sum against an integer r_s) left it to arithmetic and did not finish the
DGX-1 AllGather front in 10 minutes. Every variable has a finite domain, so the constraints go to
z3's finite-domain solver (``SolverFor("QF_FD")``: its SAT core with native cardinality and PB
constraints, small integers bit-blasted), measured ~40× faster than its SMT core on (S, R, C) =
(3, 7, 6) of the DGX-1 AllGather (1.1 s against 45 s CPU). Σ r is a pseudo-Boolean sum of the choices, at least the
proven rounds bound; "R ≤ cap" is an assumption, so one encoding answers every cap of a bisection.
SCCL's encoding has no plain switches; here the copies into a plain switch are counted in unary
(ordered Booleans) and a running balance (a switch forwards by step s at most what arrived by step
s−1) extends it, pseudo-Boolean as well.
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np
import z3

from optcoll.instances.clock import Clock
from optcoll.producers.exact.memory import ModelSize, require_fits
from optcoll.producers.exact.step.backends import RoundsResult
from optcoll.producers.exact.step.problem import StepProblem
from optcoll.producers.exact.step.solution import StepSolution, cleaned
from optcoll.producers.exact.step.symmetry import Entry
from optcoll.producers.exact.toolkit import solver_version
from optcoll.producers.exact.toolkit.interrupt import run_interruptibly

Literal = z3.BoolRef


def size(problem: StepProblem, steps: int) -> ModelSize:
    """What ``SmtEncoding`` would create for ``steps`` steps, counted without building it: a
    ``sent`` per (chunk, edge into a copying node) with a non-empty window, a unary count per step
    on edges into plain switches, a ``time`` per (chunk, node) that can receive. Terms: every
    ``sent`` and count enters the capacity sums of its steps, plus its window and causality."""
    S = int(steps)
    per_edge = problem.arrival_steps(S)
    into_copier = problem.copies[problem.edge_dst][None, :]
    sent = int(((per_edge > 0) & into_copier).sum())
    counts = int(np.where(into_copier, 0, per_edge).sum())
    times = int(((problem.dist_from > 0) & (problem.dist_from + problem.dist_to <= S)
                 & problem.copies[None, :]).sum())
    return ModelSize("step-smt", f"for S = {S} steps", sent + counts + times + S,
                     (S + 3) * sent + (S + 2) * counts + 3 * times)


class SmtEncoding:
    """The constraints of "S = steps, lo ≤ R ≤ hi" on a z3 solver, and the maps back to a
    solution (module docstring)."""

    def __init__(self, problem: StepProblem, steps: int, hi: int, lex: list[list[tuple[Entry, Entry]]] = (),
                 lo: int | None = None):
        self.problem, self.steps = problem, steps
        self.solver = z3.SolverFor("QF_FD")  # all finite domain: z3's SAT core with native PB
        # z3's own SIGINT handler, installed and restored by the solver thread, races with
        # ``run_interruptibly``'s: Ctrl-C was then swallowed in one call and killed the process in
        # a later one. Off, as CP-SAT's is; the toolkit stops z3 through ``ctx.interrupt``.
        self.solver.set("ctrl_c", False)
        self.constraints: list[z3.BoolRef] = []  # what was added, for export (the SAT core keeps no list)
        self.max_r = hi - (steps - 1)
        self.feasible = True
        self.time: dict[tuple[int, int], z3.ArithRef | int] = {}
        self.sent: dict[tuple[int, int], Literal] = {}
        self.units: dict[tuple[int, int, int], list[Literal]] = {}  # (c, e, s) into plain switches
        self._windows: dict[tuple[int, int], list[int]] = {}
        self._caps: dict[int, Literal] = {}
        self._rounds(lo if lo is not None else steps, hi)
        self._variables()
        self._receive_once()
        self._causality()
        self._switch_balance()
        self._capacity()
        for pairs in lex:
            self.add(_lex_leq([(self._arrival(a), self._arrival(b)) for a, b in pairs]))

    def add(self, *constraints: z3.BoolRef) -> None:
        self.constraints += constraints
        self.solver.add(*constraints)

    def smt2(self) -> str:
        """The constraints as an SMT-LIB 2 benchmark (any SMT solver reads it)."""
        plain = z3.Solver()
        plain.add(*self.constraints)
        return plain.to_smt2()

    # -- variables ------------------------------------------------------------------------------
    def _rounds(self, lo: int, hi: int) -> None:
        S, add = self.steps, self.add
        self.rounds_is = [[z3.Bool(f"r{s}_is{i}") for i in range(1, self.max_r + 1)] for s in range(1, S + 1)]
        for choice in self.rounds_is:
            add(z3.PbEq([(b, 1) for b in choice], 1))
        self.total_terms = [(b, i) for choice in self.rounds_is for i, b in enumerate(choice, start=1)]
        add(z3.PbLe(self.total_terms, hi))
        if lo > S:
            add(z3.PbGe(self.total_terms, lo))

    def _variables(self) -> None:
        p, S, add = self.problem, self.steps, self.add
        copiers = [v for v in range(p.num_nodes) if p.copies[v]]
        for c in range(p.num_chunks):
            lacking = sum(1 for v in copiers if v not in p.holders[c])
            for e in range(p.num_edges):
                window = [s for s in range(1, S + 1) if p.may_arrive(c, e, s, S)]
                if not window:
                    continue
                if p.copies[p.edge_dst[e]]:
                    self._windows[c, e] = window
                    self.sent[c, e] = z3.Bool(f"sent{c}_{e}")
                    continue
                bound = min(int(p.edge_weight[e]) * self.max_r, lacking)
                for s in window:
                    unit = self.units[c, e, s] = [z3.Bool(f"n{c}_{e}_{s}_{j}") for j in range(bound)]
                    for j in range(1, bound):
                        add(z3.Implies(unit[j], unit[j - 1]))
            for v in copiers:
                if v in p.holders[c]:
                    self.time[c, v] = 0
                elif not any((c, e) in self.sent for e in p.in_edges[v]):
                    self.time[c, v] = S + 1
                    self.feasible &= v not in p.needers[c]
                else:
                    t = self.time[c, v] = z3.Int(f"time{c}_{v}")
                    add(t >= 1, t <= (S if v in p.needers[c] else S + 1))

    # -- constraints ----------------------------------------------------------------------------
    def _receive_once(self) -> None:
        """A copying node holds c by S iff it received c over exactly one in-edge."""
        p, S, add = self.problem, self.steps, self.add
        for (c, v), t in self.time.items():
            if isinstance(t, int):
                continue
            into = [self.sent[c, e] for e in p.in_edges[v] if (c, e) in self.sent]
            if len(into) > 1:
                add(z3.AtMost(*into, 1))
            add(z3.Implies(t <= S, z3.Or(into)))

    def _causality(self) -> None:
        """A copy arrives within its window, from a sender that held the chunk a step earlier."""
        p, add = self.problem, self.add
        for (c, e), window in self._windows.items():
            u, v = int(p.edge_src[e]), int(p.edge_dst[e])
            sent, t = self.sent[c, e], self.time[c, v]
            add(z3.Implies(sent, z3.And(t >= window[0], t <= window[-1])))
            if p.copies[u]:
                add(z3.Implies(sent, self.time[c, u] < t))
        for (c, e, s), unit in self.units.items():
            u = int(p.edge_src[e])
            if p.copies[u] and unit:
                add(z3.Implies(unit[0], self.time[c, u] < s))

    def _switch_balance(self) -> None:
        """Per plain switch k, chunk c and step s: copies out by s ≤ copies in by s−1, written
        Σ out + Σ ¬in ≤ |in| so that every coefficient is positive."""
        p = self.problem
        arrivals: dict[tuple[int, int], list[tuple[int, Literal]]] = defaultdict(list)
        onward: dict[tuple[int, int], list[tuple[int, Literal]]] = defaultdict(list)
        for (c, e, s), unit in self.units.items():
            arrivals[c, int(p.edge_dst[e])] += [(s, b) for b in unit]
            if not p.copies[p.edge_src[e]]:
                onward[c, int(p.edge_src[e])] += [(s, b) for b in unit]
        delivered: dict[tuple[int, int], list[tuple[Literal, z3.ArithRef]]] = defaultdict(list)
        for (c, e), sent in self.sent.items():
            if not p.copies[p.edge_src[e]]:
                delivered[c, int(p.edge_src[e])].append((sent, self.time[c, int(p.edge_dst[e])]))
        for key in sorted(set(onward) | set(delivered)):
            for s in range(1, self.steps + 1):
                out = [(z3.And(sent, t <= s), 1) for sent, t in delivered[key]]
                out += [(b, 1) for t, b in onward[key] if t <= s]
                came = [b for t, b in arrivals[key] if t <= s - 1]
                if out:
                    self.add(z3.PbLe(out + [(z3.Not(b), 1) for b in came], len(came)))

    def _capacity(self) -> None:
        """Per edge and per link group, per step: copies·coef + slack(r_s) ≤ capacity·r_max."""
        p = self.problem
        crossing: dict[tuple[int, int], list[Literal]] = defaultdict(list)
        for (c, e), sent in self.sent.items():
            t = self.time[c, int(p.edge_dst[e])]
            for s in self._windows[c, e]:
                crossing[e, s].append(z3.And(sent, t == s))
        for (c, e, s), unit in self.units.items():
            crossing[e, s] += unit
        for (e, s), terms in crossing.items():
            self._within([(b, 1) for b in terms], int(p.edge_weight[e]), s)
        for group in p.groups:
            for s in range(1, self.steps + 1):
                self._within([(b, int(k)) for e, k in zip(group.edges.tolist(), group.coef.tolist())
                              for b in crossing.get((e, s), ())], group.capacity, s)

    def _within(self, terms: list[tuple[Literal, int]], per_round: int, s: int) -> None:
        if sum(k for _, k in terms) <= per_round:
            return  # one round already carries them all
        slack = [(b, per_round * (self.max_r - i)) for i, b in enumerate(self.rounds_is[s - 1], start=1)
                 if i < self.max_r]
        self.add(z3.PbLe(terms + slack, per_round * self.max_r))

    def _arrival(self, entry: Entry):
        value = self.time.get(entry, self.steps + 1)
        return z3.IntVal(value) if isinstance(value, int) else value

    # -- solving --------------------------------------------------------------------------------
    def check(self, rounds_cap: int, clock: Clock) -> z3.CheckSatResult:
        """Whether some solution has R ≤ ``rounds_cap``, within the clock's time left; a Ctrl-C
        interrupts z3 (the toolkit's handling) and answers unknown, the clock then says so."""
        if rounds_cap not in self._caps:
            literal = self._caps[rounds_cap] = z3.Bool(f"R_at_most_{rounds_cap}")
            self.add(z3.Implies(literal, z3.PbLe(self.total_terms, rounds_cap)))
        self.solver.set("timeout", max(1, int(clock.left() * 1000)))
        answer: list[z3.CheckSatResult] = []
        if run_interruptibly(lambda: answer.append(self.solver.check(self._caps[rounds_cap])),
                             self.solver.ctx.interrupt):
            clock.interrupt()
        return answer[0] if answer else z3.unknown

    def decode(self) -> StepSolution:
        model = self.solver.model()

        def true(b: Literal) -> bool:
            return z3.is_true(model.eval(b, model_completion=True))

        rows = []
        for (c, e), sent in self.sent.items():
            if true(sent):
                step = model.eval(self.time[c, int(self.problem.edge_dst[e])], model_completion=True)
                rows.append((c, e, step.as_long()))
        for (c, e, s), unit in self.units.items():
            rows += [(c, e, s)] * sum(true(b) for b in unit)
        rounds = [next(i for i, b in enumerate(choice, start=1) if true(b)) for choice in self.rounds_is]
        return StepSolution.from_rows(rounds, rows)

    def variables(self) -> int:
        return (len(self.sent) + sum(len(u) for u in self.units.values()) + sum(map(len, self.rounds_is))
                + sum(1 for t in self.time.values() if not isinstance(t, int)))


def _lex_leq(pairs: list[tuple[z3.ArithRef, z3.ArithRef]]) -> z3.BoolRef:
    result = z3.BoolVal(True)
    for a, b in reversed(pairs):
        result = z3.Or(a < b, z3.And(a == b, result))
    return result


class Z3Backend:
    name = "z3"

    def version(self) -> str:
        return solver_version("z3")

    def minimise_rounds(self, problem: StepProblem, steps: int, lo: int, hi: int, *,
                        hint: StepSolution | None, lex: list[list[tuple[Entry, Entry]]],
                        clock: Clock) -> RoundsResult:
        """Bisection on R with one encoding (z3 gets no hint: its answers stay independent of
        the other encoding); ``lo`` is a proven bound, so it is a constraint too."""
        if lo > hi:
            return RoundsResult("infeasible", None, hi + 1)
        z3.set_param("smt.random_seed", clock.budget.seed)
        z3.set_param("sat.random_seed", clock.budget.seed)
        require_fits(size(problem, steps), self.name, 1, clock.budget.max_memory)
        enc = SmtEncoding(problem, steps, hi, lex, lo=lo)
        if not enc.feasible:
            return RoundsResult("infeasible", None, hi + 1)
        best: StepSolution | None = None
        upper = hi
        while True:
            cap = upper if best is None else (lo + upper - 1) // 2 if lo < upper else None
            if cap is None:
                break
            answer = enc.check(cap, clock)
            if answer == z3.sat:
                best = enc.decode()
                upper = best.total_rounds
            elif answer == z3.unsat:
                if best is None:
                    return RoundsResult("infeasible", None, hi + 1)
                lo = cap + 1
            else:
                break
            if clock.left() <= 0:
                break
        if best is None:
            return RoundsResult("unknown", None, lo)
        best = cleaned(problem, best)
        return RoundsResult("optimal" if best.total_rounds <= lo else "feasible", best, lo)
