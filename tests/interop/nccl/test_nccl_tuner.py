"""Tuner tables: the ranges optcoll writes, and NVIDIA's example plugin (compiled from an NCCL
snapshot, called through ctypes) picking exactly the algorithm, protocol and channels optcoll chose
at every sampled size and between them."""
from __future__ import annotations

import math
import subprocess
import sys

import pytest

from optcoll.errors import InputError
from optcoll.interop.nccl_tuner import (ALGORITHM_INDEX, MAX_BYTES, PROTOCOL_INDEX, Candidate, SizeChoice,
                                        optimizer_csv, tuner_conf, tuner_rules)

from nccl_example_tuner import ExampleTuner, build, example_folder

KIB, MIB = 1024, 1024**2
#: A choice per size of the shape NCCL's own tuning gives on one NVSwitch box: LL for small,
#: LL128 in between, Simple for large, NVLS from a few MiB.
CHOICES = [SizeChoice(4 * KIB, "nccl-ring", "LL", 8, 1e-5), SizeChoice(64 * KIB, "nccl-ring", "LL", 8, 2e-5),
           SizeChoice(1 * MIB, "nccl-ring", "LL128", 16, 6e-5), SizeChoice(16 * MIB, "nccl-nvls", "Simple", 24, 1e-4),
           SizeChoice(256 * MIB, "nccl-nvls", "Simple", 32, 1e-3), SizeChoice(4096 * MIB, "nccl-nvls", "Simple", 32, 1e-2)]


def test_ranges_cover_every_size_once_and_merge_equal_neighbours():
    rules = tuner_rules("allreduce", CHOICES, nodes=1, ranks=8)
    assert [(r.algorithm, r.protocol, r.channels) for r in rules] == [
        ("ring", "ll", 8), ("ring", "ll128", 16), ("nvls", "simple", 24), ("nvls", "simple", 32)]
    assert rules[0].min_bytes == 0 and rules[-1].max_bytes == MAX_BYTES
    assert all(a.max_bytes + 1 == b.min_bytes for a, b in zip(rules, rules[1:]))
    # the cut between 64 KiB and 1 MiB sits at their geometric mean
    assert rules[0].max_bytes == math.isqrt(64 * KIB * MIB)


def test_conf_header_is_a_comment_so_the_plugin_never_reads_it_as_a_rule():
    text = tuner_conf(tuner_rules("allreduce", CHOICES), ["from optcoll"])
    lines = text.splitlines()
    assert all(line.startswith("#") for line in lines[:2])
    assert all(len(line.split(",")) == 10 for line in lines[2:])


@pytest.mark.parametrize("bad", [[SizeChoice(1, "ring", "ll", 1, 1.0), SizeChoice(1, "tree", "ll", 1, 1.0)],
                                 [SizeChoice(1, "bruck", "ll", 1, 1.0)], [SizeChoice(1, "ring", "ll64", 1, 1.0)], []])
def test_bad_choices_are_refused_by_name(bad):
    with pytest.raises(InputError):
        tuner_rules("allreduce", bad)


@pytest.fixture(scope="module")
def plugin_library(tmp_path_factory):
    library, why = build(tmp_path_factory.mktemp("nccl-tuner"))
    if library is None:
        pytest.skip(why)
    return library


def _expected(size: int) -> SizeChoice:
    """The sampled choice nearest to ``size`` on a log scale (ties go to the smaller sample)."""
    return min(CHOICES, key=lambda c: (abs(math.log(max(size, 1) / c.size)), c.size))


def test_the_real_example_plugin_picks_optcolls_choice_at_every_size(plugin_library, tmp_path):
    conf = tmp_path / "nccl_tuner.conf"
    conf.write_text(tuner_conf(tuner_rules("allreduce", CHOICES, nodes=1, ranks=8)))
    tuner = ExampleTuner(plugin_library, conf, ranks=8, nodes=1)
    try:
        probes = sorted({c.size for c in CHOICES} | {c.size + 1 for c in CHOICES} | {1, 3 * KIB, 300 * KIB,
                        5 * MIB, 100 * MIB, 2**40})
        for size in probes:
            want = _expected(size)
            algo = ALGORITHM_INDEX[{"nccl-ring": "ring", "nccl-nvls": "nvls"}[want.algorithm]]
            assert tuner.choose("allreduce", size) == (algo, PROTOCOL_INDEX[want.protocol.lower()],
                                                       want.channels), size
        assert tuner.choose("allgather", MIB) is None  # no rule for another collective
    finally:
        tuner.close()


