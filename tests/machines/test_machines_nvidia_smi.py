"""Machines from ``nvidia-smi topo -m`` output: real outputs (tests/machines/data/nvidia_smi, sources
in its README) give their GPUs the vendor's NVLink bandwidth; PCIe trees, NIC affinity, clusters;
bad input is one line naming the file and field."""
from pathlib import Path

import numpy as np
import pytest

from optcoll.bounds import best_lower_bound
from optcoll.collectives.builtins import make_collective
from optcoll.errors import InputError
from optcoll.interop.nvidia_smi import MAX_GPUS, load_nvidia_smi, machine_from_nvidia_smi, read_topology
from optcoll.instances.instance import TimeModel
from optcoll.machines.figures import npu_bandwidth
from optcoll.machines.generators import DGX1_NVLINKS, dgx1

REAL = Path(__file__).parent / "data" / "nvidia_smi"
HANDWRITTEN = Path(__file__).parents[1] / "interop" / "msccl" / "data"
NVLINK = 25e9  # NVLink 2, 3 and 4: 25 GB/s per link and direction
GB = 1e9
GiB = 2**30


def load(name: str, **options):
    return load_nvidia_smi(REAL / name, nvlink_bandwidth=NVLINK, nvlink_latency=0.5e-6, **options)


def multiplicity(machine, n=8):
    counts = np.zeros((n, n), dtype=int)
    for u, v in zip(machine.link_src.tolist(), machine.link_dst.tolist()):
        if u < n and v < n:
            counts[u, v] += 1
    return counts


# Vendor per-GPU NVLink bandwidth per direction: V100 6 x 25 GB/s (300 GB/s both ways), A100
# 12 x 25 (600), H100 18 x 25 (900), A800 8 x 25 (400 GB/s both ways).
@pytest.mark.parametrize("name, switched, per_gpu", [
    ("dgx1_v100.txt", False, 150 * GB), ("dgx_a100.txt", True, 300 * GB),
    ("h100_8gpu.txt", True, 450 * GB), ("a800_8gpu_crlf.txt", True, 200 * GB)])
def test_real_outputs_give_every_gpu_the_vendor_nvlink_bandwidth(name, switched, per_gpu):
    machine = load(name)
    egress, ingress = npu_bandwidth(machine)
    assert machine.num_npus == 8
    assert np.allclose(egress, per_gpu) and np.allclose(ingress, per_gpu)
    assert [s.label for s in machine.switches] == (["nvswitch"] if switched else [])


def test_dgx_a100_is_an_nvswitch_fabric_not_twelve_links_per_pair():
    """The bug of issue 15: NV12 on every pair read as 12 direct links gave each GPU 2.1 TB/s."""
    machine = load("dgx_a100.txt")
    assert machine.num_links == 16 and set(machine.link_bandwidth.tolist()) == {12 * NVLINK}
    assert multiplicity(machine).sum() == 0  # no GPU-to-GPU link at all
    allgather = make_collective("allgather", list(range(8)), 1 * GiB, 1)
    bound = best_lower_bound(machine, allgather, TimeModel()).value
    assert bound >= 7 / 8 * GiB / (300 * GB)


def test_real_dgx1_keeps_its_hybrid_cube_mesh():
    machine = load("dgx1_v100.txt")
    counts = multiplicity(machine)
    assert (counts == counts.T).all() and (counts.sum(axis=1) == 6).all()
    assert counts[0].tolist() == [0, 1, 1, 2, 2, 0, 0, 0]  # as its row: NV1 NV1 NV2 NV2 SYS SYS SYS


