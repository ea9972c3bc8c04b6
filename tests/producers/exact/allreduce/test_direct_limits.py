"""The direct AllReduce phase under the job's limits (a time limit and Ctrl-C return the best
schedule so far with its bound, and the job ends within its limit): what a 512-GPU cluster ran
into — a set-up that never looked at the clock, a hint read for minutes for a model then refused
for memory, a Ctrl-C during set-up that lost the answer. Clocks here are fake or work-limited:
the same answers under any load."""
from __future__ import annotations

import os
import signal

import numpy as np

from allreduce_reference import star
from optcoll.collectives.builtins import make_collective
from optcoll.instances.budget import Budget
from optcoll.instances.clock import Clock
from optcoll.instances.instance import Instance
from optcoll.machines import generators as G
from optcoll.machines.catalog import load_machine
from optcoll.producers.exact.allreduce import timed as direct
from optcoll.producers.exact.allreduce.problem import timed_problem
from optcoll.producers.exact.timed.solve import solve_timed
from optcoll.producers.exact.timed.start import best_start
from optcoll.producers.registry import SYNTHESIZERS, get_synthesizer
from optcoll.producers.exact.timed.symmetry import rank_group_links
from optcoll.verify import verify
from solver_checks import proof_budget


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def ring8(budget: Budget = proof_budget()) -> Instance:
    """Where ReduceScatter then AllGather (8 link times) misses the bound (7): the direct phase runs."""
    return Instance("ring8", G.ring(8, 1e9, 1e-6), make_collective("allreduce", range(8), 8e6, 1), budget=budget)


def _start(inst: Instance):
    start = get_synthesizer("tacos")(inst, 0)
    return start, verify(inst.machine, inst.collective, start).time


def _ctrl_c_then(real):
    """``real`` after a real SIGINT to this process (Python raises it at the next bytecode)."""
    def pressed(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)
        return real(*args, **kwargs)
    return pressed


def test_route_hops_are_every_routes_hops_in_order():
    """The one-pass cut of ``hop_route`` equals a search per route, on machines whose routes pass
    plain switches (a star; two DGX H100 on their rails) and on one without any."""
    for machine in (star(4, 1e9, 1e-6), load_machine("dgxh100-rail-2x8"), G.torus([3, 3], 1e9, 1e-6)):
        coll = make_collective("allreduce", range(machine.num_npus), 2.0**26, 1)
        problem = timed_problem(Instance("m", machine, coll))
        hops = problem.route_hops()
        assert len(hops) == problem.num_routes
        assert all(list(hops[r]) == np.flatnonzero(problem.hop_route == r).tolist() for r in range(problem.num_routes))


def test_a_model_over_the_memory_limit_is_refused_before_its_hint_is_read():
    """The refusal is known from the model's size alone: no time goes to reading the start as a
    hint (74 s on the 512-GPU cluster, for a model of 387,054 TiB), and the record says why."""
    inst = ring8(Budget(60.0, 1, 0, max_memory=1 << 20))
    start, made = _start(inst)
    clock = Clock(inst.budget, now=FakeTime())
    phase = direct.direct_phase(inst, start, made, 0.0, clock)
    names = [p.name for p in clock.phases]
    assert "direct model: size" in names and "direct model: the start as a hint" not in names
    assert phase.schedule is None and "would need about" in phase.params["refused"]
    assert any(note.startswith("direct AllReduce model: memory limit: ") for note in phase.notes)


def test_the_clock_ending_while_the_direct_model_is_set_up_refuses_it_with_that_reason(monkeypatch):
    """Setting the problem up looks at the clock as it lists routes: when the clock ends there,
    the phase stops and records what stopped it (before, the set-up ran to its end whatever the
    time, 3-6 s on the 512-GPU cluster)."""
    inst = ring8()
    start, made = _start(inst)
    time = FakeTime()
    clock = Clock(Budget(60.0, 1, 0), now=time)

    def late(*args, **kwargs):
        time.now += 61.0  # the limit passes as the set-up begins
        return timed_problem(*args, **kwargs)

    monkeypatch.setattr(direct, "timed_problem", late)
    phase = direct.direct_phase(inst, start, made, 0.0, clock)
    assert phase.schedule is None and phase.params == {"refused": "the time limit (60 s) reached while it was set up"}
    assert phase.notes == ["direct AllReduce model: not built: the time limit (60 s) reached"]


