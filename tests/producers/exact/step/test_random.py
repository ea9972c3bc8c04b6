"""Seeded random instances (directed links, mixed bandwidths, switches, custom collectives): the
solvers must agree and every schedule must verify."""
from __future__ import annotations

import numpy as np
import pytest

from solver_checks import proof_budget
from step_helpers import BW, LAT, close, instance, named, verified

from optcoll.collectives.builtins import make_custom
from optcoll.machines.machine import MachineBuilder
from optcoll.producers.exact.step import solve_step

SEEDS = range(24)


def _random_instance(seed: int):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 6))
    kind = str(rng.choice(["allgather", "broadcast", "scatter", "gather", "alltoall", "custom",
                           "reducescatter", "reduce"]))
    b = MachineBuilder(f"rand{seed}", n)
    combining = kind in ("reducescatter", "reduce")  # inversion needs switches that reduce or not copy
    multicast = bool(rng.integers(2)) and not combining
    switch = b.add_switch("sw", multicast=multicast) if rng.random() < 0.3 else None
    order = rng.permutation(n)
    for u, v in zip(order, np.roll(order, -1)):  # a directed Hamiltonian cycle keeps it connected
        b.add_link(int(u), int(v), bandwidth=BW * int(rng.integers(1, 3)), latency=LAT)
    for _ in range(int(rng.integers(0, n))):
        u, v = (int(x) for x in rng.choice(n, 2, replace=False))
        b.add_link(u, v, bandwidth=BW * int(rng.integers(1, 3)), latency=LAT,
                   bidirectional=bool(rng.integers(2)))
    if switch is not None:
        for v in rng.choice(n, 2, replace=False):
            b.add_link(int(v), switch, bandwidth=BW, latency=LAT, bidirectional=True)
    machine = b.build()
    if kind == "custom":
        pre = [[int(rng.integers(n))] for _ in range(3)]
        post = [sorted(int(x) for x in rng.choice(n, int(rng.integers(1, n)), replace=False))
                for _ in range(3)]
        return named(machine, make_custom(range(n), pre, post, 1e3), f"s{seed}")
    root = int(rng.integers(n)) if kind in ("broadcast", "scatter", "gather", "reduce") else None
    return instance(machine, kind, chunks=int(rng.integers(1, 3)), root=root)


@pytest.mark.parametrize("seed", SEEDS)
def test_random_instances_agree(seed):
    inst = _random_instance(seed)
    costs = [verified(inst, solve_step(inst, solver=solver, budget=proof_budget(solver)))
             for solver in ("cpsat", "scip", "z3")]
    assert all(close(c, costs[0]) for c in costs), costs
