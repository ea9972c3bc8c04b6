"""Process groups on the real network: combined collectives, bounds ≤ verified schedules, and the
ring model next to optcoll's bounds where textbook values are known."""
from __future__ import annotations

import numpy as np
import pytest

from optcoll.analysis.axonn.cluster import Cluster
from optcoll.analysis.axonn.grid import ParallelGrid
from optcoll.analysis.axonn.layer import AG, AR, RS, TransformerLayer
from optcoll.analysis.axonn.network import NetworkEvaluator, union_collective
from optcoll.analysis.axonn.ranking import MODELS, rank_configurations
from optcoll.analysis.axonn.ringmodel import group_bandwidths, ring_time
from optcoll.bounds import lower_bounds
from optcoll.errors import InputError

GB = 1e9
SLACK = 1 + 1e-9


def test_union_collective_is_every_group_at_once():
    groups = ((0, 4), (1, 5), (2, 6))
    ag = union_collective(AG, groups, 8e6, 2)
    assert ag.num_chunks == 12 and ag.chunk_bytes == 2e6 and not ag.combining
    assert ag.pre.as_lists()[:4] == [[0], [0], [4], [4]]
    assert ag.post.as_lists()[5] == [1, 5]
    rs = union_collective(RS, groups, 8e6, 2)
    assert rs.combining and rs.pre.as_lists()[8] == [2, 6] and rs.post.as_lists()[7] == [5]
    ar = union_collective(AR, groups, 8e6, 1)
    assert ar.combining and ar.pre.as_lists() == ar.post.as_lists() == [[0, 4], [0, 4], [1, 5],
                                                                        [1, 5], [2, 6], [2, 6]]
    assert ar.ranks == (0, 1, 2, 4, 5, 6)
    with pytest.raises(InputError, match="groups"):
        union_collective(AG, ((0, 1), (2,)), 1e6)
    with pytest.raises(InputError, match="kind"):
        union_collective("broadcast", groups, 1e6)


@pytest.mark.parametrize("chunks", [1, 3])
def test_single_node_ring_model_and_bound_agree_with_the_textbook(chunks):
    """One NVSwitch node, α = 0: AllGather/ReduceScatter over p GPUs need (p−1)/p·M/B (every GPU
    receives/sends that much over its one link), which is the ring model's value exactly. An
    AllReduce needs more than the ring model's 2(p−1)/p·M/B here: every chunk makes 2(p−1)
    deliveries into GPUs, each GPU's one in-link takes its first only after the switch hop (store
    and forward), so the AllReduce transfer count sits above the model, below the verified time."""
    c = Cluster(1, 4, 100 * GB, 0.0, 25 * GB, 0.0)
    ev = NetworkEvaluator(c, chunks_per_rank=chunks)
    group = ((0, 1, 2, 3),)
    size = 12e6
    beta = float(group_bandwidths(c, group)[0])
    assert beta == 100 * GB
    textbook = 3 / 4 * size / beta
    for kind in (AG, RS):
        m = ev.measure(kind, group, size)
        assert ring_time(kind, 4, size, beta) == pytest.approx(textbook, rel=1e-15)
        assert m.concurrent_bound == pytest.approx(textbook, rel=1e-12)
        assert m.isolated_bound == m.concurrent_bound  # one group: nothing to share
        assert m.concurrent_time >= m.concurrent_bound / SLACK
    m = ev.measure(AR, group, size)
    chunk_time = size / 4 / chunks / beta
    deliveries_per_link = 2 * 3 * 4 * chunks // 4
    assert m.bound_name == "concurrent allreduce-transfers"
    assert m.concurrent_bound == pytest.approx((2 + deliveries_per_link - 1) * chunk_time, rel=1e-12)
    assert ring_time(AR, 4, size, beta) < m.concurrent_bound <= m.concurrent_time * SLACK


