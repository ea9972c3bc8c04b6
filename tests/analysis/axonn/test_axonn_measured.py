"""Measured bandwidths in AxoNN's own form (Megatron-AxoNN examples/comm_model.py, get_bw): the
built-in Perlmutter table, table files, and the ring model ranking with them."""
import pytest

from optcoll.analysis.axonn.cluster import cluster_from_model
from optcoll.analysis.axonn.grid import ParallelGrid, configurations
from optcoll.analysis.axonn.layer import TransformerLayer, infeasible, layer_calls
from optcoll.analysis.axonn.measured import AXONN_PERLMUTTER, bandwidth_table, parse_bandwidth_table
from optcoll.analysis.axonn.ranking import evaluate, rank_configurations
from optcoll.analysis.axonn.ringmodel import ring_time
from optcoll.errors import InputError

GIB = 2**30


def axonn_get_bw(ip, my):
    """AxoNN's published Perlmutter numbers (GB/s of 2^30 bytes), as its if-chain reads."""
    if ip == 1:
        return {2: 76, 4: 225}.get(my, 80 if my >= 8 else None)
    if ip == 2:
        return 76 if my == 2 else 40 if my >= 4 else None
    return 20 if ip >= 4 else None


@pytest.mark.parametrize("ip", [1, 2, 4, 8, 64, 512])
def test_the_builtin_perlmutter_table_is_axonns(ip):
    for my in (2, 4, 8, 16, 256):
        expected = axonn_get_bw(ip, my)
        got = AXONN_PERLMUTTER.bandwidth(ip, my)
        assert got == (None if expected is None else expected * GIB)
    assert AXONN_PERLMUTTER.bandwidth(3, 2) is None  # AxoNN has no entry there either


def test_a_configuration_costed_by_hand_with_the_table():
    # 4x2x2x4 on 64 Perlmutter GPUs: X groups of 4 at level 1 (225), Y of 2 at level 4 (20), Z of 2
    # at level 8 (20), D of 4 at level 16 (20 GiB/s)
    cluster = cluster_from_model("perlmutter", 64)
    layer = TransformerLayer(5120, 2048, 256)
    grid = ParallelGrid(4, 2, 2, 4)
    result = evaluate(cluster, layer, grid, table=AXONN_PERLMUTTER)
    beta = {"X": 225 * GIB, "Y": 20 * GIB, "Z": 20 * GIB, "D": 20 * GIB}
    for r, call in zip(result.calls, layer_calls(layer, grid)):
        assert r.bandwidth == beta[call.dim]
        assert r.ring == pytest.approx(ring_time(call.kind, grid.size(call.dim), call.size_bytes, beta[call.dim]))


def test_configurations_the_table_cannot_cost_are_skipped_with_why():
    table = parse_bandwidth_table({"name": "partial", "bandwidth": [
        {"level": 1, "size": "2+", "bandwidth": "100 GiB/s"}, {"level": "2+", "size": 2, "bandwidth": "10 GB/s"}]})
    cluster = cluster_from_model("perlmutter", 8)
    layer = TransformerLayer(1024, 512, 64)
    ranking = rank_configurations(cluster, layer, table=table)
    costed = {r.grid.shape for r in ranking.results}
    # any group at level 1 (its dimension has only groups of one below it), else only pairs; a
    # dimension of size 1 issues no collective
    assert costed == {g.shape for g in configurations(8) if infeasible(layer, g) is None and all(
        g.size(d) in (1, 2) or g.stride(d) == 1 for d in "XYZD")}
    assert (1, 8, 1, 1) in costed and (2, 4, 1, 1) not in costed
    skipped = dict((g.shape, why) for g, why in ranking.skipped)
    assert "partial has no bandwidth for Y groups of 4 at level 2" in skipped[(2, 4, 1, 1)]
    with pytest.raises(InputError, match="no bandwidth for Y groups of 4") as err:
        evaluate(cluster, layer, ParallelGrid(2, 4, 1, 1), table=table)
    assert err.value.field == "--bandwidths"


def test_table_files(tmp_path):
    path = tmp_path / "bw.toml"
    path.write_text('name = "lab"\nsource = "nccl-tests"\n[[bandwidth]]\nlevel = "1"\nsize = "4+"\n'
                    'bandwidth = "150 GB/s"\n')
    table = bandwidth_table(str(path), "anything")
    assert table.bandwidth(1, 8) == 150e9 and table.bandwidth(1, 2) is None and table.name == "lab"
    assert bandwidth_table("measured", "perlmutter") is AXONN_PERLMUTTER
    assert bandwidth_table("nominal", "perlmutter") is None
    with pytest.raises(InputError, match="no built-in measured table") as err:
        bandwidth_table("measured", "dgx1")
    assert err.value.field == "--bandwidths"


@pytest.mark.parametrize("text, field, words", [
    ('[[bandwidth]]\nlevel = 1\nsize = 2\nbandwidth = 76\n', "bandwidth[0].bandwidth", "unit"),
    ('[[bandwidth]]\nlevel = 1\nsize = 2\nbandwdith = "7 GB/s"\n', "bandwidth[0].bandwdith", "unknown key"),
    ('[[bandwidth]]\nlevel = "x"\nsize = 2\nbandwidth = "7 GB/s"\n', "bandwidth[0].level", "positive integer"),
    ('[[bandwidth]]\nlevel = 1\nbandwidth = "7 GB/s"\n', "bandwidth[0].size", "missing"),
    ('[[bandwidth]]\nlevel = 1\nsize = 2\nbandwidth = "-7 GB/s"\n', "bandwidth[0].bandwidth", ""),
    ('name = "empty"\n', "bandwidth", "at least one"),
])
def test_bad_table_files_name_the_file_and_field(tmp_path, text, field, words):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(InputError) as err:
        bandwidth_table(str(path), "perlmutter")
    assert err.value.source == str(path) and err.value.field == field and words in str(err.value)
