"""``optcoll.bounds.fullness`` and what it adds to ``allreduce-cut-once`` on machines whose servers
reduce and multicast in their NVSwitch (NVLS): the ranks' own sends before q full contents, the
crossings in release order, and the hop from the first NPU a crossing reaches (issue 34)."""
from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optcoll.bounds import lower_bounds
from optcoll.bounds.fullness import RankSends, release_order_end
from optcoll.bundled import bundled_dir
from optcoll.collectives.builtins import make_collective
from optcoll.instances.instancefile import load_instance
from optcoll.machines import generators as G
from optcoll.machines.machine import Switch
from optcoll.producers.registry import get_synthesizer
from optcoll.units import format_time
from optcoll.verify import verify

ONCE = "allreduce-cut-once"


def test_eight_ranks_around_one_switch_need_seven_sends_each_for_eight_full_contents():
    """One out-link per rank into a reducing switch, hop x (to the switch and on to an NPU: 2x):
    q full contents need 7q sends, at most q per rank, so ceil(7q/8) slots of the busiest rank."""
    x = 1.0
    sends = RankSends(np.arange(8), np.full(8, 2 * x), np.full(8, x), 8)
    assert sends.ready(1) == pytest.approx(2 * x)  # seven ranks send once
    assert sends.ready(8) == pytest.approx(8 * x)  # 56 sends: every rank sends 7 (slots 0..6)
    assert sends.ready(16) == pytest.approx(15 * x)  # 112 sends: 14 each
    assert RankSends(np.zeros(1, dtype=np.int64), np.ones(1), np.ones(1), 1).ready(5) == 0.0


def _brute_force(releases: list[float], links: int, busy: float) -> float:
    """The least last start over every order of the crossings and every link choice."""
    best = np.inf
    for order in itertools.permutations(range(len(releases))):
        for choice in itertools.product(range(links), repeat=len(releases)):
            free, last, starts = [0.0] * links, 0.0, []
            for job, link in zip(order, choice):
                begin = max(free[link], releases[job])
                free[link] = begin + busy
                starts.append(begin)
                last = max(last, begin)
            # the q-th start (sorted) must not precede the q-th release: re-matched, as the proof does
            if all(s >= r - 1e-12 for s, r in zip(sorted(starts), sorted(releases))):
                best = min(best, last)
    return best


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(releases=st.lists(st.integers(0, 6), min_size=1, max_size=5), links=st.integers(1, 3),
       busy=st.integers(1, 4))
def test_release_order_meets_the_least_last_start_of_every_schedule(releases, links, busy):
    ready = sorted(float(r) for r in releases)
    end = release_order_end(lambda q: ready[q - 1], len(ready), links, 0.0, float(busy), 0.5)
    assert end == pytest.approx(_brute_force(ready, links, float(busy)) + 0.5)


def test_h100_rail_cluster_cut_once_is_nvls_aware_and_below_the_rail_exchange():
    """dgxh100-rail-2x8 at C = 1 (x: one NVLink hop, h: one NIC hop of a chunk): the q-th crossing
    out of a server waits for (7q/8 + 1)x of its GPUs' sends, 16 crossings share 8 rails (the
    second on a rail one h after the first), each lands 2h later, the last two no earlier than
    8x + 3h, and an H100 that neither reached takes both over its one NVSwitch link, the first no
    earlier than one hop into the switch after it landed: 8x + 3h + 3x = 5.67847 ms, which
    rail-exchange's verified schedule meets, so it is optimal among schedules that cross once.
    Some chunk crossing twice, sorted by what each crossing can still do, takes no less than
    5.67597 ms, the bound (0.04 % under the schedule)."""
    inst = load_instance(bundled_dir("instances") / "machines" / "dgxh100-rail-2x8-allreduce-c1.toml")
    once = {b.name: b for b in lower_bounds(inst.machine, inst.collective, inst.model)}[ONCE]
    b = inst.collective.chunk_bytes
    x, h = 0.5e-6 + b / 450e9, 2e-6 + b / 50e9
    assert once.value == pytest.approx(5.67597e-3, rel=1e-5)
    assert "only from the first NPU it reaches" in once.detail
    assert f"not before {format_time(11 * x + 3 * h)}" in once.detail
    assert once.assumptions == ("the switches a crossing passes before its first NPU (rail0, rail1, rail2, rail3, …) "
                                "neither reduce nor multicast",)
    schedule = get_synthesizer("rail-exchange")(inst, 0)
    assert verify(inst.machine, inst.collective, schedule, inst.model).time == pytest.approx(11 * x + 3 * h, rel=1e-9)


@pytest.mark.parametrize("multicast,reduce", [(True, False), (False, True)], ids=["copying", "reducing"])
def test_nothing_is_added_where_a_switch_between_the_servers_copies_or_combines(multicast, reduce):
    """A crossing's content may then reach several NPUs at once, or be merged on the way: neither
    the hop from the first NPU nor the sorting of the crossings applies, and nothing is assumed."""
    servers = G.multinode(2, 4, nvlink_bandwidth=1e11, nvlink_latency=1e-6, nic_bandwidth=1e10, nic_latency=2e-6,
                          multicast=True, reduce=True)
    spine = Switch("spine", multicast=multicast, reduce=reduce)
    special = replace(servers, switches=tuple(spine if s.label == "spine" else s for s in servers.switches))
    coll = make_collective("allreduce", range(8), 2.0**24, 1)
    found = {b.name: b for b in lower_bounds(special, coll)}[ONCE]
    assert found.assumptions == () and "not counted" in found.detail
    plain = {b.name: b for b in lower_bounds(servers, coll)}[ONCE]
    assert found.value <= plain.value