def test_concurrent_groups_share_the_nics_as_axonn_assumes():
    """Four data-parallel pairs cross the two nodes at once: optcoll's cut bound for the combined
    collective equals the ring model with the node's NICs split four ways, while one pair alone
    could borrow its neighbours' NICs through NVLink. (A pair's AllGather is unicast, so the flow
    bound also applies to it and is higher still: every chunk crosses the spine store-and-forward,
    one more chunk time than the cut counts.)"""
    c = Cluster(2, 4, 300 * GB, 0.5e-6, 25 * GB, 2e-6)
    ev = NetworkEvaluator(c, chunks_per_rank=8)
    groups = ParallelGrid(1, 1, 4, 2).groups("D")
    beta = group_bandwidths(c, groups, "axonn")
    assert beta.tolist() == [25 * GB] * 4
    for kind in (AG, RS, AR):
        m = ev.measure(kind, groups, 64e6)
        ring = ring_time(kind, 2, 64e6, 25 * GB)
        union = union_collective(kind, groups, 64e6, 8)
        cut = next(b for b in lower_bounds(c.machine, union) if b.name == "cut")
        assert cut.value == pytest.approx(ring, rel=1e-9)
        assert m.concurrent_bound >= ring * (1 - 1e-9)
        assert m.bound_name == ("concurrent mcf" if kind == AG else "concurrent cut")
        assert m.isolated_bound < m.concurrent_bound / 2
        assert m.isolated_bound <= m.isolated_time * SLACK
        assert m.concurrent_bound <= m.concurrent_time * SLACK


@pytest.fixture(scope="module")
def small_ranking():
    c = Cluster(2, 2, 100 * GB, 0.5e-6, 25 * GB, 2e-6, name="tiny")
    layer = TransformerLayer(32, 8, 8)
    ev = NetworkEvaluator(c, chunks_per_rank=2)
    return c, layer, rank_configurations(c, layer, evaluator=ev)


def test_bounds_never_exceed_verified_schedules(small_ranking):
    _, _, ranking = small_ranking
    assert len(ranking.results) == 10  # 4 = 2·2: every ordered 4-factorisation
    for result in ranking.results:
        for r in result.calls:
            m = r.measured
            assert m.isolated_bound <= m.isolated_time * SLACK, (result.grid, r.call)
            assert m.concurrent_bound <= m.concurrent_time * SLACK, (result.grid, r.call)
            assert m.isolated_bound <= m.concurrent_bound
        for bound, schedule in (("bound", "schedule"), ("bound-isolated", "schedule-isolated")):
            assert result.total(bound) <= result.total(schedule) * SLACK


def test_ranking_is_deterministic_and_sorted(small_ranking):
    c, layer, ranking = small_ranking
    again = rank_configurations(c, layer, evaluator=NetworkEvaluator(c, chunks_per_rank=2))
    assert ranking.models() == list(MODELS)
    for model in MODELS:
        first = [(r.grid.shape, r.total(model)) for r in ranking.ranked(model)]
        assert first == [(r.grid.shape, r.total(model)) for r in again.ranked(model)]
        totals = [t for _, t in first]
        assert totals == sorted(totals)
        ties = [(a, b) for (a, ta), (b, tb) in zip(first, first[1:]) if ta == tb]
        assert all(a < b for a, b in ties)  # equal times: (X, Y, Z, D) order
    assert sorted(ranking.positions("ring").values()) == list(range(1, 11))


def test_ring_only_ranking_and_tensor_parallel_floor():
    c = Cluster(4, 4, 300 * GB, 0.5e-6, 25 * GB, 2e-6)
    layer = TransformerLayer(64, 8, 4)
    ranking = rank_configurations(c, layer, min_tensor_parallel=4)
    assert ranking.models() == ["ring"]
    assert all(r.grid.x * r.grid.y * r.grid.z >= 4 for r in ranking.results)
    assert all("batch" in why for _, why in ranking.skipped)  # batch 4 cannot split over Z·D = 8
    with pytest.raises(InputError, match="bound"):
        ranking.ranked("bound")
    with pytest.raises(InputError, match="model"):
        ranking.results[0].total("fast")


def test_evaluator_rejects_bad_settings():
    c = Cluster(1, 2, 100 * GB, 0.0, 25 * GB, 0.0)
    with pytest.raises(InputError, match="algo"):
        NetworkEvaluator(c, producers=("nope",))
    with pytest.raises(InputError, match="chunks_per_rank"):
        NetworkEvaluator(c, chunks_per_rank=0)
    ev = NetworkEvaluator(c, schedules=False)
    m = ev.measure(AG, ((0, 1),), 1e6)
    assert m.concurrent_time is None and np.isfinite(m.concurrent_bound)
    assert ev.measure(AG, ((0, 1),), 1e6) is m  # remembered
