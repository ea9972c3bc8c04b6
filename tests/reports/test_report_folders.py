"""What a killed or failed run leaves behind (issue 21, class 6): a report folder is swapped in whole
or not at all (a full disk used to leave a new README beside the old HTML), a folder holding other
files is never replaced, and the temporary files of a run killed with SIGKILL (`.NAME.PID.RANDOM.tmp`,
which stayed forever) are removed by the next run that writes in their folder."""
from __future__ import annotations

import os
import signal
import time

import pytest

from fault_helpers import (ENOSPC_TEXT, assert_one_line_error, full_disk, invoke, run_cli, snapshot,
                           temporary_files, write_instance)
from optcoll.fileio import write_text_atomic
from special_inputs import kind

QUICK_ARGS = ["--jobs", "0", "--runs", "1", "--no-progress"]
HOUR_AGO = time.time() - 3600


@pytest.fixture
def report_args(tmp_path):
    suite = write_instance(tmp_path / "suite", "ring4-a2a", "ring4", "alltoall", "16 MiB", time_limit="5 s")
    return ["report", suite, "--cache-dir", tmp_path / "cache", *QUICK_ARGS, "--out", tmp_path / "report"]


@pytest.mark.parametrize("where", ["README.md", "results.csv", "gaps.svg"])
def test_a_full_disk_leaves_the_old_report_folder_exactly(where, report_args, tmp_path, record_property):
    """Fault: ENOSPC while the new report writes one of its files (the first, the third, the
    last): the old folder is byte for byte as it was and no temporary is left."""
    out = tmp_path / "report"
    assert invoke(report_args).returncode == 0
    (out / "README.md").write_text("the previous report\n")  # tell the old apart from any new one
    before = snapshot(out)
    with full_disk(after=64, where=where):
        proc = invoke(report_args)
    line = assert_one_line_error(proc, str(out / where), ENOSPC_TEXT)
    assert snapshot(out) == before and temporary_files(tmp_path) == []
    record_property("tried", f"report --out: the disk fills while it writes {where}")
    record_property("message", line.replace(str(tmp_path), "<tmp>"))


def test_a_new_report_replaces_the_whole_folder(report_args, tmp_path):
    """A second report into the folder of an earlier one holds only its own files (a figure the
    earlier report had and this one has not is gone), with the folder's mode kept."""
    out = tmp_path / "report"
    assert invoke(report_args).returncode == 0
    (out / "pareto-old.svg").write_text("<svg/>")
    out.chmod(0o750)
    assert invoke(report_args).returncode == 0
    assert "pareto-old.svg" not in os.listdir(out) and "README.md" in os.listdir(out)
    assert (out.stat().st_mode & 0o777) == 0o750


@pytest.mark.parametrize("foreign", ["notes.txt", "data"])
def test_a_folder_holding_other_files_is_never_replaced(foreign, report_args, tmp_path, record_property):
    """Input: --out naming a folder with a file or a folder the report did not write (a mistyped
    `--out .` must not delete a person's work): refused, nothing touched."""
    out = tmp_path / "report"
    out.mkdir()
    (out / "README.md").write_text("mine\n")
    (out / foreign).mkdir() if foreign == "data" else (out / foreign).write_text("keep me\n")
    before = snapshot(out)
    line = assert_one_line_error(invoke(report_args), f"{out}: holds files this command did not write ({foreign})")
    assert snapshot(out) == before and foreign in os.listdir(out)
    record_property("tried", f"report --out a folder that holds {foreign!r}")
    record_property("message", line.replace(str(tmp_path), "<tmp>"))


@pytest.mark.parametrize("what, says", [("a file", "--out: Directory '{out}' is a file"),
                                        ("a FIFO", "{out}: is not a folder; nothing was written")],
                         ids=["a file", "a FIFO"])
def test_report_out_that_is_not_a_folder(what, says, report_args, tmp_path, record_property):
    """Input: --out naming a regular file or a FIFO."""
    out = tmp_path / "report"
    if what == "a FIFO":
        os.mkfifo(out)
    else:
        out.write_text("not a folder\n")
    line = assert_one_line_error(invoke(report_args), says.format(out=out))
    assert kind(out) == ("fifo" if what == "a FIFO" else "file")
    record_property("tried", f"report --out {what}")
    record_property("message", line.replace(str(tmp_path), "<tmp>"))


def _temporary(folder, name: str, pid: int | None, age: float = HOUR_AGO, directory: bool = False):
    path = folder / (f".{name}.{pid}.abcd1234.tmp" if pid is not None else f".{name}.abcd1234.tmp")
    path.mkdir() if directory else path.write_text("half a file")
    os.utime(path, (age, age))
    return path


def _dead_pid() -> int:
    """A process id no process has now."""
    pid = 2**22 - 7
    while os.path.exists(f"/proc/{pid}"):
        pid -= 1
    return pid


def test_stale_temporaries_go_on_the_next_write_in_their_folder(tmp_path, record_property):
    """Left behind: temporaries of a dead process (an hour old), one of the old naming without a
    process id, and a temporary folder; kept: one of a live process (another optcoll writing here)
    and one younger than this run, and files that only look similar."""
    dead = _dead_pid()
    stale = [_temporary(tmp_path, "x.toml", dead), _temporary(tmp_path, "y.json", None),
             _temporary(tmp_path, "report", dead, directory=True)]
    kept = [_temporary(tmp_path, "z.toml", os.getpid()), _temporary(tmp_path, "w.toml", dead, age=time.time() + 60)]
    lookalikes = [tmp_path / ".x.toml.tmp", tmp_path / "x.toml.12.abcd1234.tmp", tmp_path / ".bashrc"]
    for path in lookalikes:
        path.write_text("mine")
    write_text_atomic(tmp_path / "new.txt", "new\n")
    left = set(os.listdir(tmp_path))
    assert not {p.name for p in stale} & left
    assert {p.name for p in kept + lookalikes} | {"new.txt"} == left
    record_property("tried", "stale temporaries of dead, live and young runs beside a new write")


def test_a_truth_update_killed_mid_write_leaves_nothing_after_the_next(tmp_path, record_property):
    """Fault: SIGKILL to `truth update` between writing an instance file's temporary and renaming
    it (the .toml.*.tmp stayed forever); the next update removes it and records the truth."""
    instance = write_instance(tmp_path / "suite", "ring4-a2a", "ring4", "alltoall", "16 MiB")
    suite, original = instance.parent, instance.read_text()
    args = ["truth", "update", suite, "--cache-dir", tmp_path / "cache", *QUICK_ARGS]
    assert invoke(args).returncode == 0  # every result cached: the next run renames only in the suite
    instance.write_text(original)
    killed = run_cli(args, timeout=300, kill_on_call={"target": "os:replace", "call": 1})
    assert killed.returncode == -signal.SIGKILL
    left = temporary_files(suite)
    assert left, "the kill left no temporary: the fault did not land where intended"
    proc = run_cli(args, timeout=300)  # a new run: the killed one's temporaries are older than it
    assert proc.returncode == 0, proc.stderr
    assert temporary_files(suite) == [] and invoke(["truth", "verify", suite, "--require-all"]).returncode == 0
    record_property("tried", "SIGKILL to truth update with a temporary on disk, then a rerun")
    record_property("message", f"left {len(left)} temporary file(s); the rerun removed them")
