"""A `bounded` result with a large gap says what would most likely tighten it; an optimal one,
or a small gap, says nothing."""
from optcoll.results.advice import LARGE_GAP, tightening_hints
from optcoll.results.record import Result


def result(status="bounded", time=2.0, bound=1.0, model="timed", **params) -> Result:
    return Result("i", "exact-timed", status, model, time, bound, "cut", 1.0, params=params)


def test_a_time_limited_solve_with_few_chunks_hears_of_chunks_limit_and_step_model():
    hints = tightening_hints(result(chunks_per_rank=1, time_limit=20.0))
    assert [h.split(":")[0] for h in hints] == ["more chunks", "a longer limit", "the step model (--model step)"]
    assert "chunks_per_rank = 2" in hints[0] and "(it stopped at 20.0 s)" in hints[1]


def test_an_allreduce_optimal_within_its_family_is_not_told_to_wait_longer():
    hints = tightening_hints(result(chunks_per_rank=8, family_optimal=True))
    assert hints[0].startswith("both parts are optimal") and not any("limit" in h for h in hints)


def test_no_advice_for_optimal_results_small_gaps_or_step_models_with_many_chunks():
    assert tightening_hints(result(status="optimal", time=1.0)) == []
    assert tightening_hints(result(time=1.0 + LARGE_GAP / 2)) == []
    assert tightening_hints(result(model="step", chunks_per_rank=4, interrupted=True)) == [
        "a longer limit: --time-limit (it was interrupted) or --max-memory where a note says a model "
        "was refused"]
