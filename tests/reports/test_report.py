"""Gap reports: the numbers follow from the records, the files carry the expected sections, and
local and Dask runs give the same report."""
import csv
import json
import subprocess
from dataclasses import replace

import pytest
from click.testing import CliRunner

from optcoll.cli.commands_report import report as report_command
from optcoll.reports.build import assemble, plan_report, run_plan
from optcoll.reports.files import write_report
from optcoll.results.record import meets
from optcoll.sweeps import ResultCache
from optcoll.instances.suite import find_suite
from optcoll.sweeps.plan import Settings
from optcoll.truth import update_suite
from optcoll.truth.tomlfile import read_results, write_results
from sweep_helpers import CLI, comparable, small_suite

# the instances' own limits: a work limit ends each solve, the wall clock only a safety net
SETTINGS = Settings(runs=2, threads=1)
SUITE_TOML = ('[suite]\nruns = 2\n[plots.sizes]\ninstance = "ring8-ag"\nchunks = [1, 2]\n'
              'from = "1 KiB"\nto = "1 MiB"\npoints = 3\n')


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    suite_dir = small_suite(root / "suite")
    (suite_dir / "suite.toml").write_text(SUITE_TOML)
    plan = plan_report([find_suite(str(suite_dir))], SETTINGS, plots=True)
    records, stats = run_plan(plan, ResultCache(root / "cache"), workers=0, progress=False)
    return root, suite_dir, plan, records, assemble(plan, records, "test report")


def test_rows_and_summary_follow_from_the_records(built):
    *_, report = built
    assert [row.name for row in report.rows] == ["dgx1-ag", "ring4-a2a", "ring8-ag"]
    for row in report.rows:
        assert row.status == "optimal" and row.gap == 0.0
        assert row.bound == max(b["value"] for b in row.bounds) or row.bound_source.startswith("exact")
        for result in row.producers.values():
            if result.time is not None:  # NCCL's at its own chunking: against the bound at that C
                bound = row.nccl_bound if result.own_chunking else row.bound
                assert result.time >= bound * (1 - 1e-9)
                assert result.gap == pytest.approx(max(result.time / bound - 1, 0.0), abs=1e-9)
    for s in report.summary:
        ran = [row for row in report.rows if s.label in row.producers and row.producers[s.label].ran]
        assert s.instances == len(ran)
        expected = tuple(row.name for row in ran if not meets(row.producers[s.label].time, row.best)
                         and not row.producers[s.label].own_chunking)
        assert s.misses == expected
        gaps = [row.producers[s.label].gap for row in ran]
        if gaps:
            assert s.max_gap == max(gaps)
    ring = next(s for s in report.summary if s.label == "ring")
    assert "dgx1-ag" in ring.misses  # one unidirectional ring is far from optimal on DGX-1


def test_nccl_table_shows_the_fastest_nccl_algorithm_at_its_own_chunking(built):
    from optcoll.producers.registry import NCCL
    from optcoll.reports.content import nccl_table

    *_, report = built
    table = nccl_table(report)
    for row, cells in zip(report.rows, table.rows):
        cells = dict(zip(table.headers, cells))
        ran = {label: r for label, r in row.producers.items() if label in NCCL and r.ran}
        if not ran:  # AlltoAll: NCCL runs it as point-to-point sends, not one of its algorithms
            assert row.collective == "alltoall" and cells["best NCCL algorithm"] == "n/a"
            continue
        best = min(ran.values(), key=lambda r: r.time)
        assert cells["best NCCL algorithm"] == best.label and cells["NCCL's chunking"] == best.own_chunking
        assert cells["best NCCL algorithm vs yardstick"] == (
            f"{'≤ ' if best.gap > 0 else ''}{100 * best.gap:.1f} % over the lower bound at its chunking")
    dgx1 = dict(zip(table.headers, table.rows[0]))
    assert dgx1["best NCCL algorithm"] in ("nccl-ring", "nccl-pat")  # AllGather: ring or PAT


def test_nccl_is_judged_at_its_own_chunking_not_at_one_chunk_per_rank(built):
    """DGX-1 AllGather of 1 GiB at C = 1: NCCL's ring is 3.5 times the optimum at that C, but NCCL
    cuts 1 GiB into 1 MiB Simple slices (C = 128 on 8 ranks), where its channels meet the lower
    bound: the report judges it there, and says what C = 1 would have said."""
    from optcoll.analysis.expect.predict import context, run
    from optcoll.bounds import best_lower_bound
    from optcoll.instances.instance import TimeModel
    from optcoll.machines.calibration import generation_of
    from optcoll.producers.chunks import at_chunks
    from optcoll.reports.content import nccl_table

    _, suite_dir, _, _, report = built
    row = next(r for r in report.rows if r.name == "dgx1-ag")
    assert row.chunks_per_rank == 1 and row.status == "optimal"
    at_one = row.nccl_fixed["nccl-ring"]
    assert at_one.gap == pytest.approx(2.5)  # C = 1 would blame NCCL: 250 % over the optimum
    own = row.producers["nccl-ring"]
    assert own.own_chunking == "Simple, 1 MiB units → C = 128" and own.params["chunking"]["chunks"] == 128
    assert own.gap == 0.0 and meets(own.time, row.nccl_bound)
    # the C is the one optcoll expect runs NCCL's ring at (its own path to C), the bound the one at that C
    inst = find_suite(str(suite_dir)).spec("dgx1-ag").instance
    assert run(context(inst.machine, generation_of("dgx1")), "allgather", 1 << 30, "nccl-ring", "ring",
               "simple").chunks == 128
    pipelined = at_chunks(inst, 128)
    assert row.nccl_bound == best_lower_bound(pipelined.machine, pipelined.collective,
                                              TimeModel(occupancy="serialization")).value
    cells = dict(zip(nccl_table(report).headers, nccl_table(report).rows[0]))
    assert cells["best NCCL algorithm vs yardstick"] == "0.0 % over the lower bound at its chunking"
    assert "nccl-ring: 250.0 % over the proven optimum" == cells["at the instance's C instead"]
    summary = next(s for s in report.summary if s.label == "nccl-ring")
    assert "dgx1-ag" not in summary.misses and summary.optimal_known == 0


