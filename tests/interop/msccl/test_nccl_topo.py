"""NCCL topology XML import on real files (their sources: data/nccl-topo/README.md), checked
against the catalog's sourced per-GPU figures for the same systems."""
from pathlib import Path

import pytest
from click.testing import CliRunner

from optcoll.cli.main import cli
from optcoll.errors import InputError
from optcoll.interop.nccl_topo import load_nccl_topo, nic_speeds
from optcoll.machines.catalog import load_machine

DATA = Path(__file__).parent / "data" / "nccl-topo"


def per_gpu_out(machine, gpu=0):
    return sum(float(machine.link_bandwidth[e]) for e in machine.out_links[gpu])


@pytest.mark.parametrize("name, catalog", [("rccl_topo_8p_940", "mi300x"), ("rccl_topo_8p_940vm", "mi300x"),
                                           ("ibm_cloud_h100_topo", "dgxh100")])
def test_real_dumps_match_the_catalogs_per_gpu_bandwidth(name, catalog):
    box, reference = load_nccl_topo(DATA / f"{name}.xml"), load_machine(catalog)
    assert box.num_npus == reference.num_npus == 8
    for g in range(8):
        assert per_gpu_out(box, g) == pytest.approx(per_gpu_out(reference, g))
    assert len(box.switches) == len(reference.switches)  # MI300X: a full mesh; H100: one NVSwitch node


def nvlink_out(machine, gpu=0):
    """What a GPU sends per direction over links to GPUs and NVSwitches (not NICs or rails)."""
    return sum(float(machine.link_bandwidth[e]) for e in machine.out_links[gpu]
               if "nvswitch" in machine.label(int(machine.link_dst[e])) or int(machine.link_dst[e]) < machine.num_npus)


@pytest.mark.parametrize("name, catalog, nvlink", [
    ("perlmutter_a100_nid001056", "perlmutter", 300e9),  # 4 A100s, 4 NVLink3 per pair, no NVSwitch
    ("vastai_hgx_h200_8x", "dgxh200", 450e9),  # 18 NVLink4 on four NVSwitches (4, 5, 5, 4)
    ("vastai_hgx_b200_8x", "dgxb200", 900e9),  # 18 NVLink5, the fabric collapsed to one target
])
def test_captured_dumps_match_the_catalogs_nvlink_per_gpu(name, catalog, nvlink):
    box, reference = load_nccl_topo(DATA / f"{name}.xml"), load_machine(catalog)
    assert box.num_npus == reference.num_npus // (16 if catalog == "perlmutter" else 1)
    for g in range(box.num_npus):
        assert nvlink_out(box, g) == pytest.approx(nvlink) == pytest.approx(nvlink_out(reference, g))


def test_perlmutter_dump_has_one_200_gbit_nic_per_gpu_as_the_catalog():
    # each <cpu> holds one GPU and one Slingshot NIC, on root ports of their own: the NIC serves
    # its CPU's GPU; 16 such nodes send what the catalog's Perlmutter sends per GPU (300 + 25 GB/s)
    path = DATA / "perlmutter_a100_nid001056.xml"
    assert nic_speeds(path.read_text()) == [200e9 / 8] * 4
    cluster, reference = load_nccl_topo(path, nodes=16), load_machine("perlmutter")
    assert cluster.num_npus == reference.num_npus == 64
    for g in range(64):
        assert per_gpu_out(cluster, g) == pytest.approx(per_gpu_out(reference, g)) == pytest.approx(325e9)


@pytest.mark.parametrize("name", ["vastai_hgx_h200_8x", "vastai_hgx_b200_8x"])
def test_rented_hgx_dumps_list_only_a_10_gbit_socket_nic_not_the_dgx_400_gbit_ones(name):
    # what the file says, not the catalog: the rented hosts' NCCL saw one 10 Gbit/s eth0 per
    # socket (no RDMA); a DGX H200/B200 has eight 400 Gbit/s ConnectX-7 (the rail models' 50 GB/s)
    path = DATA / f"{name}.xml"
    assert nic_speeds(path.read_text()) == [10e9 / 8] * 2
    two = load_nccl_topo(path, nodes=2)
    nic_links = [float(two.link_bandwidth[e]) for e in two.out_links[0] if "nic" in two.label(int(two.link_dst[e]))]
    assert nic_links == [10e9 / 8]
    assert 400e9 / 8 in {float(b) for b in load_machine("dgxh100-rail-2x8").link_bandwidth}


def test_mi300x_dump_is_the_catalogs_full_mesh_and_its_nics_are_400_gbit():
    box = load_nccl_topo(DATA / "rccl_topo_8p_940.xml")
    assert all(len(box.links_between(u, v)) == 1 for u in range(8) for v in range(8) if u != v)
    assert nic_speeds((DATA / "rccl_topo_8p_940.xml").read_text()) == [400e9 / 8] * 8
    two = load_nccl_topo(DATA / "rccl_topo_8p_940.xml", nodes=2)
    assert two.num_npus == 16 and any("per NIC and direction" in s for s in two.sources)


def test_h100_dump_counts_5_5_4_4_nvlinks_into_the_switches():
    box = load_nccl_topo(DATA / "ibm_cloud_h100_topo.xml")
    assert per_gpu_out(box) == pytest.approx(18 * 25e9)
    assert nic_speeds((DATA / "ibm_cloud_h100_topo.xml").read_text()) == [200e9 / 8] * 8


def test_a_generation_without_a_nominal_rate_is_refused_in_one_line():
    with pytest.raises(InputError, match=r"GPU generation \['gfx906'\] has no nominal link rate"):
        load_nccl_topo(DATA / "rccl_topo_8p_rome.xml")


@pytest.mark.parametrize("text, words", [
    ('<system version="1"><cpu numaid="0"><foo/></cpu></system>', "unknown element <foo> inside <cpu>"),
    ("<system><cpu", "not well-formed XML"),
    ('<algo name="x"/>', "the root element is <algo>"),
    ('<system><cpu numaid="0"><pci busid="0:1"><gpu rank="x" sm="90"/></pci></cpu></system>',
     "attribute rank='x' is not an integer"),
])
def test_bad_topology_files_are_one_line_exit_2(tmp_path, text, words):
    bad = tmp_path / "topo.xml"
    bad.write_text(text)
    run = CliRunner().invoke(cli, ["model", "from-nccl-topo", str(bad), "-o", str(tmp_path / "m.toml")])
    assert run.exit_code == 2
    lines = run.output.strip().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0] and words in lines[0]


def test_cli_writes_a_model_that_loads_back(tmp_path):
    out = tmp_path / "box.toml"
    run = CliRunner().invoke(cli, ["model", "from-nccl-topo", str(DATA / "ibm_cloud_h100_topo.xml"), "-o", str(out)])
    assert run.exit_code == 0, run.output
    assert "450 GB/s per GPU and direction" in run.output
    back = load_machine(str(out))
    assert per_gpu_out(back) == pytest.approx(450e9)
    assert "# source: link counts" in out.read_text()
