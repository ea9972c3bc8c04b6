"""AlltoAllv: per-pair sizes from a CSV or TOML matrix or a seeded MoE generator, chunks of their
own sizes through the time rule and the verifier, and one clear line for every bad matrix."""
from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from optcoll.cli.main import cli
from optcoll.collectives.builtins import make_alltoallv
from optcoll.collectives.traffic import moe_traffic, read_matrix
from optcoll.instances.instance import TimeModel
from optcoll.instances.instancefile import load_instance
from optcoll.instances.suite import find_suite
from optcoll.machines import generators as gen
from optcoll.schedules.schedule import ScheduleBuilder
from optcoll.verify import verify

SIZES = np.array([[0, 3, 0], [1, 0, 2], [4, 5, 0]], dtype=float)


def test_pairs_in_row_major_order_cut_into_pieces():
    coll = make_alltoallv([0, 1, 2], SIZES * 2.0**20, 2)
    pairs = [(0, 1), (1, 0), (1, 2), (2, 0), (2, 1)]  # (0, 2) sends nothing: no chunk
    assert coll.num_chunks == 2 * len(pairs)
    assert [(int(coll.pre.of(c)[0]), int(coll.post.of(c)[0])) for c in range(0, 10, 2)] == pairs
    assert coll.sizes().tolist() == [s * 2.0**19 for s in (3, 3, 1, 1, 2, 2, 4, 4, 5, 5)]
    assert coll.chunk_bytes == 2.0**19 and coll.size_bytes == SIZES.sum() * 2.0**20 / 3
    assert not coll.equal_chunks


def test_csv_and_toml_files_agree(tmp_path):
    (tmp_path / "m.csv").write_text("# bytes\n0, 3, 0\n1 ,0,2\n\n4,5,0\n")
    (tmp_path / "w.csv").write_text("0 3 0\n1 0 2\n4 5 0\n")
    (tmp_path / "m.toml").write_text("sizes = [[0, 3, 0], [1, 0, 2], [4, 5.0, 0]]\n")
    for name in ("m.csv", "w.csv", "m.toml"):
        assert np.array_equal(read_matrix(tmp_path / name, 3, 1024.0), SIZES * 1024)


def test_moe_generator_is_seeded_and_skewed():
    a, b = moe_traffic(16, 2.0**26, seed=5), moe_traffic(16, 2.0**26, seed=5)
    assert np.array_equal(a, b) and not np.array_equal(a, moe_traffic(16, 2.0**26, seed=6))
    assert np.all(np.diag(a) == 0) and a.sum() / 16 == pytest.approx(2.0**26)
    received = a.sum(axis=0)
    assert received.max() > 3 * np.median(received)  # a hot expert
    flat = moe_traffic(16, 2.0**26, skew=0.0, tokens=65536, seed=5).sum(axis=0)
    assert flat.max() < 1.2 * np.median(flat)


def test_verifier_times_each_chunk_by_its_own_size():
    """Two chunks of 1 and 3 MiB back to back on one link: valid only if the second starts once
    the first (its own size) has left the link."""
    two = make_alltoallv([0, 1, 2], np.array([[0, 1.0, 3.0], [0, 0, 0], [0, 0, 0]]) * 2.0**20)
    chain = gen.line(3, 2.0**30, 0.0)
    small, large = 2.0**-10, 3 * 2.0**-10  # seconds on a 1 GiB/s link
    good = ScheduleBuilder(chain)
    good.send(1, 0, 1, 0.0)            # the 3 MiB chunk first
    good.send(0, 0, 1, large)          # then the 1 MiB one, when the link is free
    good.send(1, 1, 2, large)
    result = verify(chain, two, good.build(), TimeModel())
    assert result.valid and result.time == pytest.approx(2 * large)
    assert [s.bytes for s in result.link_stats if s.transfers] == [4 * 2.0**20, 3 * 2.0**20]
    assert result.rank_stats[0].bytes_sent == 4 * 2.0**20
    bad = ScheduleBuilder(chain)
    bad.send(1, 0, 1, 0.0)
    bad.send(0, 0, 1, small)           # free after a 1 MiB chunk, not after a 3 MiB one
    bad.send(1, 1, 2, large)
    found = verify(chain, two, bad.build(), TimeModel())
    assert not found.valid and found.violation.kind == "link-overlap"


def test_instance_files_and_cache_key(tmp_path):
    (tmp_path / "m.csv").write_text("0,3,0\n1,0,2\n4,5,0\n")
    (tmp_path / "v.toml").write_text('[instance]\nmachine = "ring4"\ncollective = "alltoallv"\n'
                                     'ranks = [0, 1, 2]\nchunks_per_rank = 2\n'
                                     '[alltoallv]\nmatrix = "m.csv"\nunit = "MiB"\n')
    inst = load_instance(tmp_path / "v.toml")
    assert inst.collective.num_chunks == 10 and inst.collective.sizes().max() == 2.5 * 2.0**20
    before = find_suite(str(tmp_path / "v.toml")).specs[0].content_key
    (tmp_path / "m.csv").write_text("0,3,0\n1,0,2\n4,6,0\n")
    assert find_suite(str(tmp_path / "v.toml")).specs[0].content_key != before
    (tmp_path / "g.toml").write_text('[instance]\nmachine = "torus4x4"\ncollective = "alltoallv"\n'
                                     'size = "8 MiB"\n[alltoallv]\ngenerator = "moe"\nseed = 2\n')
    generated = load_instance(tmp_path / "g.toml").collective
    assert generated.size_bytes == pytest.approx(8 * 2.0**20)


