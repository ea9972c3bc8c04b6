"""Hypothesis strategies that mutate valid input files, for the parser fuzzers.

Two levels, because parsers fail at both: bytes (flips, truncation, lines deleted, duplicated or
swapped, bytes inserted) exercise decoding and the format's own parser; parsed data (a key
deleted, a value copied under a misspelt key, a value replaced by one of the wrong type or an
absurd one) exercises the field checks behind it.

Bounded on purpose: a byte flip never writes an ASCII digit and replacement integers for a
generator call stay small. Absurd sizes are refused (the ``nodes``/``links`` caps of
``optcoll.limits``, in the corpus), but a legal 900,000-NPU ring is built, which takes seconds a fuzzer should not spend.
Explicit graphs, instances, schedules and the other forms get the full range.
"""
from __future__ import annotations

import datetime
import math
import xml.etree.ElementTree as ET
from typing import Any

from hypothesis import strategies as st

_NOT_DIGITS = [b for b in range(256) if not 0x30 <= b <= 0x39]


@st.composite
def mutated_bytes(draw, seed: bytes, max_mutations: int = 3) -> bytes:
    """``seed`` after one to ``max_mutations`` byte-level mutations."""
    data = bytearray(seed)
    for _ in range(draw(st.integers(1, max_mutations))):
        op = draw(st.sampled_from(["flip", "truncate", "delete_line", "duplicate_line", "swap_lines",
                                   "insert"]))
        if not data:
            break
        at = draw(st.integers(0, len(data) - 1))
        if op == "flip":
            data[at] = draw(st.sampled_from(_NOT_DIGITS))
        elif op == "truncate":
            del data[at:]
        elif op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8).map(
                lambda b: bytes(_NOT_DIGITS[x % len(_NOT_DIGITS)] for x in b)))
        else:
            lines = bytes(data).splitlines(keepends=True)
            i, j = (draw(st.integers(0, len(lines) - 1)) for _ in range(2))
            if op == "delete_line":
                del lines[i]
            elif op == "duplicate_line":
                lines.insert(i, lines[i])
            else:
                lines[i], lines[j] = lines[j], lines[i]
            data = bytearray(b"".join(lines))
    return bytes(data)


def scalars(*, json: bool = False, dates: bool = False, wide_ints: bool = True) -> st.SearchStrategy:
    """Values a file of the format can hold, biased to the ones parsers trip over."""
    ints = st.sampled_from([-2**63, -1, 0, 1, 2, 3, 7, 2**31, 2**63, 10**30]) if wide_ints \
        else st.integers(-2, 12)
    options = [st.booleans(), ints,
               st.sampled_from([0.0, -0.0, 0.5, -1.5, 1e300, 1e-300, math.inf, -math.inf, math.nan]),
               st.sampled_from(["", "x", "1 GiB", "10 GB", "10 Gbit", "50 GiB/s", "0.5 us", "-1 us",
                                "5 parsecs", "nan GB/s", "1e9999999 B", "ring", "dgx1", "copy", "allgather",
                                "\u00e9", "Ring", "X", "NV2"]),
               st.text(max_size=12)]
    if json:
        options.append(st.none())
    if dates:
        options.append(st.just(datetime.date(1979, 5, 27)))
    return st.one_of(options)


def values(**kind) -> st.SearchStrategy:
    """A scalar, or a small array or table of them."""
    leaf = scalars(**kind)
    return st.one_of(leaf, st.lists(leaf, max_size=3),
                     st.dictionaries(st.sampled_from(["a", "src", "name"]), leaf, max_size=2))


def _paths(data: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path (keys and indices) to a value inside nested dicts and lists."""
    out = [prefix] if prefix else []
    if isinstance(data, dict):
        for key, value in data.items():
            out += _paths(value, prefix + (key,))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            out += _paths(value, prefix + (i,))
    return out


def _copy(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _copy(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_copy(v) for v in data]
    return data


@st.composite
def mutated_data(draw, seed: dict, max_mutations: int = 3, **kind) -> dict:
    """``seed`` (parsed data) after up to ``max_mutations`` edits: delete a key or item, copy a
    value under a misspelt key, replace a value by a random one."""
    data = _copy(seed)
    for _ in range(draw(st.integers(1, max_mutations))):
        paths = _paths(data)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = data
        for step in path[:-1]:
            parent = parent[step]
        last = path[-1]
        op = draw(st.sampled_from(["delete", "misspell", "replace", "replace"]))
        if op == "delete":
            del parent[last]
        elif op == "misspell" and isinstance(parent, dict):
            parent[str(last)[:-1] + "_"] = parent[last]
        else:
            parent[last] = draw(values(**kind))
    return data


ATTRIBUTE_VALUES = st.one_of(st.sampled_from(["-1", "0", "1", "2", "7", "8", "64", "100000000000", "1e3", "",
                                              "x", "i", "o", "s", "r", "rcs", "rrc", "nop", "cpy",
                                              "allreduce", "sum", "LL"]),
                             st.integers(-3, 40).map(str))


@st.composite
def mutated_xml(draw, seed: bytes, max_mutations: int = 3) -> bytes:
    """XML ``seed`` with attributes replaced (ids, peers, offsets, counts, types: numbers small,
    negative, huge or not numbers) or deleted, and elements deleted or duplicated."""
    root = ET.fromstring(seed)
    for _ in range(draw(st.integers(1, max_mutations))):
        elements = list(root.iter())
        element = draw(st.sampled_from(elements))
        op = draw(st.sampled_from(["replace", "replace", "replace", "delete_attribute", "delete",
                                   "duplicate"]))
        parents = {child: parent for parent in elements for child in parent}
        if op in ("delete", "duplicate") and element in parents:
            parent = parents[element]
            if op == "delete":
                parent.remove(element)
            else:
                parent.insert(list(parent).index(element), ET.fromstring(ET.tostring(element)))
        elif element.attrib:
            name = draw(st.sampled_from(sorted(element.attrib)))
            if op == "delete_attribute":
                del element.attrib[name]
            else:
                element.set(name, draw(ATTRIBUTE_VALUES))
    return ET.tostring(root)
