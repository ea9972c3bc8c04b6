"""Unit-bearing values as people write them in files: "50 GiB/s", "400 Gbit/s", "0.5 us", "1 GiB".

Decimal (k, M, G, T = 1e3...) and binary (Ki, Mi, Gi, Ti = 2^10...) prefixes are both accepted and
never confused. Inside optcoll everything is bytes, seconds and bytes/second as floats.
"""
from __future__ import annotations

import math
import re
from decimal import Context, Decimal

from optcoll.errors import InputError

# Decimal factors so "500 ns" is exactly the float nearest 5e-7, not 500 * 1e-9.
_PREFIX = {
    "": Decimal(1), "k": Decimal("1e3"), "K": Decimal("1e3"), "M": Decimal("1e6"),
    "G": Decimal("1e9"), "T": Decimal("1e12"), "P": Decimal("1e15"),
    "Ki": Decimal(2**10), "Mi": Decimal(2**20), "Gi": Decimal(2**30), "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
}
_BYTE_UNITS = {"B": Decimal(1), "byte": Decimal(1), "bytes": Decimal(1), "bit": Decimal("0.125"),
               "bits": Decimal("0.125"), "b": Decimal("0.125")}
#: Microseconds as "us", "µs" (U+00B5 MICRO SIGN) or "μs" (U+03BC GREEK SMALL LETTER MU): the two
#: characters look the same and keyboards produce either.
_TIME_UNITS = {"h": Decimal(3600), "min": Decimal(60), "s": Decimal(1), "ms": Decimal("1e-3"),
               "us": Decimal("1e-6"), "µs": Decimal("1e-6"), "μs": Decimal("1e-6"),
               "ns": Decimal("1e-9"), "ps": Decimal("1e-12")}
#: Decimal arithmetic that never raises: an exponent beyond its range ("1e9999999999 GB") gives
#: Infinity or NaN, which ``_finite`` refuses like any other non-finite value.
_EXACT = Context(traps=[])
_NUMBER = r"(?P<num>[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)"
_QUANTITY = re.compile(_NUMBER + r"\s*(?P<unit>[A-Za-zµμ/]*)\s*$")


def _split(text: object, kind: str) -> tuple[Decimal, str]:
    if isinstance(text, bool) or not isinstance(text, str):
        raise InputError(f"expected a {kind} with a unit as a string, e.g. {_EXAMPLES[kind]!r}, got {text!r}")
    match = _QUANTITY.match(text.strip())
    if not match:
        raise InputError(f"cannot read {text!r} as a {kind}, e.g. {_EXAMPLES[kind]!r}")
    return _EXACT.create_decimal(match["num"]), match["unit"]


_EXAMPLES = {"size": "1 GiB", "bandwidth": "50 GiB/s", "time": "0.5 us"}


def _bytes_factor(unit: str, text: str, kind: str) -> Decimal:
    for name, factor in _BYTE_UNITS.items():
        if unit.endswith(name):
            prefix = unit[: -len(name)]
            if prefix in _PREFIX:
                return _PREFIX[prefix] * factor
    raise InputError(f"unknown unit in {text!r} for a {kind} (use B, KiB, MB, GiB, Gbit, ...)")


def _finite(number: Decimal, factor: Decimal, text: str, kind: str, *, allow_zero: bool) -> float:
    """``number · factor`` as a float, refused unless finite and positive (or zero when allowed)."""
    value = float(_EXACT.multiply(number, factor))
    if not math.isfinite(value):
        raise InputError(f"{kind} {text!r} is not a finite number")
    if value < 0 or (value == 0 and not allow_zero):
        raise InputError(f"{kind} {text!r} must be {'non-negative' if allow_zero else 'positive'}")
    return value


def parse_size(text: object) -> float:
    """Bytes in a size such as "1 GiB", "64 KB", "512 B". Bits are accepted only spelt out
    ("8 Gbit"): "1 Gb" is refused, since a buffer written "Gb" is far more often meant in bytes
    (GB) than in gigabits, and reading it as bits would silently make it eight times smaller."""
    number, unit = _split(text, "size")
    if not unit:
        raise InputError(f"size {text!r} has no unit (write e.g. '{text} B' or '{text} MiB')")
    if unit.endswith("b") and unit[:-1] in _PREFIX:
        raise InputError(f"size {text!r}: '{unit}' is bits, but a size is counted in bytes: write "
                         f"'{number} {unit[:-1]}B' (or '{number} {unit[:-1]}bit' if you mean bits)")
    return _finite(number, _bytes_factor(unit, str(text), "size"), str(text), "size", allow_zero=False)


def parse_bandwidth(text: object) -> float:
    """Bytes per second in a bandwidth such as "50 GiB/s", "400 Gbit/s", "25 GB/s"."""
    number, unit = _split(text, "bandwidth")
    if "/" not in unit:
        if unit.endswith("bps"):
            unit = unit[:-3] + "bit/s"
        else:
            raise InputError(f"bandwidth {text!r} needs a unit per second such as GiB/s or Gbit/s")
    amount, _, per = unit.partition("/")
    if per != "s":
        raise InputError(f"bandwidth {text!r} must be per second ('/s')")
    return _finite(number, _bytes_factor(amount, str(text), "bandwidth"), str(text), "bandwidth",
                   allow_zero=False)


def parse_time(text: object, *, allow_zero: bool = True) -> float:
    """Seconds in a duration such as "0.5 us", "700 ns", "1.2 ms"."""
    number, unit = _split(text, "time")
    if unit not in _TIME_UNITS:
        raise InputError(f"time {text!r} needs a unit: one of {', '.join(_TIME_UNITS)}")
    return _finite(number, _TIME_UNITS[unit], str(text), "time", allow_zero=allow_zero)


def format_size(nbytes: float) -> str:
    """A byte count in binary units, exact where possible ("1 GiB", "1.5 MiB", "100 B")."""
    for prefix in ("Pi", "Ti", "Gi", "Mi", "Ki"):
        if nbytes >= _PREFIX[prefix]:
            return f"{nbytes / float(_PREFIX[prefix]):.6g} {prefix}B"
    return f"{nbytes:.6g} B"


def format_bandwidth(bps: float) -> str:
    return f"{bps / 2**30:.6g} GiB/s"


_READABLE_BANDWIDTH = (("TB/s", 1e12), ("GiB/s", 2.0**30), ("GB/s", 1e9), ("MiB/s", 2.0**20),
                       ("MB/s", 1e6), ("B/s", 1.0))


def bandwidth_text(bps: float) -> str:
    """A bandwidth in the unit that makes it a round number ("25 GB/s", "50 GiB/s"), so the
    decimal figures datasheets give are not shown as odd binary ones."""
    for unit, factor in _READABLE_BANDWIDTH:
        scaled = bps / factor
        if 1 <= scaled < 1e5 and abs(scaled - round(scaled, 3)) <= 1e-12 * scaled:
            return f"{round(scaled, 3):g} {unit}"
    return format_bandwidth(bps)


def format_time(seconds: float) -> str:
    """Seconds in the most readable unit; "inf" for an unbounded time."""
    if not math.isfinite(seconds):
        return "inf"
    if seconds == 0:
        return "0 s"
    for unit, factor in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if abs(seconds) >= factor:
            return f"{seconds / factor:.6g} {unit}"
    return f"{seconds / 1e-12:.6g} ps"
