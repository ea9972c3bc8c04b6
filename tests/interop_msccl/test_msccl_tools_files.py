"""Real msccl-tools output (data/msccl-tools/README.md): every file loads in the MSCCL executor's
rules, imports, verifies, and takes the time of one message per step.

Times are derived by hand on a fully connected 8-GPU machine (α per message, β = b/B per chunk of
b bytes; τ = α + β): a step sending ``cnt`` chunks is one message, α + cnt·β. Files with no
``cnt > 1`` send are timed with link occupancy (a link carries one chunk at a time for τ), the
others with serialization occupancy, where one message is exactly α + cnt·β.
"""
from pathlib import Path

import pytest

from optcoll.interop.msccl import import_msccl_xml, parse_algo, validate_msccl_xml
from optcoll.machines.generators import fully_connected
from optcoll.verify import verify

DATA = Path(__file__).parent / "data" / "msccl-tools"
ALPHA, BW = 0.3e-6, 1e9
FC8 = fully_connected(8, BW, ALPHA)

# file -> (occupancy, messages in a row α, chunk times β) of its critical path
EXPECTED = {
    # 7 ring steps of one chunk
    "allgather_ring_8_ch1_i1.xml": ("link", 7, 7),
    # every GPU sends its chunk to all 7 peers at once
    "allgather_allpairs_8_i1.xml": ("link", 1, 1),
    # 3 exchanges of 1, 2 and 4 chunks
    "allgather_recursive_doubling_8_i1.xml": ("serialization", 3, 7),
    # 2(N-1) = 14 ring steps
    "allreduce_a100_ring_8_ch1_i1.xml": ("link", 14, 14),
    # reduce-scatter then all-gather, each one message of 8 chunks to every peer
    "allreduce_a100_allpairs_8_i1.xml": ("serialization", 2, 16),
    # halving with 4, 2, 1 chunks, doubling with 1, 2, 4
    "allreduce_recursive_doubling_halving_8_i1.xml": ("serialization", 6, 14),
    # one message of 8 chunks to every peer
    "reducescatter_allpairs_8.xml": ("serialization", 1, 8),
    # one chunk to every peer at once
    "alltoall_allpairs_8_i1.xml": ("link", 1, 1),
    # across nodes one message of the 4 chunks bound for the other node, then one chunk locally
    "alltoall_a100_two_step_2x4.xml": ("serialization", 2, 5),
    # two 4-GPU rings per node share every local link: 2·3 chunks each way, and the cross-node
    # exchange of one chunk overlaps them
    "hierarchical_allgather_4x2.xml": ("link", 6, 6),
    # the local rings (6 chunks per link), then one cross-node step on their result
    "hierarchical_reducescatter_4x2.xml": ("link", 7, 7),
    # local reduce-scatter 6, across 1 + 1, local all-gather 6
    "hierarchical_allreduce_4x2_i1.xml": ("link", 14, 14),
}


def test_every_kept_file_is_named():
    assert sorted(p.name for p in DATA.glob("*.xml")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_msccl_tools_file_loads_imports_and_takes_one_message_per_step(name):
    path = DATA / name
    assert validate_msccl_xml(path, runtime="executor") == []
    imported = import_msccl_xml(path, FC8, size=64 * 1000, runtime="executor")
    assert imported.problems == ()
    occupancy, alphas, betas = EXPECTED[name]
    assert imported.model.occupancy == occupancy
    result = verify(FC8, imported.collective, imported.schedule, imported.model)
    assert result.valid, result.summary()
    beta = imported.collective.chunk_bytes / BW
    assert result.time == pytest.approx(alphas * ALPHA + betas * beta, rel=1e-12)


def test_a_message_of_several_chunks_streams_them_one_chunk_time_apart():
    path = DATA / "allgather_recursive_doubling_8_i1.xml"
    algo, _, _ = parse_algo(path)
    assert sorted({s.cnt for g in algo.gpus for t in g.tbs for s in t.steps if s.type == "s"}) == [1, 2, 4]
    imported = import_msccl_xml(path, FC8, size=64 * 1000)
    beta = imported.collective.chunk_bytes / BW
    starts = sorted(imported.schedule.start[imported.schedule.link == FC8.links_between(0, 4)[0]].tolist())
    # GPU 0's last exchange (with GPU 4) sends its 4 chunks as one message
    assert [b - starts[0] for b in starts] == pytest.approx([0, beta, 2 * beta, 3 * beta])
