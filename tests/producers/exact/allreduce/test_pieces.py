"""The pieces relaxation (``allreduce.pieces``): a lower bound of the timed model for AllReduce.

Checked two ways. Its flooring argument, executed: every verified timed schedule, each start
moved to its epoch, is a schedule of R (``accepts``), on the recorded instances, rings, lines
and random machines. Its proofs against independent ones: where the analytic bounds or the
direct model settle an optimum, R never proves more, and on rings it proves exactly that.
"""
from __future__ import annotations

import math
import tomllib
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from optcoll.collectives.builtins import make_collective, make_custom
from optcoll.instances.instance import Instance, TimeModel
from optcoll.instances.instancefile import load_instance
from optcoll.machines import generators as G
from optcoll.machines.machine import MachineBuilder
from optcoll.producers.base import NotApplicable
from optcoll.producers.exact.allreduce import pieces
from optcoll.producers.exact.allreduce.problem import timed_problem
from optcoll.producers.exact.allreduce.transfers import from_schedule, partial_sums
from optcoll.producers.exact.timed.solve import solve_timed
from optcoll.producers.exact.toolkit import run_cpsat
from optcoll.schedules.jsonfile import load_schedule
from optcoll.schedules.schedule import COPY, REDUCE, from_arrays
from optcoll.verify import verify
from optcoll.instances.clock import Clock
from solver_checks import WORK, proof_budget

ROOT = Path(__file__).resolve().parents[4]
#: Relative slack when reading seconds as epochs.
SLACK = 1e-9


def epoch_of(seconds: float, q: float) -> int:
    return math.floor(seconds / q * (1 + SLACK))


def accepts(problem, schedule, time: float) -> str:
    """CP-SAT's answer to "is ``schedule``, each start floored to its epoch, a schedule of R done
    by epoch ⌊time/q⌋?" (only its sends, any contents R allows)."""
    q = problem.quantum
    group_of = np.empty(problem.machine.num_links, dtype=np.int64)
    for g, links in enumerate(problem.group_links):
        group_of[list(links)] = g
    route_of = {int(problem.hop_group[problem.hop_route == r][0]): r for r in range(problem.num_routes)}
    used = Counter((int(c), route_of[int(group_of[e])], epoch_of(s, q))
                   for c, e, s in zip(schedule.chunk, schedule.link, schedule.start))
    model = pieces.build(problem, epoch_of(time, q), order_chunks=False, among={(r, k) for _, r, k in used})
    cand = model.cand
    for (c, j), lit in model.sends.items():
        if cand.slot[j] >= used.get((c, int(cand.route[j]), int(cand.start[j])), 0):
            model.cp.add(lit == 0)
    return run_cpsat(model.cp, Clock(proof_budget()), has_objective=False).status


def allreduce(machine, size=2.0**26, chunks=1, work=WORK):
    coll = make_collective("allreduce", range(machine.num_npus), size, chunks)
    return Instance(f"{machine.name}-allreduce", machine, coll, TimeModel(), proof_budget(work=work))


def prove(problem, horizon, work=WORK):
    return pieces.prove(problem, horizon, Clock(proof_budget(work=work)))


@pytest.mark.parametrize("path", ["quick/dgx1-allreduce-c1", "standard/dgx1-allreduce-c2", "standard/ring8-allreduce-c1",
                                  pytest.param("standard/torus4x4-allreduce-c1", marks=pytest.mark.slow)])
def test_recorded_allreduce_schedules_are_schedules_of_the_relaxation(path):
    """The recorded best schedules, verified, floored to their epochs, are accepted by R at their
    own epoch: so R can never prove a bound above them."""
    toml = ROOT / "instances" / f"{path}.toml"
    inst = load_instance(toml)
    schedule = load_schedule(toml.parent / tomllib.loads(toml.read_text())["results"]["schedule"], inst.machine)
    checked = verify(inst.machine, inst.collective, schedule)
    assert checked.valid
    problem = pieces.relaxation_problem(inst)
    assert accepts(problem, schedule, checked.time) in ("optimal", "feasible")


