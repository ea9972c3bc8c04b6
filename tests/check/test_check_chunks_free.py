"""check on an instance that leaves C free: the user's synthesizer is handed the instance at each
allowed C (as the exact solver and report's producers are), the fastest verified schedule is the
verdict, and the verdict names the C it used."""
import json

from optcoll.instances.suite import find_suite
from optcoll.producers.chunks import at_chunks
from optcoll.producers.registry import best_of, get_synthesizer
from optcoll.verify import require_valid


def test_each_allowed_c_runs_and_the_fastest_is_judged(tmp_path, run_cli):
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "line4-free.toml").write_text('[instance]\nmachine = "line4"\ncollective = "allgather"\n'
                                           'size = "1 MiB"\nchunks_per_rank = [1, 2, 4]\n')
    code, out, err = run_cli("--synth", "builtin:tacos", "--suite", suite, "--json", "--jobs", "1")
    outcome = json.loads(out)["instances"][0]
    assert outcome["status"] == "no-truth", err  # valid, nothing recorded to compare with
    free = find_suite(str(suite)).specs[0].instance
    times = {}
    for c in free.chunk_choices:
        fixed = at_chunks(free, c)
        schedule, _ = best_of(fixed, get_synthesizer("tacos"))
        times[c] = require_valid(fixed.machine, fixed.collective, schedule, fixed.model).time
    fastest = min(times, key=times.get)
    assert len(set(times.values())) > 1  # the choice matters here
    assert outcome["time"] == times[fastest]
    assert f"(C free in {{1, 2, 4}} → {fastest})" in outcome["problem"]
