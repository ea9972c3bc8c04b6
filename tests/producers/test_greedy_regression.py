"""The upstream TACOS regression points (FIELD-NOTES section 4): best of 20 seeds within 1 %.

Same conventions as TACOS: AllGather, chunk = buffer/(N·k), bandwidth in GiB/s, latency in µs,
time in µs; mesh NPU id row·width + col, 3D id z·X·Y + y·X + x (optcoll's generators).
"""
from __future__ import annotations

import pytest

from optcoll.machines import generators as g
from optcoll.producers.registry import SYNTHESIZERS, best_of
from producer_cases import GIB, instance

POINTS = [
    ("mesh", [5, 5], 50, 0.5, 1, 1, 9606.0),
    ("mesh", [10, 10], 100, 1.0, 2, 1, 5049.0),
    ("mesh", [7, 12], 100, 1.0, 3, 4, 19966.27),
    ("mesh", [3, 3, 3], 50, 0.5, 1, 1, 6671.17),
    ("torus", [3, 3, 3], 50, 0.5, 1, 1, 3706.20),
    ("torus", [3, 4, 5], 50, 0.5, 2, 2, 6676.67),
]


@pytest.mark.parametrize("algo", ["tacos", "tacos+"])
@pytest.mark.parametrize("family, dims, gib_per_s, latency_us, k, size_gib, expected_us", POINTS)
def test_tacos_regression_point(algo, family, dims, gib_per_s, latency_us, k, size_gib, expected_us):
    make = g.mesh if family == "mesh" else g.torus
    machine = make(dims, gib_per_s * GIB, latency_us * 1e-6)
    inst = instance(machine, "allgather", size_gib * GIB, k)
    assert inst.collective.chunk_bytes == size_gib * GIB / (machine.num_npus * k)
    _, times = best_of(inst, SYNTHESIZERS[algo], runs=20)
    assert len(times) == 20
    assert min(times) * 1e6 == pytest.approx(expected_us, rel=0.01)
