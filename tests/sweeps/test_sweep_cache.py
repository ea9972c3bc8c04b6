import gzip
import json
import pickle

import pytest

from optcoll.errors import InputError
from optcoll.machines.generators import ring
from optcoll.schedules.jsonfile import schedule_to_dict
from optcoll.schedules.npzfile import schedule_to_npz
from optcoll.schedules.schedule import ScheduleBuilder
from optcoll.sweeps import Job, ResultCache
from optcoll.sweeps.cache import _CHECKSUM, _HAS_SCHEDULE, _checksum
from optcoll.instances.suite import find_suite
from optcoll.instances.suite import InstanceSpec, geometric_sizes, size_label
from sweep_helpers import small_suite, write_instance


def test_builtin_suites_load(tmp_path):
    for name in ("quick", "standard", "frontier", "machines", "sizes"):
        suite = find_suite(name)
        assert suite.specs
        for spec in suite.specs:
            assert spec.instance.collective.num_chunks > 0
    assert find_suite("standard").sizes.chunks == (1, 2, 3)


def test_content_key_ignores_results_but_not_content(tmp_path):
    path = write_instance(tmp_path, "a", "ring8", "allgather", "64 MiB")
    key = InstanceSpec(path, find_suite(str(path)).specs[0].data).content_key
    with path.open("a") as handle:
        handle.write('\n[results]\nstatus = "optimal"\n')
    assert find_suite(str(path)).specs[0].content_key == key
    assert find_suite(str(path)).specs[0].derive(size="32 MiB").content_key != key
    write_instance(tmp_path, "a", "ring8", "allgather", "32 MiB")
    assert find_suite(str(path)).specs[0].content_key != key


def test_an_occupancy_override_changes_the_model_the_name_and_the_key(tmp_path):
    spec = find_suite(str(write_instance(tmp_path, "a", "ring8", "allgather", "64 MiB"))).specs[0]
    pipelined = spec.derive(chunks_per_rank=4, occupancy="serialization")
    assert pipelined.name == "a[C=4,occupancy=serialization]"
    assert pipelined.instance.model.occupancy == "serialization" and spec.instance.model.occupancy == "link"
    assert pipelined.instance.collective.chunks_per_rank == 4
    assert pipelined.content_key not in (spec.content_key, spec.derive(chunks_per_rank=4).content_key)
    assert pipelined.derive(size="1 MiB").occupancy == "serialization"


def test_job_key_depends_on_producer_params_and_pickles(tmp_path):
    spec = find_suite(str(small_suite(tmp_path))).specs[0]
    a = Job(spec, "synth", {"algo": "tacos", "runs": 2, "seed0": 0})
    b = Job(spec, "synth", {"algo": "tacos", "runs": 3, "seed0": 0})
    assert a.key != b.key and a.key == Job(spec, "synth", {"seed0": 0, "runs": 2, "algo": "tacos"}).key
    spec.instance  # cached; must not travel
    clone = pickle.loads(pickle.dumps(a))
    assert "instance" not in clone.spec.__dict__ and clone.key == a.key


def _ring_allgather():
    machine = ring(4, 1e9, 1e-6)
    b = ScheduleBuilder(machine)
    for k in range(3):
        for i in range(4):
            b.send((i - k) % 4, i, (i + 1) % 4, start=k * 2e-6)
    return machine, b.build()


def test_cache_round_trip_and_unreadable_record(tmp_path):
    machine, schedule = _ring_allgather()
    cache = ResultCache(tmp_path / "c")
    cache.put("ab" + "0" * 62, {"status": "ok", "x": 1.5}, schedule_to_npz(schedule, machine))
    assert cache.get("ab" + "0" * 62) == {"status": "ok", "x": 1.5}
    back = cache.schedule("ab" + "0" * 62, machine)
    assert schedule_to_dict(back, machine) == schedule_to_dict(schedule, machine)
    assert cache.schedule_path("ab" + "0" * 62).name.endswith(".schedule.npz")
    cache.record_path("cd" + "0" * 62).parent.mkdir(parents=True)
    cache.record_path("cd" + "0" * 62).write_text('{"truncated')
    assert cache.get("cd" + "0" * 62) is None
    assert not list((tmp_path / "c").rglob(".*"))  # no temporary files left behind


