"""One instance of ``optcoll check`` in a worker process: produce the schedule, run it through the
shared verifier, and return a JSON-plain record of what happened (never raises for the
synthesizer's sake: what went wrong is the finding).

Record fields: ``status`` (valid | invalid | timeout | error | crash | missing | malformed |
skipped), ``message``, ``detail``, ``seconds`` (synthesis wall time, None for pre-made files),
``source`` (where the schedule came from), and for a schedule: ``time`` (verified), ``transfers``,
``violation`` (kind, message, time, chunk, link, node, transfer, step), ``seed`` (the run's).
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from optcoll.producers.external.produce import Failed, Imported, produce
from optcoll.producers.external.spec import parse_synth
from optcoll.instances.suite import InstanceSpec


def check_instance(spec: InstanceSpec, synth: str, time_limit: float, workdir: str,
                   seeds: tuple[int, ...] = ()) -> dict[str, Any]:
    """The synthesizer's verdict on one instance: run once per seed (default: the instance's
    [budget] seed) and, when the instance leaves C free, once per allowed C (each handed the
    instance at that C with an equal share of ``time_limit``, as the exact solver gets); a
    failing run is the verdict, else the fastest verified schedule is, with its seed and C."""
    choices = spec.instance.chunk_choices
    at_c = [spec.derive(chunks_per_rank=c) for c in choices] or [spec]
    best: dict[str, Any] | None = None
    for seed in seeds or (spec.instance.budget.seed,):
        for fixed in at_c:
            record = {**_run_once(_seeded(fixed, seed), synth, time_limit / len(at_c), workdir), "seed": seed}
            if choices:
                record["chunks_per_rank"] = fixed.chunks_per_rank
            if record["status"] != "valid":
                return record
            if best is None or record["time"] < best["time"]:
                best = record
    return best


def _seeded(spec: InstanceSpec, seed: int) -> InstanceSpec:
    if seed == spec.instance.budget.seed:
        return spec
    budget = spec.data.get("budget", {})
    return dataclasses.replace(spec, data={**spec.data, "budget": {**budget, "seed": seed}})


def _run_once(spec: InstanceSpec, synth: str, time_limit: float, workdir: str) -> dict[str, Any]:
    try:
        produced = produce(parse_synth(synth), spec, time_limit, Path(workdir))
    except Failed as failure:
        return {"status": failure.status, "message": failure.message, "detail": failure.detail,
                "seconds": failure.seconds}
    return {"seconds": produced.seconds, "source": produced.source,
            "transfers": len(produced.schedule), **_verdict(spec, produced)}


def _invalid(kind: str, message: str, **where: Any) -> dict[str, Any]:
    violation = {"kind": kind, "message": message, "time": None, "chunk": None, "link": None,
                 "node": None, "transfer": None, "step": None, **where}
    return {"status": "invalid", "message": f"invalid schedule [{kind}]: {message}",
            "violation": violation}


def _verdict(spec: InstanceSpec, produced: Imported) -> dict[str, Any]:
    from optcoll.errors import ScheduleRejected
    from optcoll.results.record import verified

    # A fresh copy of the instance: the synthesizer was handed the cached one and could have
    # changed its arrays in place.
    instance = dataclasses.replace(spec).instance
    schedule = produced.schedule
    if schedule.model != instance.model.kind:
        return _invalid("model", f"the instance is in the {instance.model.kind} model, but the "
                        f"schedule is a {schedule.model}-model schedule")
    try:
        verification = verified(instance, schedule, produced.source)
    except ScheduleRejected as rejected:
        violation = dataclasses.asdict(rejected.violation)
        return _invalid(violation.pop("kind"), violation.pop("message"), **violation)
    except Exception as exc:  # noqa: BLE001 - e.g. arrays of the wrong shape built by hand
        return {"status": "error", "message": f"the verifier could not read the schedule: "
                f"{type(exc).__name__}: {exc}"}
    if produced.problems:
        more = f" (and {len(produced.problems) - 1} more)" if len(produced.problems) > 1 else ""
        return {**_invalid("msccl", f"the MSCCL file does not run as optcoll's model of it: "
                           f"{produced.problems[0]}{more}"), "detail": "\n".join(produced.problems)}
    return {"status": "valid", "time": float(verification.time),
            "message": f"valid, {len(schedule)} transfers"}
