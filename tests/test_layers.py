"""The layers of docs/model.md §7 hold in the import graph (pyproject's import-linter contract),
and the contract really catches an upward import: a copy of the package with one planted fails."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

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


def test_an_upward_import_breaks_the_contract(tmp_path):
    copy = tmp_path / "optcoll"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "_models", "_instances"))
    verifier = copy / "verify" / "verifier.py"
    verifier.write_text(verifier.read_text() + "\n\ndef _planted():\n    from optcoll.reports import build\n")
    proc = lint(tmp_path)
    assert proc.returncode != 0
    assert "optcoll.verify is not allowed to import optcoll.reports" in proc.stdout