def test_ctrl_c_while_the_direct_model_is_set_up_returns_the_best_schedule_verified_with_its_bound(monkeypatch):
    """A real SIGINT while the direct model is set up ends the solve with the schedule it had
    (ReduceScatter then AllGather), verified, and the bound proven so far (before, the interrupt
    escaped the phase and the whole answer was lost)."""
    monkeypatch.setattr(direct, "timed_problem", _ctrl_c_then(timed_problem))
    inst = ring8()
    out = solve_timed(inst)
    assert out.params["interrupted"] and out.params["direct"] == {"refused": "interrupted while it was set up"}
    assert out.schedule is not None and out.notes[-1] == "interrupted: returning the best schedule so far and the proven bound"
    assert out.lower_bound <= verify(inst.machine, inst.collective, out.schedule).time * (1 + 1e-9)


def test_ctrl_c_among_the_start_producers_keeps_the_starts_already_made(monkeypatch):
    """On two DGX H100 on rails the structured producers run in turn; a SIGINT in rail-exchange
    keeps nccl-nvls-tree's verified start (before, every start made was dropped)."""
    monkeypatch.setitem(SYNTHESIZERS, "rail-exchange", _ctrl_c_then(SYNTHESIZERS["rail-exchange"]))
    machine = load_machine("dgxh100-rail-2x8")
    inst = Instance("rail2x8", machine, make_collective("allreduce", range(16), 2.0**30, 1), budget=proof_budget())
    clock, notes = Clock(inst.budget), []
    start = best_start(inst, clock, notes)
    assert clock.interrupted and start is not None and start.producer == "nccl-nvls-tree"
    assert start.time == verify(machine, inst.collective, start.schedule).time
    assert notes[0].startswith("start schedules interrupted before rail-exchange")


def test_ctrl_c_in_the_lower_bounds_still_returns_a_verified_allreduce(monkeypatch):
    """A SIGINT while the AllReduce bounds are computed keeps the bounds an ended clock still
    makes (the latency bound) and returns a whole verified AllReduce."""
    import optcoll.bounds.api as api

    monkeypatch.setattr(api, "allreduce_bounds", _ctrl_c_then(api.allreduce_bounds))
    api._recent.clear()
    inst = ring8()
    out = solve_timed(inst)
    assert out.params["interrupted"] and out.schedule is not None
    assert 0 < out.lower_bound <= verify(inst.machine, inst.collective, out.schedule).time * (1 + 1e-9)


def test_the_direct_phase_books_its_steps_on_the_jobs_phase_log():
    """Each step of the phase is timed on the job's clock (``solve --verbose`` prints them)."""
    inst = ring8()
    start, made = _start(inst)
    clock = Clock(inst.budget)
    direct.direct_phase(inst, start, made, 0.0, clock, lambda part: rank_group_links(inst, part))
    names = [p.name for p in clock.phases]
    assert names[:3] == ["direct model: set-up", "direct model: size", "direct model: symmetry"]
    assert all(p.depth == 0 and 0.0 <= p.began <= p.ended for p in clock.phases)


def test_the_least_size_never_exceeds_the_size_so_it_refuses_only_what_the_size_would():
    """The cheap count (no reach) is a lower bound of the estimate the builder is held to, on
    machines with and without plain switches, at a few horizons."""
    from optcoll.producers.exact.allreduce.encoding import least_size, size

    for machine in (G.ring(8, 1e9, 1e-6), star(4, 1e9, 1e-6), load_machine("dgxh100-rail-2x8")):
        problem = timed_problem(Instance("m", machine, make_collective("allreduce", range(machine.num_npus), 2.0**26, 1)))
        for horizon in (3, 8, 40):
            least, whole = least_size(problem, horizon), size(problem, horizon)
            assert least.variables <= whole.variables and least.terms <= whole.terms
