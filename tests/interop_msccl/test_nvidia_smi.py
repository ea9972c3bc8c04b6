"""Machines from ``nvidia-smi topo -m`` text (samples written for these tests)."""
from pathlib import Path

import numpy as np
import pytest

from optcoll.errors import InputError
from optcoll.interop.nvidia_smi import load_nvidia_smi, machine_from_nvidia_smi
from optcoll.machines.generators import DGX1_NVLINKS, dgx1

DATA = Path(__file__).parent / "data"
NV_BW, NV_LAT = 25e9, 0.7e-6


def multiplicity(machine, n=8):
    counts = np.zeros((n, n), dtype=int)
    for u, v in zip(machine.link_src.tolist(), machine.link_dst.tolist()):
        if u < n and v < n:
            counts[u, v] += 1
    return counts


def test_dgx1_sample_is_the_dgx1_hybrid_cube_mesh():
    m = load_nvidia_smi(DATA / "nvidia_smi_dgx1.txt", nvlink_bandwidth=NV_BW, nvlink_latency=NV_LAT)
    assert m.num_npus == 8 and m.switches == () and m.name == "nvidia_smi_dgx1"
    assert m.npu_labels == tuple(f"GPU{i}" for i in range(8))
    assert multiplicity(m).tolist() == [list(row) for row in DGX1_NVLINKS]
    ref = dgx1(NV_BW, NV_LAT)  # same links in the same order as the built-in generator
    for column in ("link_src", "link_dst", "link_latency", "link_bandwidth"):
        assert np.array_equal(getattr(m, column), getattr(ref, column))


def test_dgx_a100_sample_has_twelve_nvlinks_between_every_pair():
    text = (DATA / "nvidia_smi_dgx_a100.txt").read_text()
    m = machine_from_nvidia_smi(text, nvlink_bandwidth="25 GB/s", nvlink_latency="700 ns")
    counts = multiplicity(m)
    assert (counts == 12 * (1 - np.eye(8, dtype=int))).all()
    assert m.num_links == 8 * 7 * 12
    assert set(m.link_bandwidth.tolist()) == {25e9} and np.allclose(m.link_latency, 7e-7)


def test_pcie_paths_join_a_host_switch_when_asked():
    m = load_nvidia_smi(DATA / "nvidia_smi_dgx1.txt", nvlink_bandwidth=NV_BW, nvlink_latency=NV_LAT,
                        pcie_bandwidth="16 GB/s", pcie_latency="1 us")
    assert m.num_npus == 8 and [s.label for s in m.switches] == ["pcie"]
    host = 8
    for g in range(8):
        assert len(m.links_between(g, host)) == 1 and len(m.links_between(host, g)) == 1
    assert m.link(m.links_between(0, host)[0]).bandwidth == 16e9
    assert m.hop_counts()[0, 5] == 2  # no NVLink between GPU0 and GPU5: through the host


def _sample(rows, header="\tGPU0\tGPU1\tGPU2\tCPU Affinity"):
    return "\n".join([header, *rows, "", "Legend:", "  X = Self"]) + "\n"


def test_errors_name_the_line():
    asym = _sample(["GPU0\t X\tNV2\tSYS\t0-7", "GPU1\tNV1\t X\tNV1\t0-7", "GPU2\tSYS\tNV1\t X\t0-7"])
    with pytest.raises(InputError) as info:
        machine_from_nvidia_smi(asym, nvlink_bandwidth=NV_BW, nvlink_latency=NV_LAT)
    assert info.value.field == "line 3" and "row GPU1 says NV1 to GPU0, but row GPU0 says NV2" in str(info.value)
    bad = _sample(["GPU0\t X\tNV2\tSYS\t0-7", "GPU1\tNV2\t X\tQPI\t0-7", "GPU2\tSYS\tQPI\t X\t0-7"])
    with pytest.raises(InputError, match="line 3: row GPU1, column GPU2: unknown connection 'QPI'"):
        machine_from_nvidia_smi(bad, nvlink_bandwidth=NV_BW, nvlink_latency=NV_LAT)
    short = _sample(["GPU0\t X\tNV2\tSYS\t0-7", "GPU1\tNV2\t X", "GPU2\tSYS\tSYS\t X\t0-7"])
    with pytest.raises(InputError, match="line 3: row GPU1 has 2 entries, expected at least 3"):
        machine_from_nvidia_smi(short, nvlink_bandwidth=NV_BW, nvlink_latency=NV_LAT)
    diag = _sample(["GPU0\tNV1\tNV2\tSYS\t0-7", "GPU1\tNV2\t X\tSYS\t0-7", "GPU2\tSYS\tSYS\t X\t0-7"])
    with pytest.raises(InputError, match="line 2: row GPU0, column GPU0: 'NV1' .a GPU is X to itself"):
        machine_from_nvidia_smi(diag, nvlink_bandwidth=NV_BW, nvlink_latency=NV_LAT)
    missing = _sample(["GPU0\t X\tNV2\tSYS\t0-7", "GPU1\tNV2\t X\tSYS\t0-7"])
    with pytest.raises(InputError, match="no row for GPU2"):
        machine_from_nvidia_smi(missing, nvlink_bandwidth=NV_BW, nvlink_latency=NV_LAT)
    with pytest.raises(InputError, match="no topology matrix found"):
        machine_from_nvidia_smi("No devices were found\n", nvlink_bandwidth=NV_BW, nvlink_latency=NV_LAT)
    with pytest.raises(InputError, match="must be positive"):
        machine_from_nvidia_smi(_sample(["GPU0\t X\tNV2\tSYS\t0-7", "GPU1\tNV2\t X\tSYS\t0-7",
                                         "GPU2\tSYS\tSYS\t X\t0-7"]), nvlink_bandwidth=0.0,
                                nvlink_latency=NV_LAT)


def test_a_small_pcie_only_box_without_pcie_bandwidth_has_no_links():
    text = _sample(["GPU0\t X\tPHB\tSYS\t0-7", "GPU1\tPHB\t X\tSYS\t0-7", "GPU2\tSYS\tSYS\t X\t8-15"])
    m = machine_from_nvidia_smi(text, nvlink_bandwidth=NV_BW, nvlink_latency=NV_LAT)
    assert m.num_npus == 3 and m.num_links == 0
    m = machine_from_nvidia_smi(text, nvlink_bandwidth=NV_BW, nvlink_latency=NV_LAT, pcie_bandwidth=12e9)
    assert m.num_links == 6 and m.description.endswith("through a host switch")
