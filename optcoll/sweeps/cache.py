"""The sweep result cache: one JSON record per job key, written atomically, checked when read.

Layout under the root (default ``.optcoll-cache/``, or ``$OPTCOLL_CACHE``)::

    results/ab/ab12....json              the record (its presence means "done")
    results/ab/ab12....schedule.npz      the verified schedule in compact form, when the job made one
                                         (records written before it have .schedule.json.gz: read too)

The schedule is written before the record, so a record never points at a missing schedule; an
interrupted write leaves only a temporary file, never a half record. Keys are content hashes, so
a changed instance, producer parameter, optcoll source file or solver library simply misses the
cache. Each record carries a checksum of itself and of its schedule: a record cut short, edited
or separated from its schedule is ``Damaged`` when read (the sweep computes the job again and
says so); the sweep also re-verifies every cached schedule (``sweeps.recheck``). Schedules are
kept in the compact form (``schedules.npzfile``): in JSON a 256-NPU ring AlltoAll (8 M transfers)
took more than the input cap the cache reads back with, so its record was computed again on
every run.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from optcoll.errors import InputError
from optcoll.fileio import write_bytes_atomic, write_text_atomic
from optcoll.inputfiles import read_bytes
from optcoll.machines.machine import Machine
from optcoll.schedules.jsonfile import schedule_from_dict
from optcoll.schedules.npzfile import schedule_from_npz
from optcoll.schedules.schedule import Schedule

DEFAULT_DIR = ".optcoll-cache"
_CHECKSUM, _HAS_SCHEDULE = "checksum", "has_schedule"


def default_cache_dir() -> Path:
    return Path(os.environ.get("OPTCOLL_CACHE", DEFAULT_DIR))


class Damaged(Exception):
    """A cached record that exists but cannot be believed; ``str()`` says why."""


def _checksum(record: dict[str, Any], schedule: bytes | None) -> str:
    body = json.dumps(record, sort_keys=True, separators=(",", ":")).encode()
    sha = hashlib.sha256(body)
    sha.update(b"\0" + (hashlib.sha256(schedule).digest() if schedule is not None else b"none"))
    return sha.hexdigest()


class ResultCache:
    def __init__(self, root: str | os.PathLike | None = None):
        self.root = Path(root) if root is not None else default_cache_dir()

    def _path(self, key: str, suffix: str) -> Path:
        return self.root / "results" / key[:2] / f"{key}{suffix}"

    def record_path(self, key: str) -> Path:
        return self._path(key, ".json")

    def schedule_path(self, key: str) -> Path:
        """The schedule's file: compact, or JSON in a record written before the compact form."""
        compact = self._path(key, ".schedule.npz")
        old = self._path(key, ".schedule.json.gz")
        return old if not os.path.lexists(compact) and os.path.lexists(old) else compact

    def _read(self, path: Path) -> bytes | None:
        """The file's bytes (gunzipped), None when absent; ``Damaged`` when unreadable."""
        if not os.path.lexists(path):
            return None
        try:
            return read_bytes(path)
        except InputError as exc:
            raise Damaged(exc.detail) from None

    def lookup(self, key: str) -> dict[str, Any] | None:
        """The stored record (None: not stored); ``Damaged`` when it is stored but unreadable, its
        checksum does not match it and its schedule, or its schedule is gone."""
        raw = self._read(self.record_path(key))
        if raw is None:
            return None
        try:
            record = json.loads(raw)
        except (ValueError, RecursionError) as exc:  # also UnicodeDecodeError
            raise Damaged(f"the record is not readable JSON ({exc})") from None
        if not isinstance(record, dict) or not isinstance(record.get(_CHECKSUM), str):
            raise Damaged("the record has no checksum")
        stored = record.pop(_CHECKSUM)
        schedule = self._read(self.schedule_path(key)) if record.get(_HAS_SCHEDULE) else None
        if record.get(_HAS_SCHEDULE) and schedule is None:
            raise Damaged("its schedule file is missing")
        if _checksum(record, schedule) != stored:
            raise Damaged("its checksum does not match the record and its schedule (changed or cut short)")
        record.pop(_HAS_SCHEDULE)
        return record

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored record, or None (also when it is ``Damaged``: the job simply runs again)."""
        try:
            return self.lookup(key)
        except Damaged:
            return None

    def schedule(self, key: str, machine: Machine) -> Schedule | None:
        """The stored schedule, None when there is none; ``Damaged`` when it is unreadable."""
        path = self.schedule_path(key)
        raw = self._read(path)
        if raw is None:
            return None
        try:
            if path.suffix == ".npz":
                return schedule_from_npz(raw, machine, str(path))
            return schedule_from_dict(json.loads(raw), machine, str(path))
        except InputError as exc:
            raise Damaged(f"its schedule does not read: {exc.one_line()}") from None
        except (ValueError, RecursionError) as exc:
            raise Damaged(f"the cached schedule is not readable JSON ({exc})") from None

    def put(self, key: str, record: dict[str, Any], schedule: bytes | None = None) -> None:
        """Stores ``record`` and ``schedule``, the verified schedule in compact form."""
        stored = {**record, _HAS_SCHEDULE: schedule is not None}
        self.discard(key)  # a record of an earlier form must not outlive this one
        if schedule is not None:
            write_bytes_atomic(self._path(key, ".schedule.npz"), schedule)
        stored[_CHECKSUM] = _checksum(stored, schedule)
        write_text_atomic(self.record_path(key), json.dumps(stored, indent=1, sort_keys=True))

    def discard(self, key: str) -> None:
        for suffix in (".json", ".schedule.npz", ".schedule.json.gz"):
            self._path(key, suffix).unlink(missing_ok=True)
