"""The one limits record of a producer run: time limit, threads, seed, memory and work.

docs/model.md §6 asks every result to record its time limit and seed; this is where they are
held and checked, once. A limit a person writes is parsed here with units — on the command line
"90" (seconds), "90 s" or "2 min" for a time and "8 GiB" for memory; in an instance file with
its unit ("60 s") — and a bad value is one ``InputError`` naming the field or the flag as the
user wrote it.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from optcoll.errors import InputError
from optcoll.units import parse_size, parse_time


#: What every solver backend accepts (CP-SAT's limits): at most this many threads, seeds up to this.
MAX_THREADS, MAX_SEED = 10_000, 2**31 - 1


@dataclass(frozen=True)
class Budget:
    """What a producer may spend (docs/model.md §6).

    ``time_limit``: wall-clock seconds for the whole run (starts, model building and every
    solver call); ``threads``: solver threads; ``seed``: for anything random; ``max_memory``:
    bytes one solver model may take (None: a share of the memory available, see
    ``optcoll.producers.exact.memory``); ``work_limit``: CP-SAT deterministic time for the whole
    run (None: none), which stops a solve at the same point on any machine and under any load.
    """

    time_limit: float = 60.0
    threads: int = 2
    seed: int = 0
    max_memory: int | None = None
    work_limit: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "time_limit", checked_seconds(self.time_limit, "time_limit"))
        object.__setattr__(self, "threads", checked_count(self.threads, "threads"))
        if self.threads > MAX_THREADS:
            raise InputError(f"must be at most {MAX_THREADS}, got {self.threads}", field="threads")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed <= MAX_SEED:
            raise InputError(f"must be an integer from 0 to {MAX_SEED}, got {self.seed!r}", field="seed")
        if self.max_memory is not None:
            object.__setattr__(self, "max_memory", checked_count(self.max_memory, "max_memory"))
        if self.work_limit is not None:
            object.__setattr__(self, "work_limit", checked_seconds(self.work_limit, "work_limit"))

    def overridden(self, **values: Any) -> "Budget":
        """This budget with the given fields replaced; None leaves a field as it is."""
        unknown = set(values) - {f.name for f in fields(self)}
        if unknown:
            raise TypeError(f"unknown budget fields {sorted(unknown)}")
        return replace(self, **{k: v for k, v in values.items() if v is not None})

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> "Budget":
        """The budget ``to_params`` wrote (a sweep job's parameters, a recorded result's)."""
        return cls(**{f.name: params[f.name] for f in fields(cls) if params.get(f.name) is not None})

    def to_params(self) -> dict[str, Any]:
        """The fields a result or a job records to be reproducible (the memory and work limits
        only when set), as plain numbers: the one place limits are packed into a dict."""
        out: dict[str, Any] = {"time_limit": self.time_limit, "threads": self.threads, "seed": self.seed}
        if self.max_memory is not None:
            out["max_memory"] = self.max_memory
        if self.work_limit is not None:
            out["work_limit"] = self.work_limit
        return out


def checked_seconds(value: object, field: str) -> float:
    """A positive, finite number of seconds given as a number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0 < value < math.inf):
        raise InputError(f"must be a positive number of seconds, got {value!r}", field=field)
    return float(value)


def checked_count(value: object, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(f"must be a positive integer, got {value!r}", field=field)
    return value


def parse_seconds(text: object, field: str, *, bare: bool = True) -> float:
    """Seconds from "90 s" or "2 min", and when ``bare`` (the command line and the Python API,
    whose unit is the second) from "90" or a number. Errors name ``field`` (a file key or a flag)."""
    if bare and isinstance(text, (int, float)) and not isinstance(text, bool):
        return checked_seconds(text, field)
    if bare and isinstance(text, str):
        try:
            number = float(text)
        except ValueError:
            pass
        else:
            if not 0 < number < math.inf:
                raise InputError(f"must be a positive number of seconds, got {text!r}", field=field)
            return number
    try:
        return parse_time(text, allow_zero=False)
    except InputError as exc:
        raise InputError(exc.detail, field=field) from None


def parse_bytes(text: object, field: str) -> int:
    """Bytes from "8 GiB", "500 MB" (or a positive whole number of bytes)."""
    if isinstance(text, int) and not isinstance(text, bool):
        return checked_count(text, field)
    try:
        value = parse_size(text)
    except InputError as exc:
        raise InputError(exc.detail, field=field) from None
    if not value >= 1:
        raise InputError(f"must be at least one byte, got {text!r}", field=field)
    return int(value)
