"""The compiled list schedulers (``baselines.compiled``) change speed, not schedules: every baseline
and flow producer places the same transfers at the same float times, compiled or interpreted, and
fails in the same words where it does not apply."""
from __future__ import annotations

import numpy as np
import pytest

from optcoll.analysis.expect import predict as P
from optcoll.collectives.builtins import make_collective
from optcoll.instances.instance import Instance, TimeModel
from optcoll.instances.suite import find_suite
from optcoll.machines import generators as g
from optcoll.machines.calibration import generation_of
from optcoll.machines.catalog import load_machine
from optcoll.producers.base import NotApplicable
from optcoll.producers.baselines import listsched
from optcoll.producers.baselines.flows import Exchange, Flow, flows_makespan, schedule_flows
from optcoll.producers.registry import IMPLEMENTS, RANDOMIZED, get_synthesizer
from optcoll.producers.spread import forward
from optcoll.schedules.schedule import REDUCE
from producer_cases import GIB, instance, small_machines

#: Producers placed by ``list_schedule`` or ``schedule_flows`` (the greedy ones and mcf are not).
PRODUCERS = sorted(name for name in IMPLEMENTS if name not in RANDOMIZED and name != "mcf")
KINDS = ("allgather", "reducescatter", "allreduce", "alltoall", "broadcast")


def _placed(monkeypatch, compiled: bool, make):
    """``make()`` with the schedulers forced compiled or interpreted: its result or its refusal."""
    monkeypatch.setattr(listsched, "COMPILED_FROM", 0 if compiled else 1 << 62)
    monkeypatch.setattr(listsched, "LOADED_FROM", 0 if compiled else 1 << 62)
    try:
        return make()
    except (NotApplicable, AssertionError) as exc:
        return type(exc), str(exc)


def _same(a, b) -> bool:
    if isinstance(a, tuple) or isinstance(b, tuple):
        return a == b
    via = (a.via is None and b.via is None) or (a.via is not None and b.via is not None
                                                and np.array_equal(a.via, b.via))
    return (via and np.array_equal(a.chunk, b.chunk) and np.array_equal(a.link, b.link)
            and np.array_equal(a.start, b.start) and np.array_equal(a.op, b.op))


def _instances():
    """Small machines of every shape, and calibrated catalog clusters (switches that route only,
    multicast and reduce, NIC rails) as ``optcoll expect`` rates them."""
    for machine in small_machines()[:8] + [g.multinode(2, 2, nvlink_bandwidth=1e11, nvlink_latency=1e-6,
                                                      nic_bandwidth=1e10, nic_latency=3e-6, gpus_per_nic=2)]:
        for kind in KINDS:
            for chunks in (1, 2):
                yield instance(machine, kind, 2.0**20, chunks, root=0 if kind == "broadcast" else None)
    for name in ("dgxh100-rail-2x8", "mi300x"):
        ctx = P.context(load_machine(name), generation_of(name))
        for innetwork in (False, True):
            rated = ctx.rated("simple", innetwork).machine
            for kind in ("allgather", "allreduce", "alltoall"):
                coll = make_collective(kind, list(range(rated.num_npus)), float(1 << 24), 2)
                yield Instance(f"{name}-{kind}", rated, coll, P.TIME_MODEL)
    # unlike nodes: the rail exchange's swaps send the partial ready first (flows.Exchange)
    yield find_suite("machines").spec("hetero-dgxa100-dgxh100-rail-2x8-allreduce-c1").instance


@pytest.mark.parametrize("inst", list(_instances()), ids=lambda i: f"{i.machine.name}-{i.collective.kind}-"
                                                                   f"{i.collective.chunks_per_rank}")
def test_every_producer_places_the_same_schedule_compiled_and_interpreted(monkeypatch, inst):
    kind = inst.collective.kind
    for name in PRODUCERS:
        if kind not in IMPLEMENTS[name]:
            continue
        run = get_synthesizer(name).run
        interpreted = _placed(monkeypatch, False, lambda: run(inst, 0))
        compiled = _placed(monkeypatch, True, lambda: run(inst, 0))
        assert _same(interpreted, compiled), name


def test_a_refused_relay_is_refused_in_the_same_words(monkeypatch):
    inst = instance(g.line(3, GIB, 1e-6), "allreduce", 1e6, 1)
    flows = [Flow(0, 2, 0, REDUCE)]
    refusal = _placed(monkeypatch, True, lambda: schedule_flows(inst, flows))
    assert refusal == _placed(monkeypatch, False, lambda: schedule_flows(inst, flows))
    assert refusal[0] is NotApplicable and "through nodes that may relay it" in refusal[1]


def test_an_exchange_from_a_member_that_holds_nothing_is_refused_in_the_same_words(monkeypatch):
    inst = instance(g.fully_connected(3, GIB, 1e-6), "allgather", 1e6, 1)
    flows = [Exchange(0, (0, 1), REDUCE)]  # chunk 0 is held by npu0 only
    refusal = _placed(monkeypatch, True, lambda: schedule_flows(inst, flows))
    assert refusal == _placed(monkeypatch, False, lambda: schedule_flows(inst, flows))
    assert refusal[0] is AssertionError and "exchange sends chunk 0 from npu1" in refusal[1]


@pytest.mark.parametrize("seed", range(4))
def test_exchanges_through_a_shared_nic_end_at_the_same_time(monkeypatch, seed):
    """Exchanges whose swaps queue at one plain NIC switch (the rounding-sensitive case of
    ``test_flows``): the same makespan, or the same refusal, both ways."""
    rng = np.random.default_rng(seed)
    machine = g.multinode(2, 2, nvlink_bandwidth=float(rng.uniform(5e10, 3e11)),
                          nvlink_latency=float(rng.uniform(0, 2e-6)), nic_bandwidth=float(rng.uniform(5e9, 2.4e10)),
                          nic_latency=float(rng.uniform(0, 5e-6)), gpus_per_nic=2)
    inst = instance(machine, "allreduce", 2.0**22, 2)
    flows = [Exchange(c, (0, 2)) for c in range(inst.collective.num_chunks)]
    assert (_placed(monkeypatch, True, lambda: flows_makespan(inst, flows))
            == _placed(monkeypatch, False, lambda: flows_makespan(inst, flows)))


def test_port_limits_stay_interpreted():
    inst = instance(g.ring(4, GIB, 1e-6), "allgather", model=TimeModel(send_ports=1))
    problem = forward(inst, inst.collective.pre, inst.collective.post)
    assert not listsched.compiled_pays(problem, 1 << 30)
    assert listsched.compiled_pays(forward(instance(g.ring(4, GIB, 1e-6), "allgather"),
                                           inst.collective.pre, inst.collective.post), listsched.COMPILED_FROM)
