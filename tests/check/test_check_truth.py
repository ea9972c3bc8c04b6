"""What a valid schedule is compared with: the recorded optimum or best known schedule (default)
or the proven lower bound, and what happens when the record is missing, stale or contradicted."""
import tomllib

import pytest
import tomli_w

from check_helpers import PY_CHAOS, copy_instance
from optcoll.check import run_check
from optcoll.units import format_time

RING, ALLREDUCE = "ring8-allgather-c1", "dgx1-allreduce-c1"


def _edit(path, change):
    data = tomllib.loads(path.read_text())
    change(data)
    path.write_text(tomli_w.dumps(data))


def _by(report):
    return {o.instance: o for o in report.outcomes}


def _bounded_by_the_transfer_count(data):
    """The record as it was before the pieces relaxation proved the 4 link times optimal: bounded
    by the AllReduce transfer count's 3 link times (a valid, weaker bound)."""
    results = data["results"]
    bound = results["time"] * 3 / 4
    results.update(status="bounded", lower_bound=bound, gap=1 / 3)
    results["bound"] = {"value": bound, "producer": "analytic", "source": "allreduce-transfers"}


def test_a_bounded_instance_is_compared_with_the_best_known_schedule_or_with_the_bound(make_suite):
    suite = make_suite({"good": ALLREDUCE})
    _edit(suite / "good.toml", _bounded_by_the_transfer_count)
    best = run_check(PY_CHAOS, suite, max_gap=1.2)
    (o,) = best.outcomes
    assert (o.status, o.reference_kind, o.ratio) == ("pass", "best known", pytest.approx(1.0))
    assert o.reference > o.lower_bound  # bounded: the optimum is not proven

    bound = run_check(PY_CHAOS, suite, max_gap=1.2, against="bound")
    (o,) = bound.outcomes
    assert (o.status, o.reference_kind) == ("gap", "lower bound")
    # 4 link times of ReduceScatter + AllGather against the 3 of the recorded bound
    assert o.ratio == pytest.approx(o.time / o.lower_bound) and o.ratio == pytest.approx(4 / 3)
    assert f"is 1.3333× the recorded lower bound {format_time(o.lower_bound)}" in o.message
    assert "the recorded best proven lower bound" in bound.text()


def test_missing_or_stale_truth_is_a_failure_that_says_what_to_do(make_suite, tmp_path):
    suite = make_suite({"recorded": RING})
    copy_instance(suite, RING, "good-unrecorded", results=False)
    copy_instance(suite, RING, "good-stale")
    _edit(suite / "good-stale.toml", lambda d: d["instance"].update(size="32 MiB"))
    by = _by(run_check(PY_CHAOS, suite))
    assert by["good-unrecorded"].status == "no-truth"
    assert by["good-unrecorded"].message.startswith("valid (")
    assert "no recorded ground truth to compare with; run `optcoll truth update`" in \
        by["good-unrecorded"].message
    assert by["good-stale"].status == "no-truth"
    assert "recorded results were for different instance content" in by["good-stale"].message


def test_a_schedule_below_a_proven_bound_is_a_loud_contradiction(make_suite):
    suite = make_suite({"good": RING})

    def raise_bound(data):
        data["results"]["bound"]["value"] = 1.0  # seconds: far above the real optimum

    _edit(suite / "good.toml", raise_bound)
    (o,) = run_check(PY_CHAOS, suite).outcomes
    assert o.status == "contradiction" and o.failed
    assert o.message.startswith(f"valid schedule of {format_time(o.time)} beats the proven lower "
                                f"bound 1 s (")
    assert "a bug in a bound, the recorded truth or the verifier" in o.message


def test_beating_a_bounded_record_passes_with_a_note(make_suite):
    suite = make_suite({"good": ALLREDUCE})
    _edit(suite / "good.toml", lambda d: d["results"]["best"].update(value=0.03))
    (o,) = run_check(PY_CHAOS, suite).outcomes
    assert o.status == "pass" and o.ratio < 1
    assert o.message.endswith("; it beats the best schedule on record (30 ms)")
