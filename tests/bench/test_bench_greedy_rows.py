"""The greedy benchmark records what verifying each schedule costs, and re-running one case
replaces that case's earlier row instead of listing it twice."""
from optcoll.bench.greedy import run_bench


def _stale(family: str, npus: int) -> dict:
    return {"family": family, "npus": npus, "collective": "allgather", "algo": "tacos+",
            "transfers": -1, "synth_wall_s": 0.0, "synth_cpu_s": 0.0, "rss_before_bytes": 1.0,
            "rss_peak_bytes": 1.0, "time_s": None, "link_time_s": 1.0, "verify_wall_s": 0.0,
            "unverified": "stale"}


def test_a_rerun_case_replaces_its_row_and_reports_the_verifier_cost(tmp_path):
    out = tmp_path / "bench.md"
    kept = _stale("mesh2d", 16)
    rows = run_bench(sizes=(16,), families=("torus2d",), collectives=("allgather",), algos=("tacos+",),
                     out=str(out), bounds=False, extra_rows=[_stale("torus2d", 16), kept])
    assert [r["family"] for r in rows] == ["mesh2d", "torus2d"] and rows[0] is kept
    fresh = rows[1]
    assert fresh["transfers"] == 16 * 15 and fresh["time_s"] > 0
    assert fresh["verify_peak_bytes"] >= fresh["verify_start_bytes"] > 0
    lines = out.read_text().splitlines()
    torus = [line for line in lines if line.startswith("| torus2d | 16 | allgather | tacos+ | 240 |")]
    assert len(torus) == 2  # the results table and the verifier's table
    assert "## The shared verifier on these schedules" in lines
    assert sum("not verified: stale" in line for line in lines) == 1  # only the kept mesh row
    assert not any(line.startswith("| mesh2d | 16 | allgather | tacos+ | -1 | 0.0 |") for line in lines)
