"""A producer whose schedule the verifier rejects ends ``optcoll synth`` with one line naming the
producer and the violation, exit 2 (main.py's documented status), never a traceback."""
from __future__ import annotations

from optcoll.producers import registry
from optcoll.producers.base import Synthesizer


def test_a_rejected_schedule_is_one_line_naming_the_producer(run, ring_instance, monkeypatch):
    ring = registry.SYNTHESIZERS["ring"]

    def broken(instance, seed):  # the ring's schedule without its last transfer
        schedule = ring.run(instance, seed)
        return schedule.take(list(range(len(schedule) - 1)))

    monkeypatch.setitem(registry.SYNTHESIZERS, "ring", Synthesizer("ring", ring.description, broken))
    code, out, err = run("synth", ring_instance / "ag.toml", "--algo", "ring")
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("optcoll: error: ring produced an invalid schedule"), err
    assert "never holds chunk" in lines[0] and "Traceback" not in err + out