def test_handwritten_dgx1_sample_is_the_generator_dgx1():
    machine = load_nvidia_smi(HANDWRITTEN / "nvidia_smi_dgx1.txt", nvlink_bandwidth=NVLINK, nvlink_latency=7e-7)
    assert machine.npu_labels == tuple(f"GPU{i}" for i in range(8)) and machine.name == "nvidia_smi_dgx1"
    assert multiplicity(machine).tolist() == [list(row) for row in DGX1_NVLINKS]
    ref = dgx1(NVLINK, 7e-7)  # same links in the same order as the built-in generator
    for column in ("link_src", "link_dst", "link_latency", "link_bandwidth"):
        assert np.array_equal(getattr(machine, column), getattr(ref, column))


def test_pcie_tree_has_a_switch_per_pcie_tree_and_a_host_per_socket():
    machine = load("pcie_8gpu.txt", pcie_bandwidth=32 * GB, pcie_latency=1e-6)
    assert sorted(s.label for s in machine.switches) == ["cpu0", "cpu1", "pcie0", "pcie1"]
    hops = machine.hop_counts()
    assert hops[0, 1] == 2 and hops[0, 3] == 2  # PIX and PXB: through their PCIe switch
    assert hops[0, 4] == 5  # SYS: switch, socket, socket, switch
    assert set(machine.link_bandwidth.tolist()) == {32 * GB}
    dgx1_pcie = load("dgx1_pcie_view.txt", pcie_bandwidth=16 * GB)  # DGX-1's four PLX switches
    assert sorted(s.label for s in dgx1_pcie.switches) == ["cpu0", "cpu1", "pcie0", "pcie1", "pcie2", "pcie3"]
    assert dgx1_pcie.hop_counts()[0, 2] == 4  # PHB: up to the CPU and down another switch


def test_nics_place_nvlink_joined_gpus_in_the_pcie_tree():
    machine = load("dgx_a100.txt", pcie_bandwidth=32 * GB)
    labels = {s.label for s in machine.switches}
    assert {"pcie0", "pcie1", "pcie2", "pcie3"} <= labels  # GPU pairs behind a PCIe switch with 2 NICs
    h100 = load("h100_8gpu.txt", pcie_bandwidth=64 * GB)  # no NIC columns: one host switch
    assert [s.label for s in h100.switches] == ["nvswitch", "cpu0"]


def test_nic_affinity_is_the_closest_pcie_path():
    assert read_topology((REAL / "dgx_a100.txt").read_text()).nic_affinity() == (
        (0, 1), (0, 1), (2, 3), (2, 3), (), (), (4, 5), (4, 5), (6, 7), (6, 7), (), ())
    a800 = read_topology((REAL / "a800_8gpu_crlf.txt").read_text())
    assert a800.nics == ("mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3")  # names from the NIC legend
    assert a800.nic_affinity() == ((1,), (3,), (7,), (7,))


def test_imported_box_becomes_a_rail_cluster_through_its_nics():
    machine = load("dgx_a100.txt", nodes=2, nic_bandwidth="200 Gbit/s", nic_latency="2 us",
                   network_latency="1 us", pcie_bandwidth=32 * GB)
    assert machine.num_npus == 16
    labels = [s.label for s in machine.switches]
    assert [x for x in labels if x.startswith("rail")] == [f"rail{r}" for r in range(8)]
    assert "spine" in labels and "n1.nic7" in labels  # NIC shared by GPUs 6, 7: a node of its own
    nic = labels.index("n1.nic7") + machine.num_npus
    assert {machine.label(int(v)) for v in machine.link_src[machine.in_links[nic]]} == {"n1g6", "n1g7", "rail7"}


def test_nvls_only_on_an_nvswitch_fabric():
    assert all(s.multicast and s.reduce for s in load("h100_8gpu.txt", nvls=True).switches)
    with pytest.raises(InputError, match="NVLS needs an NVSwitch fabric"):
        load("dgx1_v100.txt", nvls=True)


def _matrix(rows, header="\tGPU0\tGPU1\tGPU2\tCPU Affinity"):
    return "\n".join([header, *rows, "", "Legend:", "  X = Self"]) + "\n"


