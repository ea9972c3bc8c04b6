"""Every writer aimed at what is not a plain file (issue 21, class 1): a FIFO, /dev/null, /dev/full,
/dev/stdout through a symlink, a socket, a directory, a symlink to a file, a file of mode 0600.
A FIFO or device is written in place and stays what it was; anything else that is not a regular
file is refused with one line (exit 2); a replaced file keeps its mode and a symlink stays one."""
from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from fault_helpers import assert_one_line_error, cli_command, invoke, run_cli
from special_inputs import FifoReader, Inputs, kind, make_inputs, release, unix_socket


@dataclass(frozen=True)
class Writer:
    """A command that writes one file: its arguments with the target last, text the file holds,
    and the exit codes of a run that wrote it (``check`` exits 1 on a failing verdict)."""

    name: str
    argv: Callable[[Inputs, Path], list]
    holds: bytes
    ok: tuple[int, ...] = (0,)


WRITERS = [
    Writer("model draw -o", lambda i, t: ["model", "draw", "ring4", "-o", t], b"<svg"),
    Writer("synth --out", lambda i, t: ["synth", i.instance, "--algo", "ring", "--out", t],
           b'"format":"optcoll-schedule"'),
    Writer("msccl export -o", lambda i, t: ["msccl", "export", i.instance, i.schedule, "-o", t], b"<algo"),
    Writer("astra export-network -o", lambda i, t: ["astra", "export-network", "ring4", "-o", t], b"topology:"),
    Writer("astra import-network -o", lambda i, t: ["astra", "import-network", i.network, "-o", t], b"[machine]"),
    Writer("model from-nvidia-smi -o", lambda i, t: ["model", "from-nvidia-smi", i.smi, "--nvlink-bandwidth",
                                                     "25 GB/s", "-o", t], b"[machine]"),
    Writer("check --junit", lambda i, t: ["check", "--synth", "builtin:tacos", "--suite", i.truth, "--jobs", "1",
                                          "--junit", t], b"<testsuites", (0, 1)),
    Writer("check --summary", lambda i, t: ["check", "--synth", "builtin:tacos", "--suite", i.truth,
                                            "--jobs", "1", "--summary", t], b"| instance |", (0, 1)),
    Writer("simulate --gantt", lambda i, t: ["simulate", i.instance, i.schedule, "--gantt", t], b"<svg"),
]
BY_NAME = {w.name: w for w in WRITERS}


@pytest.fixture
def inputs(tmp_path) -> Inputs:
    return make_inputs(tmp_path / "inputs")


def _run(writer: Writer, inputs: Inputs, target: Path):
    return invoke(writer.argv(inputs, target))


@pytest.mark.parametrize("writer", WRITERS, ids=lambda w: w.name)
def test_a_fifo_with_a_reader_gets_the_output_and_stays_a_fifo(writer, inputs, tmp_path, record_property):
    """Target: a FIFO some process reads (`cat fifo`); the output is written into it in place."""
    record_property("tried", f"{writer.name} onto a FIFO with a reader")
    target = tmp_path / "out.fifo"
    os.mkfifo(target)
    reader = FifoReader(target)
    try:
        proc = _run(writer, inputs, target)
    finally:
        release(target)
    data = reader.result()
    assert proc.returncode in writer.ok, proc.stderr
    assert writer.holds in data, data[:200]
    assert kind(target) == "fifo"


@pytest.mark.parametrize("writer", WRITERS, ids=lambda w: w.name)
def test_a_symlink_to_dev_null_stays_and_dev_null_stays_a_device(writer, inputs, tmp_path, record_property):
    """Target: a symlink to /dev/null (as root the old writer turned the device into a file)."""
    record_property("tried", f"{writer.name} onto a symlink to /dev/null")
    target = tmp_path / "out.null"
    target.symlink_to("/dev/null")
    proc = _run(writer, inputs, target)
    assert proc.returncode in writer.ok, proc.stderr
    assert kind(target) == "symlink" and stat.S_ISCHR(os.stat("/dev/null").st_mode)


@pytest.mark.parametrize("writer", WRITERS, ids=lambda w: w.name)
def test_a_full_device_is_one_line_and_stays_a_device(writer, inputs, tmp_path, record_property):
    """Target: a symlink to /dev/full (every write fails with ENOSPC)."""
    target = tmp_path / "out.full"
    target.symlink_to("/dev/full")
    proc = _run(writer, inputs, target)
    line = assert_one_line_error(proc, str(target), "No space left on device", "written in place")
    record_property("tried", f"{writer.name} onto a symlink to /dev/full")
    record_property("message", line.replace(str(tmp_path), "<tmp>"))
    assert kind(target) == "symlink" and stat.S_ISCHR(os.stat("/dev/full").st_mode)


