"""Sweep jobs: one producer run on one instance, keyed by a content hash, run anywhere.

A job is plain picklable data (the instance travels as its parsed file, so a Dask worker on
another machine needs no shared filesystem). ``execute`` runs it and returns a JSON-plain record
plus the verified schedule, if any; every exception becomes a ``failed`` record naming its reason,
so one bad instance never stops a sweep.

Producers:

- ``bounds``: every analytic lower bound (``optcoll.bounds.lower_bounds``); for an instance that
  leaves C free, the least over C of the best bound per C (``optcoll.instances.chunks``).
- ``synth``: a synthesizer from the registry, best of ``runs`` seeds from ``seed0``
  (``optcoll.producers.run.synthesized``).
- ``exact``: the exact solver of the instance's model (``optcoll.producers.run.exact``) with
  ``solver`` and the limits ``Budget.to_params`` packs (``time_limit``, ``threads``, ``seed``
  and, when given, ``max_memory``: a model over it is refused).
- ``pareto``: the step model's Pareto front up to ``max_chunks`` chunks per rank.
- ``check``: a user's synthesizer (``synth``, an ``optcoll check`` spec) run with a time limit
  (``time_limit``) and verified (``optcoll.producers.external.worker``); the record says what went wrong.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import optcoll
from optcoll.errors import ScheduleRejected
from optcoll.provenance import solver_libraries, source_digest
from optcoll.instances.suite import InstanceSpec, digest

PRODUCERS = ("bounds", "synth", "exact", "pareto", "check")
#: Statuses of a record. "failed" carries a reason; "not-applicable" too (not an error).
FAILED, NOT_APPLICABLE = "failed", "not-applicable"
#: ``error`` of a failed record whose worker was lost before the job ended (killed, out of
#: memory, a Dask worker gone): the environment failed, not the job, so the sweep reports it but
#: does not cache it, and the next run computes the job again.
WORKER_LOST = "Killed"


@dataclass(frozen=True, eq=False)
class Job:
    spec: InstanceSpec
    producer: str
    params: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.producer not in PRODUCERS:
            raise ValueError(f"unknown producer {self.producer!r}")

    @property
    def label(self) -> str:
        """The column a report shows: the synthesizer's name, or the producer."""
        return self.params["algo"] if self.producer == "synth" else self.producer

    @property
    def key(self) -> str:
        """Content hash of (instance, producer, parameters, the code and solver libraries that
        run it): the cache key. Any change to optcoll's sources misses the cache."""
        return digest({"instance": self.spec.content_key, "producer": self.producer,
                       "params": self.params, "optcoll": optcoll.__version__,
                       "code": source_digest(), **solver_libraries()})

    def describe(self) -> dict[str, Any]:
        return {"instance": self.spec.name, "file": self.spec.path.name, "producer": self.producer,
                "label": self.label, "params": dict(self.params), "optcoll": optcoll.__version__}


@dataclass(frozen=True)
class JobResult:
    """``record`` is JSON-plain; ``schedule`` the verified schedule in optcoll's JSON form."""

    record: dict[str, Any]
    schedule: dict[str, Any] | None = None


def failed(job: Job, reason: str, wall_time: float = 0.0, error: str = "Error") -> JobResult:
    return JobResult({**job.describe(), "status": FAILED, "reason": reason, "error": error,
                      "wall_time": wall_time})


def execute(job: Job) -> JobResult:
    """Runs one job; never raises for a producer's failure (KeyboardInterrupt still stops it)."""
    from optcoll.producers.base import NotApplicable

    start = time.perf_counter()
    try:
        body, schedule = _RUNNERS[job.producer](job)
    except NotApplicable as exc:
        return JobResult({**job.describe(), "status": NOT_APPLICABLE, "reason": exc.one_line(),
                          "wall_time": time.perf_counter() - start})
    except ScheduleRejected as exc:
        return failed(job, str(exc), time.perf_counter() - start, "ScheduleRejected")
    except Exception as exc:  # noqa: BLE001 - the sweep records the reason and goes on
        return failed(job, f"{type(exc).__name__}: {exc}", time.perf_counter() - start,
                      type(exc).__name__)
    body.setdefault("wall_time", time.perf_counter() - start)
    return JobResult({**job.describe(), **body}, schedule)


