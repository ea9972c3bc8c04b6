"""The compact schedule form: the same schedule as JSON, within the caps, and one line naming the
file for anything that is not a compact schedule (exit 2 through the CLI)."""
import io
import json
import zipfile

import numpy as np
import pytest

from optcoll.cli.main import cli
from optcoll.errors import InputError
from optcoll.machines.machine import MachineBuilder
from optcoll.schedules.files import load_schedule, save_schedule
from optcoll.schedules.jsonfile import schedule_to_dict
from optcoll.schedules.npzfile import load_npz, schedule_from_npz, schedule_to_npz
from optcoll.schedules.schedule import ScheduleBuilder, from_arrays


@pytest.fixture
def schedule(pair_machine):
    b = ScheduleBuilder(pair_machine, producer="hand", params={"seed": 3, "nested": [1.5, None]})
    b.send(0, 0, 1, start=0.0)
    b.send(1, 0, 1, start=0.1 + 0.2, lane=1)  # a start time with no short decimal form
    b.send(1, 1, 0, start=2e-6, op="reduce")
    b.send(0, 1, 0, start=2e-6, via=0)  # the file forms keep a named arrival whatever the verifier says of it
    return b.build()


@pytest.mark.parametrize("order", ["as built", "by start"])  # start times in order are encoded in one pass
def test_json_to_npz_to_json_is_identical(tmp_path, schedule, pair_machine, order):
    schedule = schedule if order == "as built" else schedule.sorted()
    save_schedule(tmp_path / "s.json", schedule, pair_machine)
    save_schedule(tmp_path / "s.npz", load_schedule(tmp_path / "s.json", pair_machine), pair_machine)
    save_schedule(tmp_path / "back.json", load_schedule(tmp_path / "s.npz", pair_machine), pair_machine)
    assert (tmp_path / "back.json").read_bytes() == (tmp_path / "s.json").read_bytes()
    via = json.loads((tmp_path / "back.json").read_text())["transfers"]["via"]
    assert via == ([None, None, None, 0] if order == "as built" else [None, 0, None, None])


def test_a_schedule_naming_no_arrival_has_no_via_in_either_form(schedule, pair_machine):
    plain = from_arrays(schedule.chunk[:3], schedule.link[:3], schedule.start[:3], schedule.op[:3])
    with zipfile.ZipFile(io.BytesIO(schedule_to_npz(plain, pair_machine))) as archive:
        assert "via.npy" not in archive.namelist()
    assert "via" not in schedule_to_dict(plain, pair_machine)["transfers"]
    assert schedule_from_npz(schedule_to_npz(plain, pair_machine), pair_machine).via is None


def test_step_schedules_and_empty_schedules_round_trip(pair_machine):
    b = ScheduleBuilder(pair_machine, rounds=[1, 2])
    b.send(0, 0, 1, step=1)
    b.send(0, 1, 0, step=2)
    for s in (b.build(), ScheduleBuilder(pair_machine).build()):
        back = schedule_from_npz(schedule_to_npz(s, pair_machine), pair_machine)
        assert json.dumps(schedule_to_dict(back, pair_machine)) == json.dumps(schedule_to_dict(s, pair_machine))


def test_the_same_schedule_gives_the_same_bytes(schedule, pair_machine):
    assert schedule_to_npz(schedule, pair_machine) == schedule_to_npz(schedule, pair_machine)


def test_a_schedule_for_another_machine_is_refused(tmp_path, schedule, pair_machine):
    b = MachineBuilder("other", 2)
    b.add_link(1, 0, bandwidth=1e9, latency=1e-6)
    b.add_link(0, 1, bandwidth=1e9, latency=1e-6, count=2)
    save_schedule(tmp_path / "s.npz", schedule, pair_machine)
    with pytest.raises(InputError, match=r"s\.npz: link_ends: names link 0 as 0->1, but in machine 'other'"):
        load_schedule(tmp_path / "s.npz", b.build())


def test_the_input_cap_applies_to_the_compact_file(tmp_path, schedule, pair_machine, monkeypatch):
    save_schedule(tmp_path / "s.npz", schedule, pair_machine)
    size = (tmp_path / "s.npz").stat().st_size
    monkeypatch.setenv("OPTCOLL_MAX_INPUT_BYTES", str(size))
    load_schedule(tmp_path / "s.npz", pair_machine)
    monkeypatch.setenv("OPTCOLL_MAX_INPUT_BYTES", str(size - 1))
    with pytest.raises(InputError, match=r"s\.npz: holds .*more than optcoll reads from one file .*"
                                         r"OPTCOLL_MAX_INPUT_BYTES"):
        load_schedule(tmp_path / "s.npz", pair_machine)