@pytest.mark.parametrize("writer", WRITERS, ids=lambda w: w.name)
def test_a_private_file_keeps_its_mode(writer, inputs, tmp_path, record_property):
    """Target: an existing file of mode 0600 (the old writer made it 0644, readable by all)."""
    record_property("tried", f"{writer.name} over a file of mode 0600")
    target = tmp_path / "private.out"
    target.write_bytes(b"old")
    target.chmod(0o600)
    proc = _run(writer, inputs, target)
    assert proc.returncode in writer.ok, proc.stderr
    assert writer.holds in target.read_bytes()
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


@pytest.mark.parametrize("writer", [BY_NAME["model draw -o"], BY_NAME["synth --out"], BY_NAME["check --junit"]],
                         ids=lambda w: w.name)
def test_a_fifo_nobody_reads_is_refused_in_bounded_time(writer, inputs, tmp_path, monkeypatch, record_property):
    """Target: a FIFO no process opens for reading (the writer would block forever)."""
    monkeypatch.setattr("optcoll.fileio.FIFO_WAIT", 0.2)
    target = tmp_path / "lonely.fifo"
    os.mkfifo(target)
    proc = _run(writer, inputs, target)
    line = assert_one_line_error(proc, str(target), "no process opened for reading within 0.2 s")
    record_property("tried", f"{writer.name} onto a FIFO nobody reads")
    record_property("message", line.replace(str(tmp_path), "<tmp>"))
    assert kind(target) == "fifo"


@pytest.mark.parametrize("writer", [BY_NAME["model draw -o"], BY_NAME["synth --out"],
                                    BY_NAME["astra import-network -o"]], ids=lambda w: w.name)
def test_a_symlink_to_a_file_stays_a_symlink(writer, inputs, tmp_path, record_property):
    """Target: a symlink to a file of mode 0640; the file it names is replaced, the link stays."""
    record_property("tried", f"{writer.name} onto a symlink to a file of mode 0640")
    real = tmp_path / "real.out"
    real.write_bytes(b"old")
    real.chmod(0o640)
    target = tmp_path / "link.out"
    target.symlink_to(real.name)
    proc = _run(writer, inputs, target)
    assert proc.returncode == 0, proc.stderr
    assert kind(target) == "symlink" and os.readlink(target) == real.name
    assert writer.holds in real.read_bytes() and stat.S_IMODE(real.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["inputs", "link.out", "real.out"]


@pytest.mark.parametrize("writer", [BY_NAME["model draw -o"], BY_NAME["synth --out"], BY_NAME["check --summary"]],
                         ids=lambda w: w.name)
def test_a_socket_is_refused(writer, inputs, tmp_path, record_property):
    """Target: a Unix socket (neither a file to replace nor one to write into)."""
    target = tmp_path / "out.sock"
    server = unix_socket(target)
    try:
        proc = _run(writer, inputs, target)
    finally:
        server.close()
    line = assert_one_line_error(proc, str(target), "is a socket, not a regular file; nothing was written")
    record_property("tried", f"{writer.name} onto a Unix socket")
    record_property("message", line.replace(str(tmp_path), "<tmp>"))
    assert kind(target) == "socket"


@pytest.mark.parametrize("writer", [BY_NAME["model draw -o"], BY_NAME["synth --out"]], ids=lambda w: w.name)
def test_dev_stdout_through_a_symlink_prints_the_output(writer, inputs, tmp_path, record_property):
    """Target: a symlink to /dev/stdout, in a real process whose stdout is a pipe: the output
    arrives on stdout and the symlink stays."""
    record_property("tried", f"{writer.name} onto a symlink to /dev/stdout")
    target = tmp_path / "out.stdout"
    target.symlink_to("/dev/stdout")
    proc = run_cli(writer.argv(inputs, target), timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert writer.holds.decode() in proc.stdout and f"wrote {target}" in proc.stdout
    assert kind(target) == "symlink"


def test_dev_stdout_redirected_to_a_file_keeps_what_came_before(inputs, tmp_path):
    """`optcoll model draw ring4 -o /dev/stdout > file`: the picture is written through the
    process's own stdout, so the closing 'wrote' line follows it in the file, nothing overwritten."""
    out = tmp_path / "captured.txt"
    with open(out, "w") as handle:
        code = subprocess.run(cli_command(["model", "draw", "ring4", "-o", "/dev/stdout"]), stdout=handle,
                              timeout=120).returncode
    text = out.read_text()
    assert code == 0 and text.startswith("<?xml") and text.rstrip().endswith("wrote /dev/stdout")
