"""Recorded ground truth: written into the instance file without touching the hand-written part,
re-verified without solving, never made worse, and loud about contradictions."""
import shutil
import subprocess

import numpy as np
import pytest

from optcoll.errors import InputError
from optcoll.sweeps import ResultCache
from optcoll.instances.suite import find_suite
from optcoll.sweeps.plan import Settings
from optcoll.truth import (Claim, Truth, TruthContradiction, load_truth, schedule_path,
                           update_suite, verify_suite)
from optcoll.truth.record import combine
from optcoll.truth.tomlfile import read_results, split_results, write_results
from sweep_helpers import CLI, small_suite, write_instance

# the instances' own limits: a work limit ends each solve, the wall clock only a safety net
SETTINGS = Settings(runs=2, threads=1)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A small suite after one truth update (its cache is kept for the reruns)."""
    root = tmp_path_factory.mktemp("truth")
    suite_dir = small_suite(root / "suite")
    write_instance(suite_dir, "ring4-ar", "ring4", "allreduce", "16 MiB")
    heads = {p.name: p.read_text() for p in suite_dir.glob("*.toml")}
    cache = ResultCache(root / "cache")
    updated, stats = update_suite(find_suite(str(suite_dir)), SETTINGS, cache, workers=0, progress=False)
    return suite_dir, cache, heads, updated


def _copy(recorded, tmp_path):
    suite_dir = tmp_path / "suite"
    shutil.copytree(recorded[0], suite_dir)
    return suite_dir


def test_update_records_optimum_and_keeps_the_hand_written_part(recorded):
    suite_dir, _, heads, updated = recorded
    assert {u.instance: u.after.status for u in updated} == {
        "dgx1-ag": "optimal", "ring4-a2a": "optimal", "ring8-ag": "optimal", "ring4-ar": "optimal"}
    allreduce = read_results(suite_dir / "ring4-ar.toml")
    assert allreduce["family"]["family"] == "reducescatter+allgather"
    # The direct AllReduce (3 link times) meets the 2(N−1)-deliveries bound; the family's own
    # optimum, ReduceScatter then AllGather, takes 4.
    assert allreduce["lower_bound"] == allreduce["time"] < allreduce["family"]["bound"] == allreduce["family"]["time"]
    for path in suite_dir.glob("*-ag.toml"):
        text = path.read_text()
        assert text.startswith(heads[path.name])  # comments and layout kept byte for byte
        results = read_results(path)
        assert results["status"] == "optimal" and results["gap"] == 0.0
        assert results["lower_bound"] == results["time"]
        assert results["bound"]["source"] and results["best"]["producer"]
        assert results["environment"]["optcoll"] and results["updated"]
        assert (suite_dir / results["schedule"]).is_file()
    ring = read_results(suite_dir / "ring8-ag.toml")
    assert ring["time"] == pytest.approx(4 * (0.5e-6 + 8 * 2**20 / (50 * 2**30)))  # 4 hops of one chunk


def test_verify_re_verifies_stored_schedules(recorded):
    findings = verify_suite(find_suite(str(recorded[0])))
    assert [f.ok for f in findings] == [True] * 4
    assert all("re-verified" in f.message for f in findings)


def test_second_update_changes_nothing(recorded, tmp_path):
    suite_dir = _copy(recorded, tmp_path)
    before = {p: p.read_bytes() for p in suite_dir.rglob("*") if p.is_file()}
    updated, stats = update_suite(find_suite(str(suite_dir)), SETTINGS, recorded[1], workers=0,
                                  progress=False)
    assert stats.computed == 0 and not any(u.changed or u.schedule_written for u in updated)
    after = {p: p.read_bytes() for p in suite_dir.rglob("*") if p.is_file() and p.suffix == ".gz"}
    assert all(before[p] == data for p, data in after.items())


def test_combine_never_makes_a_proven_optimum_worse():
    old = Truth("h", "timed", Claim(1.0, "exact-timed", "proof"), Claim(1.0, "exact-timed", "exact-timed"))
    bound, best = combine("x", old, [Claim(0.5, "analytic", "cut")], [Claim(1.5, "tacos", "tacos")])
    assert bound is old.lower_bound and best is old.best
    bound, best = combine("x", old, [Claim(1.0, "analytic", "cut")], [Claim(1.0, "tacos", "tacos")])
    assert best is old.best and bound is old.lower_bound  # ties keep the recorded provenance
    with pytest.raises(TruthContradiction, match="below the proven lower bound"):
        combine("x", old, [], [Claim(0.9, "tacos", "tacos")])
    with pytest.raises(TruthContradiction):
        combine("x", old, [Claim(1.2, "exact-timed", "a claimed proof")], [])


def _tamper(path, **changes):
    text = path.read_text()
    head, results = split_results(text, str(path))
    for key, value in changes.items():
        section, field = key.split("__")
        results[section][field] = value
    write_results(path, results)


def test_update_stops_loudly_on_a_contradicted_proof(recorded, tmp_path):
    suite_dir = _copy(recorded, tmp_path)
    path = suite_dir / "ring8-ag.toml"
    time = read_results(path)["time"]
    _tamper(path, bound__value=time * 1.5)  # a "proof" the real optimum contradicts
    with pytest.raises(TruthContradiction, match="ring8-ag"):
        update_suite(find_suite(str(suite_dir)), SETTINGS, recorded[1], workers=0, progress=False)
    assert read_results(path)["bound"]["value"] == time * 1.5  # nothing written
    proc = subprocess.run([*CLI, "truth", "update", str(path), "--cache-dir", str(recorded[1].root),
                           "--jobs", "0", "--runs", "2", "--threads", "1"],
                          capture_output=True, text=True)
    assert proc.returncode == 1 and "CONTRADICTION" in proc.stderr


def test_verify_fails_on_a_broken_stored_schedule(recorded, tmp_path):
    suite_dir = _copy(recorded, tmp_path)
    from optcoll.schedules.jsonfile import load_schedule, save_schedule

    spec = find_suite(str(suite_dir / "dgx1-ag.toml")).specs[0]
    path = schedule_path(spec)
    schedule = load_schedule(path, spec.instance.machine)
    from optcoll.schedules.schedule import from_arrays
    save_schedule(path, from_arrays(schedule.chunk[1:], schedule.link[1:], schedule.start[1:]),
                  spec.instance.machine)
    findings = {f.instance: f for f in verify_suite(find_suite(str(suite_dir)))}
    assert not findings["dgx1-ag"].ok and "no longer verifies" in findings["dgx1-ag"].message
    assert findings["ring8-ag"].ok
    proc = subprocess.run([*CLI, "truth", "verify", str(suite_dir)], capture_output=True, text=True)
    assert proc.returncode == 1 and "FAIL" in proc.stdout


def test_truth_for_changed_instance_content_is_set_aside(recorded, tmp_path):
    suite_dir = _copy(recorded, tmp_path)
    path = suite_dir / "ring8-ag.toml"
    path.write_text(path.read_text().replace('size = "64 MiB"', 'size = "32 MiB"'))
    spec = find_suite(str(path)).specs[0]
    truth, stale = load_truth(spec)
    assert truth is None and "different instance content" in stale
    assert not verify_suite(find_suite(str(path)))[0].ok


def test_results_must_come_last(tmp_path):
    path = tmp_path / "x.toml"
    path.write_text('[instance]\nmachine = "ring8"\n[results]\nstatus = "optimal"\n[budget]\nseed = 0\n')
    with pytest.raises(InputError, match=r"\[budget\] follows \[results\]"):
        write_results(path, {"status": "bounded"})


@pytest.mark.parametrize("name", ["quick", "standard", "frontier",
                                  pytest.param("machines", marks=pytest.mark.slow),  # 10 s CPU: 65k-chunk schedules
                                  pytest.param("sizes", marks=pytest.mark.slow)])  # 30 s CPU: 128 instances
def test_recorded_truth_of_builtin_suites_holds(name):
    """Every instance has recorded truth; every stored schedule re-verifies at its recorded time;
    every recorded and analytic bound is ≤ every recorded time (no solving)."""
    findings = verify_suite(find_suite(name))
    bad = [f"{f.instance}: {f.message}" for f in findings if not f.ok]
    assert not bad, bad
    assert all(f.status != "missing" for f in findings)


def test_family_record_changes_only_when_it_says_more():
    from optcoll.truth.update import _family

    old = {"family": "reducescatter+allgather", "bound": 2.0, "time": 2.0, "status": "optimal",
           "wall_time": 1.0}
    assert _family(old, {**old, "wall_time": 5.0}) is old
    assert _family(old, None) is old and _family(None, old) is old
    weaker = {**old, "status": "feasible", "bound": 1.5}
    assert _family(old, weaker) is old
    assert _family(weaker, old) is old  # a proof where there was none
    faster = {**weaker, "time": 1.8}
    assert _family(weaker, faster) is faster


def test_exact_allreduce_bound_is_a_bound_and_its_family_keeps_the_family_bound():
    """An exact AllReduce record: its lower bound (valid for every schedule) becomes a bound claim,
    the family table holds the sum of the parts' bounds and says whether the family optimum was
    proven."""
    from optcoll.truth.update import claims

    params = {"family": "reducescatter+allgather", "family_optimal": True, "family_lower_bound": 2.0}
    record = {"key": "k", "producer": "exact", "status": "ok", "solver_status": "feasible",
              "result": {"producer": "exact-timed", "time": 2.0, "lower_bound": 1.5,
                         "lower_bound_source": "allreduce-transfers bound", "params": params}}
    bounds, times, family = claims([record])
    assert [(b.value, b.source) for b in bounds] == [(1.5, "allreduce-transfers bound")]
    assert family["bound"] == 2.0 and family["status"] == "optimal" and family["time"] == 2.0


def test_old_family_tables_are_read_in_todays_meaning():
    """Before its meaning was fixed, a family table sometimes held the instance-wide bound (here
    the ReduceScatter part's ingress bound of cluster2x8-allreduce-c1): it is read as the family's
    own bound (the sum in its params) and the instance-wide one is handed over as a bound."""
    old = {"family": "reducescatter+allgather", "bound": 0.0071662788266666656,
           "source": "reducescatter part: per-node ingress", "time": 0.014332557653333328,
           "status": "feasible", "solver": "cpsat",
           "params": {"family_optimal": True, "family_lower_bound": 0.014332557653333331}}
    truth = Truth.from_dict({"instance_hash": "h", "model": "timed", "family": old, "updated": "2026-11-26"})
    assert truth.family["bound"] == pytest.approx(0.014332557653333331) and truth.family["status"] == "optimal"
    [promoted] = truth.promoted
    assert promoted.value == pytest.approx(0.0071662788266666656) and promoted.producer == "exact-timed"
    summed = {**old, "bound": 0.0214, "source": "family: reducescatter (latency) + allgather (latency)",
              "params": {}}
    assert Truth.from_dict({"family": summed}).promoted == ()


def test_update_can_be_limited_to_named_instances(recorded):
    """``truth update SUITE --only NAMES`` keeps the suite's other instances out of the sweep."""
    from optcoll.cli.commands_report import _only

    suite = find_suite(str(recorded[0]))
    [kept] = _only([suite], "ring4-ar")
    assert [spec.name for spec in kept.specs] == ["ring4-ar"] and kept.name == suite.name
    with pytest.raises(InputError, match="no instance named 'nosuch'"):
        _only([suite], "ring4-ar,nosuch")


def test_a_bounded_record_names_what_stopped_the_proof():
    """Refused models and stopped searches are read from anywhere in the solve's details; a record
    whose exact solve stayed inside a family says so; a record that says nothing gives ""."""
    from optcoll.truth.record import unproven

    details = {"params": {"interrupted": False, "reducescatter": {"interrupted": True}}}
    family = {"family": "reducescatter+allgather", "status": "optimal",
              "params": {"direct": {"refused": "the model at 64 epochs would take about 469 s to build"}}}
    why = unproven(details, family)
    assert why == ("reducescatter search stopped by its time limit; direct model not built: the model at 64 "
                   "epochs would take about 469 s to build")
    assert unproven({"params": {"refused": ["over the memory limit", "over the memory limit"]}}, None) == \
        "exact model not built: over the memory limit; over the memory limit"
    assert unproven({}, {"family": "reducescatter+allgather", "status": "optimal", "params": {}}) == \
        "only the reducescatter+allgather family was searched (optimal within it)"
    assert unproven({"params": {"interrupted": False}}, None) == ""


def test_a_bounded_record_names_its_time_grid_and_the_c_of_its_least_bound():
    """An exact solve that ended on its own rounded-up grid (not stopped, nothing refused) and a
    C-free bound taken at another C were "no cause recorded"; the words state the recorded
    numbers, and a grid whose relaxation meets it, or a bound at the schedule's C, says nothing."""
    from optcoll.truth.record import unproven

    params = {"interrupted": False, "quantum": 3.778270222222222e-05, "rounding": "up", "epochs": 57,
              "relaxation_epochs": 56, "chunks_per_rank": 4, "chunk_choices": [1, 2, 4, 8], "bound_chunks": 8}
    assert unproven({"params": params}, None) == (
        "exact time grid (quantum 37.7827 us): its schedule takes 57 epochs with link times rounded up, "
        "its relaxation with them rounded down proves only 56; the grids meet only where link times are "
        "multiples of the quantum; the least bound over C is the one at C=8; the best schedule is at C=4")
    assert unproven({"params": {**params, "relaxation_epochs": 57, "bound_chunks": 4}}, None) == ""


def test_a_stored_schedule_that_no_longer_verifies_gives_way_only_to_one_as_fast(recorded, tmp_path):
    """The verifier's rules grew (a plain switch told which arrival to forward): a recorded
    schedule they reject is replaced by this run's when that is at least as fast, with a note
    saying so; a recorded time no schedule of the run reaches stops the update (never lost)."""
    from optcoll.schedules.jsonfile import load_schedule, save_schedule

    suite_dir = _copy(recorded, tmp_path)
    spec = find_suite(str(suite_dir)).spec("ring8-ag")
    truth, _ = load_truth(spec)
    path = suite_dir / truth.schedule
    machine = spec.instance.machine
    stored = load_schedule(path, machine)
    save_schedule(path, stored.take(list(range(1, len(stored)))), machine)  # no longer valid
    updated, _ = update_suite(find_suite(str(suite_dir)), SETTINGS, recorded[1], workers=0, progress=False)
    [ring] = [u for u in updated if u.instance == "ring8-ag"]
    assert ring.schedule_written and ring.after.best.value == truth.best.value
    assert any("no longer verifies" in note and "replaced by" in note for note in ring.notes)
    again, _ = load_truth(find_suite(str(suite_dir)).spec("ring8-ag"))
    save_schedule(suite_dir / again.schedule, stored.take(list(range(1, len(stored)))), machine)
    text = (suite_dir / "ring8-ag.toml").read_text().replace(f"time = {again.best.value!r}",
                                                            f"time = {again.best.value / 2!r}")
    text = text.replace(f"value = {again.best.value!r}\nproducer = \"{again.best.producer}\"",
                        f"value = {again.best.value / 2!r}\nproducer = \"{again.best.producer}\"")
    (suite_dir / "ring8-ag.toml").write_text(text)
    with pytest.raises(TruthContradiction, match="no longer verifies"):
        update_suite(find_suite(str(suite_dir)), SETTINGS, recorded[1], workers=0, progress=False)


def test_a_schedule_over_the_cap_as_json_is_stored_compact_and_re_verified(recorded, tmp_path, monkeypatch):
    """Truth keeps a new schedule as JSON while it is within the input cap that reads it back, in
    the compact form past it; ``truth verify`` reads either."""
    import dataclasses
    import gzip

    from optcoll.schedules.files import load_schedule
    from optcoll.truth.stored import stored_form, verify_stored

    suite_dir = _copy(recorded, tmp_path)
    spec = find_suite(str(suite_dir)).spec("ring8-ag")
    truth, _ = load_truth(spec)
    schedule = load_schedule(spec.path.parent / truth.schedule, spec.instance.machine)
    path, text = stored_form(spec, schedule, spec.instance.machine)
    assert path.name.endswith(".json.gz")
    with monkeypatch.context() as patch:
        patch.setenv("OPTCOLL_MAX_INPUT_BYTES", str(len(gzip.decompress(text)) - 1))  # JSON over the cap
        path, content = stored_form(spec, schedule, spec.instance.machine)
    assert path.suffix == ".npz"
    path.write_bytes(content)
    compact = dataclasses.replace(truth, schedule=path.relative_to(spec.path.parent).as_posix())
    write_results(spec.path, compact.to_dict())
    spec = find_suite(str(suite_dir)).spec("ring8-ag")
    assert verify_stored(spec, load_truth(spec)[0]) == truth.best.value


def test_named_forwards_survive_the_compact_form_and_re_verify(tmp_path, monkeypatch):
    """A rail exchange's AllReduce is valid only with the arrivals its switch sends name (via):
    stored compact by truth, it reads back with them and re-verifies at its recorded time."""
    import dataclasses

    from optcoll.schedules.files import load_schedule
    from optcoll.truth.stored import stored_form, verify_stored

    suite_dir = tmp_path / "standard"
    shutil.copytree(find_suite("standard").spec("cluster2x8-allreduce-c1").path.parent, suite_dir)
    spec = find_suite(str(suite_dir)).spec("cluster2x8-allreduce-c1")
    truth, _ = load_truth(spec)
    schedule = load_schedule(spec.path.parent / truth.schedule, spec.instance.machine)
    assert schedule.via is not None
    with monkeypatch.context() as patch:
        patch.setenv("OPTCOLL_MAX_INPUT_BYTES", "1000")  # JSON over the cap
        path, content = stored_form(spec, schedule, spec.instance.machine)
    assert path.suffix == ".npz"
    path.write_bytes(content)
    assert np.array_equal(load_schedule(path, spec.instance.machine).via, schedule.via)
    compact = dataclasses.replace(truth, schedule=path.relative_to(spec.path.parent).as_posix())
    write_results(spec.path, compact.to_dict())
    spec = find_suite(str(suite_dir)).spec("cluster2x8-allreduce-c1")
    assert verify_stored(spec, load_truth(spec)[0]) == truth.best.value