def _schedule_dict(job: Job, schedule) -> dict[str, Any]:
    from optcoll.schedules.jsonfile import schedule_to_dict

    return schedule_to_dict(schedule, job.spec.instance.machine)


def _bounds(job: Job) -> tuple[dict[str, Any], None]:
    from optcoll.bounds import lower_bounds

    inst = job.spec.instance
    if inst.chunk_choices:  # a per-C bound holds only at its C: the least over C bounds them all
        from optcoll.producers.chunks import least_bound

        bounds = [least_bound(inst)]
    else:
        bounds = lower_bounds(inst.machine, inst.collective, inst.model)
    rows = [{"name": b.name, "value": float(b.value), "detail": b.detail, "exact": bool(b.exact),
             "assumptions": list(b.assumptions)} for b in bounds]
    best = max(rows, key=lambda row: row["value"])
    return {"status": "ok", "bounds": rows, "best": best["name"]}, None


def _synth(job: Job) -> tuple[dict[str, Any], dict[str, Any]]:
    from optcoll.producers import run

    params = job.params
    produced = run.synthesized(job.spec.instance, params["algo"], params["runs"], params["seed0"], dict(params))
    return ({"status": produced.result.status, "result": produced.result.to_dict(), "times": list(produced.times),
             "best_seed": produced.schedule.meta.get("best_seed"), "wall_time": produced.result.wall_time},
            _schedule_dict(job, produced.schedule))


def _exact(job: Job) -> tuple[dict[str, Any], dict[str, Any] | None]:
    from optcoll.instances.budget import Budget
    from optcoll.instances.clock import Clock
    from optcoll.producers import run

    clock = Clock(Budget.from_params(job.params))  # started before the instance is read: the job's whole work
    produced = run.exact(job.spec.instance, solver=job.params["solver"], clock=clock)
    outcome = produced.outcome
    body = {"status": produced.result.status, "result": produced.result.to_dict(), "solver_status": outcome.status,
            "wall_time": outcome.wall_time}
    schedule = _schedule_dict(job, produced.schedule) if produced.schedule is not None else None
    return body, schedule


def _plain_point(point: Any) -> dict[str, Any]:
    """A Pareto point as plain numbers (its schedule is verified separately, not stored)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(point):
        value = getattr(point, f.name)
        if isinstance(value, Fraction):
            out[f.name] = [value.numerator, value.denominator]
        elif isinstance(value, (bool, int, float, str)):
            out[f.name] = value
    return out


def _pareto(job: Job) -> tuple[dict[str, Any], None]:
    """The front, each point's schedule run through the shared verifier in the step model on the
    collective cut into C pieces per chunk (the solver's cost is believed only once verified)."""
    from optcoll.instances.instance import TimeModel
    from optcoll.producers.exact.step import pareto_front
    from optcoll.producers.exact.step.chunking import rechunk
    from optcoll.verify import require_valid

    from optcoll.instances.budget import Budget

    inst = job.spec.instance
    front = pareto_front(inst, job.params["max_chunks"], solver=job.params["solver"],
                         budget=Budget.from_params(job.params))
    rows = []
    for point in front.points:
        collective = rechunk(inst.collective, point.chunks)
        verified = require_valid(inst.machine, collective, point.schedule, TimeModel(kind="step"))
        rows.append({**_plain_point(point), "verified_cost": float(verified.time)})
    return {"status": "ok", "points": rows, "complete": front.complete, "scope": front.scope,
            "stopped": front.stopped}, None


def _check(job: Job) -> tuple[dict[str, Any], None]:
    from optcoll.producers.external.worker import check_instance

    return check_instance(job.spec, job.params["synth"], job.params["time_limit"],
                          job.params["workdir"], tuple(job.params.get("seeds", ()))), None


_RUNNERS = {"bounds": _bounds, "synth": _synth, "exact": _exact, "pareto": _pareto,
            "check": _check}
