"""Which transfer a plain switch forwards, for schedules made by time reversal (SCCL's inversion).

A reduction is built as the time reversal of a spread on the reversed machine (``compose``, the
exact solvers' inversion). In the spread every copy of a chunk is the same, so a plain switch may
forward any earlier arrival; reversed, the arrivals carry different partial sums and the
verifier must be told which one each departure forwards (``Schedule.via``; docs/model.md,
"Switches: forwarding simultaneous arrivals"). Any pairing the spread's times allow reverses into
a valid reduction: a partial still reaches the switch before it leaves it, and every NPU still
sends once, after everything it receives. The one taken here is the spread's own rule: at each
(chunk, switch) the i-th departure forwards the i-th arrival, oldest first.
"""
from __future__ import annotations

import numpy as np


def forwarded_by(chunk: np.ndarray, src: np.ndarray, dst: np.ndarray, start: np.ndarray,
                 arrive: np.ndarray, plain: np.ndarray) -> np.ndarray:
    """Per transfer of a spread schedule, the transfer that forwards its arrival at a plain
    switch (``plain``: bool per node), -1 elsewhere or when nothing forwards it. Reversed, that
    is the row the reversed transfer names as the arrival it forwards."""
    via = np.full(chunk.size, -1, dtype=np.int64)
    into, out = np.flatnonzero(plain[dst]), np.flatnonzero(plain[src])
    if into.size == 0 or out.size == 0:
        return via
    width = int(plain.size)
    into = into[np.lexsort((into, arrive[into], chunk[into] * width + dst[into]))]
    out = out[np.lexsort((out, start[out], chunk[out] * width + src[out]))]
    key_in, key_out = chunk[into] * width + dst[into], chunk[out] * width + src[out]
    # The k-th departure of a (chunk, switch) takes the k-th arrival of it, if there is one.
    first_out = np.searchsorted(key_out, key_out, side="left")
    at = np.searchsorted(key_in, key_out, side="left") + np.arange(out.size) - first_out
    ok = at < np.searchsorted(key_in, key_out, side="right")
    via[into[at[ok]]] = out[ok]
    return via
