"""A disk that fills up in the middle of a write: the file that was there keeps its content, no
temporary file is left, and the command says so in one line (exit 2), not with a traceback."""
from __future__ import annotations

import gzip
import json

import pytest

from fault_helpers import (ENOSPC_TEXT, assert_one_line_error, full_disk, invoke, run_cli, snapshot,
                           temporary_files, write_instance)
from optcoll.errors import InputError
from optcoll.fileio import WriteFailed, write_atomic, write_bytes_atomic, write_text_atomic

OLD = "the previous content\n"


@pytest.mark.parametrize("name, write", [
    ("result.json", lambda path: write_text_atomic(path, json.dumps({"x": list(range(1000))}))),
    ("schedule.json.gz", lambda path: write_atomic(path, lambda h: json.dump(list(range(5000)), h))),
    ("trace.et", lambda path: write_bytes_atomic(path, bytes(range(256)) * 100)),
])
def test_full_disk_mid_write_keeps_the_old_file(tmp_path, name, write):
    """Fault: ENOSPC after 16 bytes of the temporary file (text, gzip and binary writes)."""
    path = tmp_path / name
    old = gzip.compress(OLD.encode()) if name.endswith(".gz") else OLD.encode()
    path.write_bytes(old)
    with full_disk(after=16) as hit, pytest.raises(WriteFailed) as caught:
        write(path)
    assert hit, "the fault was never reached"
    assert path.read_bytes() == old
    assert temporary_files(tmp_path) == [] and sorted(p.name for p in tmp_path.iterdir()) == [name]
    assert isinstance(caught.value, InputError)
    assert caught.value.one_line() == f"{path}: cannot write it: {ENOSPC_TEXT}; nothing was changed there"


def test_full_disk_before_the_first_byte_creates_nothing(tmp_path):
    """Fault: ENOSPC on the very first write of a file that did not exist."""
    path = tmp_path / "new" / "report.md"
    with full_disk(after=0), pytest.raises(WriteFailed):
        write_text_atomic(path, "# report\n")
    assert not path.exists() and temporary_files(tmp_path) == []


def _suite(tmp_path):
    return write_instance(tmp_path / "suite", "ring4-a2a", "ring4", "alltoall", "16 MiB", time_limit="5 s")


def test_cli_schedule_out_on_a_full_disk(tmp_path):
    """Fault: ENOSPC while ``optcoll synth --out`` writes the schedule over an older one, in a
    real ``optcoll`` process (what a user sees: one line on stderr, exit 2)."""
    instance = _suite(tmp_path)
    out = tmp_path / "best.json"
    out.write_text(OLD)
    proc = run_cli(["synth", instance, "--algo", "ring", "--out", out], full_disk={"after": 32})
    assert_one_line_error(proc, str(out), ENOSPC_TEXT)
    assert out.read_text() == OLD and temporary_files(tmp_path) == []


def test_cli_report_and_its_cache_on_a_full_disk(tmp_path):
    """Fault: ENOSPC while ``optcoll report --out`` writes report.html (the earlier report stays),
    then while the sweep writes a result record into its cache (the records written before it
    stay readable; the next run completes the report)."""
    instance = _suite(tmp_path)
    out, cache = tmp_path / "report", tmp_path / "cache"
    args = ["report", instance, "--out", out, "--cache-dir", cache, "--jobs", "0", "--runs", "1", "--no-progress"]
    assert invoke(args).returncode == 0
    before = snapshot(out)
    with full_disk(after=64, where="report.html"):
        proc = invoke(args)
    assert_one_line_error(proc, str(out / "report.html"), ENOSPC_TEXT)
    assert snapshot(out)["report.html"] == before["report.html"] and temporary_files(tmp_path) == []

    fresh = tmp_path / "cache2"
    args = ["report", instance, "--cache-dir", fresh, "--jobs", "0", "--runs", "1", "--no-progress", "--json"]
    with full_disk(after=64, where="/results/"):
        proc = invoke(args)
    assert_one_line_error(proc, str(fresh / "results"), ENOSPC_TEXT)
    assert temporary_files(tmp_path) == []
    stored = list(fresh.rglob("*.json"))
    for record in stored:
        json.loads(record.read_text())  # what was stored before the fault is whole
    again = invoke(args)
    assert again.returncode == 0 and json.loads(again.stdout)["rows"]


def test_cli_instance_file_on_a_full_disk(tmp_path):
    """Fault: ENOSPC while ``optcoll truth update`` rewrites the instance file with its results:
    the instance file is untouched, a rerun records the results and they verify."""
    instance = _suite(tmp_path)
    old = instance.read_bytes()
    args = ["truth", "update", instance, "--cache-dir", tmp_path / "cache", "--jobs", "0", "--runs", "1",
            "--no-progress"]
    with full_disk(after=40, where=instance.name):
        proc = invoke(args)
    assert_one_line_error(proc, str(instance), ENOSPC_TEXT)
    assert instance.read_bytes() == old and temporary_files(tmp_path) == []
    assert invoke(args).returncode == 0
    assert invoke(["truth", "verify", instance, "--require-all"]).returncode == 0
