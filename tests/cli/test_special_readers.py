"""Every reader handed what never ends or never fits (issue 21, class 2): a FIFO with no writer,
/dev/zero, a sparse file of a gigabyte, a gzip stream that expands a thousandfold, a schedule of
more transfers than the verifier handles. Each is refused at once with one line naming the file
(exit 2), in bounded time and, run in a real process under an address-space limit, bounded memory."""
from __future__ import annotations

import gzip
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from fault_helpers import assert_one_line_error, invoke, run_cli
from special_inputs import MEMORY, Inputs, gzip_bomb, make_inputs, many_transfers_gz, sparse

@dataclass(frozen=True)
class Reader:
    """A command reading one file of a form: its arguments around the bad file, the file's name,
    and the field the message names after the file (where the file was named)."""

    form: str
    name: str
    argv: Callable[[Inputs, Path, Path], list]  # (good inputs, the bad file, an output path)
    field: str = ""


READERS = [
    Reader("model", "model.toml", lambda i, f, o: ["model", "show", f]),
    Reader("instance", "instance.toml", lambda i, f, o: ["instance", "show", f]),
    Reader("model named by an instance", "machine.toml", lambda i, f, o: ["instance", "show", _naming(f)],
           "instance.machine"),
    Reader("schedule", "schedule.json", lambda i, f, o: ["verify", i.instance, f]),
    Reader("gzip schedule", "schedule.json.gz", lambda i, f, o: ["verify", i.instance, f]),
    Reader("MSCCL-IR XML", "algo.xml", lambda i, f, o: ["msccl", "validate", f]),
    Reader("ASTRA-sim network.yml", "network.yml", lambda i, f, o: ["astra", "import-network", f, "-o", o]),
    Reader("ASTRA-sim system.json", "system.json",
           lambda i, f, o: ["astra", "predict", "--network", i.network, "--system", f, "--collective",
                            "allreduce", "--size", "1MiB"]),
    Reader("nvidia-smi text", "topo.txt",
           lambda i, f, o: ["model", "from-nvidia-smi", f, "--nvlink-bandwidth", "25 GB/s", "-o", o]),
]


def _naming(machine: Path) -> Path:
    """An instance whose machine is the file ``machine``."""
    instance = machine.with_name("names-it.toml")
    instance.write_text(f'[instance]\nmachine = "{machine.name}"\ncollective = "allgather"\nsize = "4 MB"\n')
    return instance


@dataclass(frozen=True)
class Attack:
    name: str
    make: Callable[[Path], None]
    says: str


ATTACKS = [
    Attack("a FIFO with no writer", lambda p: os.mkfifo(p), "is a FIFO (named pipe), not a regular file"),
    Attack("a symlink to /dev/zero", lambda p: p.symlink_to("/dev/zero"),
           "is a character device, not a regular file"),
    Attack("a sparse file of 1 GiB", lambda p: sparse(p, 2**30),
           "holds 1 GiB, more than optcoll reads from one file (at most 64 MiB; raise it with OPTCOLL_MAX_INPUT_BYTES)"),
]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Inputs:
    return make_inputs(tmp_path_factory.mktemp("round2-readers") / "inputs")


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.name)
@pytest.mark.parametrize("reader", READERS, ids=lambda r: r.form)
def test_what_never_ends_is_refused_at_once(reader, attack, inputs, tmp_path, record_property):
    """Input: a FIFO (reading it would wait forever), /dev/zero (never ends) or a sparse 1 GiB
    file, given where each file form is read."""
    bad = tmp_path / reader.name
    attack.make(bad)
    out = tmp_path / "out.toml"
    proc = invoke(reader.argv(inputs, bad, out))
    line = assert_one_line_error(proc, f"{bad}: " + (f"{reader.field}: " if reader.field else "") + attack.says)
    record_property("tried", f"{reader.form}: {attack.name}")
    record_property("message", line.replace(str(tmp_path), "<tmp>"))
    assert not out.exists()


@pytest.fixture(scope="module")
def bombs(tmp_path_factory) -> dict[str, Path]:
    """Compressed files of a few hundred kilobytes that expand past the 64 MiB cap."""
    root = tmp_path_factory.mktemp("round2-bombs")
    return {"zeros": gzip_bomb(root / "zeros.json.gz", 96 * 2**20, b'{"format": "'),
            "transfers": many_transfers_gz(root / "transfers.json.gz", 5 * 10**7)}


@pytest.mark.parametrize("bomb, tried", [
    ("zeros", "a .json.gz of 100 KB that expands to 96 MiB (as 8 MB would to 8 GiB)"),
    ("transfers", "a .json.gz of 300 KB holding 5·10⁷ transfers (the old reader needed > 5.8 GB)"),
], ids=["zeros", "transfers"])
def test_a_gzip_bomb_stops_at_the_cap_in_bounded_memory(bomb, tried, bombs, inputs, record_property):
    """Input: a gzip schedule that expands a thousandfold, in a real process whose address space
    is capped (1.5 GiB): the streamed gunzip stops at the cap."""
    proc = run_cli(["verify", inputs.instance, bombs[bomb]], timeout=120, memory=MEMORY)
    line = assert_one_line_error(proc, str(bombs[bomb]), "gunzips to more than optcoll reads from one file "
                                 "(at most 64 MiB; raise it with OPTCOLL_MAX_INPUT_BYTES)")
    record_property("tried", tried)
    record_property("message", line.replace(str(bombs[bomb].parent), "<tmp>"))


