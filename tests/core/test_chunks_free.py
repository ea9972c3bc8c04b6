"""chunks_per_rank left free: "free", a list or an int in instance files and on --chunks; every bad
form is one line naming the file and field (or the flag) and exit 2."""
from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from optcoll.cli.main import cli
from optcoll.errors import InputError
from optcoll.instances.chunks import FREE_CHUNKS, parse_chunks_flag
from optcoll.producers.chunks import at_chunks
from optcoll.instances.instancefile import load_instance
from optcoll.instances.suite import find_suite

HEAD = '[instance]\nmachine = "ring4"\ncollective = "allgather"\nsize = "1 MiB"\n'


def write(tmp_path: Path, chunks: str) -> Path:
    path = tmp_path / "inst.toml"
    path.write_text(HEAD + f"chunks_per_rank = {chunks}\n")
    return path


def test_free_list_and_int(tmp_path):
    free = load_instance(write(tmp_path, '"free"'))
    assert free.chunk_choices == FREE_CHUNKS == (1, 2, 4, 8) and free.collective.chunks_per_rank == 1
    listed = load_instance(write(tmp_path, "[4, 1, 2]"))
    assert listed.chunk_choices == (1, 2, 4) and listed.collective.chunks_per_rank == 1
    fixed = load_instance(write(tmp_path, "3"))
    assert fixed.chunk_choices == () and fixed.collective.chunks_per_rank == 3
    one = load_instance(write(tmp_path, "[2]"))
    assert one.chunk_choices == () and one.collective.chunks_per_rank == 2
    at_4 = at_chunks(free, 4)
    assert at_4.chunk_choices == () and at_4.collective.num_chunks == 16
    assert at_4.collective.chunk_bytes == 2.0**20 / 16


@pytest.mark.parametrize("value, words", [("0", "at least 1"), ("-2", "at least 1"), ("[]", "lists no chunk"),
                                          ("[1, 2, 1]", "lists 1 twice"), ("1.5", "must be an integer"),
                                          ('"fre"', "must be an integer"), ("true", "must be an integer"),
                                          ('[1, "a"]', "must be an integer"), ("[0, 2]", "at least 1")])
def test_bad_chunks_in_a_file_is_one_line_exit_2(tmp_path, value, words):
    path = write(tmp_path, value)
    with pytest.raises(InputError, match=words) as caught:
        load_instance(path)
    assert caught.value.field == "instance.chunks_per_rank" and caught.value.source == str(path)
    result = CliRunner().invoke(cli, ["instance", "show", str(path)])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and "instance.chunks_per_rank" in lines[0] and words in lines[0]


def test_collectives_with_their_own_chunks_refuse_free(tmp_path):
    path = tmp_path / "custom.toml"
    path.write_text('[instance]\nmachine = "ring4"\ncollective = "custom"\nchunks_per_rank = "free"\n'
                    '[custom]\npre = [[0]]\npost = [[1]]\nchunk_size = "1 MiB"\n')
    with pytest.raises(InputError, match="custom fixes its chunks"):
        load_instance(path)
    path.write_text(path.read_text().replace('"free"', "1"))
    assert load_instance(path).collective.kind == "custom"


def test_chunks_flag_forms():
    assert parse_chunks_flag("free") == FREE_CHUNKS
    assert parse_chunks_flag("4,1, 2") == (1, 2, 4)
    assert parse_chunks_flag("3") == 3


@pytest.mark.parametrize("command", ["solve", "synth"])
@pytest.mark.parametrize("value", ["0", "-1", "", "1,1", "1.5", "fre", "1,x", "2,"])
def test_bad_chunks_flag_is_one_line_exit_2(tmp_path, command, value):
    result = CliRunner().invoke(cli, [command, str(write(tmp_path, "1")), "--chunks", value])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"optcoll: error: --chunks {value}:"), lines


def test_synth_and_solve_choose_c_and_save_it(tmp_path):
    path = write(tmp_path, "1")
    out = tmp_path / "best.json"
    result = CliRunner().invoke(cli, ["solve", str(path), "--chunks", "1,2,4", "--out", str(out)])
    assert result.exit_code == 0, result.stderr
    assert "chose C = 2 of [1, 2, 4]" in result.stdout and "least over C in {1, 2, 4}" in result.stdout
    verified = CliRunner().invoke(cli, ["verify", str(write(tmp_path, "[1, 2, 4]")), str(out)])
    assert verified.exit_code == 0 and "valid" in verified.stdout
    result = CliRunner().invoke(cli, ["synth", str(path), "--algo", "tacos", "--chunks", "free"])
    assert result.exit_code == 0 and "chose C = " in result.stdout


def test_hash_of_a_free_instance_includes_the_allowed_set_and_fixed_hashes_stay():
    """A fixed-C record's hash is what it was (truth verify finds no stale record); a C-free
    instance's names its allowed set."""
    suite = find_suite("standard")
    fixed = suite.spec("cluster2x8-allgather-c1")
    assert fixed.data["results"]["instance_hash"] == fixed.content_key
    free = suite.spec("cluster2x8-allgather-cfree")
    assert free.instance.chunk_choices == FREE_CHUNKS
    assert free.data["results"]["instance_hash"] == free.content_key


def test_out_of_time_keeps_the_best_so_far_and_the_analytic_bounds_of_the_rest(tmp_path):
    """A clock past its end after the first C: that C's schedule, and in the least bound the C
    values not reached count with their analytic bound (least_bound at each)."""
    from optcoll.instances.budget import Budget
    from optcoll.instances.clock import Clock
    from optcoll.producers.chunks import least_bound
    from optcoll.producers import run

    inst = load_instance(write(tmp_path, "[1, 2, 4]"))
    ended = Clock(Budget(time_limit=1.0), start=0.0, now=lambda: 2.0)  # a fake time source past the limit
    produced = run.over_chunks(inst, lambda fixed, _: run.synthesized(fixed, "tacos"), ended)
    result = produced.result
    assert result.params["chunks_per_rank"] == 1 and "stopped before C=2, 4" in result.notes[-1]
    c1 = run.synthesized(at_chunks(inst, 1), "tacos").result
    assert result.time == c1.time
    assert result.lower_bound == min([c1.lower_bound] + [least_bound(at_chunks(inst, c)).value for c in (2, 4)])


def test_exact_over_c_records_the_whole_budget(tmp_path):
    from optcoll.instances.budget import Budget
    from optcoll.producers import run

    inst = load_instance(write(tmp_path, "[1, 2]"))
    produced = run.exact(inst, budget=Budget(time_limit=20.0, threads=1))
    params = produced.result.params
    assert params["time_limit"] == 20.0 and params["chunk_choices"] == [1, 2] and params["chunks_per_rank"] == 2
    assert produced.result.status == "optimal" and produced.schedule.meta["chunks_per_rank"] == 2
