"""check says which seeds it ran and takes --runs: a randomised builtin runs the instance's
[budget] seed and the next ones and keeps the fastest verified schedule, as report does, so the
two give one verdict on the same seeds; a deterministic one runs once whatever --runs says."""
import json

from optcoll.producers.registry import best_of, get_synthesizer

TORUS = "torus4x4-allgather-c1"  # tacos's time depends on the seed here


def _times(out: str) -> dict[str, float]:
    return {o["instance"]: o["time"] for o in json.loads(out)["instances"]}


def test_runs_keep_the_fastest_seed_like_report(make_suite, run_cli):
    from optcoll.instances.suite import find_suite

    suite = make_suite({TORUS: TORUS})
    code, one, _ = run_cli("--synth", "builtin:tacos", "--suite", suite, "--json", "--max-gap", "2", "--jobs", "1")
    assert code == 0 and json.loads(one)["seeds"] == "seed 0"
    code, five, _ = run_cli("--synth", "builtin:tacos", "--suite", suite, "--json", "--max-gap", "2",
                            "--runs", "5", "--jobs", "1")
    assert code == 0 and json.loads(five)["seeds"] == "seeds 0..4, the fastest kept"
    instance = find_suite(str(suite)).specs[0].instance
    _, times = best_of(instance, get_synthesizer("tacos"), runs=5, seed0=0)  # what report runs for 5 runs
    assert _times(five)[TORUS] == min(times) <= _times(one)[TORUS] == times[0]


def test_a_deterministic_synthesizer_runs_once_and_the_text_names_the_seed(make_suite, run_cli):
    suite = make_suite({TORUS: TORUS})
    code, out, _ = run_cli("--synth", "builtin:ring", "--suite", suite, "--runs", "5", "--max-gap", "9", "--jobs", "1")
    assert code == 0 and "1 instances, seed 0;" in out.splitlines()[0]
