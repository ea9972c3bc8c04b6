"""The in-switch AllReduce (``baselines.inswitch``): verified wherever it applies, never below a
proven lower bound, meets ``allreduce-cut`` on a switch that reduces and multicasts (and then the
exact timed solver answers optimal from it without building a model), declines elsewhere, stays
valid when one member's links are slower (across such nodes, ``rail-exchange`` uses their switches:
tests/producers/test_railexchange.py)."""
from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from optcoll.bounds import lower_bounds
from optcoll.cli.main import cli
from optcoll.instances.instance import Instance
from optcoll.machines import generators as g
from optcoll.machines.catalog import load_machine
from optcoll.machines.modelpaths import builtin_model_names
from optcoll.machines.machine import Machine, MachineBuilder
from optcoll.producers.base import NotApplicable
from optcoll.producers.exact.timed.solve import solve_timed
from optcoll.producers.registry import get_synthesizer
from optcoll.results.record import evaluate_outcome
from producer_cases import GIB, instance, verified

INSWITCH = get_synthesizer("inswitch")
#: The catalog machines with one switch that reduces and multicasts reaching every GPU (NVLS).
NVLS_MACHINES = {"dgxh100", "dgxh200", "dgxb200", "gb200-nvl72", "star4_sharp"}
KINDS = ("allreduce", "reducescatter", "allgather")
US = 1e-6


def _respects_bounds(inst: Instance) -> float:
    """The verified time of the in-switch schedule, checked against every proven lower bound."""
    result = verified(inst, INSWITCH(inst))
    for bound in lower_bounds(inst.machine, inst.collective, inst.model):
        assert result.time >= bound.value * (1 - 1e-9), (inst.name, bound.name)
    return result.time


@pytest.mark.parametrize("name", builtin_model_names())
def test_applies_exactly_on_the_catalog_machines_with_nvls_and_verifies(name):
    machine = load_machine(name)
    inst = instance(machine, "allreduce", 2.0**26, 1)
    if name in NVLS_MACHINES:
        for kind in KINDS:
            for chunks in (1, 2):
                _respects_bounds(instance(machine, kind, 2.0**26, chunks))
    else:
        with pytest.raises(NotApplicable, match="multicasts and reduces"):
            INSWITCH(inst)


def _solve(inst: Instance, time_limit: float = 30):
    out = solve_timed(inst, time_limit=time_limit, threads=1, seed=0)
    return out, evaluate_outcome(inst, "exact", out)


@pytest.mark.parametrize("chunks", [1, 2])
@pytest.mark.parametrize("name", ["dgxh100", "star4_sharp"])
def test_meets_the_allreduce_cut_bound_and_the_solver_answers_optimal_from_it(name, chunks):
    inst = instance(load_machine(name), "allreduce", float(GIB), chunks)
    made = _respects_bounds(inst)
    cut = {b.name: b.value for b in lower_bounds(inst.machine, inst.collective)}["allreduce-cut"]
    assert made == pytest.approx(cut, rel=1e-9)
    out, result = _solve(inst)
    assert result.status == "optimal" and result.time == pytest.approx(made, rel=1e-9)
    assert out.lower_bound_source.startswith("allreduce-cut")
    assert out.params["formulation"] == "none (the inswitch schedule meets the bound)"
    assert out.schedule.meta["producer"] == "inswitch"


def test_optcoll_solve_reports_optimal_on_dgxh100():
    path = Path(__file__).parents[2] / "instances" / "machines" / "dgxh100-allreduce-c1.toml"
    result = CliRunner().invoke(cli, ["solve", str(path), "--time-limit", "10", "--no-progress"],
                                catch_exceptions=False)
    assert result.exit_code == 0
    assert "optimal: 2.68885 ms (verified)" in result.stdout and "first AllReduce schedule: inswitch" in result.stdout


@pytest.mark.parametrize("machine", [g.switch(4, 10 * GIB, US), g.switch(4, 10 * GIB, US, reduce=True),
                                     g.switch(4, 10 * GIB, US, multicast=True)],
                         ids=["plain", "reduce-only", "multicast-only"])
def test_not_applicable_without_a_switch_that_reduces_and_multicasts(machine):
    with pytest.raises(NotApplicable, match="multicasts and reduces"):
        INSWITCH(instance(machine, "allreduce"))


@pytest.mark.parametrize("kind", ["alltoall", "broadcast", "gather"])
def test_not_applicable_to_other_collectives(kind):
    sharp = g.switch(4, 10 * GIB, US, multicast=True, reduce=True)
    with pytest.raises(NotApplicable, match=f"does not implement {kind}"):
        INSWITCH(instance(sharp, kind, root=1 if kind != "alltoall" else None))


def _one_slow_member(bandwidth: float, latency: float) -> Machine:
    """Four NPUs on a switch that reduces and multicasts; NPU 3's links are ``bandwidth`` and
    ``latency``, the others' 50 GiB/s and 0.5 µs."""
    b = MachineBuilder("star4-slow", 4)
    hub = b.add_switch("sw", multicast=True, reduce=True)
    for v in range(4):
        slow = v == 3
        b.add_link(v, hub, bandwidth=bandwidth if slow else 50 * GIB, latency=latency if slow else 0.5 * US,
                   bidirectional=True)
    return b.build()


@pytest.mark.parametrize("bandwidth,latency", [(25 * GIB, 0.5 * US), (50 * GIB, 5 * US), (50 * GIB / 3, 2 * US)],
                         ids=["half-bandwidth", "ten-times-latency", "both"])
def test_one_slower_member_still_verifies_and_warm_starts_the_solver(bandwidth, latency):
    machine = _one_slow_member(bandwidth, latency)
    for kind in KINDS:
        _respects_bounds(instance(machine, kind, 2.0**26, 2))
    inst = instance(machine, "allreduce", 2.0**26)
    made = _respects_bounds(inst)
    out, result = _solve(inst, time_limit=2)
    assert made < out.params["family_time"] * (1 - 1e-9)  # ReduceScatter then AllGather is slower here
    start = out.params["start"]  # the fastest producer starts the direct model (inswitch or faster)
    assert "inswitch" in start["tried"] and start["time"] <= made * (1 + 1e-9)
    assert any(note.startswith(f"the {start['producer']} schedule") for note in out.notes)
    assert result.time <= start["time"] * (1 + 1e-9)  # a start of the direct model: never worse


def test_ctrl_c_while_building_the_in_switch_start_still_returns_an_allreduce(monkeypatch):
    import optcoll.producers.exact.timed.solve as timed

    def pressed(inst, *_):
        raise KeyboardInterrupt

    monkeypatch.setattr(timed, "best_start", pressed)
    inst = instance(load_machine("star4_sharp"), "allreduce", float(GIB), 1)
    out, result = _solve(inst)
    assert out.params["interrupted"] and out.params["family"] == "reducescatter+allgather"
    assert result.time >= out.lower_bound * (1 - 1e-9)
