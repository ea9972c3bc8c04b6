"""The AllReduce bounds: their closed forms on known machines, their assumptions, and that none
exceeds a verified AllReduce — greedy ones and the direct model's near-optimal ones — on random
small machines with and without switches that reduce or multicast, and on every recorded
AllReduce instance."""
from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optcoll.bounds import lower_bounds, not_applied
from optcoll.bounds.allreduce import NO_REDUCTION
from optcoll.bundled import bundled_dir
from optcoll.collectives.builtins import make_collective
from optcoll.instances.instance import Instance, TimeModel
from optcoll.instances.instancefile import load_instance
from optcoll.machines import generators as G
from optcoll.producers.base import NotApplicable
from optcoll.producers.exact.allreduce.problem import timed_problem
from optcoll.producers.exact.allreduce.solve import solve
from optcoll.producers.exact.allreduce.transfers import from_schedule, to_schedule
from optcoll.producers.registry import get_synthesizer
from optcoll.schedules.jsonfile import load_schedule
from optcoll.verify import verify
from optcoll.instances.budget import Budget
from optcoll.instances.clock import Clock

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "producers" / "exact" / "allreduce"))
from allreduce_reference import small_machine  # noqa: E402

GIB_S, US = 50 * 2.0**30, 1e-6


def by_name(machine, collective, model=TimeModel()):
    return {b.name: b for b in lower_bounds(machine, collective, model)}


def test_transfer_counts_on_rings_and_tori():
    """2(N−1)·K deliveries over the NPU in-links, whole chunks: 7 link times on an 8-ring, 8 on a
    4×4 torus (issue 13: it proves torus4x4-allreduce-c1 optimal at 2.504 ms)."""
    for machine, size, expected in ((G.ring(8, GIB_S, 0.5 * US), 2.0**26, 7), (G.torus([4, 4], GIB_S, 0.5 * US), 2.0**28, 8)):
        coll = make_collective("allreduce", range(machine.num_npus), size, 1)
        tau = 0.5 * US + coll.chunk_bytes / GIB_S
        found = by_name(machine, coll)
        assert found["allreduce-transfers"].value == pytest.approx(expected * tau)
        n = machine.num_npus
        volume = 2 * (n - 1) * size / (2 * machine.num_npus * GIB_S) if n == 8 else 2 * (n - 1) * size / (4 * n * GIB_S)
        assert found["allreduce-volume"].value == pytest.approx(volume)
        assert found["allreduce-transfers"].assumptions == ("no in-network reduction (switches do not combine)",)
        assert len(found["allreduce-transfers-egress"].assumptions) == 2
    torus = load_instance(bundled_dir("instances") / "standard" / "torus4x4-allreduce-c1.toml")
    assert max(b.value for b in lower_bounds(torus.machine, torus.collective)) == pytest.approx(2.504e-3)


def test_cut_form_counts_crossings_with_their_latency():
    """Two 8-GPU servers. Cut {n0g0}: every chunk must carry n0g0's contribution out to the other
    server; through its NIC (2 NIC hops to arrive, then one every NIC time) or into the NVSwitch
    (then still a hop back out and both NIC hops): the 16th of those completions. A line: every
    chunk carries the first rank's contribution across the middle link to the last rank."""
    inst = load_instance(bundled_dir("instances") / "standard" / "cluster2x8-allreduce-c1.toml")
    b = inst.collective.chunk_bytes
    nic, nvlink = 2 * US + b / 25e9, 0.5 * US + b / 300e9
    completions = sorted([2 * nic + j * nic for j in range(16)] + [2 * nvlink + 2 * nic + j * nvlink for j in range(16)])
    cut = by_name(inst.machine, inst.collective)["allreduce-cut"]
    assert cut.value == pytest.approx(completions[15]) and "carrying n0g0's contribution" in cut.detail
    for n in range(4, 9):
        line = G.line(n, GIB_S, 0.5 * US)
        coll = make_collective("allreduce", range(n), 2.0**26, 1)
        tau = 0.5 * US + coll.chunk_bytes / GIB_S
        assert by_name(line, coll)["allreduce-cut"].value == pytest.approx(2 * (n - 1) * tau)


def test_multicast_switch_drops_only_the_egress_forms():
    coll = make_collective("allreduce", range(4), 2.0**20, 1)
    plain, copying = G.switch(4, 1e9, 1e-6), G.switch(4, 1e9, 1e-6, multicast=True)
    assert {"allreduce-volume-egress", "allreduce-transfers-egress"} <= set(by_name(plain, coll))
    found = by_name(copying, coll)
    assert "allreduce-transfers" in found and "allreduce-transfers-egress" not in found
    assert "multicasts" in not_applied(copying, coll) and not_applied(plain, coll) == ""


def _direct_schedule(inst: Instance, start, work: float):
    """The direct model's best schedule from ``start`` (None when it does not apply or is big)."""
    try:
        problem = timed_problem(inst)
    except NotApplicable:
        return None
    t0 = verify(inst.machine, inst.collective, start, inst.model).time
    horizon = math.ceil(t0 / problem.quantum * (1 - 1e-9))
    if horizon > 24:
        return None
    _, found = solve(problem, horizon, 1, Clock(Budget(60.0, 1, 0, work_limit=work)),
                     start=from_schedule(problem, start))
    return None if found is None else to_schedule(problem, found)


@settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), npus=st.integers(3, 4), chunks=st.integers(1, 2),
       switch=st.sampled_from([None, "plain", "reduce", "multicast", "both"]),
       occupancy=st.sampled_from(["link", "serialization"]))
def test_bounds_never_beat_a_verified_allreduce_on_small_machines(seed, npus, chunks, switch, occupancy):
    rng = np.random.default_rng(seed)
    machine = small_machine(rng, npus, switch)
    model = TimeModel(occupancy=occupancy)
    inst = Instance("random", machine, make_collective("allreduce", range(npus), 2.0**20 * npus, chunks), model)
    try:
        start = get_synthesizer("tacos")(inst, seed % 7)
    except NotApplicable:
        return
    schedules = [start, _direct_schedule(inst, start, 2.0)]  # CP-SAT work units: the same search on any load
    bounds = lower_bounds(machine, inst.collective, model)
    for schedule in [s for s in schedules if s is not None]:
        result = verify(machine, inst.collective, schedule, model)
        assert result.valid, result.violation.message
        for bound in bounds:
            assert bound.value <= result.time * (1 + 1e-9), (bound, result.time)
    if switch in ("reduce", "both"):  # only bounds that let the reducing switch combine
        assert not any(NO_REDUCTION in b.assumptions for b in bounds)


@pytest.mark.parametrize("suite", ["quick", "standard", "frontier", "machines",
                                   pytest.param("sizes", marks=pytest.mark.slow)])  # 32 AllReduce files
def test_bounds_below_every_recorded_allreduce(suite):
    folder = bundled_dir("instances") / suite
    for path in sorted(folder.glob("*allreduce*.toml")):
        inst = load_instance(path)
        schedule = load_schedule(path.parent / inst.results["schedule"], inst.machine)
        time = verify(inst.machine, inst.collective, schedule, inst.model).time
        for bound in lower_bounds(inst.machine, inst.collective, inst.model):
            assert bound.value <= time * (1 + 1e-9), (path.name, bound)