def test_sizes_curves_cover_every_size(built):
    *_, report = built
    (data,) = report.sizes
    labels = {c.label for c in data.curves}
    assert {"optimal C=1", "optimal C=2", "tacos", "ring"} <= labels
    for curve in data.curves:
        assert curve.sizes == (1024.0, 32768.0, 1048576.0)
        assert all(t is not None for t in curve.times)
    optimal = {c.label: c.times for c in data.curves if c.label.startswith("optimal")}
    assert all(t >= b * (1 - 1e-9) for t, b in zip(optimal["optimal C=1"], data.bounds))


def test_report_files_have_the_expected_sections(built, tmp_path):
    *_, report = built
    written = write_report(report, tmp_path / "out", "optcoll report suite")
    names = {p.name for p in written}
    assert {"README.md", "report.html", "results.csv", "report.json", "gaps.svg", "sizes-suite.svg"} <= names
    md = (tmp_path / "out/README.md").read_text()
    for heading in ("# test report", "## Summary per producer", "## NCCL's algorithms at their own chunking",
                    "## Gap per instance and producer",
                    "## Instances", "## Lower bounds", "## Greedy synthesizers over seeds",
                    "## Solver and synthesis times", "## Message size and the step model"):
        assert heading in md
    assert "![Gap to the best proven lower bound" in md and "(gaps.svg)" in md
    page = (tmp_path / "out/report.html").read_text()
    assert page.count("<svg") == 2 and "<table>" in page and "src=" not in page and "<script" not in page
    rows = list(csv.DictReader((tmp_path / "out/results.csv").open()))
    assert len(rows) == sum(len(r.producers) for r in report.rows)
    exact = [r for r in rows if r["producer"] == "exact"]
    assert all(r["status"] == "optimal" and float(r["gap"]) == 0.0 for r in exact)
    data = json.loads((tmp_path / "out/report.json").read_text())
    assert [r["name"] for r in data["rows"]] == ["dgx1-ag", "ring4-a2a", "ring8-ag"]
    assert data["summary"][0]["label"] == "exact"


def test_dask_report_equals_local_report(built, tmp_path):
    import distributed
    _, _, plan, _, local = built
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:
        records, _ = run_plan(plan, ResultCache(tmp_path), cluster=cluster.scheduler_address,
                              progress=False)
    remote = assemble(plan, records, "test report")
    assert comparable(remote.to_dict()) == comparable(local.to_dict())


def test_recorded_optimum_is_used_instead_of_solving(built, tmp_path):
    root, suite_dir, *_ = built
    update_suite(find_suite(str(suite_dir)), SETTINGS, ResultCache(root / "cache"), workers=0,
                 progress=False)
    plan = plan_report([find_suite(str(suite_dir))], SETTINGS, plots=False)
    assert not [job for job in plan.jobs() if job.producer == "exact"]
    records, _ = run_plan(plan, ResultCache(root / "cache"), workers=0, progress=False)
    report = assemble(plan, records, "t")
    assert all(row.producers["exact"].recorded and row.status == "optimal" for row in report.rows)
    resolved = plan_report([find_suite(str(suite_dir))], SETTINGS, plots=False, resolve=True)
    assert len([job for job in resolved.jobs() if job.producer == "exact"]) == 3