def test_a_pcie_only_box_needs_the_pcie_bandwidth(tmp_path):
    with pytest.raises(InputError) as info:
        load("pcie_8gpu.txt")
    assert info.value.field == "--pcie-bandwidth" and "pcie_8gpu.txt" in str(info.value)
    bridged = _matrix(["GPU0\t X\tNV4\tSYS\t0-7", "GPU1\tNV4\t X\tSYS\t0-7", "GPU2\tSYS\tSYS\t X\t0-7"])
    with pytest.raises(InputError, match="NVLink does not join every GPU"):
        machine_from_nvidia_smi(bridged, nvlink_bandwidth=NVLINK, nvlink_latency=0.0)
    assert machine_from_nvidia_smi(bridged, nvlink_bandwidth=NVLINK, nvlink_latency=0.0,
                                   pcie_bandwidth=GB).num_npus == 3


def test_errors_name_the_line():
    asym = _matrix(["GPU0\t X\tNV2\tSYS\t0-7", "GPU1\tNV1\t X\tNV1\t0-7", "GPU2\tSYS\tNV1\t X\t0-7"])
    with pytest.raises(InputError) as info:
        machine_from_nvidia_smi(asym, nvlink_bandwidth=NVLINK, nvlink_latency=0.0)
    assert info.value.field == "line 3" and "row GPU1 says NV1 to GPU0, but row GPU0 says NV2" in str(info.value)
    bad = _matrix(["GPU0\t X\tNV2\tSYS\t0-7", "GPU1\tNV2\t X\tQPI\t0-7", "GPU2\tSYS\tQPI\t X\t0-7"])
    with pytest.raises(InputError, match="line 3: row GPU1, column GPU2: unknown connection 'QPI'"):
        machine_from_nvidia_smi(bad, nvlink_bandwidth=NVLINK, nvlink_latency=0.0)
    short = _matrix(["GPU0\t X\tNV2\tSYS\t0-7", "GPU1\tNV2\t X", "GPU2\tSYS\tSYS\t X\t0-7"])
    with pytest.raises(InputError, match="line 3: row GPU1 has 2 entries, expected at least 3"):
        machine_from_nvidia_smi(short, nvlink_bandwidth=NVLINK, nvlink_latency=0.0)
    diag = _matrix(["GPU0\tNV1\tNV2\tSYS\t0-7", "GPU1\tNV2\t X\tSYS\t0-7", "GPU2\tSYS\tSYS\t X\t0-7"])
    with pytest.raises(InputError, match="line 2: row GPU0, column GPU0: 'NV1' .a GPU is X to itself"):
        machine_from_nvidia_smi(diag, nvlink_bandwidth=NVLINK, nvlink_latency=0.0)
    with pytest.raises(InputError, match="no topology matrix found"):
        machine_from_nvidia_smi("No devices were found\n", nvlink_bandwidth=NVLINK, nvlink_latency=0.0)
    with pytest.raises(InputError, match="must be positive"):
        machine_from_nvidia_smi(asym, nvlink_bandwidth=0.0, nvlink_latency=0.0)


def test_a_matrix_that_is_not_square_is_one_line(tmp_path):
    missing = _matrix(["GPU0\t X\tNV2\tSYS\t0-7", "GPU1\tNV2\t X\tSYS\t0-7"])
    with pytest.raises(InputError, match="line 1: the matrix is not square: no row for GPU2"):
        machine_from_nvidia_smi(missing, nvlink_bandwidth=NVLINK, nvlink_latency=0.0, source="topo.txt")
    extra = _matrix(["GPU0\t X\tNV2\tSYS\t0-7", "GPU1\tNV2\t X\tSYS\t0-7", "GPU2\tSYS\tSYS\t X\t0-7",
                     "GPU3\tSYS\tSYS\tSYS\t X\t0-7"])
    with pytest.raises(InputError, match="line 5: the matrix is not square: row GPU3 has no column"):
        machine_from_nvidia_smi(extra, nvlink_bandwidth=NVLINK, nvlink_latency=0.0, source="topo.txt")


