"""Every real ``nvidia-smi topo -m`` output in tests/machines/data/nvidia_smi (sources in its README)
either becomes a physically right model or is refused in one line naming the file: one test per
file, so adding a file adds a test (and fails until its expectation is written here)."""
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from optcoll.cli.main import cli
from optcoll.errors import InputError
from optcoll.interop.nvidia_smi import GPU_NVLINK, load_nvidia_smi, machine_from_nvidia_smi
from optcoll.machines.figures import npu_bandwidth

REAL = Path(__file__).parent / "data" / "nvidia_smi"
FILES = sorted(p.name for p in REAL.glob("*.txt"))
GB = 1e9
PCIE = 32 * GB  # PCIe 4.0 x16 per direction


@dataclass(frozen=True)
class Expect:
    """What a file gives: the GPU model named (None: PCIe only), each GPU's NVLink bandwidth per
    direction (vendor: links x per-link), whether it is an NVSwitch fabric, and the error line
    without the GPU or the PCIe bandwidth (None: it loads); ``refused``: the error line whatever
    the options (a truncated paste)."""

    gpu: str | None
    nvlink_per_gpu: tuple[float, ...] | float = 0.0
    fabric: bool = False
    bare_error: str | None = None
    refused: str | None = None


NO_PCIE = "--pcie-bandwidth: no NVLink joins any two GPUs"
EXPECT = {
    "dgx1_v100.txt": Expect("V100", 6 * 25 * GB),
    "dgx_a100.txt": Expect("A100", 12 * 25 * GB, fabric=True),
    "dgx1_pcie_view.txt": Expect(None, bare_error=NO_PCIE),
    "h100_8gpu.txt": Expect("H100", 18 * 25 * GB, fabric=True),
    "a800_8gpu_crlf.txt": Expect("A800", 8 * 25 * GB, fabric=True),
    "pcie_8gpu.txt": Expect(None, bare_error=NO_PCIE),
    # 4-GPU HGX H100: 6 direct links per pair, 18 per GPU; without the GPU it could be 4 GPUs of a DGX-2.
    "h100_4gpu_nv6_mesh.txt": Expect("H100", 18 * 25 * GB,
                                     bare_error="--gpu: NV6 on every pair of 4 GPUs is either 18 direct NVLinks "
                                                "per GPU (a 4-GPU board) or 6 per GPU into an NVSwitch fabric"),
    # Two bridged GPUs and one on PCIe only (the GPU is not named in the issue: 25 GB/s per link given).
    "nv4_pair_plus_pcie_gpu.txt": Expect("25 GB/s", (4 * 25 * GB, 4 * 25 * GB, 0.0),
                                         bare_error="--pcie-bandwidth: NVLink does not join every GPU"),
    "a100_2gpu_nv12_mlx5_columns.txt": Expect("A100", 12 * 25 * GB),
    "rtx4090_5gpu_pcie.txt": Expect(None, bare_error=NO_PCIE),
    "rtx5090_2gpu_phb_tabs.txt": Expect(None, bare_error=NO_PCIE),
    "rtx4090_8gpu_sys_nics.txt": Expect(None, bare_error=NO_PCIE),
    "rtx4090_8gpu_node_sys.txt": Expect(None, bare_error=NO_PCIE),
    "2gpu_node_indented_wrapped.txt": Expect(None, bare_error=NO_PCIE),
    "l40s_4gpu_nics.txt": Expect(None, bare_error=NO_PCIE),
    "h800_8gpu_truncated.txt": Expect("H800", refused="line 9: row GPU7 has 4 entries, expected at least 17"),
}


def _loads(name: str) -> bool:
    return EXPECT.get(name, Expect(None)).refused is None


def _gpu_options(expect: Expect) -> dict:
    if expect.gpu is None:
        return {}
    return {"gpu": expect.gpu} if expect.gpu in GPU_NVLINK else {"nvlink_bandwidth": expect.gpu}


@pytest.mark.parametrize("name", FILES)
def test_every_real_output_has_an_expectation(name):
    assert name in EXPECT, f"{name}: add what it must give to EXPECT"


@pytest.mark.parametrize("name", [f for f in FILES if EXPECT.get(f, Expect(None)).gpu and _loads(f)])
def test_nvlinks_are_the_vendor_bandwidth_of_that_gpu(name):
    expect = EXPECT[name]
    machine = load_nvidia_smi(REAL / name, nvlink_latency=0.5e-6, pcie_bandwidth=PCIE,
                              **_gpu_options(expect))
    egress, ingress = npu_bandwidth(machine)
    wanted = np.broadcast_to(np.asarray(expect.nvlink_per_gpu, dtype=float), egress.shape)
    assert np.allclose(egress, wanted + PCIE) and np.allclose(ingress, wanted + PCIE)  # NVLink + one PCIe uplink
    assert ("nvswitch" in [s.label for s in machine.switches]) == expect.fabric
    if expect.bare_error is None or expect.bare_error.startswith("--gpu"):  # NVLink alone joins every GPU
        nvlink_only = load_nvidia_smi(REAL / name, nvlink_latency=0.5e-6, **_gpu_options(expect))
        assert np.allclose(npu_bandwidth(nvlink_only)[0], wanted)


