import pytest

from optcoll.collectives.builtins import dual, make_collective, make_custom, split_allreduce
from optcoll.errors import InputError


def test_allgather_chunks_belong_to_rank_slots_and_size_splits_evenly():
    c = make_collective("allgather", [3, 5, 7], 3 * 2**20, chunks_per_rank=2)
    assert c.num_chunks == 6 and c.chunk_bytes == 2**19
    assert c.pre.of(2).tolist() == [5] and c.post.of(2).tolist() == [3, 5, 7]
    needs_c, needs_v = c.needs
    assert len(needs_c) == 6 * 2  # every chunk misses at two ranks


def test_alltoall_chunk_numbering_and_needs():
    c = make_collective("alltoall", range(3), 3000, chunks_per_rank=1)
    # chunk (i*N + k) goes from member i to member k; diagonal chunks need nothing
    assert c.pre.of(1 * 3 + 2).tolist() == [1] and c.post.of(1 * 3 + 2).tolist() == [2]
    assert len(c.needs[0]) == 6


def test_alltoall_of_a_sub_communicator_with_chunks_per_pair():
    """Chunk (i·N + j)·C + k goes from ranks[i] to ranks[j], for ranks in any order."""
    ranks, n, per = [9, 2, 4], 3, 2
    c = make_collective("alltoall", ranks, 1800, chunks_per_rank=per)
    assert c.num_chunks == n * n * per and c.chunk_bytes == 1800 / (n * per)
    assert c.pre.as_lists() == [[ranks[i]] for i in range(n) for _ in range(n) for _ in range(per)]
    assert c.post.as_lists() == [[ranks[j]] for _ in range(n) for j in range(n) for _ in range(per)]


def test_combining_needs_include_contributors_but_not_sole_holders():
    rs = make_collective("reducescatter", range(4), 4096)
    assert rs.combining and sorted(zip(*[a.tolist() for a in rs.needs])) == [(i, i) for i in range(4)]
    single = make_collective("reduce", [2], 64, root=2)
    assert len(single.needs[0]) == 0


def test_dual_swaps_pre_and_post_and_allreduce_splits():
    rs = make_collective("reducescatter", range(4), 4096, 2)
    ag = dual(rs)
    assert ag.kind == "allgather" and not ag.combining
    assert ag.pre.as_lists() == rs.post.as_lists()
    first, second = split_allreduce(make_collective("allreduce", range(4), 4096, 2))
    assert (first.kind, second.kind) == ("reducescatter", "allgather")
    assert first.chunk_bytes == second.chunk_bytes == 4096 / 8


@pytest.mark.parametrize("kwargs, message", [
    (dict(kind="broadcast", ranks=[0, 1], size_bytes=8), "needs a root"),
    (dict(kind="allgather", ranks=[0, 1], size_bytes=8, root=0), "takes no root"),
    (dict(kind="scatter", ranks=[0, 1], size_bytes=8, root=5), "not one of the ranks"),
    (dict(kind="allgather", ranks=[0, 0], size_bytes=8), "distinct"),
    (dict(kind="allgatherr", ranks=[0, 1], size_bytes=8), "unknown collective"),
    (dict(kind="allgather", ranks=[0, 1], size_bytes=8, chunks_per_rank=0), "at least 1"),
])
def test_bad_collectives(kwargs, message):
    with pytest.raises(InputError, match=message):
        make_collective(**kwargs)


def test_custom_alltonext():
    c = make_custom(range(4), [[i] for i in range(3)], [[i + 1] for i in range(3)], 1024)
    assert c.num_chunks == 3 and c.needs[1].tolist() == [1, 2, 3]
    with pytest.raises(InputError, match="not one of the ranks"):
        make_custom(range(2), [[0]], [[7]], 1024)
    with pytest.raises(InputError, match="no holder"):
        make_custom(range(2), [[]], [[1]], 1024)
