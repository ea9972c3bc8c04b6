"""The size ladders of ``optcoll bench exact``: climbing stops at the first rung not proven in
time, every row comes from a verified result, and the proof path is named for what closed it."""
from __future__ import annotations

import math
from functools import partial

import pytest
from click.testing import CliRunner

from optcoll.cli.main import cli
from optcoll.errors import InputError
from optcoll.machines import generators as G
from optcoll.bench import exact as B

from solver_checks import proof_budget
from timed_helpers import BW, LAT, close, instance

GIB = 2.0**30
#: Each rung reaches its proof by a different path (seen on these instances with CP-SAT, seed 0):
#: the greedy start meets the latency bound on a one-way ring; on a 3×3 torus with C = 2 the
#: time-expanded model's schedule meets an analytic bound (on a switch the shift schedule now
#: meets the ingress bound before any model is built); on a 3×3 mesh with uneven links and C = 2 the
#: continuous model's does. The 2×2 mesh whose links run at 50 and 50·√2 GiB/s can be proven at
#: no time limit and on no machine: its link times have no common unit, so the solver brackets
#: the optimum between a rounded-up and a rounded-down grid, which settle about 6 % apart. The
#: ladder must stop there, whatever the machine's speed or load.
LADDER = B.Ladder("test", "test ladder", (
    B.Rung("uniring5", partial(G.ring, 5, BW, LAT, bidirectional=False)),
    B.Rung("torus3x3", partial(G.torus, [3, 3], BW, LAT), chunks=2),
    B.Rung("hetmesh3x3", partial(G.mesh, [3, 3], B.HET_BANDWIDTHS, B.LATENCY), chunks=2),
    B.Rung("irrational2x2", partial(G.mesh, [2, 2], [50 * GIB, 50 * GIB * math.sqrt(2)], B.LATENCY), chunks=2),
    B.Rung("never climbed", partial(G.ring, 4, BW, LAT)),
))
#: Far above what any rung needs (under a second each): a safety net, never what ends a rung.
LIMIT = 600.0


@pytest.fixture(scope="module")
def runs() -> list[B.RungRun]:
    return B.climb(LADDER, LIMIT)


def test_climbing_stops_at_the_first_unproven_rung(runs):
    assert [r.rung for r in runs] == ["uniring5", "torus3x3", "hetmesh3x3", "irrational2x2"]
    assert [r.proven for r in runs] == [True, True, True, False]
    stop = runs[-1]
    assert stop.status == "bounded" and stop.detail.startswith("no proof in ")
    assert stop.detail.endswith("(limit 600 s; time-expanded)")
    assert stop.time > stop.lower_bound and stop.gap > 0.01
    # the solver's own account of what ran travels with the unproven rung: its search on the
    # rounded-up grid ended in that grid's optimum, not at a limit
    assert any(": optimal (" in note for note in stop.notes)
    assert not any("limit" in note or "interrupted" in note for note in stop.notes)


def test_proven_rows_are_verified_optima_labelled_by_what_closed_them(runs):
    assert [r.proof for r in runs[:3]] == [B.START_MET_BOUND, B.SOLVER_MET_BOUND, B.SOLVER_MET_BOUND]
    for r in runs[:3]:
        assert r.status == "optimal" and close(r.time, r.lower_bound)
    assert [(r.npus, r.chunks) for r in runs] == [(5, 1), (9, 2), (9, 2), (4, 2)]
    # Independent of the solver: a one-way ring of 5 needs 4 hops, each one chunk of 1 GiB / 5.
    assert close(runs[0].time, 4 * (LAT + GIB / 5 / BW))
    assert "latency" in runs[0].detail and runs[1].detail.startswith("time-expanded; ")
    assert runs[2].detail.startswith("continuous; ")


def test_section_names_largest_proven_solver_closed_and_first_unproven(runs):
    heading, headers, rows, note = B.ladder_section(LADDER, runs, LIMIT)
    assert heading == "Ladder: test ladder" and len(rows) == 4 and len(rows[0]) == len(headers)
    assert "**Largest proven: hetmesh3x3 C=2 (9 NPUs)**" in note
    assert ("Largest the solver had to close (its greedy start was above the bound): hetmesh3x3 C=2 (9 NPUs)"
            in note and "every bound it met was analytic (none came from its search)" in note)
    assert "**First unproven: irrational2x2 C=2 (4 NPUs)**: bounded" in note and "Solver notes on it" in note
    assert rows[-1][-1].startswith("no proof in") and rows[0][-1] == B.START_MET_BOUND


def test_a_ladder_proven_to_its_top_says_so_and_credits_the_solver_only_for_what_it_did():
    ladder = B.Ladder("small", "small", (B.Rung("ring4", partial(G.ring, 4, BW, LAT)),
                                         B.Rung("ring6", partial(G.ring, 6, BW, LAT))))
    runs = B.climb(ladder, LIMIT)
    note = B.ladder_section(ladder, runs, LIMIT)[3]
    assert [r.proof for r in runs] == [B.START_MET_BOUND] * 2
    assert "Every rung proven: the ladder ends at ring6 C=1" in note
    assert "No proven rung needed the solver's search" in note
    switch = B.Ladder("switch", "switch", (LADDER.rungs[1],))
    note = B.ladder_section(switch, B.climb(switch, LIMIT), LIMIT)[3]
    assert "had to close (its greedy start was above the bound): torus3x3 C=2 (9 NPUs)" in note
    assert "every bound it met was analytic (none came from its search)" in note


