"""``optcoll truth update``: solve a suite again and record what is now known.

Per instance: the analytic bounds, the exact solver and every synthesizer run as one sweep
(cached, local or Dask); the recorded schedule is re-verified first; old and new claims are
combined (``record.combine``); a better schedule is stored compressed beside the instance file.
A contradiction stops everything before anything is written for that instance.

Interrupted anywhere (Ctrl-C, a kill, a full disk), every instance keeps its old record or has
its new one, whole: a new schedule gets a file of its own, written before the record naming it
(``stored.new_schedule_path``); schedules no record names any more are removed after it.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from optcoll.errors import InputError
from optcoll.fileio import remove_stale_temporaries
from optcoll.inputfiles import read_json
from optcoll.sweeps.cache import Damaged, ResultCache
from optcoll.sweeps.jobs import FAILED, Job
from optcoll.sweeps.plan import Settings, instance_jobs, runs_for
from optcoll.sweeps.runner import SweepStats, run_sweep
from optcoll.instances.suite import InstanceSpec, Suite
from optcoll.truth.record import Claim, Truth, TruthContradiction, combine, family_record
from optcoll.truth.siblings import siblings
from optcoll.truth.stored import (SCHEDULE_DIR, load_truth, new_schedule_path, unreferenced_schedules,
                                  verify_stored)
from optcoll.truth.tomlfile import write_results
from optcoll.units import format_time

_RESULT_DETAILS = ("solver", "solver_version", "quantum", "wall_time", "params", "steps", "rounds")


@dataclass(frozen=True)
class Updated:
    """What happened to one instance's record."""

    instance: str
    before: Truth | None
    after: Truth
    schedule_written: bool
    notes: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        if self.before is None:
            return True
        return (self.before.to_dict() | {"updated": None, "environment": None}) != \
            (self.after.to_dict() | {"updated": None, "environment": None})


def _details(result: dict[str, Any]) -> dict[str, Any]:
    return {k: result[k] for k in _RESULT_DETAILS if result.get(k) is not None}


def claims(records: list[dict[str, Any]]) -> tuple[list[Claim], list[tuple[Claim, str]], dict | None]:
    """(bound claims, (schedule claim, job key) pairs, family record) from one instance's records.

    Each record must carry its ``key``. An exact solver's ``lower_bound`` holds for every schedule
    of the instance and is a bound claim; when it also solved within a family of schedules
    (AllReduce as ReduceScatter + AllGather), that family's own bound and status become the family
    record (``record.family_record``), never a bound.
    """
    bounds: list[Claim] = []
    times: list[tuple[Claim, str]] = []
    family = None
    for record in records:
        status, producer = record.get("status"), record["producer"]
        if producer == "bounds" and status == "ok":
            bounds += [Claim(b["value"], "analytic", f"{b['name']}: {b['detail']}" + _assumed(b))
                       for b in record["bounds"]]
            continue
        result = record.get("result")
        if not result or status == FAILED:
            continue
        details = _details(result)
        when = {"date": result["date"]} if result.get("date") else {}
        if result.get("time") is not None:
            times.append((Claim(result["time"], result["producer"], result["producer"], details,
                                **when), record["key"]))
        if producer == "exact" and result.get("lower_bound") is not None:
            bounds.append(Claim(result["lower_bound"], result["producer"], result["lower_bound_source"],
                                details, **when))
        if producer == "exact" and result["params"].get("family"):
            family = family_record(result["params"], result.get("time"), details)
    return bounds, times, family


def _assumed(bound: dict[str, Any]) -> str:
    """"; assumes no in-network reduction" for a bound record that states assumptions."""
    needs = bound.get("assumptions") or ()
    return f"; assumes {', '.join(needs)}" if needs else ""


def _family(old: dict[str, Any] | None, new: dict[str, Any] | None) -> dict[str, Any] | None:
    """The new within-family result only when it says more: a higher bound, a faster schedule,
    or a proof where there was none; otherwise the recorded one stays (no churn)."""
    if old is None or new is None:
        return new or old
    inf = float("inf")
    better = (new["bound"] > old["bound"] or (new.get("time") or inf) < (old.get("time") or inf)
              or (new.get("status") == "optimal" and old.get("status") != "optimal"))
    return new if better else old


def _rejections(records: list[dict[str, Any]]) -> list[str]:
    return [f"{r['instance']} {r['label']}: {r['reason']}" for r in records
            if r.get("status") == FAILED and r.get("error") == "ScheduleRejected"]


