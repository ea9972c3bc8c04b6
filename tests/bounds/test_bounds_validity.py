"""No bound exceeds the time of a valid schedule; duality; models; user errors."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bounds_reference import random_machine, reference_schedule
from optcoll.bounds import lower_bounds
from optcoll.collectives.builtins import make_collective, make_custom
from optcoll.errors import InputError
from optcoll.instances.instance import TimeModel
from optcoll.machines import generators as gen
from optcoll.verify import verify

KINDS = ("allgather", "reducescatter", "allreduce", "broadcast", "reduce", "gather", "scatter", "alltoall")
COMBINING = ("reducescatter", "allreduce", "reduce")
ROOTED = ("broadcast", "reduce", "gather", "scatter")
MODELS = (TimeModel(), TimeModel(occupancy="serialization"), TimeModel(send_ports=1, recv_ports=1))


def assert_below(machine, collective, model):
    schedule = reference_schedule(machine, collective, model)
    result = verify(machine, collective, schedule, model)
    assert result.valid, result.violation.message
    for bound in lower_bounds(machine, collective, model):
        assert bound.value <= result.time * (1 + 1e-9), (bound, result.time)


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), npus=st.integers(2, 6), switches=st.integers(0, 2),
       kind=st.sampled_from(KINDS), chunks=st.integers(1, 3), model=st.sampled_from(MODELS),
       bidirectional=st.booleans(), subset=st.booleans())
def test_bounds_never_beat_a_valid_schedule(seed, npus, switches, kind, chunks, model, bidirectional, subset):
    rng = np.random.default_rng(seed)
    if kind in COMBINING:  # the reference builder reduces only where every node is a rank
        switches, subset = 0, False
    machine = random_machine(rng, npus, switches, extra=int(rng.integers(0, 5)), bidirectional=bidirectional)
    ranks = sorted(rng.choice(npus, size=int(rng.integers(2, npus + 1)), replace=False).tolist()) \
        if subset else list(range(npus))
    root = ranks[int(rng.integers(len(ranks)))] if kind in ROOTED else None
    assert_below(machine, make_collective(kind, ranks, 2.0**20, chunks, root=root), model)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n", [2, 3, 5])
def test_one_port_below_valid_schedules(kind, n):
    """On the one-port full mesh the textbook bound must also sit below a real schedule."""
    fc = gen.fully_connected(n, 25e9, 1e-6)
    model = TimeModel(send_ports=1, recv_ports=1)
    coll = make_collective(kind, range(n), 2.0**24, 2, root=0 if kind in ROOTED else None)
    assert_below(fc, coll, model)


def test_custom_collectives():
    """Custom pre/postconditions: several holders per chunk (nearest one counts), AllToNext."""
    ring = gen.ring(6, 10e9, 1e-6)
    replicated = make_custom(range(6), [[0, 3], [1, 4], [2]], [[0, 1, 2, 3, 4, 5]] * 3, 2.0**20)
    found = {b.name: b for b in lower_bounds(ring, replicated)}
    tau = 1e-6 + 2.0**20 / 10e9
    assert found["latency"].value == pytest.approx(3 * tau)  # chunk 2 from rank 2 to rank 5
    assert "egress" in found  # rank 2 alone holds chunk 2
    assert_below(ring, replicated, TimeModel())
    to_next = make_custom(range(6), [[i] for i in range(5)], [[i + 1] for i in range(5)], 2.0**20)
    found = {b.name: b for b in lower_bounds(ring, to_next)}
    assert found["latency"].value == pytest.approx(tau)
    assert found["capacity"].value > 0
    assert_below(ring, to_next, TimeModel())


@pytest.mark.parametrize("machine", [gen.dgx1(), gen.torus([3, 4], [25e9, 10e9], [1e-6, 2e-6]),
                                     gen.ring(5, 1e9, 0.0, bidirectional=False),
                                     gen.switch(4, 5e9, 1e-6)], ids=lambda m: m.name)
@pytest.mark.parametrize("pair", [("reducescatter", "allgather"), ("reduce", "broadcast")])
def test_duality(machine, pair):
    """A combining collective on G is bounded like its dual on the reversed graph: latency and
    cut agree, ingress and egress trade places."""
    combining, plain = pair
    root = 0 if combining == "reduce" else None
    on_g = {b.name: b.value for b in lower_bounds(machine, make_collective(combining, machine.npus,
                                                                           2.0**24, 2, root=root))}
    on_r = {b.name: b.value for b in lower_bounds(machine.reversed(), make_collective(
        plain, machine.npus, 2.0**24, 2, root=root))}
    swap = {"ingress": "egress", "egress": "ingress"}
    assert {swap.get(k, k): v for k, v in on_g.items()} == pytest.approx(on_r)


def test_allreduce_parts():
    machine = gen.torus([3, 3], 25e9, 1e-6)
    ar = make_collective("allreduce", machine.npus, 2.0**24, 2)
    parts = [{b.name: b.value for b in lower_bounds(machine, make_collective(k, machine.npus, 2.0**24, 2))}
             for k in ("reducescatter", "allgather")]
    found = {b.name: b for b in lower_bounds(machine, ar)}
    assert found["allreduce"].value == max(max(part.values()) for part in parts)
    # Every AllReduce chunk crosses every cut splitting the ranks: at least each part's cut.
    assert found["cut"].value == pytest.approx(2.0**24 / (4 * 25e9))
    assert found["cut"].value >= max(part["cut"] for part in parts)


def test_step_model_uses_serialization():
    machine, coll = gen.dgx1(), make_collective("allgather", range(8), 2.0**24, 2)
    step = lower_bounds(machine, coll, TimeModel(kind="step"))
    serial = lower_bounds(machine, coll, TimeModel(occupancy="serialization"))
    assert [(b.name, b.value) for b in step] == [(b.name, b.value) for b in serial]


def test_serialization_pipelines_latency():
    """With α pipelined a link delivers one chunk per b/B after the first α + b/B."""
    ring = gen.ring(4, 1e9, 1e-3, bidirectional=False)
    coll = make_collective("allgather", range(4), 4e6, 1)  # 1 MB chunks, s = 1 ms
    link = {b.name: b.value for b in lower_bounds(ring, coll)}
    serial = {b.name: b.value for b in lower_bounds(ring, coll, TimeModel(occupancy="serialization"))}
    assert link["ingress"] == pytest.approx(3 * 2e-3)
    assert serial["ingress"] == pytest.approx(2e-3 + 2 * 1e-3)


def test_unreachable_is_infinite():
    line = gen.ring(4, 1e9, 0.0, bidirectional=False).without(links=[0])
    found = {b.name: b for b in lower_bounds(line, make_collective("allgather", range(4), 2.0**20))}
    assert found["latency"].value == np.inf and "cannot be reached" in found["latency"].detail
    assert found["cut"].value == np.inf


def test_nothing_to_do():
    ring = gen.ring(3, 1e9, 0.0)
    coll = make_custom(range(3), [[0]], [[0]], 1.0)
    assert [(b.name, b.value) for b in lower_bounds(ring, coll)] == [("latency", 0.0)]


def test_rejects_ranks_outside_the_machine():
    with pytest.raises(InputError, match="collective.ranks"):
        lower_bounds(gen.ring(3, 1e9, 0.0), make_collective("allgather", range(5), 2.0**20))
