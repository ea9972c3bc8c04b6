"""Reading recorded truth back, and re-verifying a stored schedule without solving anything."""
from __future__ import annotations

import gzip
import hashlib
import json
import re
from pathlib import Path

from optcoll import limits
from optcoll.errors import InputError
from optcoll.machines.machine import Machine
from optcoll.schedules.jsonfile import schedule_to_dict
from optcoll.schedules.npzfile import schedule_to_npz
from optcoll.schedules.schedule import Schedule
from optcoll.results.record import meets
from optcoll.instances.suite import InstanceSpec, digest
from optcoll.truth.record import Truth, TruthContradiction

SCHEDULE_DIR = "schedules"


def schedule_path(spec: InstanceSpec) -> Path | None:
    """The instance's stored best schedule, as its recorded ``[results]`` name it (None: none)."""
    name = (spec.data.get("results") or {}).get("schedule")
    return spec.path.parent / name if name else None


#: A JSON transfer takes at least this many bytes ("1,2,3,4,0.5,\"copy\"" and separators), so a
#: schedule of more transfers than the cap over this is stored compact without trying JSON.
JSON_BYTES_PER_TRANSFER = 16


def stored_form(spec: InstanceSpec, schedule: Schedule, machine: Machine) -> tuple[Path, bytes]:
    """Where a new best schedule goes and its bytes: ``schedules/<file stem>.<content hash>`` beside
    the instance, gzipped JSON (``.json.gz``, readable by people and other tools) when its text is
    within the ``input_bytes`` cap that reads it back, else the compact ``.npz``. A name of its
    own, never the recorded one, keeps an update all-or-nothing: the schedule is written first and
    the ``[results]`` naming it second, so an update interrupted between the two leaves the old
    record naming the old, untouched file."""
    folder, cap = spec.path.parent / SCHEDULE_DIR, limits.value("input_bytes")
    if len(schedule) * JSON_BYTES_PER_TRANSFER <= cap:
        data = schedule_to_dict(schedule, machine)
        text = json.dumps(data, separators=(",", ":")).encode()
        if len(text) <= cap:
            return folder / f"{spec.path.stem}.{digest(data)[:12]}.json.gz", gzip.compress(text, mtime=0)
    raw = schedule_to_npz(schedule, machine)
    return folder / f"{spec.path.stem}.{hashlib.sha256(raw).hexdigest()[:12]}.npz", raw


def unreferenced_schedules(spec: InstanceSpec, keep: str | None) -> list[Path]:
    """Stored schedules of this instance other than ``keep`` (relative to the instance file):
    replaced by a better one, or written by an update interrupted before its record."""
    own = re.compile(re.escape(spec.path.stem) + r"(\.[0-9a-f]{12})?(\.json\.gz|\.npz)")
    folder = spec.path.parent / SCHEDULE_DIR
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if own.fullmatch(p.name)
                  and p.relative_to(spec.path.parent).as_posix() != keep)


def load_truth(spec: InstanceSpec) -> tuple[Truth | None, str | None]:
    """(recorded truth or None, why it was set aside). Truth recorded for other instance content
    (the file's tables or its machine changed since) is stale: it answers another question."""
    data = spec.data.get("results") or {}
    if not data:
        return None, None
    try:
        truth = Truth.from_dict(data)
    except InputError as exc:
        raise exc.located(str(spec.path)) from None
    if truth.instance_hash != spec.content_key:
        return None, ("recorded results were for different instance content (the file or its "
                      "machine changed since); they were set aside")
    return truth, None


def verify_stored(spec: InstanceSpec, truth: Truth) -> float:
    """Loads the stored schedule, verifies it, and checks it still takes the recorded time.
    Returns the verified time; raises ``TruthContradiction`` when it does not hold."""
    from optcoll.schedules.files import load_schedule
    from optcoll.verify import verify

    assert truth.best is not None
    if not truth.schedule:
        raise TruthContradiction(f"{spec.name}: a best time is recorded but no schedule file")
    from optcoll.producers.chunks import chosen

    path = spec.path.parent / truth.schedule
    try:  # a C-free instance's schedule is verified at the C it chose
        instance = chosen(spec.instance, truth.best.details.get("params", {}))
    except InputError as exc:
        raise TruthContradiction(f"{spec.name}: {exc}") from None
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
