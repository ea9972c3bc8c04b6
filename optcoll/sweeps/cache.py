"""The sweep result cache: one JSON record per job key, written atomically.

Layout under the root (default ``.optcoll-cache/``, or ``$OPTCOLL_CACHE``)::

    results/ab/ab12....json              the record (its presence means "done")
    results/ab/ab12....schedule.json.gz  the verified schedule, when the job produced one

The schedule is written before the record, so a record never points at a missing schedule; an
interrupted write leaves only a temporary file, never a half record. Keys are content hashes, so
a changed instance, producer parameter, optcoll source file or solver library simply misses the
cache.
"""
from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any

from optcoll.fileio import write_bytes_atomic, write_text_atomic

DEFAULT_DIR = ".optcoll-cache"


def default_cache_dir() -> Path:
    return Path(os.environ.get("OPTCOLL_CACHE", DEFAULT_DIR))


class ResultCache:
    def __init__(self, root: str | os.PathLike | None = None):
        self.root = Path(root) if root is not None else default_cache_dir()

    def _path(self, key: str, suffix: str) -> Path:
        return self.root / "results" / key[:2] / f"{key}{suffix}"

    def record_path(self, key: str) -> Path:
        return self._path(key, ".json")

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored record, or None (also for an unreadable file: the job simply runs again)."""
        try:
            return json.loads(self.record_path(key).read_text(encoding="utf-8"))
        except (FileNotFoundError, json.JSONDecodeError, UnicodeDecodeError):
            return None

    def schedule(self, key: str) -> dict[str, Any] | None:
        try:
            return json.loads(gzip.decompress(self._path(key, ".schedule.json.gz").read_bytes()))
        except FileNotFoundError:
            return None

    def put(self, key: str, record: dict[str, Any], schedule: dict[str, Any] | None = None) -> None:
        if schedule is not None:
            data = json.dumps(schedule, separators=(",", ":")).encode()
            write_bytes_atomic(self._path(key, ".schedule.json.gz"), gzip.compress(data, mtime=0))
        write_text_atomic(self.record_path(key), json.dumps(record, indent=1, sort_keys=True))

    def discard(self, key: str) -> None:
        for suffix in (".json", ".schedule.json.gz"):
            self._path(key, suffix).unlink(missing_ok=True)
