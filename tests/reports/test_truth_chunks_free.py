"""A C-free instance end to end: truth update records the chosen C, truth verify re-verifies the
schedule at that C and the bound as the least over C, and the report shows "free → C"."""
import csv
import io
import json
import shutil

import pytest

from optcoll.instances.suite import find_suite
from optcoll.reports.build import assemble, plan_report, run_plan
from optcoll.reports.content import compact_table
from optcoll.reports.files import csv_text
from optcoll.sweeps import ResultCache
from optcoll.sweeps.plan import Settings
from optcoll.truth import load_truth, update_suite, verify_suite
from optcoll.truth.tomlfile import read_results, write_results
from sweep_helpers import write_instance

# the instances' own limits: a work limit ends each solve, the wall clock only a safety net
SETTINGS = Settings(runs=1, threads=1)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    root = tmp_path_factory.mktemp("cfree")
    suite_dir = root / "suite"
    write_instance(suite_dir, "ring4-ag-free", "ring4", "allgather", "1 MiB", chunks='[1, 2, 4]')
    write_instance(suite_dir, "ring4-ag-c1", "ring4", "allgather", "1 MiB")
    cache = ResultCache(root / "cache")
    updated, _ = update_suite(find_suite(str(suite_dir)), SETTINGS, cache, workers=0, progress=False)
    return suite_dir, cache, {u.instance: u for u in updated}


def test_update_records_the_chosen_c_and_the_least_bound(recorded):
    suite_dir, _, updated = recorded
    free = updated["ring4-ag-free"].after
    params = free.best.details["params"]
    assert params["chunks_per_rank"] == 2 and params["chunk_choices"] == [1, 2, 4]
    assert "least over C in {1, 2, 4}" in free.lower_bound.source
    fixed = updated["ring4-ag-c1"].after
    assert fixed.best.value > free.best.value  # C = 2 pays on a ring
    assert "chunks_per_rank" not in fixed.best.details.get("params", {}) or \
        fixed.best.details["params"]["chunks_per_rank"] == 1
    findings = {f.instance: f for f in verify_suite(find_suite(str(suite_dir)))}
    assert all(f.ok for f in findings.values()), findings


def test_verify_checks_the_schedule_at_its_recorded_c(recorded, tmp_path):
    suite_dir = tmp_path / "suite"
    shutil.copytree(recorded[0], suite_dir)
    path = suite_dir / "ring4-ag-free.toml"
    results = read_results(path)
    results["best"]["params"]["chunks_per_rank"] = 4
    write_results(path, results)
    finding = next(f for f in verify_suite(find_suite(str(suite_dir))) if f.instance == "ring4-ag-free")
    assert not finding.ok and "no longer verifies" in finding.message
    results["best"]["params"]["chunks_per_rank"] = 3
    write_results(path, results)
    finding = next(f for f in verify_suite(find_suite(str(suite_dir))) if f.instance == "ring4-ag-free")
    assert not finding.ok and "not one of the allowed" in finding.message


def test_verify_leaves_records_byte_for_byte(recorded, tmp_path):
    suite_dir = tmp_path / "suite"
    shutil.copytree(recorded[0], suite_dir)
    shutil.copy(find_suite("standard").spec("cluster2x8-allgather-c1").path, suite_dir)
    shutil.copytree(find_suite("standard").directory / "schedules", suite_dir / "schedules", dirs_exist_ok=True)
    before = {p.name: p.read_bytes() for p in suite_dir.glob("*.toml")}
    assert all(f.ok for f in verify_suite(find_suite(str(suite_dir))))
    assert {p.name: p.read_bytes() for p in suite_dir.glob("*.toml")} == before


def test_report_shows_the_chosen_c(recorded):
    suite_dir, cache, _ = recorded
    plan = plan_report([find_suite(str(suite_dir))], SETTINGS, plots=False)
    records, _ = run_plan(plan, cache, workers=0, progress=False)
    report = assemble(plan, records, "c free")
    row = next(r for r in report.rows if r.name == "ring4-ag-free")
    assert row.chunks_label == "1,2,4 → 2" and row.chunks_per_rank == 2 and row.chunk_choices == (1, 2, 4)
    assert row.chunk_bytes == 2.0**20 / 8
    assert next(r for r in report.rows if r.name == "ring4-ag-c1").chunks_label == "1"
    assert "1,2,4 → 2" in [cells[4] for cells in compact_table(report).rows]
    line = next(r for r in csv.DictReader(io.StringIO(csv_text(report))) if r["instance"] == "ring4-ag-free")
    assert line["chunks_per_rank"] == "2" and line["chunk_choices"] == "1 2 4"
    data = json.loads(json.dumps(report.to_dict(), default=str))
    assert next(r for r in data["rows"] if r["name"] == "ring4-ag-free")["chunk_choices"] == [1, 2, 4]
    for result in row.producers.values():  # every producer's gap against the least bound
        if result.time is not None:
            assert result.time >= row.bound * (1 - 1e-9)
    assert load_truth(find_suite(str(suite_dir)).spec("ring4-ag-free"))[0].best.value == row.best
