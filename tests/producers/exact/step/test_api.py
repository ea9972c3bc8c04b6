"""The public entry points: arguments, limits, statuses, time limits, progress and exports."""
from __future__ import annotations

import os
import signal

import pytest
import z3
from ortools.linear_solver.python import model_builder
from ortools.sat.python import cp_model

from solver_checks import proof_budget
from step_helpers import BW, LAT, close, instance, verified

from optcoll.errors import InputError
from optcoll.instances.instance import Instance, TimeModel
from optcoll.machines import generators as G
from optcoll.machines.machine import MachineBuilder
from optcoll.producers.exact.step import export_step_model, pareto_front, solve_step


PROOF = proof_budget()


@pytest.fixture(scope="module")
def dgx1_c2():
    return instance(G.dgx1(), chunks=2)


@pytest.mark.parametrize("kwargs, field", [
    ({"solver": "gurobi"}, "solver"), ({"time_limit": 0}, "time_limit"), ({"threads": 0}, "threads"),
    ({"steps": 0}, "steps"), ({"rounds": 1.5}, "rounds"), ({"objective": "fast"}, "objective"),
    ({"objective": "steps", "rounds": 3}, "rounds")])
def test_bad_arguments_name_the_field(dgx1_c2, kwargs, field):
    with pytest.raises(InputError) as err:
        solve_step(dgx1_c2, **kwargs)
    assert err.value.field == field


def test_bandwidth_ratios_must_be_whole():
    b = MachineBuilder("odd", 2)
    b.add_link(0, 1, bandwidth=BW, latency=LAT)
    b.add_link(1, 0, bandwidth=1.5 * BW, latency=LAT)
    with pytest.raises(InputError, match="integer multiple") as err:
        solve_step(instance(b.build()))
    assert err.value.field == "links.bandwidth"


def test_timed_only_options_are_refused(dgx1_c2):
    inst = Instance("occupancy", dgx1_c2.machine, dgx1_c2.collective,
                    TimeModel(kind="step", occupancy="serialization"))
    with pytest.raises(InputError) as err:
        solve_step(inst)
    assert err.value.field == "model.occupancy"


def test_least_cost_trades_steps_for_rounds(dgx1_c2):
    out = solve_step(dgx1_c2, budget=PROOF)
    assert out.status == "optimal" and (out.params["S"], out.params["R"]) == (2, 3)
    assert close(verified(dgx1_c2, out), out.lower_bound)
    assert out.model == "step" and out.solver == "cpsat" and "CP-SAT" in out.solver_version


def test_fixed_steps_are_optimal_for_those_steps(dgx1_c2):
    out = solve_step(dgx1_c2, steps=4, budget=PROOF)
    assert out.status == "optimal" and (out.params["S"], out.params["R"]) == (4, 4)
    assert close(verified(dgx1_c2, out), out.lower_bound)
    assert out.params["steps_limit"] == 4


def test_a_rounds_cap_below_the_bound_is_infeasible(dgx1_c2):
    out = solve_step(dgx1_c2, rounds=2, budget=PROOF)
    assert out.status == "infeasible" and out.schedule is None


def test_fewer_steps_than_hops_is_infeasible(dgx1_c2):
    assert solve_step(dgx1_c2, steps=1, budget=PROOF).status == "infeasible"
    assert solve_step(dgx1_c2, steps=1, objective="steps", budget=PROOF).status == "infeasible"


def test_feasibility_of_a_given_point(dgx1_c2):
    out = solve_step(dgx1_c2, steps=2, rounds=3, budget=proof_budget("z3"), solver="z3")
    assert out.status == "optimal" and out.schedule.rounds is not None
    verified(dgx1_c2, out)


def test_out_of_time_still_returns_a_valid_schedule_and_a_bound():
    inst = instance(G.torus([4, 4], BW, LAT), chunks=2)
    out = solve_step(inst, time_limit=0.2)
    cost = verified(inst, out)
    assert out.status in ("optimal", "feasible")
    assert out.lower_bound <= cost * (1 + 1e-9)


def test_progress_reports_incumbent_and_bound(dgx1_c2):
    rows = []
    out = solve_step(dgx1_c2, budget=PROOF, progress=lambda *row: rows.append(row))
    assert rows and rows[-1][1:] == (out.trace[-1][1], out.trace[-1][2])
    assert all(bound <= incumbent * (1 + 1e-9) for _, incumbent, bound in rows if incumbent and bound)


def test_ctrl_c_in_a_question_ends_the_search_and_the_other_allreduce_part(monkeypatch):
    """A real SIGINT in the middle of the first CP-SAT call (sent from its first callback):
    that call stops with its best, no later question is asked (the AllGather part only stretches
    its greedy start), and the AllReduce comes back verified with the bound proven so far. (CP-SAT's
    own SIGINT handler used to swallow the signal and let the search go on.)"""
    from optcoll.producers.exact.step import backends

    real = backends.solve

    def pressing_ctrl_c(model, solver, clock, **_):
        def progress(objective, bound):
            if not getattr(progress, "sent", False):
                progress.sent = True
                os.kill(os.getpid(), signal.SIGINT)
        return real(model, solver, clock, progress=progress)

    monkeypatch.setattr(backends, "solve", pressing_ctrl_c)
    inst = instance(G.hypercube(3, BW, LAT), "allreduce", chunks=2)  # one question per part
    out = solve_step(inst, time_limit=600)
    assert out.params["interrupted"] and out.status in ("feasible", "optimal")
    assert len(out.params["reducescatter"]["questions"]) == 1 and out.params["allgather"]["questions"] == []
    assert "reducescatter: interrupted: returning the best schedule so far and the proven bound" in out.notes
    assert out.lower_bound <= verified(inst, out) * (1 + 1e-9)


