import gzip
import json

import numpy as np
import pytest

from optcoll.errors import InputError
from optcoll.machines.machine import MachineBuilder
from optcoll.schedules.jsonfile import load_schedule, save_schedule, schedule_from_dict, schedule_to_dict
from optcoll.schedules.schedule import REDUCE, ScheduleBuilder


@pytest.fixture
def pair_machine():
    b = MachineBuilder("pair2", 2)
    b.add_link(0, 1, bandwidth=1e9, latency=1e-6, count=2)
    b.add_link(1, 0, bandwidth=1e9, latency=1e-6)
    return b.build()


def test_round_trip_keeps_every_column(tmp_path, pair_machine):
    b = ScheduleBuilder(pair_machine, producer="hand")
    b.send(0, 0, 1, start=0.0)
    b.send(1, 0, 1, start=0.5e-6, lane=1)
    b.send(1, 1, 0, start=2e-6, op="reduce")
    schedule = b.build()
    for name in ("s.json", "s.json.gz"):
        save_schedule(tmp_path / name, schedule, pair_machine)
        back = load_schedule(tmp_path / name, pair_machine)
        assert back.link.tolist() == [0, 1, 2] and back.chunk.tolist() == [0, 1, 1]
        assert back.start.tolist() == schedule.start.tolist()
        assert back.op[2] == REDUCE and back.meta["producer"] == "hand"
    with gzip.open(tmp_path / "s.json.gz", "rt") as handle:
        assert json.load(handle)["format"] == "optcoll-schedule"


def test_src_dst_lane_resolve_without_link_ids(pair_machine):
    data = {"format": "optcoll-schedule", "version": 1,
            "transfers": {"chunk": [0, 0], "src": [0, 0], "dst": [1, 1], "lane": [0, 1], "start": [0, 0]}}
    assert schedule_from_dict(data, pair_machine).link.tolist() == [0, 1]


def test_step_schedules_round_trip(pair_machine):
    b = ScheduleBuilder(pair_machine, rounds=[1, 2])
    b.send(0, 0, 1, step=1)
    b.send(0, 1, 0, step=2)
    data = schedule_to_dict(b.build(), pair_machine)
    back = schedule_from_dict(json.loads(json.dumps(data)), pair_machine)
    assert back.rounds == (1, 2) and back.step.tolist() == [1, 2] and np.isnan(back.start).all()


def test_via_round_trips_and_renumbers_with_its_rows(pair_machine):
    """``via`` names rows; null where none is named; re-listing (``take``) renumbers it, and a
    schedule without it reads as before."""
    from optcoll.schedules.schedule import from_arrays

    schedule = from_arrays([0, 0, 1], [0, 2, 1], [0.0, 1e-5, 0.0], via=[-1, 0, -1])
    data = json.loads(json.dumps(schedule_to_dict(schedule, pair_machine)))
    assert data["transfers"]["via"] == [None, 0, None]
    assert schedule_from_dict(data, pair_machine).via.tolist() == [-1, 0, -1]
    assert schedule.take(np.array([1, 2, 0])).via.tolist() == [2, -1, -1]
    del data["transfers"]["via"]
    assert schedule_from_dict(data, pair_machine).via is None


@pytest.mark.parametrize("mutate, field", [
    (lambda d: d["transfers"].update(via=[1]), "transfers.via[0]"),
    (lambda d: d["transfers"].update(via=[-1]), "transfers.via[0]"),
    (lambda d: d.update(format="other"), "format"),
    (lambda d: d.update(version=99), "version"),
    (lambda d: d["transfers"].update(link=[7]), "transfers.link[0]"),
    (lambda d: d["transfers"].update(dst=[0]), "transfers[0]"),
    (lambda d: d["transfers"].update(start=["soon"]), "transfers.start[0]"),
    (lambda d: d["transfers"].update(op=["xor"]), "transfers.op[0]"),
    (lambda d: d["transfers"].update(chunk=[0, 1]), "transfers.start"),
    (lambda d: d.update(model="step", rounds=[0]), "rounds"),
])
def test_bad_schedules_name_the_field(pair_machine, mutate, field):
    data = {"format": "optcoll-schedule", "version": 1,
            "transfers": {"chunk": [0], "src": [0], "dst": [1], "link": [0], "start": [0.0]}}
    mutate(data)
    with pytest.raises(InputError) as info:
        schedule_from_dict(data, pair_machine, "x.json")
    assert info.value.source == "x.json" and info.value.field == field


def test_unreadable_files(tmp_path, pair_machine):
    (tmp_path / "bad.json").write_bytes(b"{not json")
    (tmp_path / "latin.json").write_bytes(b"\xff\xfe\x00")
    for name in ("bad.json", "latin.json", "missing.json"):
        with pytest.raises(InputError, match=name):
            load_schedule(tmp_path / name, pair_machine)


def test_atomic_save_leaves_the_old_file_when_writing_fails(tmp_path, pair_machine, monkeypatch):
    target = tmp_path / "s.json"
    target.write_text("old")
    b = ScheduleBuilder(pair_machine)
    b.send(0, 0, 1, start=0.0)
    import optcoll.schedules.jsonfile as jsonfile

    def explode(*args, **kwargs):
        raise OSError("disk full")
    monkeypatch.setattr(jsonfile.json, "dump", explode)
    with pytest.raises(OSError):
        save_schedule(target, b.build(), pair_machine)
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["s.json"]
