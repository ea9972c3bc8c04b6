"""Shortest distances (from each source, or from the nearest) in numpy (Bellman-Ford) and
scipy's Dijkstra give the same floats, bit for bit, and the fewest hops on a shortest path match a breadth-first search of the tight links."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse import csr_array
from scipy.sparse.csgraph import dijkstra

from optcoll.graphs import shortest


def _scipy(n, src, dst, length, sources, **options):
    order = np.lexsort((length, dst, src))
    s, d, w = src[order], dst[order], length[order]
    first = np.ones(s.size, dtype=bool)
    first[1:] = (s[1:] != s[:-1]) | (d[1:] != d[:-1])
    return dijkstra(csr_array((w[first], (s[first], d[first])), shape=(n, n)), directed=True, indices=sources,
                    **options)


@settings(max_examples=80, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 30), links=st.integers(0, 90))
def test_numpy_and_scipy_distances_are_the_same_floats(seed, n, links):
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, n, links), rng.integers(0, n, links)
    length = rng.choice([1e-6, 0.1, 1 / 3, 2.5e-5 + 1 / 7, 3.0], links) * rng.uniform(1, 2, links)
    sources = np.unique(rng.integers(0, n, max(1, n // 3)))
    numpy_side = shortest.distances(n, src, dst, length, sources)
    with pytest.MonkeyPatch.context() as patch:  # the scipy branch of the same function
        patch.setattr(shortest, "NUMPY_WORK", 0)
        scipy_side = shortest.distances(n, src, dst, length, sources)
    reference = _scipy(n, src, dst, length, sources)
    assert np.array_equal(numpy_side, reference) and np.array_equal(scipy_side, reference)
    closest = _scipy(n, src, dst, length, sources, min_only=True)
    assert np.array_equal(shortest.nearest(n, src, dst, length, sources), closest)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(shortest, "NUMPY_WORK", 0)
        assert np.array_equal(shortest.nearest(n, src, dst, length, sources), closest)


def test_fewest_hops_takes_the_shortest_path_with_the_fewest_links():
    # 0 -> 1 -> 2 costs 1 + 1, 0 -> 2 directly costs 2: both shortest, the direct one has 1 hop
    src, dst, length = np.array([0, 1, 0, 2]), np.array([1, 2, 2, 3]), np.array([1.0, 1.0, 2.0, 5.0])
    dist = shortest.distances(4, src, dst, length, np.array([0]))[0]
    assert dist.tolist() == [0.0, 1.0, 2.0, 7.0]
    assert shortest.fewest_hops(4, src, dst, length, 0, dist).tolist() == [0.0, 1.0, 1.0, 2.0]
