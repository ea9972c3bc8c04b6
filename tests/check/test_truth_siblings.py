"""One truth per question (issue 34): instances of two built-in suites that ask the same question
(machine, collective, size, C, model; budgets and names aside) have one recorded answer, and
``truth update`` of either takes the other's record as a claim."""
from __future__ import annotations

import shutil
import tomllib

import tomli_w

import optcoll.instances.suite as suite_module
import optcoll.truth.siblings as siblings_module
from optcoll.instances.suite import builtin_suite_names, find_suite, instances_dir
from optcoll.results.record import meets
from optcoll.sweeps import ResultCache
from optcoll.sweeps.plan import Settings
from optcoll.truth import update_suite, verify_suite
from optcoll.truth.siblings import siblings
from optcoll.truth.stored import load_truth

QUESTION = "dgx1-allreduce-c2"  # standard: optimal after an hour's solve; machines: 10 s


def test_the_builtin_suites_record_one_answer_per_question():
    for name in builtin_suite_names():
        for spec in find_suite(name).specs:
            truth, _ = load_truth(spec)
            for other in siblings(spec):
                assert truth is not None, f"{name}/{spec.name} has no record; {other.where} has one"
                for mine, theirs, what in ((truth.best, other.truth.best, "best time"),
                                           (truth.lower_bound, other.truth.lower_bound, "lower bound")):
                    assert (mine is None) == (theirs is None) and (mine is None or meets(mine.value, theirs.value)), (
                        f"{name}/{spec.name} and {other.where} record different {what}s: "
                        f"{mine and mine.value!r} s and {theirs and theirs.value!r} s; run `optcoll truth update` "
                        "on the weaker one")


def test_a_question_key_ignores_the_budget_and_the_name_but_not_the_chunks():
    standard, machines = (find_suite(s).spec(QUESTION) for s in ("standard", "machines"))
    assert standard.data["budget"] != machines.data["budget"] and standard.question_key == machines.question_key
    assert standard.content_key != machines.content_key
    assert find_suite("quick").spec("dgx1-allreduce-c1").question_key != standard.question_key


def test_update_takes_the_better_record_of_a_sibling_suite(tmp_path, monkeypatch):
    """A suite asking the standard suite's question with another budget and no record, updated
    with the synthesizers only (16.1 ms at best): it ends with the sibling's proven optimum
    (13.4 ms) and a copy of its schedule, re-verified; ``truth verify`` passes."""
    root = tmp_path / "instances"
    src = instances_dir() / "standard" / f"{QUESTION}.toml"
    data = tomllib.loads(src.read_text())
    (root / "standard" / "schedules").mkdir(parents=True)
    shutil.copy(src, root / "standard" / src.name)
    shutil.copy(src.parent / data["results"]["schedule"], root / "standard" / data["results"]["schedule"])
    (root / "other").mkdir()
    (root / "other" / src.name).write_text(tomli_w.dumps(
        {"instance": data["instance"], "budget": {**data["budget"], "time_limit": "10 s"}}))
    monkeypatch.setattr(suite_module, "instances_dir", lambda: root)
    monkeypatch.setattr(siblings_module, "instances_dir", lambda: root)
    siblings_module._builtin_specs.cache_clear()
    try:
        strong, _ = load_truth(find_suite(str(root / "standard")).spec(QUESTION))
        (updated,), _ = update_suite(find_suite(str(root / "other")), Settings(runs=1, exact=False),
                                     ResultCache(tmp_path / "cache"), workers=0, progress=False)
    finally:
        siblings_module._builtin_specs.cache_clear()
    after = updated.after
    assert updated.before is None and updated.schedule_written and meets(after.best.value, strong.best.value)
    assert after.status == "optimal" and after.best.producer == strong.best.producer == "exact-timed"
    assert after.best.source.endswith(f"(recorded for standard/{QUESTION})")
    assert any(f"standard/{QUESTION}'s record" in note for note in updated.notes)
    assert all(finding.ok for finding in verify_suite(find_suite(str(root / "other"))))
