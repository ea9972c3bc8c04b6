"""The built-in catalog (issue 15's acceptance): every physical number cites a source, every model of
real hardware states its per-NPU figures and matches them exactly, no model admits a schedule
faster than its figures allow, and ``optcoll model show`` prints every source."""
from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from optcoll.bounds import best_lower_bound
from optcoll.cli.main import cli
from optcoll.collectives.builtins import make_collective
from optcoll.instances.instance import TimeModel
from optcoll.machines.catalog import load_model
from optcoll.machines.modelpaths import builtin_model_names
from optcoll.machines.figures import npu_bandwidth

NAMES = builtin_model_names()
#: Synthetic networks: their numbers define them (TACOS's regression figures, ASTRA-sim examples).
SYNTHETIC = {"astra_ring4_switch8", "fc4", "hetmesh5x5", "hypercube4", "hypercube6", "line4", "mesh3x3x3",
             "mesh5x5", "ring4", "ring8", "star4_sharp", "torus3x3x3", "torus4x4", "torus4x4x4", "torus8x8"}
GB = 1e9
#: Per-GPU scale-up bandwidth per direction as the vendors state it (NVLink ports x 25 GB/s for
#: NVLink 2-4, 18 x 50 GB/s for NVLink 5; AMD: 7 Infinity Fabric links x 64 GB/s).
VENDOR_SCALE_UP = {"dgx1": 150 * GB, "dgx1_nvlink_down": 150 * GB, "dgx2": 150 * GB, "nvswitch8": 300 * GB,
                   "dgxa100": 300 * GB, "cluster2x8": 300 * GB, "perlmutter": 300 * GB, "dgxh100": 450 * GB,
                   "dgxh200": 450 * GB, "dgxb200": 900 * GB, "gb200-nvl72": 900 * GB, "mi300x": 448 * GB,
                   "dgxh100-rail-2x8": 450 * GB, "dgxh100-rail-4x8": 450 * GB,
                   "dgxh100-rail-16x8": 450 * GB, "dgxh100-rail-64x8": 450 * GB}
CATALOG = {"dgxa100", "dgxh100", "dgxh200", "dgxb200", "gb200-nvl72", "mi300x", "tpuv4-cube", "tpuv5p-cube",
           "tpuv5e-16x16", "tpuv6e-16x16", "trn2", "perlmutter", "dgxh100-rail-2x8", "dgxh100-rail-4x8",
           "dgxh100-rail-16x8", "dgxh100-rail-64x8", "hetero-dgxa100-dgxh100-rail-2x8"}


def test_the_catalog_has_the_promised_machines():
    assert CATALOG <= set(NAMES) and SYNTHETIC <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_every_physical_number_cites_a_source(name):
    provenance = load_model(name).provenance
    assert provenance.unsourced == (), f"{name}: unsourced {provenance.unsourced}"
    for value in provenance.values:
        assert value.sources, f"{name}: {value.field} names no source"
        if value.estimate:
            assert value.note, f"{name}: {value.field} is an estimate without its basis"
        last_key = value.field.rsplit(".", 1)[-1].split("[")[0]
        if last_key.endswith("bandwidth") or value.field.startswith("figures."):
            assert value.per in ("direction", "bidirectional"), f"{name}: {value.field} says neither"
    used = {key for value in provenance.values for key in value.sources}
    assert used == {c.key for c in provenance.citations}, f"{name}: cited but unused or missing sources"


@pytest.mark.parametrize("name", sorted(set(NAMES) - SYNTHETIC))
def test_hardware_models_match_the_figures_of_their_sources(name):
    model = load_model(name)
    assert model.figures is not None, f"{name} states no per-NPU figures"
    egress, ingress = npu_bandwidth(model.machine)
    if name == "dgx1_nvlink_down":  # failed links: below the figures, never above
        assert (egress <= model.figures.total).all() and (egress < model.figures.total).any()
        return
    assert np.allclose(egress, model.figures.total, rtol=1e-12)
    assert np.allclose(ingress, model.figures.total, rtol=1e-12)


@pytest.mark.parametrize("name", sorted(VENDOR_SCALE_UP))
def test_per_gpu_scale_up_bandwidth_is_the_vendor_figure(name):
    model = load_model(name)
    egress, _ = npu_bandwidth(model.machine)
    assert np.allclose(model.figures.scale_up, VENDOR_SCALE_UP[name], rtol=1e-12)
    if name != "dgx1_nvlink_down":
        assert np.allclose(egress - model.figures.scale_out, VENDOR_SCALE_UP[name], rtol=1e-12)


def test_heterogeneous_cluster_gives_each_generation_its_own_figures():
    model = load_model("hetero-dgxa100-dgxh100-rail-2x8")
    assert model.figures.scale_up.tolist() == [300 * GB] * 8 + [450 * GB] * 8
    assert model.figures.scale_out.tolist() == [25 * GB] * 8 + [50 * GB] * 8


@pytest.mark.parametrize("name", sorted(set(NAMES) - SYNTHETIC))
def test_no_model_admits_an_allgather_faster_than_its_sources_allow(name):
    """bound >= (N-1)/N * M / (per-GPU ingress the sources give): no schedule on the model can beat
    what the hardware's own figures allow."""
    model = load_model(name)
    machine, size = model.machine, 2**30
    n = machine.num_npus
    bound = best_lower_bound(machine, make_collective("allgather", list(range(n)), size, 1), TimeModel())
    assert bound.value >= (n - 1) / n * size / float(model.figures.total.min()) * (1 - 1e-12)


@pytest.mark.parametrize("name", sorted(CATALOG | {"dgx1", "cluster2x8"}))
def test_model_show_prints_every_source(name):
    result = CliRunner().invoke(cli, ["model", "show", name], catch_exceptions=False)
    assert result.exit_code == 0
    provenance = load_model(name).provenance
    for citation in provenance.citations:
        assert f"[{citation.key}] {citation.title}" in result.stdout and citation.url in result.stdout
    assert "per-NPU bandwidth per direction" in result.stdout and "unsourced" not in result.stdout


def test_model_list_names_the_sources():
    result = CliRunner().invoke(cli, ["model", "list", "--json"], catch_exceptions=False)
    rows = {row["name"]: row for row in json.loads(result.stdout)}
    assert rows["dgxh100"]["sources"].startswith("NVIDIA Hopper Architecture")
    assert all(row["sources"] != "no sources cited" for row in rows.values())
