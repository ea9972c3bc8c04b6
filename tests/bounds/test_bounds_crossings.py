"""The several-crossings counting of ``allreduce-cut-once`` (``optcoll.bounds.crossings``), on
cluster2x8's server cut and on cuts small enough to reason about by hand."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optcoll.bounds import crossings
from optcoll.bounds.crossings import CrossingLinks, several_crossings_end


def _uplinks(count: int, nic: float, nv: float) -> CrossingLinks:
    """cluster2x8's shape: GPUs whose own NIC crosses to a spine switch and on to a far GPU (two NIC
    hops), a merge landing two NVLink hops after the start, a relay two more after arrival."""
    ones = np.ones(count)
    return CrossingLinks(0 * ones, nic * ones, 2 * nic * ones, (2 * nic + 2 * nv) * ones, 2 * nv)


def test_a_second_crossing_costs_two_nvlink_hops_past_four_nic_hops():
    """8 uplinks, 16 chunks, 8 far ranks: a third crossing on an uplink must start before any merge
    lands (raw content) or be relayed too late, so every uplink carries two spreading crossings at
    most until 4 NIC hops + 2 NVLink hops."""
    nic, nv = 12.0, 1.0
    end = several_crossings_end(_uplinks(8, nic, nv), 16, 8, 4 * nic, 10 * nic)
    assert end == pytest.approx(4 * nic + 2 * nv)


def test_one_crossing_too_many_must_still_be_relayed():
    """9 chunks on 8 uplinks: one uplink carries two, the second landing after 3 NIC hops; with
    spreading capacity one per uplink before that, the ninth chunk's crossing must still be relayed
    (2 NVLink hops), and 8 direct crossings for one chunk would take every uplink's spreading one."""
    nic, nv = 12.0, 1.0
    assert several_crossings_end(_uplinks(8, nic, nv), 9, 8, 3 * nic, 10 * nic) == pytest.approx(3 * nic + 2 * nv)


def test_free_relays_and_single_contributions_leave_the_plain_count():
    """When every crossing can carry everything (one rank per side) and relaying costs nothing,
    the kinds do not matter: the plain K + 1 count stands."""
    ones = np.ones(8)
    cut = CrossingLinks(0 * ones, 12 * ones, 24 * ones, 24 * ones, -np.inf)
    assert several_crossings_end(cut, 9, 1, 36.0, 120.0) == pytest.approx(36.0)


def test_too_costly_counting_keeps_the_plain_count(monkeypatch):
    monkeypatch.setattr(crossings, "COUNT_WORK_LIMIT", 10)
    assert several_crossings_end(_uplinks(8, 12.0, 1.0), 16, 8, 48.0, 120.0) == 48.0


@settings(max_examples=40, deadline=None, derandomize=True)
@given(links=st.integers(1, 6), chunks=st.integers(1, 12), far=st.integers(1, 6),
       nic=st.floats(1.0, 20.0), nv=st.floats(0.1, 3.0), spread=st.floats(0.0, 0.5))
def test_the_answer_lies_between_the_plain_count_and_the_cap(links, chunks, far, nic, nv, spread):
    """Never below the plain count it refines, never above the cap it is searched to, and growing
    with the cap only until it is reached."""
    rng = np.random.default_rng(links * 1000 + chunks)
    cut = CrossingLinks(rng.uniform(0, spread * nic, links), nic * (1 + rng.uniform(0, spread, links)),
                        2 * nic * np.ones(links), (2 * nic + 2 * nv) * np.ones(links), 2 * nv)
    low = float(np.sort((cut.start[:, None] + cut.to_rank[:, None]
                         + np.arange(chunks + 1)[None, :] * cut.busy[:, None]).ravel())[chunks])
    high = low + 5 * nic
    end = several_crossings_end(cut, chunks, far, low, high)
    assert low <= end <= high
    assert several_crossings_end(cut, chunks, far, low, end) == pytest.approx(end)
