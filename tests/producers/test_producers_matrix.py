"""Every synthesizer × every collective × a spread of machine models: the shared verifier accepts
every schedule produced, and none beats an analytic lower bound.

A synthesizer may decline (``NotApplicable``) only for a collective it does not implement or for
a structural reason it names (recursive doubling on a non-power-of-two, hierarchical without a
grid or on a sub-communicator, mcf under port limits); everything it accepts must verify.
"""
from __future__ import annotations

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
              "port limits")


def cases():
    """(machine, ranks, model) triples: full communicator and every other rank, model rotating."""
    out = []
    for i, machine in enumerate(MACHINES):
        everyone = list(range(machine.num_npus))
        out.append((machine, everyone, MODELS[i % len(MODELS)]))
        out.append((machine, everyone[::2], MODELS[(i + 1) % len(MODELS)]))
    return out


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", list(SYNTHESIZERS))
def test_every_schedule_verifies_and_respects_bounds(name, kind):
    synth = SYNTHESIZERS[name]
    produced = 0
    for machine, ranks, model in cases():
        root = ranks[1] if kind in ROOTED else None
        inst = instance(machine, kind, 1e6, 2, root, ranks, model)
        try:
            schedule = synth(inst, seed=7)
        except NotApplicable as why:
            text = str(why)
            assert f"does not implement {kind}" in text or any(s in text for s in STRUCTURAL), text
            continue
        result = verified(inst, schedule)
        produced += 1
        for bound in lower_bounds(machine, inst.collective, model):
            assert result.time >= bound.value * (1 - 1e-9), (machine.name, bound)
    if kind in IMPLEMENTS[name]:
        assert produced > 0, f"{name} produced no {kind} schedule on any model"
    else:
        assert produced == 0
