"""NCCL latency presets in model files: the number is NCCL's, and where it came from is shown."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from optcoll.cli.main import cli
from optcoll.errors import InputError
from optcoll.machines.modelfile import machine_from_dict
from optcoll.machines.nccl_latency import resolve

# Independent copy of NCCL 2.30.7 src/graph/tuning.cc hwLatencies rows used below (µs).
NVLINK_RING = {"ll": 0.6, "ll128": 1.9, "simple": 3.4}
NET_RING = {"ll": 2.7, "ll128": 4.0, "simple": 14.0}
NET_TREE = {"ll": 5.0, "ll128": 8.5, "simple": 14.0}


@pytest.mark.parametrize("proto", ["ll", "ll128", "simple"])
def test_presets_are_nccls_per_step_hardware_latencies(proto):
    assert resolve(f"nccl:{proto}:nvlink").seconds == pytest.approx(NVLINK_RING[proto] * 1e-6)
    assert resolve(f"nccl:{proto}:net").seconds == pytest.approx(NET_RING[proto] * 1e-6)
    assert resolve(f"NCCL:{proto.upper()}:net:tree").seconds == pytest.approx(NET_TREE[proto] * 1e-6)


@pytest.mark.parametrize("text, words", [
    ("nccl:simple", "nccl:PROTOCOL:HARDWARE"), ("nccl:fast:nvlink", "unknown NCCL protocol"),
    ("nccl:simple:infiniband", "unknown NCCL hardware"), ("nccl:ll:nvlink:nvls", "does not run nvls"),
    ("nccl:simple:nvlink:ring:x", "nccl:PROTOCOL:HARDWARE")])
def test_bad_presets_say_what_is_wrong(text, words):
    with pytest.raises(InputError, match=words):
        resolve(text)


def test_model_files_take_presets_for_any_latency_and_record_them():
    data = {"machine": {"name": "two"},
            "topology": {"kind": "multinode", "nodes": 2, "gpus_per_node": 2,
                         "nvlink_bandwidth": "450 GB/s", "nvlink_latency": "nccl:simple:nvlink",
                         "nic_bandwidth": "400 Gbit/s", "nic_latency": "nccl:simple:net"}}
    machine = machine_from_dict(data, "two.toml")
    assert sorted(set(machine.link_latency.tolist())) == pytest.approx([3.4e-6, 14e-6])
    assert len(machine.sources) == 2
    assert "topology.nvlink_latency" in machine.sources[0] and "tuning.cc" in machine.sources[0]
    with pytest.raises(InputError, match=r"two.toml: topology.nic_latency: .*unknown NCCL protocol"):
        machine_from_dict({**data, "topology": {**data["topology"], "nic_latency": "nccl:x:net"}},
                          "two.toml")


def test_instance_show_names_the_preset_and_its_source(tmp_path):
    (tmp_path / "m.toml").write_text('[topology]\nkind = "ring"\nn = 4\nbandwidth = "50 GB/s"\n'
                                     'latency = "nccl:ll128:nvlink"\n')
    (tmp_path / "i.toml").write_text('[instance]\nmachine = "m.toml"\ncollective = "allgather"\n'
                                     'size = "1 MiB"\n')
    out = CliRunner().invoke(cli, ["instance", "show", str(tmp_path / "i.toml")])
    assert out.exit_code == 0, out.output
    assert "nccl:ll128:nvlink:ring = 1.9 us" in out.output and "tuning.cc" in out.output
    shown = CliRunner().invoke(cli, ["model", "show", str(tmp_path / "m.toml")])
    assert "nccl:ll128:nvlink:ring = 1.9 us" in shown.output
