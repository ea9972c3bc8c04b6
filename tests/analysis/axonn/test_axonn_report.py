"""The AxoNN report and the entry point the CLI calls: machine models, options, atomic output."""
from __future__ import annotations

import pytest

from optcoll.analysis.axonn.cluster import Cluster, cluster_from_model
from optcoll.analysis.axonn.layer import TransformerLayer
from optcoll.analysis.axonn.network import NetworkEvaluator
from optcoll.analysis.axonn.report import axonn_command, axonn_report
from optcoll.errors import InputError

MODEL = """# a test cluster
[machine]
name = "testcluster"

[topology]
kind = "multinode"
nodes = 2
gpus_per_node = 2
nvlink_bandwidth = "100 GB/s"
nvlink_latency = "0.5 us"
nic_bandwidth = "200 Gbit/s"
nic_latency = "2 us"
"""


def test_cluster_from_builtin_models():
    perl = cluster_from_model("perlmutter")
    assert (perl.nodes, perl.gpus_per_node, perl.gpus) == (16, 4, 64)
    assert perl.node_injection_bandwidth == pytest.approx(100e9)
    assert perl.intra_bandwidth == pytest.approx(300e9)
    big = cluster_from_model("perlmutter", 1024)
    assert big.nodes == 256 and big.machine.num_npus == 1024
    c28 = cluster_from_model("cluster2x8")
    assert c28.machine.num_links == cluster_from_model("cluster2x8", 16).machine.num_links


def test_model_errors_name_file_and_field(tmp_path):
    ring = tmp_path / "ring.toml"
    ring.write_text('[topology]\nkind = "ring"\nn = 4\nbandwidth = "1 GB/s"\nlatency = "1 us"\n')
    with pytest.raises(InputError, match=r"ring\.toml: topology\.kind"):
        cluster_from_model(str(ring))
    with pytest.raises(InputError, match="gpus"):
        cluster_from_model("perlmutter", 30)
    bad = tmp_path / "bad.toml"
    bad.write_text(MODEL.replace('"200 Gbit/s"', '"200"'))
    with pytest.raises(InputError, match=r"bad\.toml: topology\.nic_bandwidth"):
        cluster_from_model(str(bad))
    with pytest.raises(InputError, match=r"missing\.toml: machine: file not found"):
        cluster_from_model(str(tmp_path / "missing.toml"))


def test_command_writes_the_ranking_atomically(tmp_path):
    model = tmp_path / "testcluster.toml"
    model.write_text(MODEL)
    out = tmp_path / "reports" / "axonn.md"
    text = axonn_command(str(model), 8, 32, seq_len=8, batch=8, out=str(out), chunks_per_rank=1,
                         producers=("tacos", "direct"))
    assert out.read_text(encoding="utf-8") == text
    assert list(out.parent.iterdir()) == [out]  # no temporary file left behind
    assert "# AxoNN 4D configurations on testcluster, 8 GPUs" in text
    assert "20 configurations with X·Y·Z ≥ 1" in text
    for label in ("8x1x1x1", "1x1x1x8", "2x2x2x1"):
        assert f"| {label} |" in text
    assert "schedule (ms)" in text and "rank: bound" in text
    assert "Breakdown of the ring model's pick" in text


def test_one_shape_and_ring_only():
    cluster = Cluster(2, 2, 100e9, 0.5e-6, 25e9, 2e-6, name="tiny")
    layer = TransformerLayer(32, 8, 8)
    text = axonn_report(cluster, layer, shape="2,1,1,2",
                        evaluator=NetworkEvaluator(cluster, chunks_per_rank=1, schedules=False))
    assert "## Configuration 2x1x1x2" in text and "- bound:" in text and "- schedule:" not in text
    top = axonn_report(cluster, layer, evaluator=NetworkEvaluator(cluster, chunks_per_rank=1),
                       measure_top=3)
    assert "The ring model's 3 best on the network" in top
    ring_only = axonn_report(cluster, layer, sharing="none")
    assert "ring model only" in ring_only and "**none**" in ring_only
    with pytest.raises(InputError, match="sharing"):
        axonn_report(cluster, layer, sharing="evenly")
    with pytest.raises(InputError, match="schedules"):
        axonn_command("perlmutter", 64, 5120, bounds=False)
