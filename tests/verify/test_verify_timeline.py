"""Statistics, the timeline, utilisation, the Gantt chart and the benchmark entry point."""
import json

import numpy as np
import pytest

from optcoll.instances.instance import TimeModel
from optcoll.schedules.schedule import from_arrays
from optcoll.verify import draw_gantt, timeline, utilisation, verify
from optcoll.bench.verify import bench_verify
from verify_helpers import CHUNK, LAT, TAU, collective, ring, ring_allgather, ring_reducescatter


def test_link_and_rank_statistics_of_a_ring():
    n = 4
    m = ring(n)
    result = verify(m, collective("allgather", n), ring_allgather(m, n))
    assert result.makespan == pytest.approx((n - 1) * TAU)
    for s in result.link_stats:
        assert (s.transfers, s.bytes) == (n - 1, (n - 1) * CHUNK)
        assert s.busy_time == pytest.approx((n - 1) * TAU) and s.utilisation == pytest.approx(1.0)
    for r in result.rank_stats:
        assert r.bytes_sent == r.bytes_received == (n - 1) * CHUNK
        assert r.first_activity == 0.0 and r.last_activity == pytest.approx((n - 1) * TAU)
    json.dumps([vars(s) for s in result.link_stats] + [vars(r) for r in result.rank_stats])


def test_serialization_busy_time_is_the_bandwidth_share():
    m = ring(2)
    s = from_arrays([0], [0], [0.0])
    result = verify(m, collective("broadcast", 2, root=0), s, TimeModel(occupancy="serialization"))
    assert result.link_stats[0].busy_time == pytest.approx(TAU - LAT)
    assert result.link_stats[1].transfers == 0 and result.rank_stats[1].first_activity == 0.0
    assert result.rank_stats[0].last_activity == pytest.approx(TAU)


def test_timeline_rows_in_start_order():
    n = 3
    m = ring(n)
    coll = collective("reducescatter", n)
    s = ring_reducescatter(m, n)
    shuffled = from_arrays(s.chunk[::-1], s.link[::-1], s.start[::-1], s.op[::-1])
    result = verify(m, coll, shuffled)
    rows = timeline(m, coll, shuffled, result)
    assert [r.start for r in rows] == sorted(r.start for r in rows)
    assert [r.transfer for r in rows[:3]] == [3, 4, 5]  # ties at t = 0 by transfer id
    assert all(r.op == "reduce" and r.end == pytest.approx(r.start + TAU) for r in rows)
    assert all((r.src, r.dst) == (int(m.link_src[r.link]), int(m.link_dst[r.link])) for r in rows)
    json.dumps([vars(r) for r in rows])


def test_utilisation_orders_the_busiest_links_first():
    m = ring(3)
    s = from_arrays([0, 0, 1], [0, 1, 1], [0.0, TAU, 0.0])
    result = verify(m, collective("allgather", 3), s)
    assert not result.valid  # incomplete, but statistics still describe what ran
    used = utilisation(result)
    assert [u.link for u in used] == [1, 0] and used[0].transfers == 2
    assert len(utilisation(result, used_only=False)) == 3


def test_step_model_timeline_uses_step_times():
    n = 3
    m = ring(n)
    rows = [((i - k) % n, i, k + 1) for k in range(n - 1) for i in range(n)]
    chunk, link, step = zip(*rows)
    s = from_arrays(chunk, link, step=step, rounds=[1, 2])
    result = verify(m, collective("allgather", n), s)
    step1, step2 = TAU, LAT + 2 * CHUNK / 1e9
    assert result.time == pytest.approx(step1 + step2)
    tl = timeline(m, collective("allgather", n), s, result)
    assert sorted({r.start for r in tl}) == pytest.approx([0.0, step1])
    assert max(r.end for r in tl) == pytest.approx(step1 + step2)


def test_gantt_svg_is_written_atomically(tmp_path):
    n = 6
    m = ring(n)
    coll = collective("allgather", n)
    s = ring_allgather(m, n)
    result = verify(m, coll, s)
    path = tmp_path / "out" / "gantt.svg"
    draw_gantt(m, s, result, path, max_links=4)
    text = path.read_text()
    assert "<svg" in text and "4 of 6 used links" in text
    assert [p.name for p in path.parent.iterdir()] == ["gantt.svg"]
    bad = verify(m, coll, from_arrays(s.chunk[:3], s.link[:3], s.start[:3]))
    draw_gantt(m, s.__class__(s.chunk[:3], s.link[:3], s.start[:3], s.op[:3], s.step[:3]), bad, path)
    assert "INVALID (postcondition)" in path.read_text()


def test_bench_runs_on_a_small_torus():
    figures = bench_verify(n_side=4, trace_memory=False)
    assert figures["valid"] and figures["path"] == "vectorised"
    assert figures["transfers"] == 16 * 15
    assert figures["time"] == pytest.approx(figures["expected_time"])
    assert figures["verify_seconds"] > 0 and figures["max_rss_bytes"] > 0


def test_arrivals_are_per_transfer_and_nan_when_malformed():
    m = ring(3)
    s = from_arrays([0, 7], [0, 0], [0.0, 5 * TAU])
    result = verify(m, collective("allgather", 3), s)
    assert result.violation.kind == "unknown-chunk"  # ordered before the unmet postcondition
    assert result.arrivals[0] == pytest.approx(TAU) and np.isnan(result.arrivals[1])