@pytest.mark.parametrize("machine, optimum", [(G.ring(4, 1e9, 1e-6), 3), (G.ring(5, 1e9, 1e-6), 4),
                                              (G.ring(6, 1e9, 1e-6), 5), (G.line(4, 1e9, 1e-6), 6),
                                              (G.line(5, 1e9, 1e-6), 8)],
                         ids=["ring4", "ring5", "ring6", "line4", "line5"])
def test_relaxation_proves_the_optimum_of_rings_and_lines_and_no_more(machine, optimum):
    """The direct model (with the analytic bounds) settles these at ``optimum`` epochs, its
    schedule verified; R accepts that schedule and proves exactly the optimum."""
    inst = allreduce(machine)
    out = solve_timed(inst)
    checked = verify(inst.machine, inst.collective, out.schedule)
    problem = pieces.relaxation_problem(inst)
    q = problem.quantum
    assert out.status == "optimal" and epoch_of(checked.time, q) == optimum
    assert accepts(problem, out.schedule, checked.time) == "optimal"
    below = prove(problem, optimum - 1)
    assert below.status == "infeasible" and below.bound == pytest.approx(checked.time)
    assert prove(problem, optimum).status == "optimal"


def _random_machine(rng: np.random.Generator, npus: int):
    """A cycle through the NPUs both ways and a chord or two, each link pair 1-3 units of 1 µs
    (latency 0, so delay = occupancy), one pair in three doubled."""
    b = MachineBuilder("random", npus)
    pairs = {(v, (v + 1) % npus) for v in range(npus)}
    for _ in range(int(rng.integers(0, 3))):
        u, v = rng.choice(npus, size=2, replace=False).tolist()
        pairs.add((u, v))
    seen = set()
    for u, v in sorted(pairs):
        if (v, u) in seen or u == v:
            continue
        seen.add((u, v))
        b.add_link(u, v, bandwidth=1e9 / int(rng.integers(1, 4)), latency=0.0, bidirectional=True,
                   count=1 + int(rng.random() < 1 / 3))
    return b.build()


@pytest.mark.parametrize("seed", range(6))
def test_relaxation_bound_never_above_a_verified_schedule_on_random_machines(seed):
    """Random switchless machines of 3-5 NPUs with integral link timings: the best schedule the
    exact solver finds (within a work limit), verified, is accepted by R at its epoch, and R at the
    epoch before its time (within a work limit) is feasible, unknown or proves a bound the schedule
    meets."""
    rng = np.random.default_rng(seed)
    machine = _random_machine(rng, int(rng.integers(3, 6)))
    inst = allreduce(machine, size=1e3 * machine.num_npus, work=2.0)
    out = solve_timed(inst)
    checked = verify(inst.machine, inst.collective, out.schedule)
    assert checked.valid
    problem = pieces.relaxation_problem(inst)
    assert problem.rounding == "exact"
    assert accepts(problem, out.schedule, checked.time) == "optimal"
    last = epoch_of(checked.time, problem.quantum)
    below = prove(problem, last - 1, work=3.0)
    assert below.status != "infeasible" or below.bound <= checked.time * (1 + SLACK)
    assert out.lower_bound is None or out.lower_bound <= checked.time * (1 + SLACK)


def test_a_send_that_starts_before_an_arrival_of_its_epoch_is_accepted():
    """A triangle, every link one epoch q. Node 1 gets node 0's share at q and node 2's at 1.8q;
    in between, at 1.5q, it reduces its partial sum {0, 1} into node 2, then at 1.9q copies the
    whole sum to node 0. Valid in true seconds (done at 2.9q). On the epochs both of node 1's
    arrivals land at epoch 1 and its sends start there: the direct model, which keeps one partial
    sum, would send {0, 1, 2} to node 2 and count node 2 twice; R sends the pieces {0} ∪ {1}."""
    b = MachineBuilder("triangle", 3)
    for u, v in ((0, 1), (1, 2), (0, 2)):
        b.add_link(u, v, bandwidth=1e9, latency=0.0, bidirectional=True)
    machine = b.build()
    coll = make_custom(range(3), [[0, 1, 2]], [[0, 1, 2]], 1e3, combining=True)
    inst = Instance("triangle", machine, coll, TimeModel())
    q = 1e-6
    link = {(int(u), int(v)): e for e, (u, v) in enumerate(zip(machine.link_src, machine.link_dst))}
    sends = [((0, 1), 0.0, REDUCE), ((2, 1), 0.8 * q, REDUCE), ((1, 2), 1.5 * q, REDUCE), ((1, 0), 1.9 * q, COPY)]
    schedule = from_arrays([0] * 4, [link[uv] for uv, _, _ in sends], [t for _, t, _ in sends],
                           [op for _, _, op in sends])
    checked = verify(machine, coll, schedule)
    assert checked.valid and checked.time == pytest.approx(2.9 * q)
    direct = timed_problem(inst)
    assert direct.quantum == pytest.approx(q) and direct.rounding == "exact"
    floored = from_arrays(schedule.chunk, schedule.link, np.floor(schedule.start / q + SLACK) * q, schedule.op)
    assert partial_sums(direct, from_schedule(direct, floored), 3) is None  # the grid counts node 2 twice
    relaxed = pieces.relaxation_problem(inst)
    assert accepts(relaxed, schedule, checked.time) == "optimal"


