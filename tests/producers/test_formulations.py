"""The registry of exact formulations (``producers.formulations``): each declares what it applies to
and what it proves, ``run.exact`` runs the one named, and independent formulations that prove an
optimum of the same model agree on it."""
from __future__ import annotations

import importlib

import pytest

from optcoll.cli.commands_produce import FORMULATION_NAMES
from optcoll.collectives.builtins import make_collective
from optcoll.errors import InputError
from optcoll.instances.budget import Budget
from optcoll.instances.instance import Instance, TimeModel
from optcoll.machines import generators as G
from optcoll.producers import run
from optcoll.producers.base import NotApplicable
from optcoll.producers.formulations import BY_NAME, FORMULATIONS, choose
from optcoll.producers.registry import SYNTHESIZERS

#: Deterministic limits: every solve here ends by CP-SAT's work, never by the clock.
WORK = Budget(time_limit=600.0, threads=1, seed=0, work_limit=20.0)


def ring4(kind: str, model: str = "timed") -> Instance:
    machine = G.ring(4, 1e9, 1e-6)
    return Instance(f"ring4-{kind}-{model}", machine, make_collective(kind, range(4), 4e6, 1),
                    TimeModel(kind=model), WORK)


#: A small instance each formulation that runs alone applies to.
EXAMPLES = {"timed": ring4("allgather"), "time-expanded": ring4("allgather"), "continuous": ring4("allgather"),
            "step": ring4("allgather", "step"), "least-steps": ring4("allreduce", "step")}


def test_every_formulation_declares_what_it_applies_to_and_proves_and_where_it_lives():
    assert len(BY_NAME) == len(FORMULATIONS)
    for f in FORMULATIONS:
        assert f.model in ("timed", "step") and f.summary and f.applies_to and f.proves, f.name
        importlib.import_module(f"optcoll.{f.module}")
        assert (f.solve is None) == (f.within is not None), f.name
        assert f.within is None or f.within in BY_NAME or f.within in SYNTHESIZERS, f.name
    assert {f.name for f in FORMULATIONS if f.solve is not None} == set(EXAMPLES) == set(FORMULATION_NAMES)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_run_exact_runs_the_formulation_named_and_its_schedule_is_verified(name):
    inst = EXAMPLES[name]
    assert choose(inst, name).applies(inst) is None
    produced = run.exact(inst, formulation=name)
    result = produced.result
    assert result.time is not None and result.lower_bound is not None  # verified by run.exact
    assert result.status == "optimal" and result.model == BY_NAME[name].model


def test_independent_timed_formulations_prove_the_same_optimum():
    inst = EXAMPLES["timed"]
    times = {name: run.exact(inst, formulation=name).result.time for name in ("time-expanded", "continuous")}
    assert times["time-expanded"] == pytest.approx(times["continuous"], rel=1e-9)


def test_a_formulation_is_refused_where_it_does_not_apply_or_runs_only_within_another():
    with pytest.raises(NotApplicable, match="least-steps does not apply: it answers in the step model"):
        choose(ring4("allreduce"), "least-steps")
    with pytest.raises(NotApplicable, match="it models AllReduce-shaped collectives only"):
        choose(ring4("allgather", "step"), "least-steps")
    with pytest.raises(InputError, match="pieces runs within direct-allreduce only") as refused:
        choose(ring4("allreduce"), "pieces")
    assert refused.value.field == "formulation"
    with pytest.raises(InputError, match="unknown formulation 'simplex'"):
        choose(ring4("allreduce"), "simplex")


def test_the_default_formulation_is_the_instance_models():
    assert choose(ring4("allgather")).name == "timed" and choose(ring4("allgather", "step")).name == "step"
