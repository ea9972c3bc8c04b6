"""The C NCCL runs its algorithms at: its protocol's pipelining unit at the size, where modelled."""
import pytest

from optcoll.analysis.nccl_chunking import ASSUMED, MAX_CHUNK_COPIES, NCCL_MODEL, NCCL_PICK, nccl_chunking
from optcoll.collectives.builtins import make_collective
from optcoll.instances.instance import Instance
from optcoll.machines.catalog import load_machine


def _instance(machine: str, kind: str, size: float, ranks=None, **extra) -> Instance:
    m = load_machine(machine)
    return Instance("t", m, make_collective(kind, list(ranks or range(m.num_npus)), size, 1, **extra))


@pytest.mark.parametrize("size, protocol, chunks", [
    (64 << 10, "ll", 1),             # 8 KiB per rank: less than one 32 KiB LL step
    (1 << 30, "simple", 128),        # 128 MiB per rank in 1 MiB Simple slices
])
def test_dgxh100_ring_chunking_follows_the_protocol_nccl_picks_at_the_size(size, protocol, chunks):
    found = nccl_chunking(_instance("dgxh100", "allgather", size), "nccl-ring")
    assert (found.protocol, found.protocol_from, found.chunks, found.capped) == (protocol, NCCL_MODEL, chunks, False)


def test_nvls_uses_the_step_of_all_its_channels():
    found = nccl_chunking(_instance("dgxh100", "allreduce", 1 << 30), "nccl-nvls")
    assert found.unit_bytes == 16 * 128 * 1024 and found.chunks == 64  # 16 channels x 128 KiB (Hopper)


def test_an_algorithm_nccl_does_not_run_there_takes_the_protocol_of_nccls_pick():
    # PAT needs one GPU per node; on one 8-GPU server NCCL never considers it
    found = nccl_chunking(_instance("dgxh100", "allgather", 1 << 30), "nccl-pat")
    assert found.protocol_from == NCCL_PICK and found.protocol == "simple"


def test_an_uncalibrated_machine_assumes_simple_and_says_so():
    found = nccl_chunking(_instance("torus4x4", "allgather", 256 << 20), "nccl-ring")
    assert (found.protocol, found.protocol_from, found.chunks) == ("simple", ASSUMED, 16)
    assert "assumed" in found.describe()


def test_a_large_c_is_capped_and_reported():
    found = nccl_chunking(_instance("dgxh100-rail-64x8", "allgather", 1 << 30), "nccl-ring")
    assert found.wanted == 2 and found.chunks == MAX_CHUNK_COPIES // 512 ** 2 == 1 and found.capped
    assert "capped at C = 1" in found.describe()


def test_collectives_outside_nccls_cost_model_keep_the_instances_c():
    assert nccl_chunking(_instance("dgxh100", "broadcast", 1 << 30, root=0), "nccl-ring") is None
    assert nccl_chunking(_instance("dgxh100", "allgather", 1 << 30, ranks=range(4)), "nccl-ring") is None
