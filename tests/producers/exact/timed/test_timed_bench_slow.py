"""The issue's timed-model benchmark instances, proven optimal well inside 10 minutes each
(``pytest -m slow``). Wall times go to the terminal with ``-s``."""
from __future__ import annotations

import pytest

from optcoll.instances.instance import TimeModel
from optcoll.machines import generators as G
from optcoll.producers.exact.timed.solve import solve_timed

from timed_helpers import BW, LAT, close, instance, link_time, verified

GIB = 2.0**30
CASES = [(f"dgx1-C{c}", instance(G.dgx1(), chunks=c), c + 1) for c in range(1, 7)] + [
    ("torus4x4-C1", instance(G.torus([4, 4], BW, LAT)), 4),
    ("torus4x4-C2", instance(G.torus([4, 4], BW, LAT), chunks=2), 8),
    ("hypercube4-C1", instance(G.hypercube(4, BW, LAT)), 4),
    ("hypercube4-C2", instance(G.hypercube(4, BW, LAT), chunks=2), 8),
    ("hypercube5-C1", instance(G.hypercube(5, BW, LAT)), 7),
    ("torus8x8-C1", instance(G.torus([8, 8], BW, LAT)), 16),
    ("hypercube6-C1", instance(G.hypercube(6, BW, LAT)), 11),
    ("nvswitch16-C1", instance(G.nvswitch(16)), 16),
    ("hetmesh5x5-C1", instance(G.mesh([5, 5], [50 * GIB, 75 * GIB], [0.5e-6, 0.5e-6]), per_rank=GIB / 25), None),
    ("mesh3x3-oneport-C1", instance(G.mesh([3, 3], BW, LAT), model=TimeModel(send_ports=1, recv_ports=1)), None),
]


@pytest.mark.slow
@pytest.mark.parametrize("name, inst, chunk_times", CASES, ids=[c[0] for c in CASES])
def test_benchmark_instance(name, inst, chunk_times):
    out = solve_timed(inst, time_limit=600)
    time = verified(inst, out)
    print(f"\n{name}: {out.status} in {out.wall_time:.2f} s, {time / link_time(inst):.4g} chunk times, "
          f"bound {out.lower_bound / link_time(inst):.4g} ({out.lower_bound_source})")
    if chunk_times is not None:
        assert out.status == "optimal"
        assert close(time, chunk_times * link_time(inst))
    assert out.lower_bound <= time * (1 + 1e-9)
