"""The greedy benchmark's plumbing (the figures themselves are in reports/bench-greedy.md)."""
from __future__ import annotations

import pytest

from optcoll.bench.greedy import (GreedyCase, growth_exponent, machine_for, measure, render,
                                            run_bench)


def test_machines_per_family():
    assert machine_for("torus2d", 64).name == "torus8x8"
    assert machine_for("mesh2d", 256).name == "mesh16x16"
    assert machine_for("hypercube", 1024).num_npus == 1024
    assert machine_for("torus3d", 4096).name == "torus16x16x16"
    assert machine_for("torus3d", 256).num_npus == 256
    with pytest.raises(ValueError):
        machine_for("torus2d", 128)


def test_growth_exponent_recovers_a_power_law():
    sizes = [64, 256, 1024]
    assert growth_exponent(sizes, [3e-6 * n**2.5 for n in sizes]) == pytest.approx(2.5)
    assert growth_exponent([64], [1.0]) is None


def test_one_case_in_process_and_the_report(tmp_path):
    row = measure(GreedyCase("torus2d", 16, "allreduce", "tacos+"))
    assert row["transfers"] == 2 * 16 * 15
    assert row["time_s"] >= row["split_bound_s"] * (1 - 1e-9) >= row["bound_s"] * (1 - 1e-9)
    assert row["synth_cpu_s"] >= 0 and row["rss_peak_bytes"] > 0
    out = tmp_path / "bench.md"
    rows = run_bench(sizes=(), out=str(out), extra_rows=[row])
    text = out.read_text()
    assert "| torus2d | 16 | allreduce | tacos+ | 480 |" in text
    assert rows == [row]
    assert "Growth of synthesis time" in render([row])


def test_rows_carry_load_warmup_and_the_previous_runs_cpu(tmp_path):
    row = measure(GreedyCase("hypercube", 16, "alltoall", "tacos+"), bounds=False)
    assert row["transfers"] == 16 * 32  # every chunk on a shortest path: 32 hops from each NPU
    assert row["load_start"] >= 0 and row["load_end"] >= 0 and row["warmup_cpu_s"] >= 0
    out = tmp_path / "bench.md"
    earlier = {**row, "synth_cpu_s": 12.34}
    run_bench(sizes=(), out=str(out), extra_rows=[row], before=[earlier])
    line = next(x for x in out.read_text().splitlines()
                if x.startswith("| hypercube | 16 | alltoall | tacos+ |"))
    assert " 12.34 |" in line
    # The new rows go to the JSON-lines file beside the report, the next run's "before".
    again = tmp_path / "again.md"
    (tmp_path / "again.jsonl").write_text(out.with_suffix(".jsonl").read_text())
    run_bench(sizes=(), out=str(again), extra_rows=[{**row, "synth_cpu_s": 0.5}])
    line = next(x for x in again.read_text().splitlines()
                if x.startswith("| hypercube | 16 | alltoall | tacos+ |"))
    assert f" {row['synth_cpu_s']:.2f} |" in line.split("|")[8] + "|"