def test_the_plugin_ignores_a_table_for_another_communicator_size(plugin_library, tmp_path):
    conf = tmp_path / "nccl_tuner.conf"
    conf.write_text(tuner_conf(tuner_rules("allreduce", CHOICES, nodes=2, ranks=16)))
    tuner = ExampleTuner(plugin_library, conf, ranks=8, nodes=1)
    try:
        assert tuner.choose("allreduce", MIB) is None
    finally:
        tuner.close()


def test_optimizer_input_is_read_by_nccls_own_script(tmp_path):
    """NCCL's ``scripts/optimize_config.py`` (from the same snapshot) reads optcoll's performance
    CSV and, optimising latency, keeps the fastest candidate of each of its size bins."""
    folder, why = example_folder(tmp_path)
    if folder is None:
        pytest.skip(why)
    script = folder / "scripts" / "optimize_config.py"
    if not script.is_file():
        pytest.skip(f"this NCCL snapshot has no {script.relative_to(tmp_path)}")
    rows = [Candidate("allreduce", 512, "ring", "LL", 8, 9e-6, 1, 8),
            Candidate("allreduce", 512, "tree", "LL", 8, 7e-6, 1, 8),
            Candidate("allreduce", 8 * MIB, "ring", "Simple", 16, 9e-5, 1, 8),
            Candidate("allreduce", 8 * MIB, "nvls", "Simple", 16, 6e-5, 1, 8)]
    data = tmp_path / "perf.csv"
    data.write_text(optimizer_csv(rows))
    out = tmp_path / "out.conf"
    done = subprocess.run([sys.executable, str(script), "-m", "latency_us", "-o", str(out), str(data)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    rules = [line.split(",") for line in out.read_text().splitlines() if line and not line.startswith("#")]
    picked = {(int(r[1]), r[3], r[4]) for r in rules}
    assert any(low <= 512 and algo == "tree" and proto == "ll" for low, algo, proto in picked), rules
    assert any(algo == "nvls" and proto == "simple" for _, algo, proto in picked), rules


def test_expect_writes_a_table_the_real_plugin_follows_at_every_size(plugin_library, tmp_path):
    """``optcoll expect dgxh100 --nccl-tuner-conf``: the compiled example plugin steers NCCL to the
    algorithm, protocol and channels optcoll found fastest among NCCL's own at each size."""
    import json

    from click.testing import CliRunner

    from optcoll.cli.main import cli

    conf = tmp_path / "nccl_tuner.conf"
    result = CliRunner().invoke(cli, ["expect", "dgxh100", "--sizes", "4KiB,64KiB,1MiB,16MiB,256MiB",
                                      "--nccl-tuner-conf", str(conf), "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    tuner = ExampleTuner(plugin_library, conf, ranks=8, nodes=1)
    try:
        for r in rows:
            tuned = r["nccl_tuned"]
            assert tuned["time"] <= r["nccl"]["time"] * (1 + 1e-9)  # never slower than NCCL's own pick
            assert tuner.choose("allreduce", r["size"]) == (ALGORITHM_INDEX[tuned["algorithm"]],
                                                            PROTOCOL_INDEX[tuned["protocol"]], tuned["channels"])
        assert {r["nccl_tuned"]["algorithm"] for r in rows} == {"ring", "tree", "nvls"}  # the table does change
    finally:
        tuner.close()


def test_a_tuner_table_of_a_collective_nccl_cannot_tune_is_one_line_exit_2(tmp_path):
    from click.testing import CliRunner

    from optcoll.cli.main import cli

    result = CliRunner().invoke(cli, ["expect", "dgxh100", "--collective", "alltoall", "--sizes", "1MiB",
                                      "--nccl-tuner-conf", str(tmp_path / "t.conf")])
    assert result.exit_code == 2 and "--nccl-tuner-conf" in result.output and "alltoall" in result.output
    assert len(result.output.strip().splitlines()) == 1 and not (tmp_path / "t.conf").exists()