@pytest.mark.parametrize("name", [f for f in FILES if EXPECT.get(f, Expect("")).gpu is None and _loads(f)])
def test_pcie_only_boxes_are_no_faster_than_one_pcie_link_per_gpu(name):
    machine = load_nvidia_smi(REAL / name, nvlink_latency=0.0, pcie_bandwidth=PCIE)
    egress, ingress = npu_bandwidth(machine)
    assert np.allclose(egress, PCIE) and np.allclose(ingress, PCIE)
    assert set(machine.link_bandwidth.tolist()) == {PCIE}
    assert all(not s.label.startswith("nvswitch") for s in machine.switches)


@pytest.mark.parametrize("name", [f for f in FILES if EXPECT.get(f, Expect(None)).bare_error])
def test_without_the_missing_option_the_error_is_one_line_naming_the_file(name):
    expect = EXPECT[name]
    options = {"nvlink_bandwidth": "25 GB/s"} if expect.bare_error.startswith("--gpu") else _gpu_options(expect)
    with pytest.raises(InputError) as info:
        load_nvidia_smi(REAL / name, nvlink_latency=0.0, **options)
    text = str(info.value)
    assert "\n" not in text and name in text and expect.bare_error in text


@pytest.mark.parametrize("name", [f for f in FILES if not _loads(f)])
def test_a_truncated_paste_is_one_line_naming_the_file_and_row(name):
    expect = EXPECT[name]
    with pytest.raises(InputError) as info:
        load_nvidia_smi(REAL / name, nvlink_latency=0.0, pcie_bandwidth=PCIE, **_gpu_options(expect))
    assert "\n" not in str(info.value) and f"{REAL / name}: {expect.refused}" in str(info.value)


@pytest.mark.parametrize("name", FILES)
def test_cli_exits_0_or_2_with_one_line_never_a_traceback(name, tmp_path):
    out = tmp_path / "m.toml"
    result = CliRunner().invoke(cli, ["model", "from-nvidia-smi", str(REAL / name), "-o", str(out)])
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert result.exit_code in (0, 2)
    if result.exit_code == 2:
        assert result.stderr.count("\n") == 1 and result.stderr.startswith(f"optcoll: error: {REAL / name}")
        assert not out.exists()


def _matrix(rows: list[str], n: int) -> str:
    header = "\t" + "\t".join(f"GPU{i}" for i in range(n)) + "\tCPU Affinity"
    return "\n".join([header, *rows, "", "Legend:"]) + "\n"


def test_a_gpu_whose_nvlinks_are_down_stays_off_the_fabric():
    """As in vllm-project/vllm#16336 (8 x B200, GPU2 showing NODE/SYS to every GPU): the seven
    others are an NVSwitch fabric of 18 links each, GPU2 reaches them over PCIe only."""
    rows = []
    for i in range(4):
        cells = ["X" if j == i else ("NODE" if 2 in (i, j) else "NV18") for j in range(4)]
        rows.append("\t".join([f"GPU{i}", *cells, "0-55"]))
    text = _matrix(rows, 4)
    with pytest.raises(InputError, match="NVLink does not join every GPU"):
        machine_from_nvidia_smi(text, gpu="B200", nvlink_latency=0.0)
    machine = machine_from_nvidia_smi(text, gpu="B200", nvlink_latency=0.0, pcie_bandwidth=64 * GB)
    assert np.allclose(npu_bandwidth(machine)[0], [18 * 50 * GB + 64 * GB] * 2 + [64 * GB] + [18 * 50 * GB + 64 * GB])
    assert [s.label for s in machine.switches][0] == "nvswitch"


def test_three_gpus_of_a_switched_box_are_not_taken_for_a_direct_mesh():
    """A VM given 3 of a box's 8 A800s sees NV8 on every pair: read as direct links that would be
    16 links (400 GB/s) per GPU, twice what an A800 has."""
    rows = ["\t".join([f"GPU{i}", *("X" if j == i else "NV8" for j in range(3)), "0-7"]) for i in range(3)]
    text = _matrix(rows, 3)
    with pytest.raises(InputError, match="--gpu: NV8 on every pair of 3 GPUs is either 16 direct"):
        machine_from_nvidia_smi(text, nvlink_bandwidth="25 GB/s", nvlink_latency=0.0)
    a800 = machine_from_nvidia_smi(text, gpu="A800", nvlink_latency=0.0)
    assert np.allclose(npu_bandwidth(a800)[0], 8 * 25 * GB) and a800.switches[0].label == "nvswitch"
    by_count = machine_from_nvidia_smi(text, nvlink_bandwidth="25 GB/s", nvlinks_per_gpu=8, nvlink_latency=0.0)
    assert np.allclose(npu_bandwidth(by_count)[0], 8 * 25 * GB)
    with pytest.raises(InputError, match="GPU0 would have 8 NVLinks, but this GPU has 6"):
        machine_from_nvidia_smi(text, gpu="V100", nvlink_latency=0.0)  # no V100 shows NV8


def test_gpu_table_is_per_link_and_direction():
    """Datasheet totals are bidirectional over all links: H100 900 GB/s, B200 1.8 TB/s, A800/H800 400 GB/s."""
    total = {"V100": 300, "A100": 600, "A800": 400, "H100": 900, "H200": 900, "H800": 400, "H20": 900,
             "B200": 1800, "B300": 1800, "GB200": 1800}
    assert {k: round(2 * g.links * g.bandwidth / GB) for k, g in GPU_NVLINK.items()} == total
    with pytest.raises(InputError, match="--gpu: unknown GPU 'X9'"):
        machine_from_nvidia_smi(_matrix([], 1), gpu="X9", nvlink_latency=0.0)