def test_more_nvlinks_than_a_gpu_has_is_refused():
    mesh = _matrix(["GPU0\t X\tNV10\tNV10\t0-7", "GPU1\tNV10\t X\tNV10\t0-7", "GPU2\tNV10\tNV10\t X\t0-7"])
    assert machine_from_nvidia_smi(mesh, nvlink_bandwidth=NVLINK, nvlink_latency=0.0).switches  # 20 > 18
    pair = _matrix(["GPU0\t X\tNV20\t0-7", "GPU1\tNV20\t X\t0-7"], header="\tGPU0\tGPU1\tCPU Affinity")
    with pytest.raises(InputError, match="GPU0 would have 20 NVLinks, but no GPU has more than 18"):
        machine_from_nvidia_smi(pair, nvlink_bandwidth=NVLINK, nvlink_latency=0.0)


def test_a_degraded_gpu_keeps_its_own_link_count():
    rows = ["GPU0\t X\tNV11\tNV11\tNV11\t0-7", "GPU1\tNV11\t X\tNV12\tNV12\t0-7",
            "GPU2\tNV11\tNV12\t X\tNV12\t0-7", "GPU3\tNV11\tNV12\tNV12\t X\t0-7"]
    machine = machine_from_nvidia_smi(_matrix(rows, "\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity"),
                                      nvlink_bandwidth=NVLINK, nvlink_latency=0.0)
    assert npu_bandwidth(machine)[0].tolist() == [11 * NVLINK, 12 * NVLINK, 12 * NVLINK, 12 * NVLINK]


def test_a_2000_gpu_matrix_is_refused_at_its_header():
    """Such a matrix used to take minutes; no real box has more than 16 GPUs (DGX-2)."""
    n = 2000
    header = "\t" + "\t".join(f"GPU{i}" for i in range(n)) + "\tCPU Affinity"
    rows = ["\t".join([f"GPU{i}"] + ["X" if j == i else "NV1" for j in range(n)]) for i in range(n)]
    with pytest.raises(InputError) as info:
        machine_from_nvidia_smi("\n".join([header, *rows]), nvlink_bandwidth=NVLINK, nvlink_latency=0.0,
                                source="big.txt")
    assert info.value.field == "line 1" and f"at most {MAX_GPUS} GPUs" in str(info.value)


def test_cli_writes_the_model_and_says_what_it_read(tmp_path):
    from click.testing import CliRunner

    from optcoll.cli.main import cli
    from optcoll.machines.catalog import load_machine

    out = tmp_path / "a100.toml"
    result = CliRunner().invoke(cli, ["model", "from-nvidia-smi", str(REAL / "dgx_a100.txt"), "--nvlink-bandwidth",
                                      "25 GB/s", "-o", str(out)], catch_exceptions=False)
    assert result.exit_code == 0 and "NVSwitch fabric, 12 NVLinks of 25 GB/s per GPU" in result.stdout
    assert np.allclose(npu_bandwidth(load_machine(str(out)))[0], 300 * GB)
    args = ["model", "from-nvidia-smi", str(REAL / "h100_8gpu.txt"), "--nvlink-bandwidth", "25 GB/s", "--nodes", "2",
            "-o", str(tmp_path / "c.toml")]
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 2 and "no NIC of this box is near a GPU" in result.stderr
    args[2] = str(REAL / "a800_8gpu_crlf.txt")
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 2 and result.stderr.strip() == (
        "optcoll: error: --nic-bandwidth: missing: the boxes of a multi-node cluster reach each other through NICs")
    result = CliRunner().invoke(cli, [*args, "--nic-bandwidth", "200 Gbit/s"], catch_exceptions=False)
    machine = load_machine(str(tmp_path / "c.toml"))
    assert result.exit_code == 0 and machine.num_npus == 16
    assert sum(1 for s in machine.switches if s.label.startswith("rail")) == 4  # the box's 4 NICs
