"""Every synthesizer × every collective × a spread of machine models: the shared verifier accepts
every schedule produced, and none beats an analytic lower bound.

A synthesizer may decline (``NotApplicable``) only for a collective it does not implement or for
a structural reason it names (recursive doubling on a non-power-of-two, hierarchical without a
grid or on a sub-communicator, mcf under port limits); everything it accepts must verify.
"""
from __future__ import annotations

import functools

import pytest

from optcoll.bounds import lower_bounds
from optcoll.producers.base import NotApplicable
from optcoll.producers.registry import IMPLEMENTS, SYNTHESIZERS
from producer_cases import KINDS, MODELS, ROOTED, instance, small_machines, verified

MACHINES = small_machines()
STRUCTURAL = ("power-of-two", "multi-dimensional", "every NPU of the machine",
              # direct flows (NCCL's tree, NVLS, CollNet) and what they need of the machine
              "nodes that may relay it", "multicasts and reduces", "network switch that reduces",
              "at least 2 nodes", "within one node", "a NIC",
              # Swing's pairing and Bine's butterfly
              "even size",
              # mcf's
              "port limits",
              # orbit-trees': the symmetry and link times it builds on, and its model's size and work
              "links of one time", "acting regularly", "as many links out of every rank", "reduction cost",
              "would be too large", "found no plan")


def cases():
    """(machine, ranks, model) triples: full communicator and every other rank, model rotating."""
    out = []
    for i, machine in enumerate(MACHINES):
        everyone = list(range(machine.num_npus))
        out.append((machine, everyone, MODELS[i % len(MODELS)]))
        out.append((machine, everyone[::2], MODELS[(i + 1) % len(MODELS)]))
    return out


CASES = cases()


@functools.cache
def case_instance(case: int, kind: str):
    machine, ranks, model = CASES[case]
    return instance(machine, kind, 1e6, 2, ranks[1] if kind in ROOTED else None, ranks, model)


@functools.cache
def case_bounds(case: int, kind: str):
    """Computed once per process: every synthesizer is held to the same bounds (the AllReduce
    ones take seconds per case)."""
    inst = case_instance(case, kind)
    return lower_bounds(inst.machine, inst.collective, inst.model)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", list(SYNTHESIZERS))
def test_every_schedule_verifies_and_respects_bounds(name, kind):
    synth = SYNTHESIZERS[name]
    produced = 0
    for case in range(len(CASES)):
        inst = case_instance(case, kind)
        try:
            schedule = synth(inst, seed=7)
        except NotApplicable as why:
            text = str(why)
            assert f"does not implement {kind}" in text or any(s in text for s in STRUCTURAL), text
            continue
        result = verified(inst, schedule)
        produced += 1
        for bound in case_bounds(case, kind):
            assert result.time >= bound.value * (1 - 1e-9), (inst.machine.name, bound)
    if kind in IMPLEMENTS[name]:
        assert produced > 0, f"{name} produced no {kind} schedule on any model"
    else:
        assert produced == 0