def test_records_written_with_a_json_schedule_are_still_read(tmp_path):
    """The cache wrote gzipped JSON schedules before the compact form: they still read, checksum
    and all, and a new result for the key replaces the old files."""
    machine, schedule = _ring_allgather()
    key = "ef" + "0" * 62
    cache = ResultCache(tmp_path / "c")
    text = json.dumps(schedule_to_dict(schedule, machine), separators=(",", ":")).encode()
    old = cache.root / "results" / "ef" / f"{key}.schedule.json.gz"
    old.parent.mkdir(parents=True)
    old.write_bytes(gzip.compress(text, mtime=0))
    record = {"status": "ok", _HAS_SCHEDULE: True}
    cache.record_path(key).write_text(json.dumps({**record, _CHECKSUM: _checksum(record, text)}))
    assert cache.lookup(key) == {"status": "ok"}
    assert schedule_to_dict(cache.schedule(key, machine), machine) == schedule_to_dict(schedule, machine)
    cache.put(key, {"status": "ok"}, schedule_to_npz(schedule, machine))
    assert not old.exists() and cache.schedule_path(key).suffix == ".npz"
    assert cache.lookup(key) == {"status": "ok"}


def test_suite_errors_name_the_problem(tmp_path):
    with pytest.raises(InputError, match="no suite directory"):
        find_suite("no-such-suite")
    small_suite(tmp_path)
    (tmp_path / "suite.toml").write_text('[plots.sizes]\ninstance = "missing"\n')
    with pytest.raises(InputError, match="no instance named 'missing'"):
        find_suite(str(tmp_path))
    (tmp_path / "suite.toml").write_text('[plots.sizes]\ninstance = "ring8-ag"\nchunks = [0]\n')
    with pytest.raises(InputError, match="plots.sizes.chunks"):
        find_suite(str(tmp_path))


def test_geometric_sizes_cover_the_range():
    sizes = geometric_sizes(1024, 2**30, 11)
    assert sizes[0] == 1024 and sizes[-1] == 2**30 and len(sizes) == 11
    assert all(b == 4 * a for a, b in zip(sizes, sizes[1:]))
    assert size_label(1024.0) == "1024 B"


def test_job_key_depends_on_the_code_that_runs_it(tmp_path, monkeypatch):
    """Editing any optcoll source file, or adding one, changes the digest every job key holds."""
    import shutil
    from pathlib import Path

    import optcoll
    from optcoll import provenance
    from optcoll.sweeps import jobs

    def package_copy(name: str) -> Path:
        return Path(shutil.copytree(Path(optcoll.__file__).parent, tmp_path / name / "optcoll",
                                    ignore=shutil.ignore_patterns("__pycache__")))

    assert provenance.source_digest(package_copy("same")) == provenance.source_digest()
    edited = package_copy("edited")
    (edited / "producers" / "compose.py").write_text(
        (edited / "producers" / "compose.py").read_text() + "\n# one more line\n")
    assert provenance.source_digest(edited) != provenance.source_digest()
    extra = package_copy("extra")
    (extra / "extra.py").write_text("")
    assert provenance.source_digest(extra) != provenance.source_digest()

    spec = find_suite(str(small_suite(tmp_path / "suite"))).specs[0]
    job = Job(spec, "exact", {"solver": "cpsat"})
    before = job.key
    monkeypatch.setattr(jobs, "source_digest", lambda: provenance.source_digest(edited))
    assert job.key != before


def test_a_cached_schedule_keeps_the_arrivals_its_switch_sends_name(tmp_path):
    """The cache stores schedules compact: a rail exchange's named forwards (via) come back, and
    the schedule verifies at its recorded time only with them (without: ambiguous-forward)."""
    import dataclasses

    from optcoll.schedules.files import load_schedule
    from optcoll.truth.stored import load_truth
    from optcoll.verify import verify

    spec = find_suite("standard").spec("cluster2x8-allreduce-c1")
    truth, _ = load_truth(spec)
    inst = spec.instance
    schedule = load_schedule(spec.path.parent / truth.schedule, inst.machine)
    cache = ResultCache(tmp_path / "c")
    key = "ab" + "1" * 62
    cache.put(key, {"status": "ok"}, schedule_to_npz(schedule, inst.machine))
    back = cache.schedule(key, inst.machine)
    assert schedule_to_dict(back, inst.machine) == schedule_to_dict(schedule, inst.machine)
    assert verify(inst.machine, inst.collective, back, inst.model).time == truth.best.value
    unnamed = verify(inst.machine, inst.collective, dataclasses.replace(back, via=None), inst.model)
    assert unnamed.violation.kind == "ambiguous-forward"
