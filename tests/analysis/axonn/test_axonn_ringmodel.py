"""AxoNN's ring model: closed forms, the placement-aware sharing rule, per-layer totals."""
from __future__ import annotations

import pytest

from optcoll.analysis.axonn.cluster import Cluster
from optcoll.analysis.axonn.grid import DIMS, ParallelGrid, configurations
from optcoll.analysis.axonn.layer import AG, AR, RS, TransformerLayer, infeasible, layer_calls
from optcoll.analysis.axonn.ranking import evaluate
from optcoll.analysis.axonn.ringmodel import group_bandwidths, ring_time
from optcoll.errors import InputError

GB = 1e9


def cluster(nodes: int, gpn: int, **kw) -> Cluster:
    args = dict(nvlink_bandwidth=300 * GB, nvlink_latency=0.5e-6, nic_bandwidth=25 * GB,
                nic_latency=2e-6)
    args.update(kw)
    return Cluster(nodes, gpn, **args)


@pytest.mark.parametrize("p, size, beta", [(2, 1e6, 10 * GB), (4, 64 * 2**20, 25 * GB), (7, 3.5e8, 300 * GB)])
def test_ring_times_are_the_closed_forms(p, size, beta):
    assert ring_time(AG, p, size, beta) == pytest.approx((p - 1) / p * size / beta, rel=1e-15)
    assert ring_time(RS, p, size, beta) == pytest.approx((p - 1) / p * size / beta, rel=1e-15)
    assert ring_time(AR, p, size, beta) == pytest.approx(2 * (p - 1) / p * size / beta, rel=1e-15)
    assert ring_time(AR, 1, size, beta) == 0.0
    with pytest.raises(InputError, match="kind"):
        ring_time("alltoall", p, size, beta)


def test_node_injection_counts_nics_and_shared_pcie():
    assert cluster(2, 4).node_injection_bandwidth == 100 * GB
    assert cluster(2, 8, gpus_per_nic=2).node_injection_bandwidth == 100 * GB
    assert cluster(2, 8, gpus_per_nic=2, pcie_bandwidth=10 * GB).node_injection_bandwidth == 80 * GB


@pytest.mark.parametrize("grid", configurations(32), ids=lambda g: g.label())
def test_axonn_sharing_is_megatron_axonns_placement_aware_model(grid):
    """Megatron-AxoNN's comm_model (placement-aware, theoretical): a group of p GPUs at stride ip
    sees the intra-node bandwidth when ip·p ≤ GPUs per node, else node bandwidth / min(GPUs per
    node, ip)."""
    c = cluster(8, 4)
    for dim in DIMS:
        ip, p = grid.stride(dim), grid.size(dim)
        if p == 1:
            continue  # no communication (the model skips such dimensions)
        betas = group_bandwidths(c, grid.groups(dim), "axonn")
        expected = 300 * GB if ip * p <= 4 else 100 * GB / min(4, ip)
        assert betas.tolist() == pytest.approx([expected] * len(betas), rel=1e-15), dim
        unshared = group_bandwidths(c, grid.groups(dim), "none")
        assert unshared.tolist() == pytest.approx([300 * GB if ip * p <= 4 else 100 * GB] * len(betas))


def test_sharing_counts_the_crossing_groups_on_each_node():
    c = cluster(2, 3)  # groups (0,1) and (4,5) stay home, (2,3) crosses alone
    betas = group_bandwidths(c, [(0, 1), (2, 3), (4, 5)], "axonn")
    assert betas.tolist() == [300 * GB, 75 * GB, 300 * GB]
    with pytest.raises(InputError, match="sharing"):
        group_bandwidths(c, [(0, 1)], "fair")


def test_layer_collectives_by_hand():
    layer = TransformerLayer(8, 4, 4)  # 16 tokens, bf16, fp32 gradients, recompute on
    calls = {(c.linear, c.dim, c.kind, c.what[:6]): (c.size_bytes, c.count)
             for c in layer_calls(layer, ParallelGrid(2, 2, 2, 1))}
    # qkv 8→24: block 24·8/4 = 48 elements; 16/(Z·D) = 8 local tokens
    assert calls[("qkv", "Z", AG, "weight")] == (96, 2)
    assert calls[("qkv", "Z", RS, "weight")] == (96, 1)
    assert calls[("qkv", "X", AR, "output")] == (8 * 24 // 2 * 2, 2)
    assert calls[("qkv", "Y", AR, "input ")] == (8 * 8 // 2 * 2, 1)
    # fc2 4H→H transposed: inner group Y, outer X
    assert calls[("fc2", "Y", AR, "output")] == (8 * 8 // 2 * 2, 2)
    assert calls[("fc2", "X", AR, "input ")] == (8 * 32 // 2 * 2, 1)
    assert not any(dim == "D" for _, dim, _, _ in calls)  # D = 1: no data-parallel group
    with_d = {(c.linear, c.dim): c.size_bytes for c in layer_calls(layer, ParallelGrid(1, 1, 2, 2))
              if c.kind == AR}
    assert with_d[("qkv", "D")] == 192 // 2 * 4  # the Z shard of the weight, in fp32
    no_recompute = TransformerLayer(8, 4, 4, recompute=False)
    assert {c.count for c in layer_calls(no_recompute, ParallelGrid(2, 1, 1, 1))} == {1}


def test_infeasible_configurations_say_why():
    layer = TransformerLayer(8, 4, 6)
    assert "batch" in infeasible(layer, ParallelGrid(1, 1, 2, 2))
    assert "split" in infeasible(TransformerLayer(6, 4, 4), ParallelGrid(4, 1, 1, 1))
    assert infeasible(layer, ParallelGrid(2, 2, 1, 2)) is None
    with pytest.raises(InputError, match="shape"):
        layer_calls(layer, ParallelGrid(1, 1, 2, 2))
    with pytest.raises(InputError, match="hidden"):
        TransformerLayer(0, 4, 4)


def test_layer_total_is_the_sum_of_closed_forms():
    c = cluster(2, 4)
    layer = TransformerLayer(64, 16, 8)
    grid = ParallelGrid(2, 2, 1, 2)  # X, Y inside a node; D crosses nodes, 4 groups per node
    result = evaluate(c, layer, grid)
    beta = {"X": 300 * GB, "Y": 300 * GB, "D": 100 * GB / 4}
    expected = 0.0
    for r in result.calls:
        p = grid.size(r.call.dim)
        factor = 2 if r.call.kind == AR else 1
        one = factor * (p - 1) / p * r.call.size_bytes / beta[r.call.dim]
        assert r.ring == pytest.approx(one, rel=1e-14) and r.bandwidth == beta[r.call.dim]
        expected += r.call.count * one
    assert result.total("ring") == pytest.approx(expected, rel=1e-14)
    assert result.total("bound") is None  # no network evaluator: ring model only
    with pytest.raises(InputError, match="GPUs"):
        evaluate(c, layer, ParallelGrid(2, 2, 2, 2))
