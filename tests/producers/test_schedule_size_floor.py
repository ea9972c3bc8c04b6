"""The floor on a schedule's transfers is a floor (every produced schedule has at least as many),
and a synthesis whose every schedule cannot fit is refused before it starts, naming the size."""
import pytest

from optcoll.collectives.builtins import make_collective
from optcoll.errors import InputError
from optcoll.instances.instance import Instance
from optcoll.machines.generators import hypercube, torus
from optcoll.producers import run, size
from optcoll.producers.registry import get_synthesizer

CASES = [(kind, machine) for kind in ("allgather", "reducescatter", "allreduce", "alltoall")
         for machine in (torus([4, 4], 1e9, 1e-6), hypercube(4, 1e9, 1e-6))]


@pytest.mark.parametrize("kind, machine", CASES, ids=[f"{k}-{m.name}" for k, m in CASES])
def test_every_produced_schedule_has_at_least_the_floor(kind, machine, monkeypatch):
    monkeypatch.setattr(size, "HOPS_FROM", 1)  # count hops even on small instances
    instance = Instance(kind, machine, make_collective(kind, range(machine.num_npus), 2.0**20, 1))
    floor = size.transfers_floor(instance)
    assert floor > 0
    for algo in ("tacos", "tacos+", "direct"):
        try:
            schedule = get_synthesizer(algo)(instance, 0)
        except InputError:
            continue
        assert len(schedule) >= floor, (algo, len(schedule), floor)


def test_an_alltoall_counts_the_hops_each_chunk_must_cross(monkeypatch):
    monkeypatch.setattr(size, "HOPS_FROM", 1)
    machine = torus([4, 4], 1e9, 1e-6)
    instance = Instance("a2a", machine, make_collective("alltoall", range(16), 2.0**20, 1))
    hops = machine.hop_counts()[:16, :16]
    assert size.transfers_floor(instance) == int(hops.sum())  # 16·15 chunks, each its distance


def test_a_synthesis_that_cannot_fit_is_refused_with_its_size(monkeypatch):
    monkeypatch.setattr(size, "HOPS_FROM", 1)
    monkeypatch.setattr(size, "default_limit", lambda: 10_000)
    machine = torus([4, 4], 1e9, 1e-6)
    instance = Instance("a2a", machine, make_collective("alltoall", range(16), 2.0**20, 1))
    with pytest.raises(size.TooLarge, match=r"every schedule of a2a \(16 NPUs, alltoall\) has at least 512 "
                                            r"transfers, about .* to synthesise and verify .*nothing was built"):
        run.synthesized(instance, "tacos+")
