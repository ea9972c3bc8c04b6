"""Root of the test tree: with pytest's default import mode this puts ``tests/`` on sys.path, so
helpers shared by several test folders (``solver_checks``) are importable from all of them."""
from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest

#: The robustness helpers (``fault_helpers``, ``special_inputs``, beside the corpus they read)
#: serve robustness tests in several package folders.
sys.path.append(str(Path(__file__).resolve().parent / "hardening"))


@pytest.fixture(autouse=True)
def _interactive_ctrl_c():
    """Every test runs as in an interactive session, where Ctrl-C raises KeyboardInterrupt. A
    runner started in the background (``nohup``, ``&``) inherits SIGINT ignored; the Ctrl-C tests
    then pressed a key nobody listened to, and failed."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)
