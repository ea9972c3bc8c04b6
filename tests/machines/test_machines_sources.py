"""The sourced-value form of model files: values cite [sources] tables, bidirectional figures are
halved, estimates say their basis, [figures] refuse a model faster than its sources; users may
leave numbers unsourced and `model show` lists them; bad input is one line naming file and field."""
from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from optcoll.cli.main import cli
from optcoll.errors import InputError
from optcoll.machines.modelfile import load_model_file

SOURCES = '''
[sources.doc]
title = "A vendor document"
url = "https://example.com/doc"
'''


def write(tmp_path, text, name="m.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def ring(bandwidth: str, latency: str = '"1 us"', extra: str = "") -> str:
    return f'{SOURCES}\n[topology]\nkind = "ring"\nn = 4\nbandwidth = {bandwidth}\nlatency = {latency}\n{extra}'


def test_a_bidirectional_figure_is_halved_and_keeps_its_provenance(tmp_path):
    model = load_model_file(write(tmp_path, ring('{ value = "100 GB/s", per = "bidirectional", source = "doc" }',
                                                 '{ value = "1 us", source = "doc", estimate = true, note = "a guess" }')))
    assert set(model.machine.link_bandwidth.tolist()) == {50e9}
    fields = {v.field: v for v in model.provenance.values}
    assert fields["topology.bandwidth"].value == "100 GB/s" and fields["topology.bandwidth"].per == "bidirectional"
    assert fields["topology.latency"].estimate and model.provenance.unsourced == ()
    assert model.provenance.citations[0].url == "https://example.com/doc"


def test_plain_values_still_load_and_are_listed_as_unsourced(tmp_path):
    path = write(tmp_path, ring('"50 GB/s"'))
    assert load_model_file(path).provenance.unsourced == ("topology.bandwidth", "topology.latency")
    result = CliRunner().invoke(cli, ["model", "show", str(path)], catch_exceptions=False)
    assert result.exit_code == 0 and "unsourced: topology.bandwidth, topology.latency" in result.stdout


def test_an_nccl_latency_preset_is_sourced_and_a_cluster_keeps_its_nodes_sources(tmp_path):
    node = write(tmp_path, ring('{ value = "100 GB/s", source = "doc" }', '"nccl:simple:nvlink"'), "node.toml")
    model = load_model_file(node)
    assert model.provenance.unsourced == ()
    assert model.machine.link_latency.max() == pytest.approx(3.4e-6)
    assert any("nccl:simple:nvlink:ring" in s for s in model.machine.sources)
    cluster = load_model_file(write(tmp_path, f"""{SOURCES}
[topology]
kind = "cluster"
network_latency = {{ value = "1 us", source = "doc" }}
[[topology.groups]]
nodes = 2
node = "node.toml"
nic_bandwidth = {{ value = "400 Gbit/s", source = "doc" }}
nic_latency = "nccl:simple:net"
""", "c.toml"))
    assert cluster.provenance.unsourced == ()
    sources = cluster.machine.sources
    assert any(s.startswith("latency nccl:simple:net:ring") for s in sources)
    assert sum("node: latency nccl:simple:nvlink:ring" in s for s in sources) == 1, sources


def test_figures_refuse_a_model_faster_than_its_sources(tmp_path):
    fine = ring('"50 GB/s"', extra='[figures]\nscale_up = { value = "100 GB/s", per = "direction", source = "doc" }\n')
    assert load_model_file(write(tmp_path, fine)).figures.total.tolist() == [100e9] * 4
    fast = ring('"80 GB/s"', extra='[figures]\nscale_up = "100 GB/s"\n')
    with pytest.raises(InputError, match="figures: ring4 is faster than its sources: NPU npu0 sends 160 GB/s"):
        load_model_file(write(tmp_path, fast, "ring4.toml"))


@pytest.mark.parametrize("bandwidth, latency, field, message", [
    ('{ value = "50 GB/s", source = "nope" }', '"1 us"', "topology.bandwidth.source", r"no \[sources.nope\] table"),
    ('{ value = "50 GB/s", sorce = "doc" }', '"1 us"', "topology.bandwidth.sorce", "did you mean 'source'"),
    ('"50 GB/s"', '{ value = "1 us", estimate = true }', "topology.latency.note", "must say what it is based on"),
    ('"50 GB/s"', '{ value = "1 us", per = "direction" }', "topology.latency.per", "only bandwidths"),
    ('{ value = "50 GB/s", per = "both" }', '"1 us"', "topology.bandwidth.per", "one of direction, bidirectional"),
    ('{ value = "50", per = "bidirectional" }', '"1 us"', "topology.bandwidth.value", "needs a unit per second"),
])
def test_bad_sourced_values_name_the_field(tmp_path, bandwidth, latency, field, message):
    with pytest.raises(InputError, match=message) as info:
        load_model_file(write(tmp_path, ring(bandwidth, latency)))
    assert info.value.field == field and info.value.source.endswith("m.toml")


def test_a_source_needs_a_title(tmp_path):
    with pytest.raises(InputError) as info:
        load_model_file(write(tmp_path, '[sources.doc]\nurl = "x"\n' + ring('"1 GB/s"').replace(SOURCES, "")))
    assert info.value.field == "sources.doc.title"


NODE = '[topology]\nkind = "nvswitch"\nn = 8\nbandwidth = "450 GB/s"\nlatency = "0.5 us"\n'
CLUSTER = '''[topology]
kind = "cluster"
network = "{network}"
network_latency = "1 us"
oversubscription = {ratio}
{extra}
[[topology.groups]]
nodes = 6
node = "node.toml"
nic_gpus = {nic_gpus}
nic_bandwidth = "400 Gbit/s"
nic_latency = "2 us"
'''


@pytest.mark.parametrize("text, field, message", [
    (CLUSTER.format(network="fat_tree", ratio=1, extra="nodes_per_leaf = 4", nic_gpus="[[0], [1]]"),
     "topology.nodes_per_leaf", "6 nodes do not fill leaves of 4 nodes"),
    (CLUSTER.format(network="rail", ratio=1, extra="", nic_gpus="[[0], [8]]"),
     "topology.groups[0].nic_gpus[1]", "GPU 8 does not exist"),
    (CLUSTER.format(network="rail", ratio=0.5, extra="", nic_gpus="[[0], [1]]"),
     "topology.oversubscription", "must be at least 1"),
    ('[topology]\nkind = "torus2d"\ndims = [4, 4]\nbandwidth = ["1 GB/s", "2 GB/s", "3 GB/s"]\nlatency = "1 us"\n',
     "topology.bandwidth", r"needs one value per dimension \(2\), got 3"),
])
def test_cli_bad_model_input_is_one_line_naming_file_and_field(tmp_path, text, field, message):
    write(tmp_path, NODE, "node.toml")
    path = write(tmp_path, text, "bad.toml")
    result = CliRunner().invoke(cli, ["model", "show", str(path)], catch_exceptions=False)
    assert result.exit_code == 2
    line = result.stderr.strip()
    assert "\n" not in line and line.startswith(f"optcoll: error: {path}: {field}: ")
    assert re.search(message, line)


def test_cli_nvidia_smi_matrix_that_is_not_square(tmp_path):
    path = write(tmp_path, "\tGPU0\tGPU1\tGPU2\tCPU Affinity\nGPU0\t X \tNV2\tSYS\t0-7\nGPU1\tNV2\t X \tSYS\t0-7\n",
                 "topo.txt")
    result = CliRunner().invoke(cli, ["model", "from-nvidia-smi", str(path), "--nvlink-bandwidth", "25 GB/s",
                                      "-o", str(tmp_path / "out.toml")], catch_exceptions=False)
    assert result.exit_code == 2 and not (tmp_path / "out.toml").exists()
    assert result.stderr.strip() == (f"optcoll: error: {path}: line 1: the matrix is not square: no row for GPU2")
