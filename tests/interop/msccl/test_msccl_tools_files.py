"""Real msccl-tools output (data/msccl-tools/README.md): every file loads in the MSCCL executor's
rules, imports, verifies, and takes the time of one message per step; the files msccl-tools
writes for what is not an optcoll collective (or not a correct one) are refused in one line, and
every schedule read is exported back as XML the executor loads, no slower.

Times are derived by hand on a fully connected machine of the file's ngpus (α per message,
β = b/B per chunk of b bytes; τ = α + β): a step sending ``cnt`` chunks is one message,
α + cnt·β. Files with no ``cnt > 1`` send are timed with link occupancy (a link carries one chunk
at a time for τ), the others with serialization occupancy, where one message is exactly α + cnt·β.
"""
from pathlib import Path

import pytest

from optcoll.bounds import best_lower_bound
from optcoll.errors import InputError
from optcoll.interop.msccl import export_msccl_xml, import_msccl_xml, parse_algo, validate_msccl_xml
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
    # 4 GPUs: 3 ring steps, and on every link the chunks of 2 instances (2 channels each) in turn
    "allgather_ring_4_ch2_i2_LL.xml": ("link", 6, 6),
    # each GPU sends its 2 chunks (2 instances) to every peer at once
    "allgather_allpairs_4_i2_LL128.xml": ("link", 2, 2),
    # per instance messages of 2, 1, 1, 2 chunks; the second instance follows the first's first
    # message (α + 2β) on the same link, then never waits again
    "allreduce_recursive_doubling_halving_4_i2_LL.xml": ("serialization", 5, 8),
    # out-of-place: one chunk per instance to every peer
    "alltoall_allpairs_4_i2.xml": ("link", 2, 2),
    # 2 nodes x 2 GPUs: one message of the 2 chunks bound for the other node, then one locally
    "alltoall_a100_two_step_2x2_LL.xml": ("serialization", 2, 3),
    # one message of 4 chunks to every peer
    "reducescatter_allpairs_4.xml": ("serialization", 1, 4),
    # 16 GPUs: 4 exchanges of 1, 2, 4 and 8 chunks
    "allgather_recursive_doubling_16_i1.xml": ("serialization", 4, 15),
}
# file -> the one line optcoll refuses it with
REFUSED = {
    # msccl-tools' own Check() printed "Rank 0 chunk 0 is incorrect" for it: 4 GPUs are not the
    # 2-level PCIe box the program is written for
    "allreduce_a100_pcie_hierarchical_4_i1.xml": "ends holding chunk 0 without the contributions of npu0, npu1",
    # coll="custom": the file does not say what must end where
    "alltonext_forward_2_i1.xml": 'algo.coll: coll="custom" carries no pre/postcondition: pass the collective',
}


def _machine(path: Path):
    return fully_connected(parse_algo(path)[0].ngpus, BW, ALPHA)


def test_every_kept_file_is_named():
    assert sorted(p.name for p in DATA.glob("*.xml")) == sorted([*EXPECTED, *REFUSED])


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_msccl_tools_file_loads_imports_and_takes_one_message_per_step(name):
    path = DATA / name
    machine = _machine(path)
    assert validate_msccl_xml(path, runtime="executor") == []
    imported = import_msccl_xml(path, machine, size=64 * 1000, runtime="executor")
    assert imported.problems == ()
    occupancy, alphas, betas = EXPECTED[name]
    assert imported.model.occupancy == occupancy
    result = verify(machine, imported.collective, imported.schedule, imported.model)
    assert result.valid, result.summary()
    beta = imported.collective.chunk_bytes / BW
    assert result.time == pytest.approx(alphas * ALPHA + betas * beta, rel=1e-12)
    assert result.time >= best_lower_bound(machine, imported.collective, imported.model).value * (1 - 1e-12)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_optcoll_exports_each_schedule_as_xml_the_executor_loads_no_slower(name):
    path = DATA / name
    machine = _machine(path)
    imported = import_msccl_xml(path, machine, size=64 * 1000)
    time = verify(machine, imported.collective, imported.schedule, imported.model).time
    text = export_msccl_xml(machine, imported.collective, imported.schedule, model=imported.model)
    assert validate_msccl_xml(text, runtime="executor") == []
    back = import_msccl_xml(text, machine, size=64 * 1000, model=imported.model, runtime="executor")
    result = verify(machine, back.collective, back.schedule, back.model)
    assert result.valid and result.time <= time * (1 + 1e-12)


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_files_that_are_no_collective_optcoll_checks_are_refused_in_one_line(name):
    path = DATA / name
    machine = _machine(path)
    assert validate_msccl_xml(path, runtime="msccl") == []  # the loader would take them
    try:
        imported = import_msccl_xml(path, machine, size=64 * 1000, runtime="msccl")
    except InputError as error:
        text = str(error)
    else:
        result = verify(machine, imported.collective, imported.schedule, imported.model)
        assert not result.valid and imported.problems
        text = result.summary()
    assert "\n" not in text and REFUSED[name] in text


def test_the_first_runtime_spells_reducescatter_otherwise():
    """msccl-tools writes coll="reducescatter" (the executor's word); microsoft/msccl reads "reduce_scatter"."""
    findings = validate_msccl_xml(DATA / "reducescatter_allpairs_4.xml", runtime="msccl")
    assert len(findings) == 1 and "coll='reducescatter'" in findings[0]


def test_a_message_of_several_chunks_streams_them_one_chunk_time_apart():
    path = DATA / "allgather_recursive_doubling_8_i1.xml"
    algo, _, _ = parse_algo(path)
    assert sorted({s.cnt for g in algo.gpus for t in g.tbs for s in t.steps if s.type == "s"}) == [1, 2, 4]
    imported = import_msccl_xml(path, FC8, size=64 * 1000)
    beta = imported.collective.chunk_bytes / BW
    starts = sorted(imported.schedule.start[imported.schedule.link == FC8.links_between(0, 4)[0]].tolist())
    # GPU 0's last exchange (with GPU 4) sends its 4 chunks as one message
    assert [b - starts[0] for b in starts] == pytest.approx([0, beta, 2 * beta, 3 * beta])


def test_cli_import_of_a_custom_collective_is_exit_2_not_a_traceback():
    """It used to fail an assertion (``--runtime msccl``/``any`` let coll="custom" through)."""
    from click.testing import CliRunner

    from optcoll.cli.main import cli

    path = DATA / "alltonext_forward_2_i1.xml"
    result = CliRunner().invoke(cli, ["msccl", "import", str(path), "--machine", "dgx2", "--size", "1 MiB",
                                      "--runtime", "any"])
    assert result.exit_code == 2 and result.stderr.strip() == (
        f'optcoll: error: {path}: algo.coll: coll="custom" carries no pre/postcondition: pass the collective')
