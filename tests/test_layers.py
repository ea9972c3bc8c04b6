"""The layers of docs/model.md §7 hold in the import graph (pyproject's import-linter contract),
and the contract really catches an upward import: a copy of the package with one planted fails."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import optcoll

REPO = Path(__file__).resolve().parent.parent
PACKAGE = Path(optcoll.__file__).resolve().parent


def lint(root: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` with the repository's contract on the package found under ``root``."""
    code = ("import sys; from importlinter.cli import lint_imports_command; "
            "sys.exit(lint_imports_command.main(args=[sys.argv[1], '--no-cache'], standalone_mode=False))")
    return subprocess.run([sys.executable, "-c", code, str(REPO / "pyproject.toml")], cwd=root,
                          env={"PYTHONPATH": str(root), "PATH": ""}, capture_output=True, text=True,
                          timeout=300)


def test_layers_contract_is_kept():
    proc = lint(PACKAGE.parent)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "KEPT" in proc.stdout and "BROKEN" not in proc.stdout


@pytest.mark.parametrize("module, planted, message", [
    ("verify/verifier.py", "from optcoll.reports import build",
     "optcoll.verify is not allowed to import optcoll.reports"),
    ("producers/exact/allreduce/timed.py", "from optcoll.producers.exact.timed import solve",
     "optcoll.producers.exact.allreduce.timed -> optcoll.producers.exact.timed.solve"),
])
def test_an_upward_import_breaks_the_contract(tmp_path, module, planted, message):
    """A lazy import planted in a copy of the package breaks the layers (or, inside the exact
    solvers, the exact contract: the direct AllReduce model must not import the timed solver)."""
    copy = tmp_path / "optcoll"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "_models", "_instances"))
    target = copy / module
    target.write_text(target.read_text() + f"\n\ndef _planted():\n    {planted}\n")
    proc = lint(tmp_path)
    assert proc.returncode != 0
    assert message in proc.stdout