def test_an_exception_from_the_solver_ends_that_ladder_not_the_benchmark():
    runs = B.climb(LADDER, LIMIT, solver="no-such-solver")
    assert len(runs) == 1 and runs[0].status == "failed" and not runs[0].proven
    assert runs[0].detail.startswith("InputError:") and "no-such-solver" in runs[0].detail
    note = B.ladder_section(LADDER, runs, LIMIT)[3]
    assert "**No rung proven.**" in note and "failed (no schedule)" in note


def test_a_rung_still_running_past_its_limit_is_stopped_and_ends_the_ladder():
    # The 12×12 torus's greedy starts alone take seconds: its process cannot answer in 0.05 s.
    ladder = B.Ladder("big", "big", (B.Rung("torus12x12", partial(G.torus, [12, 12], BW, LAT)),
                                     B.Rung("ring4", partial(G.ring, 4, BW, LAT))))
    runs = B.climb(ladder, 0.05, grace=0.0)
    assert len(runs) == 1 and runs[0].status == "failed" and runs[0].npus == 144
    assert runs[0].detail.startswith("stopped 0 s past the 0.05 s limit: the solver had not returned")


def test_an_optimum_proven_past_the_limit_does_not_count(runs):
    from optcoll.producers.exact.timed.solve import solve_timed
    from optcoll.results.record import evaluate_outcome

    rung = LADDER.rungs[0]
    inst = B._allgather("uniring5", rung.machine(), 1, LIMIT)
    result = evaluate_outcome(inst, "exact-timed-cpsat", solve_timed(inst, budget=proof_budget()))
    late = B.judge("test", rung, 5, result, wall=LIMIT + 1, cpu=0.0, time_limit=LIMIT)
    assert result.status == "optimal" and not late.proven
    assert late.detail.startswith("proven only after 601 s, past the 600 s limit")


def test_unknown_families_are_refused_by_name():
    assert [ladder.family for ladder in B.select_ladders(["ring", "torus2d"])] == ["torus2d", "ring"]
    with pytest.raises(InputError, match="unknown family 'tori'; known: dgx1-chunks, nvswitch, "):
        B.select_ladders(["tori"])


# -- the CLI -------------------------------------------------------------------------------------

OLD_REPORT = """# Exact-solver benchmarks

Measured long ago.

## Timed model: AllGather of 1 GiB to a proven optimum (CP-SAT, 2 threads)

| instance | time |
|---|---|
| dgx1 C=1 | 10.7384 ms |

Numbers measured last session.

## Ladder: DGX-1, chunk ladder (C chunks per rank)

stale rows
"""


def _bench(*args) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["bench", "exact", *map(str, args)], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_cli_runs_the_ladder_alone_and_keeps_the_other_sections(tmp_path):
    out = tmp_path / "bench-exact.md"
    out.write_text(OLD_REPORT)
    code, text, err = _bench("--only", "ladder", "--families", "dgx1-chunks", "--time-limit", 600, "--out", out)
    report = out.read_text()
    assert code == 0 and f"wrote {out}" in text
    assert "dgx1-chunks: dgx1 C=32 (8 NPUs): optimal" in err  # one progress line per rung
    kept = OLD_REPORT[OLD_REPORT.index("## Timed"):OLD_REPORT.index("## Ladder")]
    assert kept in report and "stale rows" not in report
    assert report.index("## Timed") < report.index("## Ladder: DGX-1") and "## Size ladders" in report
    assert "Every rung proven: the ladder ends at dgx1 C=64 (8 NPUs)" in report
    assert report.count("| dgx1 | 8 |") == 16 and "## Ladder: 2D torus" not in report


@pytest.mark.parametrize("args, message", [
    (["--families", "dgx1-chunks,tori"], "optcoll: error: --families: unknown family 'tori'"),
    (["--only", "everything"], "optcoll: error: --only: unknown part 'everything'; use one of fixed, ladder, step, allreduce"),
])
def test_cli_refuses_bad_options_in_one_line_before_running(tmp_path, args, message):
    out = tmp_path / "bench-exact.md"
    code, _, err = _bench(*args, "--out", out)
    assert code == 2 and err.startswith(message) and not out.exists()


def test_a_bound_the_search_raised_is_credited_to_the_search():
    """A Broadcast through a plain 4-port switch: the optimum lies above every analytic bound and
    only the solver's search proves it (no horizon below it is feasible); the ladder says so."""
    from optcoll.producers.exact.timed.solve import solve_timed
    from optcoll.results.record import evaluate_outcome

    switch = partial(G.switch, 4, BW, LAT)
    inst = instance(switch(), "broadcast", root=0)
    outcome = solve_timed(inst, budget=proof_budget())
    result = evaluate_outcome(inst, "exact-timed-cpsat", outcome)
    analytic = outcome.trace[0][2]  # the first bound recorded: the analytic one
    assert result.status == "optimal" and result.lower_bound > analytic * (1 + 1e-6)
    assert result.params["bound_from"] == "search" and B.proof_path(result) == B.SOLVER_CLOSED
    rung = B.Rung("switch4 broadcast", switch)
    run = B.judge("broadcast", rung, 4, result, wall=1.0, cpu=1.0, time_limit=30)
    note = B.ladder_section(B.Ladder("b", "b", (rung,)), [run], 30)[3]
    assert "largest whose bound its search raised: switch4 broadcast C=1 (4 NPUs)" in note