def test_dev_zero_as_a_model_in_bounded_memory(inputs, tmp_path, record_property):
    """Input: a model file that is /dev/zero, in a real process with its address space capped
    (the issue's MemoryError traceback); also a FIFO in a real process (no hang)."""
    zero, fifo = tmp_path / "zero.toml", tmp_path / "fifo.toml"
    zero.symlink_to("/dev/zero")
    os.mkfifo(fifo)
    for path, says in ((zero, "is a character device"), (fifo, "is a FIFO (named pipe)")):
        proc = run_cli(["model", "show", path], timeout=60, memory=MEMORY)
        line = assert_one_line_error(proc, f"{path}: {says}")
    record_property("tried", "model show of /dev/zero and of a FIFO in a real process, 1.5 GiB address space")
    record_property("message", line.replace(str(tmp_path), "<tmp>"))


def test_more_transfers_than_the_cap_are_refused_before_arrays(inputs, tmp_path, monkeypatch, record_property):
    """Input: a schedule of 12 transfers with the transfers cap lowered to 8 (the guard that
    keeps 10⁸ transfers from reaching the verifier, tried without making them)."""
    monkeypatch.setenv("OPTCOLL_MAX_TRANSFERS", "8")
    proc = invoke(["verify", inputs.instance, inputs.schedule])
    line = assert_one_line_error(proc, f"{inputs.schedule}: transfers.chunk: 12 transfers is more than "
                                 "optcoll verifies (at most 8; raise it with OPTCOLL_MAX_TRANSFERS)")
    record_property("tried", "a schedule over the transfers cap (OPTCOLL_MAX_TRANSFERS=8)")
    record_property("message", line.replace(str(inputs.root), "<inputs>"))


def test_a_cap_is_raised_by_its_environment_variable(inputs, monkeypatch):
    """Input: the good schedule with the input cap at 64 bytes (refused), then at '1 MiB' (read)."""
    monkeypatch.setenv("OPTCOLL_MAX_INPUT_BYTES", "64")
    assert_one_line_error(invoke(["verify", inputs.instance, inputs.schedule]), "(at most 64 B; raise it")
    monkeypatch.setenv("OPTCOLL_MAX_INPUT_BYTES", "1 MiB")
    assert invoke(["verify", inputs.instance, inputs.schedule]).returncode == 0


@pytest.mark.parametrize("value", ["lots", "0", "-5", "1 Gbit/s"])
def test_a_bad_cap_value_is_one_line_naming_the_variable(value, inputs, monkeypatch, record_property):
    """Input: OPTCOLL_MAX_INPUT_BYTES set to something that is not a positive size."""
    monkeypatch.setenv("OPTCOLL_MAX_INPUT_BYTES", value)
    line = assert_one_line_error(invoke(["verify", inputs.instance, inputs.schedule]),
                                 "OPTCOLL_MAX_INPUT_BYTES: must be a positive size")
    record_property("tried", f"OPTCOLL_MAX_INPUT_BYTES={value!r}")
    record_property("message", line)


def test_gzip_cut_short_and_gzip_that_is_whole(inputs, tmp_path, record_property):
    """Input: a gzip schedule cut before its end (one line), and one of two members with zero
    padding after them, as appending and tape tools write (read whole)."""
    data = inputs.schedule.read_bytes()
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(gzip.compress(data)[:-12])
    line = assert_one_line_error(invoke(["verify", inputs.instance, cut]), "it ends before its end-of-stream marker")
    record_property("tried", "a gzip schedule cut short; a two-member gzip with zero padding")
    record_property("message", line.replace(str(tmp_path), "<tmp>"))
    whole = tmp_path / "two-members.json.gz"
    half = len(data) // 2
    whole.write_bytes(gzip.compress(data[:half]) + gzip.compress(data[half:]) + bytes(512))
    assert invoke(["verify", inputs.instance, whole]).returncode == 0


def test_truth_verify_of_a_recorded_schedule_that_is_dev_zero(inputs, tmp_path, record_property):
    """Input: a suite whose [results] schedule names /dev/zero: the record fails, named, at once."""
    suite = tmp_path / "suite"
    suite.mkdir()
    text = inputs.truth.read_text()
    start = text.index("schedule = ")
    end = text.index("\n", start)
    (suite / inputs.truth.name).write_text(text[:start] + 'schedule = "/dev/zero"' + text[end:])
    proc = invoke(["truth", "verify", suite])
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "/dev/zero: is a character device, not a regular file" in proc.stdout
    record_property("tried", "truth verify: [results] schedule = \"/dev/zero\"")