BAD_MATRICES = [
    ("rows.csv", "0,1,2\n3,0,4\n", "rows.csv: has 2 rows, but the communicator has 3 ranks"),
    ("short.csv", "0,1,2\n3,0\n5,6,0\n", "short.csv: line 2: has 2 entries, expected 3"),
    ("negative.csv", "0,1,2\n3,0,-4\n5,6,0\n", "negative.csv: line 2, column 3: size must not be negative"),
    ("nan.csv", "0,1,2\n3,0,nan\n5,6,0\n", "nan.csv: line 2, column 3: size must be a finite number"),
    ("diagonal.csv", "0,1,2\n3,7,4\n5,6,0\n", "diagonal.csv: line 2, column 2: the diagonal must be 0"),
    ("word.csv", "0,1,2\n3,0,four\n5,6,0\n", "word.csv: line 2, column 3: not a number: 'four'"),
    ("empty.csv", "0,1,2\n3,,4\n5,6,0\n", "empty.csv: line 2, column 2: not a number: ''"),
    ("zero.csv", "0,0,0\n0,0,0\n0,0,0\n", "zero.csv: every size is 0"),
    ("rows.toml", "sizes = [[0, 1, 2], [3, 0, 4], [5, 6]]\n", "rows.toml: sizes[2]: has 2 entries, expected 3"),
    ("neg.toml", "sizes = [[0, 1, 2], [3, 0, -4], [5, 6, 0]]\n", "neg.toml: sizes[1][2]: size must not be negative"),
    ("word.toml", 'sizes = [[0, 1, 2], [3, 0, "4"], [5, 6, 0]]\n', "word.toml: sizes[1][2]: not a number: '4'"),
    ("other.toml", "size = [[0]]\n", "other.toml: size: unknown key 'size'"),
    ("matrix.txt", "0,1\n", "matrix.txt: a traffic matrix must be a .csv or .toml file"),
]


@pytest.mark.parametrize("name,text,expected", BAD_MATRICES, ids=[b[0] for b in BAD_MATRICES])
def test_bad_matrix_is_one_line_naming_file_and_entry(tmp_path, name, text, expected):
    (tmp_path / name).write_text(text)
    (tmp_path / "v.toml").write_text('[instance]\nmachine = "ring4"\ncollective = "alltoallv"\n'
                                     f'ranks = [0, 1, 2]\n[alltoallv]\nmatrix = "{name}"\n')
    result = CliRunner().invoke(cli, ["instance", "show", str(tmp_path / "v.toml")], catch_exceptions=False)
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert expected in result.stderr.replace(str(tmp_path) + "/", "")


BAD_TABLES = [
    ('matrix = "m.csv"\ngenerator = "moe"', "alltoallv: give either matrix"),
    ('generator = "zipf"', "alltoallv.generator: unknown generator 'zipf'"),
    ('matrix = "absent.csv"', "alltoallv.matrix: no traffic matrix file 'absent.csv'"),
    ('generator = "moe"\nskew = -1.0', "alltoallv.skew: must be a non-negative number"),
    ('generator = "moe"\ntop_k = 9', "alltoallv.top_k: must be at most the number of ranks"),
    ('matrix = "m.csv"\nunit = "parsec"', "alltoallv.unit"),
]


@pytest.mark.parametrize("table,expected", BAD_TABLES, ids=range(len(BAD_TABLES)))
def test_bad_alltoallv_table(tmp_path, table, expected):
    (tmp_path / "m.csv").write_text("0,1,2\n3,0,4\n5,6,0\n")
    size = 'size = "1 MiB"\n' if "generator" in table else ""
    (tmp_path / "v.toml").write_text('[instance]\nmachine = "ring4"\ncollective = "alltoallv"\n'
                                     f'ranks = [0, 1, 2]\n{size}[alltoallv]\n{table}\n')
    result = CliRunner().invoke(cli, ["instance", "show", str(tmp_path / "v.toml")], catch_exceptions=False)
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert expected in result.stderr


def test_step_model_and_size_with_matrix_are_refused(tmp_path):
    (tmp_path / "m.csv").write_text("0,1\n1,0\n")
    base = '[instance]\nmachine = "ring4"\ncollective = "alltoallv"\nranks = [0, 1]\n'
    cases = {"step": base + '[alltoallv]\nmatrix = "m.csv"\n[model]\nkind = "step"\n',
             "size": base + 'size = "1 MiB"\n[alltoallv]\nmatrix = "m.csv"\n'}
    for name, text in cases.items():
        (tmp_path / f"{name}.toml").write_text(text)
        result = CliRunner().invoke(cli, ["instance", "show", str(tmp_path / f"{name}.toml")])
        assert result.exit_code == 2, name
    assert "model.kind" in CliRunner().invoke(cli, ["instance", "show", str(tmp_path / "step.toml")]).stderr
