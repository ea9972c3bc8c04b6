"""Reading recorded truth back, and re-verifying a stored schedule without solving anything."""
from __future__ import annotations

from pathlib import Path

from optcoll.results.record import meets
from optcoll.sweeps.suite import InstanceSpec
from optcoll.truth.record import Truth, TruthContradiction

SCHEDULE_DIR = "schedules"


def schedule_path(spec: InstanceSpec) -> Path:
    """Where an instance's best schedule is stored: ``schedules/<file stem>.json.gz`` beside it."""
    return spec.path.parent / SCHEDULE_DIR / f"{spec.path.stem}.json.gz"


def load_truth(spec: InstanceSpec) -> tuple[Truth | None, str | None]:
    """(recorded truth or None, why it was set aside). Truth recorded for other instance content
    (the file's tables or its machine changed since) is stale: it answers another question."""
    data = spec.data.get("results") or {}
    if not data:
        return None, None
    truth = Truth.from_dict(data)
    if truth.instance_hash != spec.content_key:
        return None, ("recorded results were for different instance content (the file or its "
                      "machine changed since); they were set aside")
    return truth, None


def verify_stored(spec: InstanceSpec, truth: Truth) -> float:
    """Loads the stored schedule, verifies it, and checks it still takes the recorded time.
    Returns the verified time; raises ``TruthContradiction`` when it does not hold."""
    from optcoll.errors import InputError
    from optcoll.schedules.jsonfile import load_schedule
    from optcoll.verify import verify

    assert truth.best is not None
    if not truth.schedule:
        raise TruthContradiction(f"{spec.name}: a best time is recorded but no schedule file")
    path = spec.path.parent / truth.schedule
    instance = spec.instance
    try:
        schedule = load_schedule(path, instance.machine)
    except InputError as exc:
        raise TruthContradiction(f"{spec.name}: the recorded schedule cannot be read: {exc}") from None
    verification = verify(instance.machine, instance.collective, schedule, instance.model)
    if not verification.valid:
        raise TruthContradiction(f"{spec.name}: the recorded schedule {path} no longer verifies: "
                                 f"{verification.violation.message}")
    if not meets(verification.time, truth.best.value):
        raise TruthContradiction(f"{spec.name}: the recorded schedule verifies at "
                                 f"{verification.time!r} s, but {truth.best.value!r} s is recorded")
    return verification.time
