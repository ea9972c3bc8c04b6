import json
import subprocess
import sys

import pytest

from cli_paths import REPO


def test_version_and_help(run):
    code, out, _ = run("--version")
    assert code == 0 and "optcoll" in out
    for args in (["--help"], ["model", "--help"], ["verify", "--help"], ["bound", "--help"]):
        code, out, _ = run(*args)
        assert code == 0 and "Usage" in out


def test_model_list_show_draw(run, tmp_path):
    code, out, _ = run("model", "list", "--json")
    names = {row["name"] for row in json.loads(out)}
    assert code == 0 and {"dgx1", "torus4x4", "hetmesh5x5"} <= names
    code, out, _ = run("model", "show", "dgx1", "--json")
    info = json.loads(out)
    assert code == 0 and info["npus"] == 8
    svg = tmp_path / "dgx1.svg"
    code, _, _ = run("model", "draw", "dgx1", "-o", svg)
    assert code == 0 and svg.read_text().lstrip().startswith("<?xml")


def test_verify_valid_schedule_prints_time_and_bound(run, ring_instance):
    code, out, _ = run("verify", ring_instance / "ag.toml", ring_instance / "ring.json", "--json")
    data = json.loads(out)
    tau = 1e-6 + 1e-3
    assert code == 0 and data["valid"] and data["time"] == pytest.approx(3 * tau)
    assert data["lower_bound"] <= data["time"] * (1 + 1e-12)


def test_verify_invalid_schedule_exits_1_with_reason(run, ring_instance):
    path = ring_instance / "ring.json"
    data = json.loads(path.read_text())
    data["transfers"]["start"][4] = 0.0  # second hop before the first delivery
    path.write_text(json.dumps(data))
    code, out, _ = run("verify", ring_instance / "ag.toml", path)
    assert code == 1 and "INVALID [causality]" in out and "chunk" in out


def test_simulate_and_gantt(run, ring_instance):
    gantt = ring_instance / "g.svg"
    code, out, _ = run("simulate", ring_instance / "ag.toml", ring_instance / "ring.json", "--gantt", gantt)
    assert code == 0 and "link utilisation" in out and gantt.exists()


def test_bound_lists_named_bounds(run, ring_instance):
    code, out, _ = run("bound", ring_instance / "ag.toml", "--json")
    bounds = {b["name"]: b["value"] for b in json.loads(out)}
    tau = 1e-6 + 1e-3
    assert code == 0 and bounds["latency"] == pytest.approx(3 * tau)


@pytest.mark.parametrize("args, fragment", [
    (["model", "show", "nosuch"], "no built-in machine model named 'nosuch'"),
    (["instance", "show", "missing.toml"], "missing.toml: file not found"),
])
def test_bad_input_is_one_line_exit_2(run, args, fragment):
    code, out, err = run(*args)
    assert code == 2 and fragment in err and len(err.strip().splitlines()) == 1


def test_bad_schedule_and_bad_instance_through_a_real_process(ring_instance):
    bad = ring_instance / "bad.json"
    bad.write_text('{"format": "optcoll-schedule", "version": 1, "transfers": '
                   '{"chunk": [0], "src": [0], "dst": [2], "start": [0]}}')
    proc = subprocess.run([sys.executable, "-m", "optcoll", "verify", ring_instance / "ag.toml", bad],
                          capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "bad.json: transfers[0]: no link 0->2" in proc.stderr
    (ring_instance / "neg.toml").write_text(
        '[topology]\nkind = "ring"\nn = 4\nbandwidth = "-1 GB/s"\nlatency = "1 us"\n')
    (ring_instance / "i.toml").write_text(
        '[instance]\nmachine = "neg.toml"\ncollective = "allgather"\nsize = "4 MB"\n')
    proc = subprocess.run([sys.executable, "-m", "optcoll", "bound", ring_instance / "i.toml"],
                          capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "neg.toml: topology.bandwidth" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_bench_core_writes_a_report(run, tmp_path):
    out = tmp_path / "bench.md"
    code, text, _ = run("bench", "core", "--side", "4", "--out", out)
    report = out.read_text()
    assert code == 0 and "16-NPU" in text and "| 240 | vectorised | True |" in report


def _leaf_commands(group, prefix=()):
    import click

    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield from _leaf_commands(command, (*prefix, name))
        else:
            yield (*prefix, name), command


def test_every_command_has_help_and_json():
    from optcoll.cli.main import cli

    leaves = list(_leaf_commands(cli))
    assert len(leaves) >= 25
    for path, command in leaves:
        options = {opt for param in command.params for opt in getattr(param, "opts", ())}
        assert "--json" in options, f"optcoll {' '.join(path)} has no --json"
        assert command.help, f"optcoll {' '.join(path)} has no help text"
