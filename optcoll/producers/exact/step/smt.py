"""The step model in SMT, SCCL-style (FIELD-NOTES section 2), solved with z3.

An independent formulation of the question linear.py answers, for the cross-check. Variables:
``time[c, v]`` the step at which copying node v first holds chunk c (0 for holders, S+1 for
never), ``sent[c, e]`` whether v = dst(e) receives c over e (at step ``time[c, v]``), rounds
``r[s]``. A copying node that holds c at some step ≤ S received it over exactly one in-edge, from
a node that held it earlier; a destination holds its chunk by S; an edge carries at most w·r[s]
copies in step s; Σ r ≤ R. SCCL's encoding has no plain switches; here a copy count
``n[c, e, s]`` on every edge into a plain switch and a running balance (a switch forwards by step s
at most what arrived by step s−1) extend it. The least R is found by bisection on Σ r ≤ R.
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np
import z3

from optcoll.producers.exact.memory import ModelSize, require_fits
from optcoll.producers.exact.step.backends import RoundsResult
from optcoll.producers.exact.step.problem import StepProblem
from optcoll.producers.exact.step.solution import StepSolution, cleaned
from optcoll.producers.exact.step.symmetry import Entry
from optcoll.producers.exact.toolkit import Clock, solver_version
from optcoll.producers.exact.toolkit.interrupt import run_interruptibly


def size(problem: StepProblem, steps: int) -> ModelSize:
    """What ``SmtEncoding`` would create for ``steps`` steps, counted without building it: a
    ``sent`` per (chunk, edge into a copying node) with a non-empty window, a count per step on
    edges into plain switches, a ``time`` per (chunk, node) that can receive. Terms: every
    ``sent`` and count enters S capacity or balance sums, plus its window and causality atoms."""
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
    """The constraints of "S = steps, R ≤ hi" on a z3 solver, and the maps back to a solution."""

    def __init__(self, problem: StepProblem, steps: int, hi: int, lex: list[list[tuple[Entry, Entry]]] = ()):
        self.problem, self.steps = problem, steps
        S, p = steps, problem
        self.solver = z3.Solver()
        add = self.solver.add
        self.rounds = [z3.Int(f"r{s}") for s in range(1, S + 1)]
        for r in self.rounds:
            add(r >= 1, r <= hi - (S - 1))
        self.total = z3.Sum(self.rounds) if S > 1 else self.rounds[0]
        add(self.total <= hi)
        self.feasible = True
        copiers = [v for v in range(p.num_nodes) if p.copies[v]]
        self.time: dict[tuple[int, int], z3.ArithRef | int] = {}
        self.sent: dict[tuple[int, int], z3.BoolRef] = {}
        self.count: dict[tuple[int, int, int], z3.ArithRef] = {}  # (c, e, s) into plain switches
        windows: dict[tuple[int, int], list[int]] = {}
        for c in range(p.num_chunks):
            lacking = sum(1 for v in copiers if v not in p.holders[c])
            for e in range(p.num_edges):
                steps_ok = [s for s in range(1, S + 1) if p.may_arrive(c, e, s, S)]
                if not steps_ok:
                    continue
                if p.copies[p.edge_dst[e]]:
                    windows[c, e] = steps_ok
                    self.sent[c, e] = z3.Bool(f"sent{c}_{e}")
                else:
                    for s in steps_ok:
                        n = self.count[c, e, s] = z3.Int(f"n{c}_{e}_{s}")
                        add(n >= 0, n <= min(int(p.edge_weight[e]) * (hi - S + 1), lacking))
            for v in copiers:
                if v in p.holders[c]:
                    self.time[c, v] = 0
                    continue
                into = [e for e in p.in_edges[v] if (c, e) in self.sent]
                if not into:
                    self.time[c, v] = S + 1
                    if v in p.needers[c]:
                        self.feasible = False
                    continue
                t = self.time[c, v] = z3.Int(f"time{c}_{v}")
                add(t >= 1, t <= (S if v in p.needers[c] else S + 1))
                add(z3.Sum([z3.If(self.sent[c, e], 1, 0) for e in into]) == z3.If(t <= S, 1, 0))
        for (c, e), window in windows.items():
            u, v = int(p.edge_src[e]), int(p.edge_dst[e])
            sent, t = self.sent[c, e], self.time[c, v]
            add(z3.Implies(sent, z3.And(t >= window[0], t <= window[-1])))
            if p.copies[u]:
                add(z3.Implies(sent, self.time[c, u] < t))
        for (c, e, s), n in self.count.items():
            u = int(p.edge_src[e])
            if p.copies[u]:
                add(z3.Implies(n > 0, self.time[c, u] < s))
        self._switch_balance()
        self._capacity()
        for pairs in lex:
            add(_lex_leq([(self._arrival(a), self._arrival(b)) for a, b in pairs]))

    def _arrival(self, entry: Entry):
        value = self.time.get(entry, self.steps + 1)
        return z3.IntVal(value) if isinstance(value, int) else value

    def _switch_balance(self) -> None:
        """Per plain switch k, chunk c and step s: copies out by s ≤ copies in by s−1."""
        p = self.problem
        arrivals: dict[tuple[int, int], list] = defaultdict(list)  # (c, k) → [(step, count)]
        onward: dict[tuple[int, int], list] = defaultdict(list)  # (c, k) → [(step, count)] to switches
        for (c, e, s), n in self.count.items():
            arrivals[c, int(p.edge_dst[e])].append((s, n))
            if not p.copies[p.edge_src[e]]:
                onward[c, int(p.edge_src[e])].append((s, n))
        delivered: dict[tuple[int, int], list] = defaultdict(list)  # (c, k) → [(sent, time)]
        for (c, e), sent in self.sent.items():
            if not p.copies[p.edge_src[e]]:
                delivered[c, int(p.edge_src[e])].append((sent, self.time[c, int(p.edge_dst[e])]))
        for key in sorted(set(onward) | set(delivered)):
            for s in range(1, self.steps + 1):
                out = [z3.If(z3.And(sent, t <= s), 1, 0) for sent, t in delivered[key]]
                out += [n for t, n in onward[key] if t <= s]
                self.solver.add(_total(out) <= _total([n for t, n in arrivals[key] if t <= s - 1]))

    def _capacity(self) -> None:
        p = self.problem
        load: dict[tuple[int, int], list] = defaultdict(list)
        for (c, e), sent in self.sent.items():
            t = self.time[c, int(p.edge_dst[e])]
            for s in range(1, self.steps + 1):
                load[e, s].append(z3.If(z3.And(sent, t == s), 1, 0))
        for (c, e, s), n in self.count.items():
            load[e, s].append(n)
        for (e, s), terms in load.items():
            self.solver.add(z3.Sum(terms) <= int(p.edge_weight[e]) * self.rounds[s - 1])

    def check(self, rounds_cap: int, clock: Clock) -> z3.CheckSatResult:
        """Whether some solution has R ≤ ``rounds_cap``, within the clock's time left; a Ctrl-C
        interrupts z3 (the toolkit's handling) and answers unknown, the clock then says so."""
        self.solver.set("timeout", max(1, int(clock.left() * 1000)))
        answer: list[z3.CheckSatResult] = []
        if run_interruptibly(lambda: answer.append(self.solver.check(self.total <= rounds_cap)),
                             self.solver.ctx.interrupt):
            clock.interrupt()
        return answer[0] if answer else z3.unknown

    def decode(self) -> StepSolution:
        model = self.solver.model()
        rows = []
        for (c, e), sent in self.sent.items():
            if z3.is_true(model.eval(sent, model_completion=True)):
                step = model.eval(self.time[c, int(self.problem.edge_dst[e])], model_completion=True)
                rows.append((c, e, step.as_long()))
        for (c, e, s), n in self.count.items():
            rows += [(c, e, s)] * model.eval(n, model_completion=True).as_long()
        rounds = [model.eval(r, model_completion=True).as_long() for r in self.rounds]
        return StepSolution.from_rows(rounds, rows)


def _total(terms: list) -> z3.ArithRef:
    return z3.Sum(terms) if terms else z3.IntVal(0)


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
        """Bisection on R (z3 gets no hint: its answers stay independent of the other encoding)."""
        if lo > hi:
            return RoundsResult("infeasible", None, hi + 1)
        z3.set_param("smt.random_seed", clock.budget.seed)
        require_fits(size(problem, steps), self.name, 1, clock.budget.max_memory)
        enc = SmtEncoding(problem, steps, hi, lex)
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
