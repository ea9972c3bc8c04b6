"""Bad inputs left after round 2 (issue 37, item 4): each is one stderr line and exit 2 (or, for a
synthesizer's own failure, a FAIL row), never a traceback, a hang or a silent misreading."""
from __future__ import annotations

import http.server
import os
import threading
from pathlib import Path

import pytest

from fault_helpers import assert_one_line_error, invoke, run_cli
from round2_helpers import QUICK

RING = QUICK / "ring4-alltoall-c1.toml"
RING4 = '[topology]\nkind = "ring"\nn = 4\nbandwidth = "1 GB/s"\nlatency = "1 us"\n'


def test_a_synthesizer_raising_keyboardinterrupt_is_its_failure_not_a_traceback(tmp_path):
    (tmp_path / "kb.py").write_text("def synth(instance):\n    raise KeyboardInterrupt\n")
    proc = run_cli(["check", "--synth", f"py:{tmp_path / 'kb.py'}:synth", "--suite", RING, "--jobs", "1"])
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "FAIL error" in proc.stdout, proc.stderr


@pytest.mark.parametrize("args, says", [
    (["check", "--synth", "builtin:ring", "--suite", "quick", "--max-gap", "nan"],
     "--max-gap: must be a ratio ≥ 1 (1.10 = within 10 % of the reference), got nan"),
    (["bench", "core", "--side", "0"], "--side: 0 is not in the range x>=1"),
    (["report", RING, "--cluster", "notaurl"],
     "--cluster: must be a Dask scheduler address such as tcp://host:8786, got 'notaurl'"),
], ids=["check --max-gap nan", "bench core --side 0", "report --cluster notaurl"])
def test_a_bad_flag_is_refused_before_anything_is_said(args, says):
    """No banner (the suite's origin, what a benchmark overwrites) before the error line; a
    malformed --cluster is refused whatever the cache holds."""
    assert_one_line_error(invoke(args), says)


class _Http(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def test_a_cluster_address_that_answers_http_is_refused_in_bounded_time(monkeypatch):
    """dask's client read the HTTP server's reply as a frame length of exabytes: "out of memory",
    or a wait past its own 30 s timeout. The address is probed first."""
    from optcoll.sweeps import cluster

    monkeypatch.setattr(cluster, "PROBE_SECONDS", 1.0)
    server = http.server.HTTPServer(("127.0.0.1", 0), _Http)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        address = f"tcp://127.0.0.1:{server.server_address[1]}"
        proc = invoke(["report", RING, "--no-cache", "--runs", "1", "--jobs", "0", "--cluster", address])
    finally:
        server.shutdown()
    assert_one_line_error(proc, "--cluster: ", "sent no Dask handshake within 1 s")


@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_a_traffic_matrix_that_is_no_regular_file_is_named_as_such(kind, tmp_path):
    (tmp_path / "ring4.toml").write_text(RING4)
    matrix = tmp_path / "m.csv"
    if kind == "directory":
        matrix.mkdir()
    else:
        os.mkfifo(matrix)
    (tmp_path / "a2av.toml").write_text('[instance]\nmachine = "ring4.toml"\ncollective = "alltoallv"\n'
                                        '[alltoallv]\nmatrix = "m.csv"\nunit = "KiB"\n')
    line = assert_one_line_error(invoke(["synth", tmp_path / "a2av.toml", "--algo", "mcf"]), "m.csv: ")
    assert ("is a directory" if kind == "directory" else "is a FIFO") in line and "no traffic matrix" not in line


def test_a_generator_field_is_named_once(tmp_path):
    (tmp_path / "ring4.toml").write_text(RING4)
    (tmp_path / "moe.toml").write_text('[instance]\nmachine = "ring4.toml"\ncollective = "alltoallv"\n'
                                       'size = "1 MiB"\n[alltoallv]\ngenerator = "moe"\nskew = -1.0\n')
    line = assert_one_line_error(invoke(["synth", tmp_path / "moe.toml", "--algo", "mcf"]),
                                 "moe.toml: alltoallv.skew: must be a non-negative number")
    assert "alltoallv.alltoallv" not in line


def test_an_nvidia_smi_matrix_mixing_nv18_and_nv2_is_not_read_as_one_nvswitch(tmp_path):
    """NV18 on most pairs (a DGX H100's count into its NVSwitches) and NV2 on one: no fabric shows
    that, and 18 + 18 + 2 links per GPU are more than an H100 has as direct links."""
    cells = [["X", "NV18", "NV18", "NV2"], ["NV18", "X", "NV18", "NV18"],
             ["NV18", "NV18", "X", "NV18"], ["NV2", "NV18", "NV18", "X"]]
    rows = ["\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity"] + [
        f"GPU{i}\t" + "\t".join(row) + "\t0-7" for i, row in enumerate(cells)]
    (tmp_path / "topo.txt").write_text("\n".join(rows) + "\n")
    proc = invoke(["model", "from-nvidia-smi", tmp_path / "topo.txt", "--nvlink-bandwidth", "25 GB/s", "--gpu", "H100",
                   "-o", tmp_path / "box.toml"])
    assert_one_line_error(proc, "topo.txt: row GPU0: mixes NV18 and NV2 pairs")
    assert not (tmp_path / "box.toml").exists()