def _still_valid(spec: InstanceSpec, old: Truth, times: list[Claim], notes: list[str]) -> Truth:
    """``old``, its stored schedule re-verified. One that no longer verifies (the verifier's rules
    grew: a schedule that names no arrival at a plain switch where that matters) is dropped when
    this run verified one at least as fast, which then takes its place; otherwise the update
    stops (``TruthContradiction``): a recorded result is never lost to a worse one."""
    assert old.best is not None
    try:
        verify_stored(spec, old)
        return old
    except TruthContradiction as why:
        fastest = min(times, key=lambda claim: claim.value, default=None)
        if fastest is None or fastest.value > old.best.value:
            raise
        notes.append(f"{why}; replaced by {fastest.producer}'s schedule of this run "
                     f"({format_time(fastest.value)}, recorded {format_time(old.best.value)})")
        return dataclasses.replace(old, best=None, schedule=None)


def _cached(cache: ResultCache, key: str, best: Claim, spec: InstanceSpec) -> dict[str, Any]:
    try:  # re-verified when the sweep read it; only a change since then lands here
        data = cache.schedule(key)
        if data is None:
            raise Damaged("it is missing")
    except Damaged as why:
        raise InputError(f"the cached schedule of {best.producer} for {spec.name} changed during "
                         f"the run ({why}); run again to compute it afresh",
                         source=str(cache.schedule_path(key))) from None
    return data


def update_instance(spec: InstanceSpec, records: list[dict[str, Any]], cache: ResultCache,
                    environment: dict[str, Any]) -> Updated:
    from optcoll.producers.chunks import chosen
    from optcoll.schedules.jsonfile import save_schedule, schedule_from_dict
    from optcoll.verify import require_valid

    rejected = _rejections(records)
    if rejected:
        raise TruthContradiction("a producer's schedule was rejected by the verifier or contradicts "
                                 "its own proof (a bug): " + "; ".join(rejected))
    notes = [f"{r['label']} failed: {r['reason']}" for r in records if r.get("status") == FAILED]
    instance = spec.instance
    old, stale = load_truth(spec)
    if stale:
        notes.append(stale)
    bounds, times, family = claims(records)
    if old is not None and old.best is not None:
        old = _still_valid(spec, old, [claim for claim, _ in times], notes)
    bounds += list(old.promoted) if old is not None else []
    others = siblings(spec)  # after this instance's own claims: a tie keeps its own provenance
    bounds += [claim for claim in (s.bound() for s in others) if claim is not None]
    from_siblings = [(claim, s) for s in others if (claim := s.best()) is not None]
    bound, best = combine(spec.name, old, bounds, [claim for claim, _ in times] + [c for c, _ in from_siblings])
    keep_old = old is not None and best is old.best
    written = False
    relative = old.schedule if keep_old and old else None
    if best is not None and not keep_old:
        sibling = next((s for claim, s in from_siblings if claim is best), None)
        if sibling is not None:
            origin = str(sibling.schedule_path())
            data = read_json(origin)  # verified on this instance below
            notes.append(f"the best schedule is {sibling.where}'s record of the same question")
        else:
            key = next(k for claim, k in times if claim is best)
            origin, data = f"cache {key}", _cached(cache, key, best, spec)
        at_c = chosen(instance, best.details.get("params", {}))
        schedule = schedule_from_dict(data, at_c.machine, origin)
        time = require_valid(at_c.machine, at_c.collective, schedule, at_c.model).time
        if time != best.value:
            raise TruthContradiction(f"{spec.name}: {best.producer}'s schedule verifies at {time!r} s "
                                     f"after a round trip through JSON, not {best.value!r} s")
        path = new_schedule_path(spec, data)
        save_schedule(path, schedule, instance.machine)
        relative = path.relative_to(spec.path.parent).as_posix()
        written = True
    truth = Truth(spec.content_key, instance.model.kind, bound, best, relative,
                  _family(old.family if old else None, family), environment)
    write_results(spec.path, truth.to_dict())
    for leftover in unreferenced_schedules(spec, relative):
        leftover.unlink(missing_ok=True)
    return Updated(spec.name, old, truth, written, tuple(notes))


def update_suite(suite: Suite, settings: Settings, cache: ResultCache, *, workers: int = 1,
                 cluster: Any = None, progress: bool | None = None,
                 retry_failed: bool = False) -> tuple[list[Updated], SweepStats]:
    from optcoll.provenance import environment

    for folder in (suite.directory, suite.directory / SCHEDULE_DIR):  # left by a killed update
        remove_stale_temporaries(folder)
    runs = runs_for(suite, settings)
    per_spec: list[tuple[InstanceSpec, list[Job]]] = [
        (spec, instance_jobs(spec, settings, runs)) for spec in suite.specs]
    records, stats = run_sweep([job for _, jobs in per_spec for job in jobs], cache, workers=workers,
                               cluster=cluster, progress=progress, retry_failed=retry_failed,
                               desc=f"truth {suite.name}")
    env = environment()
    updated = []
    for spec, jobs in per_spec:
        mine = [{**records[job.key], "key": job.key} for job in jobs]
        updated.append(update_instance(spec, mine, cache, env))
    return updated, stats
