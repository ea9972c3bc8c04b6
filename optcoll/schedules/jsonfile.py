"""The native, versioned JSON file form of a schedule (``.json`` or gzip-compressed ``.json.gz``).

Column-wise so large schedules stay compact::

    {"format": "optcoll-schedule", "version": 1, "machine": "dgx1", "model": "timed",
     "time_unit": "s", "rounds": null, "meta": {...},
     "transfers": {"chunk": [...], "src": [...], "dst": [...], "link": [...],
                   "start": [...], "op": ["copy", ...], "step": [...], "via": [null, 3, ...]}}

``link`` may be omitted when src→dst has one link (or ``lane`` picks among parallel links);
when both are given they must agree, which catches a schedule written for another machine.
``via`` (optional; null where none is named) gives, for a transfer a plain switch sends, the row
of the transfer whose arrival it forwards (docs/model.md, "Switches: forwarding simultaneous
arrivals"); schedules without it read as before.
Unknown keys and columns are errors (a misspelt ``lane`` would silently mean lane 0), times are
seconds (``time_unit`` may only say "s"), ids are integers from 0 and start times finite ≥ 0:
anything else is not a schedule, and neither is one of more transfers than the ``transfers`` cap
(``optcoll.limits``), refused before its columns become arrays. What depends on the collective (a chunk id it does not have,
causality, capacity) is the verifier's to judge.
"""
from __future__ import annotations

import json
import math
import os
from typing import Any

import numpy as np

from optcoll import limits
from optcoll.errors import InputError
from optcoll.fileio import write_atomic
from optcoll.inputfiles import known_keys, read_json
from optcoll.machines.machine import Machine
from optcoll.schedules.schedule import OP_NAMES, OPS, Schedule

FORMAT, VERSION = "optcoll-schedule", 1


def schedule_to_dict(schedule: Schedule, machine: Machine) -> dict[str, Any]:
    timed = schedule.rounds is None
    transfers: dict[str, Any] = {
        "chunk": schedule.chunk.tolist(),
        "src": machine.link_src[schedule.link].tolist(),
        "dst": machine.link_dst[schedule.link].tolist(),
        "link": schedule.link.tolist(),
        "op": [OP_NAMES[int(o)] for o in schedule.op],
    }
    if timed:
        transfers["start"] = schedule.start.tolist()
    if not timed or schedule.step.any():
        transfers["step"] = schedule.step.tolist()
    if schedule.via is not None:
        transfers["via"] = [None if r < 0 else r for r in schedule.via.tolist()]
    return {"format": FORMAT, "version": VERSION, "machine": machine.name,
            "model": schedule.model, "time_unit": "s",
            "rounds": list(schedule.rounds) if schedule.rounds is not None else None,
            "meta": schedule.meta, "transfers": transfers}


_INT64 = 2**63 - 1
_KEYS = ("format", "version", "machine", "model", "time_unit", "rounds", "meta", "transfers")
_COLUMNS = ("chunk", "src", "dst", "link", "lane", "start", "op", "step", "via")


def _problem(value: Any, kind: type) -> str | None:
    """Why ``value`` cannot sit in a column of ``kind``: ids are integers from 0 that fit 64 bits,
    times finite numbers ≥ 0 (a time before the start, like a negative id, is no schedule at all;
    the verifier judges everything that depends on the machine and the collective)."""
    if kind is str:
        return None if isinstance(value, str) else "is not a string"
    if isinstance(value, bool) or not isinstance(value, (int, float) if kind is float else int):
        return f"is not {'a number' if kind is float else 'an integer'}"
    if kind is int:
        return None if 0 <= value <= _INT64 else "is not an id from 0 to 2^63 - 1"
    return None if math.isfinite(value) and value >= 0 else "is not a finite time ≥ 0"


def _column(transfers: dict, name: str, n: int, source: str, kind: type, default=None,
            nullable: bool = False) -> list:
    if name not in transfers:
        if default is None:
            raise InputError("missing column", source=source, field=f"transfers.{name}")
        return [default] * n
    column = transfers[name]
    if not isinstance(column, list) or len(column) != n:
        got = f"{len(column)}" if isinstance(column, list) else f"a {type(column).__name__}"
        raise InputError(f"must be a list of {n} values, one per transfer as in 'chunk'; got {got}",
                         source=source, field=f"transfers.{name}")
    for i, value in enumerate(column):
        problem = None if nullable and value is None else _problem(value, kind)
        if problem:
            raise InputError(f"value {value!r} {problem}", source=source, field=f"transfers.{name}[{i}]")
    return column


