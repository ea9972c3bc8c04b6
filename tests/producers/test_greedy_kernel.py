"""The compiled greedy kernels: the TACOS matching changes speed, not schedules; the packet
router of single-destination collectives makes valid schedules.

Two independent checks: the kernel against the interpreted engine on the same problem and seed
(every transfer equal), and every synthesizer against digests of schedules recorded with the
interpreted engine before the kernel existed (``data/greedy_schedules_before_kernel.json``).
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from optcoll.machines import generators as g
from optcoll.producers import spread
from optcoll.producers.base import NotApplicable
from optcoll.producers.greedy import routes
from optcoll.producers.greedy.coverage import KERNEL_MIN_DELIVERIES, kernel_covers, kernel_pays, routes_cover
from optcoll.producers.greedy.engine import spread_greedy
from optcoll.producers.greedy.plus import spread_plus
from optcoll.producers.registry import SYNTHESIZERS
from optcoll.instances.instance import TimeModel
from optcoll.verify import verify
from producer_cases import GIB, KINDS, MODELS, ROOTED, instance, small_machines

RECORDED = json.loads((Path(__file__).parent / "data" / "greedy_schedules_before_kernel.json")
                      .read_text())["schedules"]
#: Collectives whose spread problems have no relays on an NPU-only machine with every rank a
#: member: where tacos+ kept its algorithm (elsewhere it routes differently now).
NO_RELAYS = {"allgather", "reducescatter", "allreduce", "broadcast", "reduce"}


def _machines():
    """The machines the digests were recorded on, in the recorded order (keys carry the index
    and the name): the first twelve of ``small_machines`` as they were then, and four more."""
    return small_machines()[:12] + [g.torus([8, 8], 50 * GIB, 0.5e-6),
                                    g.hypercube(5, 50 * GIB, 0.5e-6),
                                    g.torus([4, 3], [10 * GIB, 25 * GIB], [0.3e-6, 2e-6]),
                                    g.fully_connected(6, GIB, 1e-6)]


def test_the_recorded_machines_are_still_the_same():
    recorded = {key.split("|")[0] for key in RECORDED}
    assert recorded == {f"{i}:{m.name}" for i, m in enumerate(_machines())}


def _digest(s) -> str:
    h = hashlib.sha256()
    for column in (s.chunk, s.link, s.start, s.op):
        h.update(np.ascontiguousarray(column).tobytes())
    return h.hexdigest()[:16]


def _same(a, b) -> bool:
    return (np.array_equal(a.chunk, b.chunk) and np.array_equal(a.link, b.link)
            and np.array_equal(a.start, b.start))


@pytest.mark.parametrize("spreader", [spread_greedy, spread_plus])
@pytest.mark.parametrize("machine, model", [
    (g.torus([4, 4], GIB, 1e-6), TimeModel()),
    (g.torus([4, 3], [10 * GIB, 25 * GIB], [0.3e-6, 2e-6]), TimeModel()),
    (g.torus([4, 3], [10 * GIB, 25 * GIB], [0.3e-6, 2e-6]), TimeModel(occupancy="serialization")),
    (g.hypercube(4, GIB, 1e-6), TimeModel()),
    (g.dgx1(), TimeModel()),
    (g.fully_connected(6, GIB, 1e-6), TimeModel()),
])
def test_kernel_and_interpreted_engine_give_the_same_schedule(spreader, machine, model):
    for kind, chunks in (("allgather", 1), ("allgather", 3), ("broadcast", 2)):
        inst = instance(machine, kind, 1e6, chunks, root=0 if kind == "broadcast" else None,
                        model=model)
        for problem in (spread.of_collective(inst),
                        spread.dual(inst, inst.collective.post, inst.collective.pre)):
            assert kernel_covers(problem)
            for seed in (0, 1, 2):
                compiled = spreader(problem, np.random.default_rng(seed), compiled=True)
                interpreted = spreader(problem, np.random.default_rng(seed), compiled=False)
                assert len(compiled) == problem.needs[0].size
                assert _same(compiled, interpreted), (kind, chunks, seed)


def test_kernel_stops_with_the_unreachable_chunk_named():
    machine = g.ring(4, GIB, 1e-6, bidirectional=False)
    broken = machine.without(links=[int(machine.links_between(1, 2)[0])])
    problem = spread.of_collective(instance(broken, "allgather"))
    assert kernel_covers(problem)
    messages = []
    for compiled in (True, False):
        with pytest.raises(NotApplicable, match="chunk 1 cannot reach node npu0") as caught:
            spread_greedy(problem, np.random.default_rng(0), compiled=compiled)
        messages.append(str(caught.value))
    assert messages[0] == messages[1]


@pytest.mark.parametrize("index", range(len(_machines())))
def test_schedules_recorded_before_the_kernel_are_reproduced(index):
    """tacos everywhere; tacos+ wherever it kept its algorithm (no relays, no switches, no port
    limits). The 64-NPU torus only without relays: the interpreted engine's AlltoAll there
    takes seconds."""
    machine = _machines()[index]
    kinds = [k for k in KINDS if machine.num_npus <= 32 or k in NO_RELAYS]
    checked = 0
    for model_index, model in enumerate(MODELS):
        for kind in kinds:
            for chunks in (1, 2):
                inst = instance(machine, kind, 1e6, chunks, root=0 if kind in ROOTED else None,
                                model=model)
                for algo in ("tacos", "tacos+"):
                    if algo == "tacos+" and (machine.switches or kind not in NO_RELAYS
                                             or model.send_ports):
                        continue
                    expected = RECORDED[f"{index}:{machine.name}|{model_index}|{kind}|{chunks}|{algo}|0"]
                    try:
                        got = _digest(SYNTHESIZERS[algo](inst, 0))
                    except NotApplicable:
                        got = "n/a"
                    assert got == expected, (model_index, kind, chunks, algo)
                    checked += 1
    assert checked >= 40


@pytest.mark.parametrize("machine", small_machines(), ids=lambda m: m.name)
def test_packet_router_schedules_pass_the_verifier(machine):
    """The compiled router of single-destination collectives (what tacos+ runs alone beyond its
    planning budget) on every small machine, both occupancies, seeds giving different schedules."""
    for model in MODELS[:2]:
        for kind in ("alltoall", "gather", "scatter"):
            inst = instance(machine, kind, 1e6, 2, root=0 if kind in ROOTED else None, model=model)
            problem = spread.of_collective(inst)
            assert routes_cover(problem)
            schedule = routes.run(problem, np.random.default_rng(0))
            assert len(schedule) >= problem.needs[0].size
            result = verify(inst.machine, inst.collective, schedule, inst.model)
            assert result.valid, result.violation.message
            again = routes.run(problem, np.random.default_rng(0))
            assert _same(schedule, again)


def test_packet_router_takes_shortest_paths_farthest_first():
    """On a one-way ring every chunk has one route; the chunk with the longest way to go leaves
    first, so an AlltoAll on 5 NPUs ends after the longest chain of 4+3+2+1 sends on a link
    (what any schedule needs: the link out of each NPU carries 10 chunk-hops)."""
    ring = g.ring(5, GIB, 1e-6, bidirectional=False)
    inst = instance(ring, "alltoall", 5e6)
    problem = spread.of_collective(inst)
    schedule = routes.run(problem, np.random.default_rng(3))
    tau = float(problem.delay[0])
    assert len(schedule) == 5 * (1 + 2 + 3 + 4)
    assert verify(inst.machine, inst.collective, schedule, inst.model).time == pytest.approx(10 * tau)
    first = schedule.start == 0.0
    hops_left = (problem.post.nodes[schedule.chunk[first]] - problem.pre.nodes[schedule.chunk[first]]) % 5
    assert np.all(hops_left == 4)


def test_the_kernel_runs_by_default_only_where_it_pays():
    """Below ``KERNEL_MIN_DELIVERIES`` the interpreted engine runs (no numba to load), above it
    the kernel; ``compiled`` forces either way. The schedules are the same (tests above)."""
    small = spread.of_collective(instance(g.torus([8, 8], GIB, 1e-6), "allgather"))
    large = spread.of_collective(instance(g.torus([20, 20], GIB, 1e-6), "allgather"))
    assert small.needs[0].size < KERNEL_MIN_DELIVERIES <= large.needs[0].size
    assert not kernel_pays(small, None) and kernel_pays(small, True) and kernel_pays(large, None)
    assert not kernel_pays(large, False)