def test_plain_switch_forwards_pieces_once_and_the_star_optimum_is_proved():
    """Four NPUs around a plain switch: the direct model's verified 7-epoch schedule, floored, is a
    schedule of R (each arrival at the switch forwarded once, whole), and R proves the 7 epochs."""
    from allreduce_reference import star

    inst = allreduce(star(4, 1e9, 1e-6))
    out = solve_timed(inst)
    checked = verify(inst.machine, inst.collective, out.schedule)
    problem = pieces.relaxation_problem(inst)
    assert not problem.restrictions and pieces.layout(problem, 7).plain.any()
    assert epoch_of(checked.time, problem.quantum) == 7
    assert accepts(problem, out.schedule, checked.time) == "optimal"
    assert prove(problem, 6).status == "infeasible"


def test_machines_the_relaxation_does_not_cover_are_refused_in_one_line():
    from allreduce_reference import star

    with pytest.raises(NotApplicable, match="plain switches only"):
        pieces.relaxation_problem(allreduce(star(4, 1e9, 1e-6, multicast=True, reduce=True)))
    mixed = MachineBuilder("mixed", 3)
    mixed.add_link(0, 1, bandwidth=1e9, latency=0.0, bidirectional=True)
    mixed.add_link(1, 2, bandwidth=1e9 / math.pi, latency=0.0, bidirectional=True)
    with pytest.raises(NotApplicable, match="exact epochs"):
        pieces.relaxation_problem(allreduce(mixed.build(), size=3e3))


def test_size_counts_match_the_built_model():
    """The guard's counts: variables and terms (literals of clauses, terms of sums) within 10 % of
    the built CP-SAT model."""
    for machine, horizon in ((G.ring(6, 1e9, 1e-6), 5), (G.dgx1(), 3), (G.line(5, 1e9, 1e-6), 8)):
        problem = pieces.relaxation_problem(allreduce(machine))
        size = pieces.size(problem, pieces.layout(problem, horizon))
        proto = pieces.build(problem, horizon).cp.proto
        terms = 0
        for c in proto.constraints:
            terms += len(c.enforcement_literal)
            for kind in ("bool_or", "bool_and", "at_most_one", "exactly_one"):
                if getattr(c, f"has_{kind}")():
                    terms += len(getattr(c, kind).literals)
            if c.has_linear():
                terms += len(c.linear.vars)
        assert abs(size.variables / len(proto.variables) - 1) < 0.1
        assert abs(size.terms / terms - 1) < 0.1


@pytest.mark.slow
def test_dgx1_one_chunk_per_gpu_takes_four_epochs():
    """Issue 13's DGX-1 AllReduce, C = 1: R has no schedule in 3 epochs of 5.369 ms (CP-SAT,
    about 10 s), so the recorded 4-epoch schedule (21.4768 ms) is optimal."""
    inst = load_instance(ROOT / "instances" / "quick" / "dgx1-allreduce-c1.toml")
    problem = pieces.relaxation_problem(inst)
    out = pieces.prove(problem, 3, Clock(proof_budget()))
    assert out.status == "infeasible" and out.bound == pytest.approx(0.02147683648)