def schedule_from_dict(data: Any, machine: Machine, source: str = "<schedule>") -> Schedule:
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise InputError(f"not an optcoll schedule (expected \"format\": \"{FORMAT}\")", source=source,
                         field="format")
    if data.get("version") != VERSION:
        raise InputError(f"unsupported version {data.get('version')!r} (this optcoll reads {VERSION})",
                         source=source, field="version")
    known_keys(data, "", _KEYS, source)
    if data.get("time_unit", "s") != "s":
        raise InputError(f"{data['time_unit']!r}: start times are read in seconds, \"time_unit\": \"s\"",
                         source=source, field="time_unit")
    transfers = data.get("transfers")
    if not isinstance(transfers, dict) or not isinstance(transfers.get("chunk"), list):
        raise InputError("must be an object of columns with a 'chunk' list", source=source,
                         field="transfers")
    known_keys(transfers, "transfers", _COLUMNS, source)
    n = len(transfers["chunk"])
    try:
        limits.check("transfers", n, f"{n} transfers", "optcoll verifies")
    except InputError as exc:
        raise exc.located(source, "transfers.chunk") from None
    chunk = _column(transfers, "chunk", n, source, int)
    rounds = data.get("rounds")
    model = data.get("model", "timed" if rounds is None else "step")
    if model not in ("timed", "step"):
        raise InputError(f"unknown model {model!r}; use timed or step", source=source, field="model")
    if model == "step":
        if not isinstance(rounds, list) or not all(isinstance(r, int) and not isinstance(r, bool)
                                                   and 1 <= r <= _INT64 for r in rounds):
            raise InputError("a step schedule needs rounds: a list of positive integers",
                             source=source, field="rounds")
        step = _column(transfers, "step", n, source, int)
        start = [float("nan")] * n
    else:
        rounds = None
        start = _column(transfers, "start", n, source, float)
        step = _column(transfers, "step", n, source, int, default=0)
    ops = _column(transfers, "op", n, source, str, default="copy")
    for i, op in enumerate(ops):
        if op not in OPS:
            raise InputError(f"unknown op {op!r} (use copy or reduce)", source=source,
                             field=f"transfers.op[{i}]")
    link = _resolve_links(transfers, n, machine, source)
    meta = data.get("meta") or {}
    if not isinstance(meta, dict):
        raise InputError("must be an object", source=source, field="meta")
    via = None
    if "via" in transfers:
        rows = _column(transfers, "via", n, source, int, nullable=True)
        via = np.array([-1 if r is None else r for r in rows], dtype=np.int64) if n else None
        past = np.flatnonzero(via >= n) if via is not None else ()
        if len(past):
            i = int(past[0])
            raise InputError(f"names transfer {int(via[i])}, but the schedule has {n} transfers "
                             f"(rows 0..{n - 1})", source=source, field=f"transfers.via[{i}]")
        if via is not None and not (via >= 0).any():
            via = None
    return Schedule(np.array(chunk, dtype=np.int64), link, np.array(start, dtype=float),
                    np.array([OPS[o] for o in ops], dtype=np.uint8), np.array(step, dtype=np.int64),
                    tuple(rounds) if rounds is not None else None, meta, via)


def _resolve_links(transfers: dict, n: int, machine: Machine, source: str) -> np.ndarray:
    has_link, has_pair = "link" in transfers, "src" in transfers and "dst" in transfers
    if not has_link and not has_pair:
        raise InputError("each transfer needs a link id or src and dst", source=source,
                         field="transfers.link")
    if has_link:
        link = np.array(_column(transfers, "link", n, source, int), dtype=np.int64)
        bad = np.flatnonzero((link < 0) | (link >= machine.num_links))
        if bad.size:
            i = int(bad[0])
            raise InputError(f"link {int(link[i])} does not exist in machine {machine.name!r} "
                             f"({machine.num_links} links)", source=source, field=f"transfers.link[{i}]")
        if not has_pair:
            return link
    src = _column(transfers, "src", n, source, int)
    dst = _column(transfers, "dst", n, source, int)
    if has_link:
        mismatch = np.flatnonzero((machine.link_src[link] != np.array(src, dtype=np.int64)) |
                                  (machine.link_dst[link] != np.array(dst, dtype=np.int64)))
        if mismatch.size:
            i = int(mismatch[0])
            raise InputError(f"names link {int(link[i])} as {src[i]}->{dst[i]}, but in machine "
                             f"{machine.name!r} that link is {machine.link_src[link[i]]}->"
                             f"{machine.link_dst[link[i]]} (schedule made for another machine?)",
                             source=source, field=f"transfers[{i}]")
        return link
    lanes = _column(transfers, "lane", n, source, int, default=0)
    resolved = np.empty(n, dtype=np.int64)
    for i, (u, v, lane) in enumerate(zip(src, dst, lanes)):
        ids = machine.links_between(u, v)
        if not ids or not 0 <= lane < len(ids):
            raise InputError(f"no link {u}->{v} (lane {lane}) in machine {machine.name!r}",
                             source=source, field=f"transfers[{i}]")
        resolved[i] = ids[lane]
    return resolved


def load_schedule(path: str | os.PathLike, machine: Machine) -> Schedule:
    return schedule_from_dict(read_json(path), machine, str(path))


def save_schedule(path: str | os.PathLike, schedule: Schedule, machine: Machine) -> None:
    data = schedule_to_dict(schedule, machine)
    write_atomic(path, lambda handle: json.dump(data, handle, separators=(",", ":")))
