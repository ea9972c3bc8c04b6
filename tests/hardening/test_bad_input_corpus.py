"""The bad-input corpus through the real CLI: every case exits 2 with exactly one line
``optcoll: error: <file>: <field>: <detail>``, never a traceback, and leaves every file that was
already on disk byte for byte as it was."""
from __future__ import annotations

import shutil
import subprocess
import sys
import traceback
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from bad_input_cases import CORPUS, Case, load_cases
from optcoll.cli.main import cli

CASES = load_cases()
SENTINEL = b"written before the command ran; a failed command must leave it alone\n"


@pytest.fixture(scope="module")
def corpus_copy(tmp_path_factory) -> Path:
    """The corpus copied once, so a command that writes (truth update) can only touch the copy."""
    copy = tmp_path_factory.mktemp("hardening") / "corpus"
    shutil.copytree(CORPUS, copy)
    return copy


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _run(case: Case, corpus: Path, out: Path):
    """(exit code, stdout, stderr, the exception that escaped or None) of the command run
    in-process through OptcollGroup, like the real ``optcoll``."""
    result = CliRunner().invoke(cli, case.argv(corpus, out))
    escaped = result.exception if not isinstance(result.exception, SystemExit) else None
    return result.exit_code, result.stdout, result.stderr, escaped


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in CASES])
def test_bad_input_gives_one_line_and_exit_2(case: Case, corpus_copy, tmp_path, record_property):
    """Runs the corpus case's command on its bad file: exit 2, one `optcoll: error:` line naming
    the file and the field, no traceback, no file changed (the corpus, a pre-existing output)."""
    record_property("tried", case.tried)
    out = tmp_path / "existing.out"
    out.write_bytes(SENTINEL)
    before = _snapshot(corpus_copy)
    code, stdout, stderr, escaped = _run(case, corpus_copy, out)
    lines = stderr.splitlines()
    shown = f"traceback: {type(escaped).__name__}: {escaped}" if escaped else \
        lines[0] if len(lines) == 1 else stderr
    record_property("message", shown.replace(str(corpus_copy), "corpus").replace(str(tmp_path), "<tmp>"))
    assert escaped is None, "".join(traceback.format_exception(escaped))
    assert "Traceback" not in stdout + stderr, stderr
    assert code == 2, (code, stdout, stderr)
    assert len(lines) == 1 and lines[0].startswith("optcoll: error: "), stderr
    line = lines[0]
    named = case.named_file(corpus_copy, out)
    if named:
        assert named in line, f"the message does not name {named}: {line}"
    if case.field:  # after the file it names, or first when an option is at fault
        expected = f"{named}: {case.field}: " if named else f"optcoll: error: {case.field}: "
        assert expected in line, f"the message does not name field {case.field!r}: {line}"
    fragment = case.fragment(corpus_copy, out)
    if fragment:
        assert fragment in line, line
    assert out.read_bytes() == SENTINEL, "a pre-existing output file was changed"
    assert _snapshot(corpus_copy) == before, "a file in the corpus was changed"


def test_the_corpus_is_large_distinct_and_covers_every_file_form():
    """The manifest itself: at least 60 cases, one per file, every file present (except the cases
    about a missing file), and every file form optcoll reads represented."""
    files = [c.file for c in CASES]
    assert len(CASES) >= 60 and len(set(files)) == len(files)
    for case in CASES:
        assert (CORPUS / case.file).exists() != case.absent, case.file
        assert case.field or case.says, case.file
    forms = Counter(c.form for c in CASES)
    assert set(forms) == {"model", "instance", "schedule", "msccl", "network", "nvidia_smi", "suite",
                          "synth", "system"}, forms


def test_a_real_process_prints_the_same_line(corpus_copy, tmp_path):
    """One case through `python -m optcoll` in its own process: the in-process runner above takes
    the same path (exit 2, the same single line on stderr)."""
    case = next(c for c in CASES if c.file == "schedule/time_negative.json")
    argv = case.argv(corpus_copy, tmp_path / "out")
    proc = subprocess.run([sys.executable, "-m", "optcoll", *argv], capture_output=True, text=True,
                          timeout=120)
    _, _, stderr, _ = _run(case, corpus_copy, tmp_path / "out")
    assert proc.returncode == 2 and proc.stderr == stderr and proc.stdout == ""
