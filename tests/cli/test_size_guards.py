"""Guards sized to what each command can finish (issue 21, class 3): `model show` of a 1024×1024
torus or a fully connected 4096 refuses while building; what it can build but not search in
seconds it shows without the diameter or the cut, naming the cap; ASTRA predict estimates its
memory and messages before it starts; pareto's --max-chunks is bounded and its time limit covers
setup. Refusals are one line with the cap and the variable that raises it (exit 2)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from fault_helpers import assert_one_line_error, invoke, run_cli
from special_inputs import MEMORY, QUICK


def _model(path: Path, topology: str) -> Path:
    path.write_text(f'[machine]\nname = "{path.stem}"\n[topology]\n{topology}\nbandwidth = "50 GiB/s"\n'
                    'latency = "0.5 us"\n')
    return path


@pytest.mark.parametrize("topology, says", [
    ('kind = "torus2d"\ndims = [1024, 1024]', "1048576 nodes is more than `model show` handles (at most 65536; "
     "raise it with OPTCOLL_MAX_SHOW_NODES)"),
    ('kind = "fully_connected"\nn = 4096', "16773120 links is more than `model show` handles (at most 262144; "
     "raise it with OPTCOLL_MAX_SHOW_LINKS)"),
], ids=["torus 1024x1024", "fully connected 4096"])
def test_model_show_refuses_what_it_cannot_describe_quickly(topology, says, tmp_path, record_property):
    """Input: a 1024x1024 torus / fully_connected n = 4096 (passed the old guards, then ran over
    120 s in 3.3 GB), in a real process with a 1.5 GiB address space."""
    model = _model(tmp_path / "big.toml", topology)
    proc = run_cli(["model", "show", model], timeout=120, memory=MEMORY)
    line = assert_one_line_error(proc, f"{model}: topology: {says}")
    record_property("tried", f"model show: {' '.join(topology.split())}")
    record_property("message", line.replace(str(tmp_path), "<tmp>"))


@pytest.mark.parametrize("command, topology, says", [
    ("draw", 'kind = "torus2d"\ndims = [1024, 1024]', "1048576 nodes is more than `model draw` handles"),
    ("show", 'kind = "hypercube"\ndim = 20', "1048576 nodes is more than `model show` handles"),
    ("show", 'kind = "ring"\nn = 200000', "200000 nodes is more than `model show` handles"),
    ("show", 'kind = "ring"\nn = 2000000', "2000000 nodes is more than optcoll can model (at most 1048576; raise "
     "it with OPTCOLL_MAX_NODES)"),
], ids=["draw torus 1024x1024", "show hypercube 20", "show ring 200000", "show ring 2000000"])
def test_the_command_budget_or_the_global_cap_names_itself(command, topology, says, tmp_path, record_property):
    """Input: machines over `model show`/`model draw`'s budget, and one over the global cap too
    (which is then the one named: raising the command's own would not help)."""
    model = _model(tmp_path / "big.toml", topology)
    args = ["model", command, model] + (["-o", tmp_path / "big.svg"] if command == "draw" else [])
    line = assert_one_line_error(invoke(args), f"{model}: topology: {says}")
    record_property("tried", f"model {command}: {' '.join(topology.split())}")
    record_property("message", line.replace(str(tmp_path), "<tmp>"))
    assert not (tmp_path / "big.svg").exists()


def test_what_is_built_but_too_costly_to_search_is_shown_without_it(tmp_path):
    """Input: a 128x128 torus (16384 NPUs): built at once; its diameter (1.3·10⁹ search steps)
    and worst cut are left out with the caps named, and --json says the same."""
    model = _model(tmp_path / "t128.toml", 'kind = "torus2d"\ndims = [128, 128]')
    proc = invoke(["model", "show", model])
    assert proc.returncode == 0, proc.stderr
    assert "diameter not computed: 1342177280 NPU x (node + link) search steps is more than `model show` " \
           "computes (at most 134217728; raise it with OPTCOLL_MAX_SHOW_SEARCH)" in proc.stdout
    assert "worst cut not computed:" in proc.stdout and "OPTCOLL_MAX_SHOW_CUT" in proc.stdout
    info = json.loads(invoke(["model", "show", model, "--json"]).stdout)
    assert info["npu_diameter_hops"] is None and info["worst_cut"] is None and info["strongly_connected"]
    assert set(info["not_computed"]) == {"npu_diameter_hops", "worst_cut"}


def test_a_command_budget_is_raised_and_lowered_by_its_variable(monkeypatch):
    """Input: ring8 (16 links) with OPTCOLL_MAX_SHOW_LINKS=10 (refused as the links being added
    pass 10), then 16 (shown)."""
    monkeypatch.setenv("OPTCOLL_MAX_SHOW_LINKS", "10")
    assert_one_line_error(invoke(["model", "show", "ring8"]), "12 links is more than `model show` handles "
                          "(at most 10; raise it with OPTCOLL_MAX_SHOW_LINKS)")
    monkeypatch.setenv("OPTCOLL_MAX_SHOW_LINKS", "16")
    assert invoke(["model", "show", "ring8"]).returncode == 0


def _network(path: Path, side: int, dims: int = 2) -> Path:
    """Ring(side) in each of ``dims`` dimensions."""
    def row(value) -> str:
        return "[ " + ", ".join([str(value)] * dims) + " ]"
    path.write_text(f"topology: {row('Ring')}\nnpus_count: {row(side)}\nbandwidth: {row(50)}\n"
                    f"latency: {row(500)}\n")
    return path


def test_astra_predict_estimates_before_it_starts(tmp_path, record_property):
    """Input: ASTRA-sim Ring(1024) x Ring(1024) AllGather (the old predictor grew past 5.8 GB),
    in a real process with a 1.5 GiB address space."""
    network = _network(tmp_path / "network.yml", 1024)
    proc = run_cli(["astra", "predict", "--network", network, "--collective", "allgather", "--comm-size", "1MiB"],
                   timeout=120, memory=MEMORY)
    line = assert_one_line_error(proc, "network: simulating 1048576 NPUs x 1 stream(s) (2145386496 messages, "
                                 "about 7.5 GiB of memory) is more than `astra predict` simulates (at most "
                                 "8388608; raise it with OPTCOLL_MAX_PREDICT_MESSAGES)")
    record_property("tried", "astra predict on Ring(1024) x Ring(1024)")
    record_property("message", line)


def test_astra_predict_refuses_what_memory_cannot_hold(tmp_path, monkeypatch, record_property):
    """Input: Ring(64) on the congestion-aware backend with 1 KiB of memory available (as if the
    machine were full)."""
    monkeypatch.setattr("optcoll.producers.exact.memory.default_limit", lambda: 2**10)
    network = _network(tmp_path / "network.yml", 64, dims=1)
    proc = invoke(["astra", "predict", "--network", network, "--collective", "allgather", "--comm-size", "1MiB",
                   "--backend", "aware"])
    line = assert_one_line_error(proc, "network: simulating 64 NPUs x 1 stream(s)",
                                 "of memory) needs more than the 1 KiB of memory it may use; not started")
    record_property("tried", "astra predict with less memory available than its estimate")
    record_property("message", line)


def test_pareto_max_chunks_is_bounded(record_property):
    """Input: pareto --max-chunks 1000000000 --time-limit 5 (never returned: setup per C ran
    outside the limit)."""
    proc = invoke(["pareto", QUICK / "dgx1-allgather-c1.toml", "--max-chunks", "1000000000", "--time-limit", "5"])
    line = assert_one_line_error(proc, "--max-chunks: 1000000000 chunks per rank is too many: with 8 ranks the "
                                 "collective would track 64000000000 chunk copies, which is more than optcoll "
                                 "tracks (at most 16777216; raise it with OPTCOLL_MAX_CHUNK_COPIES)")
    record_property("tried", "pareto --max-chunks 1000000000")
    record_property("message", line)


def test_pareto_time_limit_covers_setup(record_property):
    """Input: pareto --max-chunks 100 --time-limit 2 on DGX-1 (took 15.7 s at a 5 s limit): it
    returns the front found in the limit, says the limit stopped it and how many C were set up
    (a real process with a generous timeout; no timing is asserted)."""
    proc = run_cli(["pareto", QUICK / "dgx1-allgather-c1.toml", "--max-chunks", "100", "--time-limit", "2"],
                   timeout=180)
    assert proc.returncode == 0, proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("front incomplete (later points may exist): stopped by the time limit (2 s)"), last
    assert "set up)" in last
    record_property("tried", "pareto --max-chunks 100 --time-limit 2")
    record_property("message", last)


def test_readme_states_every_cap_and_how_to_raise_it():
    """Every cap of optcoll.limits has its row in README's "Security and robustness" table."""
    from optcoll.limits import CAPS

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Security and robustness"):readme.index("## Files")]
    assert "OPTCOLL_MAX_<NAME>" in section
    for name in CAPS:
        assert f"`{name.upper()}`" in section, name