def test_nothing_to_send_costs_nothing():
    inst = instance(G.ring(3, BW, LAT), "broadcast", ranks=[1], root=1)
    out = solve_step(inst)
    assert out.status == "optimal" and out.lower_bound == 0.0
    assert verified(inst, out) == 0.0


def test_pareto_front_takes_max_chunks_positionally_and_says_why_it_ended():
    inst = instance(G.ring(4, BW, LAT))
    front = pareto_front(inst, 2, budget=PROOF)
    assert front.points and front.points[-1].bandwidth_optimal
    assert front.complete and front.stopped.startswith("bandwidth-optimal")


# -- exports: the written model, read back by a solver, gives the same answer ----------------------

def test_export_smt2_round_trip(dgx1_c2, tmp_path):
    for rounds, expected in ((3, z3.sat), (2, z3.unsat)):
        path = tmp_path / f"dgx1-r{rounds}.smt2"
        info = export_step_model(dgx1_c2, 2, rounds, path)
        assert info.format == "smt2" and info.variables > 0
        solver = z3.Solver()
        solver.from_file(str(path))
        assert solver.check() == expected


def test_export_mps_round_trip(dgx1_c2, tmp_path):
    path = tmp_path / "dgx1.mps"
    info = export_step_model(dgx1_c2, 2, 6, path)
    model = model_builder.Model()
    assert model.import_from_mps_file(str(path))
    assert model.num_variables == info.variables
    solver = model_builder.Solver("scip")
    assert solver.solve(model) == model_builder.SolveStatus.OPTIMAL
    assert round(solver.objective_value) == 3


def test_export_lp_writes_the_same_model(dgx1_c2, tmp_path):
    """(OR-Tools cannot parse CPLEX LP files back, so the counts in the header are checked.)"""
    info = export_step_model(dgx1_c2, 2, 6, tmp_path / "dgx1.lp")
    text = (tmp_path / "dgx1.lp").read_text()
    assert f"Variables        : {info.variables}" in text
    assert text.splitlines()[-1] == "End" and "Minimize" in text and "Generals" in text


def test_export_cpsat_round_trip(dgx1_c2, tmp_path):
    path = tmp_path / "dgx1.pbtxt"
    export_step_model(dgx1_c2, 3, 9, path)
    model = cp_model.CpModel()
    model.proto.parse_text_format(path.read_text())
    solver = cp_model.CpSolver()
    assert solver.Solve(model) == cp_model.OPTIMAL
    assert round(solver.ObjectiveValue()) == 3


def test_export_of_a_combining_collective_is_its_dual(tmp_path):
    inst = instance(G.ring(4, BW, LAT), "reducescatter")
    assert export_step_model(inst, 2, 2, tmp_path / "rs.lp").inverted


@pytest.mark.parametrize("args, field", [((2, 3, "x.txt"), "export-model"), ((0, 3, "x.lp"), "steps"),
                                         ((3, 2, "x.lp"), "rounds"), ((1, 3, "x.lp"), "steps")])
def test_export_argument_errors(dgx1_c2, tmp_path, args, field):
    steps, rounds, name = args
    with pytest.raises(InputError) as err:
        export_step_model(dgx1_c2, steps, rounds, tmp_path / name)
    assert err.value.field == field


def test_a_front_cut_short_says_by_what():
    """A refused model or the time limit ends the front early; the points so far stand and the
    front says it is incomplete and why."""
    inst = instance(G.dgx1())
    refused = pareto_front(inst, 3, budget=PROOF, max_memory=2**20)
    assert not refused.complete and refused.stopped.startswith("the memory limit at S = 2: ")
    assert "over the limit of 1 MiB (--max-memory); not built" in refused.stopped
    late = pareto_front(inst, 6, budget=proof_budget(work=0.01))
    assert not late.complete and late.stopped.startswith("the work limit (0.01) at S = ")
    assert all(not point.bandwidth_optimal for point in late.points)


def test_one_thread_interleaves_cpsat_only_where_r_may_exceed_s(dgx1_c2, monkeypatch):
    """Interleaving CP-SAT's portfolio on one thread pays where a question lets R exceed S (the
    DGX-1 front) and slows one-round-per-step questions (SCCL's least steps), measured in
    step/backends.py: each question says which it is."""
    import optcoll.producers.exact.step.backends as backends

    asked: list[bool] = []
    real = backends.solve

    def spy(model, name, clock, *, interleave=False, **options):
        asked.append(interleave)
        return real(model, name, clock, interleave=interleave, **options)

    monkeypatch.setattr(backends, "solve", spy)
    cube = solve_step(instance(G.hypercube(3, BW, LAT), "alltoall"), objective="steps", budget=PROOF)
    assert cube.status == "optimal" and asked and not any(asked)
    asked.clear()
    front = pareto_front(dgx1_c2, max_chunks=2, budget=PROOF)
    assert front.complete and asked and all(asked)
