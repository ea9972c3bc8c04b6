import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from optcoll.cli.main import cli


@pytest.fixture
def run():
    """Invokes the CLI in-process; returns (exit code, stdout, stderr)."""
    runner = CliRunner()

    def invoke(*args: str):
        result = runner.invoke(cli, [str(a) for a in args], catch_exceptions=False)
        return result.exit_code, result.stdout, result.stderr
    return invoke


@pytest.fixture
def ring_instance(tmp_path) -> Path:
    """A unidirectional ring of 4 and an AllGather on it, plus a valid ring schedule."""
    (tmp_path / "uring4.toml").write_text(
        '[topology]\nkind = "ring"\nn = 4\nbidirectional = false\n'
        'bandwidth = "1 GB/s"\nlatency = "1 us"\n')
    (tmp_path / "ag.toml").write_text(
        '[instance]\nmachine = "uring4.toml"\ncollective = "allgather"\nsize = "4 MB"\n')
    tau = 1e-6 + 1e6 / 1e9
    schedule = {"format": "optcoll-schedule", "version": 1, "transfers": {
        "chunk": [(v - k) % 4 for k in range(3) for v in range(4)],
        "src": [v for k in range(3) for v in range(4)],
        "dst": [(v + 1) % 4 for k in range(3) for v in range(4)],
        "start": [k * tau for k in range(3) for v in range(4)]}}
    (tmp_path / "ring.json").write_text(json.dumps(schedule))
    return tmp_path
