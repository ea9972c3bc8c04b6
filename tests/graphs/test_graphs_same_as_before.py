"""The one finder gives the same groups and automorphisms as the two it replaced (kept under
``tests/graphs/old/`` until this comparison has run): every catalog machine's semiregular group
(whole machine and each suite's communicator), and the timed and step solvers' symmetries of every
quick and standard instance, element for element and in the same order. The machine groups'
elements are listed in the timed solver's closure order now (the one closure): the same set,
representatives, orbits and carriers (as elements)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from optcoll.collectives.builtins import make_collective
from optcoll.instances.instance import Instance
from optcoll.instances.suite import find_suite
from optcoll.machines.automorphisms import semiregular_group
from optcoll.machines.catalog import load_machine
from optcoll.producers.base import NotApplicable
from optcoll.producers.exact.step import inversion
from optcoll.producers.exact.step.symmetry import automorphisms
from optcoll.producers.exact.timed.grid import choose_grids
from optcoll.producers.exact.timed.problem import direct_problem, dual_problem
from optcoll.producers.exact.timed.search import LEX_SYMMETRIES
from optcoll.producers.exact.timed.symmetry import breaking_symmetries, fixed_point_free_group
from optcoll.producers.exact.toolkit.symmetry import MAX_NODES
from tests.graphs.old import machines_automorphisms as old_machine
from tests.graphs.old import step_symmetry as old_step
from tests.graphs.old import timed_symmetry as old_timed

MODELS = sorted(p.stem for p in (Path(__file__).resolve().parents[2] / "models").glob("*.toml"))
SPECS = [spec for suite in ("quick", "standard") for spec in find_suite(suite).specs]


def same_group(new, old) -> None:
    rows = lambda table: sorted(map(tuple, table.tolist()))
    assert rows(new.node) == rows(old.node) and rows(np.hstack([new.node, new.link])) == \
        rows(np.hstack([old.node, old.link]))
    assert np.array_equal(new.node[0], old.node[0])
    for f in ("representatives", "npu_orbit", "link_orbit", "link_orbit_size"):
        assert np.array_equal(getattr(new, f), getattr(old, f)), f
    assert np.array_equal(new.node[new.carrier], old.node[old.carrier])
    assert new.links_free == old.links_free


def same(a: list, b: list, fields: tuple[str, ...]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        for f in fields:
            assert np.array_equal(getattr(x, f), getattr(y, f)), f


@pytest.mark.parametrize("name", MODELS)
def test_catalog_machine_groups(name):
    machine = load_machine(name)
    same_group(semiregular_group(machine), old_machine.semiregular_group(machine))


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_suite_instance_symmetries(spec):
    instance = spec.instance
    machine, collective = instance.machine, instance.collective
    members = np.zeros(machine.num_nodes, dtype=np.int64)
    members[list(collective.ranks)] = 1
    same_group(semiregular_group(machine, members), old_machine.semiregular_group(machine, members))
    if machine.num_nodes > MAX_NODES:
        return
    problems = []
    if collective.kind == "allreduce":
        gather = make_collective("allgather", collective.ranks, collective.size_bytes, collective.chunks_per_rank)
        problems.append(direct_problem(Instance(instance.name, machine, gather, instance.model, instance.budget)))
    else:
        try:
            problems.append(dual_problem(instance) if collective.combining else direct_problem(instance))
        except (NotApplicable, ValueError):
            pass
        try:
            step = inversion.plan(machine, collective, instance.model).problem
            same(automorphisms(step), old_step.automorphisms(step), ("nodes", "chunks"))
        except (NotApplicable, ValueError):
            pass
    for problem in problems:
        grid, _ = choose_grids(problem)
        a, b = fixed_point_free_group(problem, grid), old_timed.fixed_point_free_group(problem, grid)
        same(a.generators, b.generators, ("node", "link", "chunk"))
        same(a.elements, b.elements, ("node", "link", "chunk"))
        same(breaking_symmetries(problem, grid, LEX_SYMMETRIES),
             old_timed.breaking_symmetries(problem, grid, LEX_SYMMETRIES), ("node", "link", "chunk"))