def test_the_transfers_cap_applies_before_any_column_is_read(tmp_path, schedule, pair_machine, monkeypatch):
    save_schedule(tmp_path / "s.npz", schedule, pair_machine)
    monkeypatch.setenv("OPTCOLL_MAX_TRANSFERS", "3")
    with pytest.raises(InputError, match=r"4 transfers is more than optcoll verifies .*OPTCOLL_MAX_TRANSFERS"):
        load_schedule(tmp_path / "s.npz", pair_machine)


def _rewritten(raw: bytes, **members) -> bytes:
    """The compact file with members replaced (arrays) or dropped (None)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(raw)) as old, zipfile.ZipFile(out, "w") as new:
        for info in old.infolist():
            name = info.filename.removesuffix(".npy")
            if name in members:
                if members[name] is not None:
                    buffer = io.BytesIO()
                    np.save(buffer, members[name])
                    new.writestr(info.filename, buffer.getvalue())
            else:
                new.writestr(info, old.read(info))
    return out.getvalue()


def _header(raw: bytes, **changes) -> np.ndarray:
    with zipfile.ZipFile(io.BytesIO(raw)) as archive:
        header = json.loads(np.load(io.BytesIO(archive.read("header.npy"))).tobytes())
    header.update(changes)
    return np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)


BAD = [
    ("cut in half", lambda raw: raw[: len(raw) // 2], "not a readable compact schedule (.npz)"),
    ("not a zip", lambda raw: b"PK\x03\x04" + b"\0" * 40, "not a readable compact schedule (.npz)"),
    ("empty", lambda raw: b"", "not a readable compact schedule (.npz)"),
    ("no chunk column", lambda raw: _rewritten(raw, chunk=None), "chunk: missing column"),
    ("a chunk column too short", lambda raw: _rewritten(raw, chunk=np.zeros(3, np.uint8)), "chunk: must be a column of 4"),
    ("object column", lambda raw: _rewritten(raw, op=np.array([0, 1, 0, 0], dtype=np.float32)), "op: must be a column"),
    ("an unknown op", lambda raw: _rewritten(raw, op=np.array([0, 2, 0, 0], dtype=np.uint8)), "op[1]: unknown op 2"),
    ("a negative start", lambda raw: _rewritten(raw, start_values=np.array([-1.0, 0.3, 2e-6])),
     "start_values[0]: value -1.0 is not a finite time"),
    ("a start index out of range", lambda raw: _rewritten(raw, start_index=np.array([0, 9, 1, 1], np.uint8)),
     "start_index[1]: index 9 is past the 3 start values"),
    ("a link the machine lacks", lambda raw: _rewritten(raw, link=np.array([0, 7, 2, 2], np.uint8)),
     "link[1]: link 7 does not exist"),
    ("another format", lambda raw: _rewritten(raw, header=_header(raw, format="other")), "header: not an optcoll schedule"),
    ("a header that is not JSON", lambda raw: _rewritten(raw, header=np.frombuffer(b"{", np.uint8)), "header: not JSON"),
    ("a via past the transfers", lambda raw: _rewritten(raw, via=np.array([0, 10, 0, 1], np.uint8)),
     "via[1]: names transfer 9, but the schedule has 4 transfers"),
    ("a via column too short", lambda raw: _rewritten(raw, via=np.array([0, 1], np.uint8)), "via: must be a column of 4"),
    ("a transfer count that lies", lambda raw: _rewritten(raw, header=_header(raw, transfers=5)), "must be a column of 5"),
]


@pytest.mark.parametrize("what, damage, says", BAD, ids=[b[0] for b in BAD])
def test_a_damaged_compact_file_is_one_line_naming_it(tmp_path, schedule, pair_machine, what, damage, says):
    path = tmp_path / "s.npz"
    path.write_bytes(damage(schedule_to_npz(schedule, pair_machine)))
    with pytest.raises(InputError) as caught:
        load_npz(path, pair_machine)
    text = caught.value.one_line()
    assert text.startswith(str(path)) and says in text and "\n" not in text, text


def test_verify_reads_the_compact_form_and_refuses_a_cut_one_with_exit_2(tmp_path):
    from click.testing import CliRunner

    from optcoll.instances.suite import find_suite
    from optcoll.truth.stored import load_truth

    spec = find_suite("quick").specs[0]
    truth, _ = load_truth(spec)
    runner = CliRunner()
    schedule = load_schedule(spec.path.parent / truth.schedule, spec.instance.machine)
    save_schedule(tmp_path / "s.npz", schedule, spec.instance.machine)
    ok = runner.invoke(cli, ["verify", str(spec.path), str(tmp_path / "s.npz")])
    assert ok.exit_code == 0, ok.output
    raw = (tmp_path / "s.npz").read_bytes()
    (tmp_path / "s.npz").write_bytes(raw[: len(raw) - 30])
    bad = runner.invoke(cli, ["verify", str(spec.path), str(tmp_path / "s.npz")])
    assert bad.exit_code == 2
    assert bad.stderr.strip().count("\n") == 0 and str(tmp_path / "s.npz") in bad.stderr, bad.stderr
