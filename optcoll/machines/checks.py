"""Argument checks shared by the generators: Python callers get the same field-named errors as model
files (the model-file reader prefixes the field with its table)."""
from __future__ import annotations

import math
from typing import Any

from optcoll.errors import InputError


def check_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"must be an integer, got {value!r}", field=name)
    if value < minimum:
        raise InputError(f"must be at least {minimum}, got {value}", field=name)
    return value


def check_bandwidth(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise InputError(f"must be a positive finite bandwidth in bytes/s, got {value!r}", field=name)
    return float(value)


def check_latency(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
        raise InputError(f"must be a non-negative finite latency in seconds, got {value!r}", field=name)
    return float(value)
