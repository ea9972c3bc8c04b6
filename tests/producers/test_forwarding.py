"""``forwarding.forwarded_by`` against its rule written out directly: at each (chunk, plain switch)
the i-th departure (by start, then row) forwards the i-th arrival (by arrival, then row)."""
from __future__ import annotations

import numpy as np
import pytest

from optcoll.producers.forwarding import forwarded_by


def _by_the_rule(chunk, src, dst, start, arrive, plain) -> np.ndarray:
    via = np.full(chunk.size, -1, dtype=np.int64)
    for c in np.unique(chunk).tolist():
        for s in np.flatnonzero(plain).tolist():
            into = [j for j in range(chunk.size) if chunk[j] == c and dst[j] == s]
            out = [j for j in range(chunk.size) if chunk[j] == c and src[j] == s]
            into.sort(key=lambda j: (arrive[j], j))
            out.sort(key=lambda j: (start[j], j))
            for a, d in zip(into, out):
                via[a] = d
    return via


@pytest.mark.parametrize("seed", range(20))
def test_the_kth_departure_forwards_the_kth_arrival(seed):
    rng = np.random.default_rng(seed)
    nodes, rows = 6, int(rng.integers(1, 60))
    plain = rng.random(nodes) < 0.5
    chunk = rng.integers(0, 3, rows)
    src, dst = rng.integers(0, nodes, rows), rng.integers(0, nodes, rows)
    start = rng.integers(0, 5, rows).astype(float)  # ties on purpose
    arrive = start + rng.integers(1, 3, rows)
    assert np.array_equal(forwarded_by(chunk, src, dst, start, arrive, plain),
                          _by_the_rule(chunk, src, dst, start, arrive, plain))