def test_report_command_prints_the_gap_table(built, tmp_path):
    root, suite_dir, *_ = built
    result = CliRunner().invoke(report_command, [str(suite_dir / "ring8-ag.toml"), "--jobs", "0",
                                                 "--cache-dir", str(root / "cache"), "--runs", "2",
                                                 "--threads", "1"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "ring8-ag" in result.output and "misses the optimum" in result.output
    assert "from the cache" in result.output


def test_report_exits_1_on_a_contradiction(built, tmp_path):
    root, suite_dir, *_ = built
    path = tmp_path / "ring8-ag.toml"
    path.write_text((suite_dir / "ring8-ag.toml").read_text())
    (tmp_path / "schedules").mkdir()
    for f in (suite_dir / "schedules").glob("ring8-ag*"):
        (tmp_path / "schedules" / f.name).write_bytes(f.read_bytes())
    results = read_results(path)
    results["bound"]["value"] = results["time"] * 0.5  # fine: a lower bound may be weak
    write_results(path, results)
    ok = subprocess.run([*CLI, "report", str(path), "--jobs", "0", "--cache-dir", str(root / "cache"),
                         "--runs", "2", "--threads", "1"], capture_output=True,
                        text=True)
    assert ok.returncode == 0, ok.stderr
    results["bound"]["value"] = results["time"] * 1.01  # a "proof" above a verified schedule
    write_results(path, results)
    bad = subprocess.run([*CLI, "report", str(path), "--jobs", "0", "--cache-dir", str(root / "cache"),
                          "--runs", "2", "--threads", "1"], capture_output=True,
                         text=True)
    assert bad.returncode == 1 and "CONTRADICTION" in bad.stderr


def test_a_recorded_exact_result_is_marked_by_what_this_run_did(built):
    """The exact solver never ran in this report (every optimum was recorded): its cells say so
    (‡), never "better than this run's exact solve" (†), which needs a slower schedule of this run."""
    from dataclasses import replace

    from optcoll.reports.content import gap_cell, legend

    root, suite_dir, *_ = built
    update_suite(find_suite(str(suite_dir)), SETTINGS, ResultCache(root / "cache"), workers=0,
                 progress=False)
    plan = plan_report([find_suite(str(suite_dir))], SETTINGS, plots=False)
    records, _ = run_plan(plan, ResultCache(root / "cache"), workers=0, progress=False)
    report = assemble(plan, records, "t")
    for row in report.rows:
        exact = row.producers["exact"]
        assert exact.recorded and exact.beat is None and gap_cell(row, exact).endswith(" ‡")
        assert gap_cell(row, replace(exact, beat=exact.time * 1.1)).endswith(" †")
    words = [item.text for item in legend(report).items]
    assert any(w.startswith("‡:") and "this run's exact solver gave no schedule" in w for w in words)
    assert any(w.startswith("†:") and "faster than the schedule this run's exact solve found" in w for w in words)


def test_latency_share_is_what_the_bytes_alone_do_not_explain(built):
    """Ring(8) AllGather of 64 MiB at C = 1: the farthest rank is 4 hops away and each hop carries a
    whole 8 MiB chunk, so the bytes alone need 4·m/B; the optimum adds α per hop."""
    from optcoll.machines.catalog import load_machine

    *_, report = built
    row = next(r for r in report.rows if r.name == "ring8-ag")
    ring = load_machine("ring8")
    bandwidth, alpha = float(ring.link_bandwidth.max()), float(ring.link_latency.max())
    assert float(ring.link_bandwidth.min()) == bandwidth and float(ring.link_latency.min()) == alpha
    m = 8 * 2**20
    assert row.bandwidth_floor == pytest.approx(4 * m / bandwidth, rel=1e-12)
    assert row.best == pytest.approx(4 * (alpha + m / bandwidth), rel=1e-9)
    assert row.latency_share == pytest.approx(4 * alpha / row.best, rel=1e-6)


def test_size_table_has_one_row_per_network_and_collective_in_order(built):
    """A column per size, networks and collectives sorted (a rail network's name sorts inside its
    base network's rows, not after them), '-' where a size is missing; none when each has one size."""
    from dataclasses import replace

    from optcoll.reports.content import seconds, size_table

    *_, report = built
    assert size_table(report) is None  # one size per network and collective
    ring = next(r for r in report.rows if r.name == "ring8-ag")
    rows = [replace(ring, network=net, collective=coll, size_bytes=size)
            for net, coll, size in (("ring8-rail", "allgather", 1024.0), ("ring8", "reducescatter", 2048.0),
                                    ("ring8", "allgather", 1024.0), ("ring8", "allgather", 2048.0))]
    table = size_table(replace(report, rows=rows))
    assert table.headers == ("network", "collective", "1 KiB", "2 KiB")
    assert [row[:2] for row in table.rows] == [("ring8", "allgather"), ("ring8", "reducescatter"),
                                               ("ring8-rail", "allgather")]
    assert table.rows[1][2] == "-"
    assert table.rows[0][3] == (f"{seconds(ring.best)}, C={ring.chunks_per_rank}, "
                                f"latency {100 * ring.latency_share:.0f} %")


def test_report_json_is_the_same_from_the_cache(built, tmp_path):
    """A report assembled from cached records writes the same report.json as the fresh one: keys
    in one order whichever way a record's parameters were built (deterministic output)."""
    root, _, plan, _, fresh = built
    cached, stats = run_plan(plan, ResultCache(root / "cache"), workers=0, progress=False)
    again = replace(assemble(plan, cached, "test report"), generated=fresh.generated)  # a minute may pass
    write_report(fresh, tmp_path / "fresh", "optcoll report suite")
    write_report(again, tmp_path / "cached", "optcoll report suite")
    assert (tmp_path / "fresh/report.json").read_bytes() == (tmp_path / "cached/report.json").read_bytes()
