"""The compact file form of a schedule: its columns as numpy arrays in a compressed ``.npz``.

Why a second form beside JSON: a JSON transfer takes about 60 bytes of text and a Python object
per value to read, so a few million transfers exceed the input cap and 10⁸ exceed any memory.
Here a transfer takes a few bytes (ids in the narrowest unsigned type that holds them, start times
as indices into a table of the distinct times, deflated) and reads straight into arrays.

Members (each an ``.npy``; ``numpy.load`` opens the file)::

    header        uint8: UTF-8 JSON {"format": "optcoll-schedule", "version": 1, "encoding":
                  "columns", "machine", "model", "time_unit": "s", "rounds", "meta", "transfers"}
    chunk, link   ids per transfer
    op            0 copy, 1 reduce
    start_index   timed: per transfer, its start time's index in start_values (seconds, sorted)
    start_values
    step          present when the JSON form has a "step" column (step model, or steps given)
    via           present when the JSON form has a "via" column: per transfer 1 + the row of the
                  arrival a plain switch forwards, 0 where none is named (JSON's null)
    link_ends     [link, src, dst] of every link used: checked against the machine as JSON's
                  src/dst columns are, so a schedule written for another machine is refused

The same schedule reads back from either form to the same ``Schedule`` (JSON → npz → JSON gives
the same JSON). Reading refuses what JSON's reader refuses (ids out of range, negative or
non-finite times, unknown ops, more transfers than the ``transfers`` cap) and a file larger than
the ``input_bytes`` cap as stored; no column is decompressed before its header shows it has the
schedule's row count in a type of at most 8 bytes, so memory stays within the transfers cap.
"""
from __future__ import annotations

import io
import json
import math
import os
import zipfile
import zlib
from typing import Any, BinaryIO

import numpy as np

from optcoll import limits
from optcoll.errors import InputError
from optcoll.fileio import write_bytes_atomic
from optcoll.inputfiles import open_regular, too_large
from optcoll.machines.machine import Machine
from optcoll.schedules.jsonfile import FORMAT, VERSION, schedule_header
from optcoll.schedules.schedule import REDUCE, Schedule
from optcoll.units import format_size

SUFFIX = ".npz"
ENCODING = "columns"
_HEADER_KEYS = ("format", "version", "encoding", "machine", "model", "time_unit", "rounds", "meta", "transfers")


def _narrow(values: np.ndarray) -> np.ndarray:
    """``values`` (ids ≥ 0) in the narrowest unsigned type that holds them."""
    top = int(values.max(initial=0))
    for dtype in (np.uint8, np.uint16, np.uint32):
        if top <= np.iinfo(dtype).max:
            return values.astype(dtype)
    return values.astype(np.uint64)


def _used(link: np.ndarray, machine: Machine) -> np.ndarray:
    """The links used, in id order (ids within the machine): a count, not a sort (np.unique
    took 2 s at 3·10⁷ transfers, on save and on load)."""
    return np.flatnonzero(np.bincount(link, minlength=machine.num_links))


def _distinct(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, return_inverse=True)``, in one pass when ``values`` are in order
    already, as producers list transfers (sorting 3·10⁷ start times took 3 s of a 9 s save)."""
    if values.size and bool(np.all(values[1:] >= values[:-1])):
        new = np.empty(values.size, dtype=bool)
        new[0] = True
        np.not_equal(values[1:], values[:-1], out=new[1:])
        return values[new], np.cumsum(new) - 1
    values, index = np.unique(values, return_inverse=True)
    return values, index.ravel()


def schedule_to_npz(schedule: Schedule, machine: Machine) -> bytes:
    """The compact form's bytes (deterministic: same schedule, same bytes)."""
    header = {**schedule_header(schedule, machine), "encoding": ENCODING, "transfers": len(schedule)}
    used = _used(schedule.link, machine)
    columns: dict[str, np.ndarray] = {
        "header": np.frombuffer(json.dumps(header).encode(), dtype=np.uint8),
        "chunk": _narrow(schedule.chunk), "link": _narrow(schedule.link), "op": schedule.op.astype(np.uint8),
        "link_ends": _narrow(np.stack([used, machine.link_src[used], machine.link_dst[used]], axis=1)),
    }
    if schedule.rounds is None:
        values, index = _distinct(schedule.start)
        columns["start_values"], columns["start_index"] = values.astype(np.float64), _narrow(index)
    if schedule.rounds is not None or schedule.step.any():
        columns["step"] = _narrow(schedule.step)
    if schedule.via is not None:
        columns["via"] = _narrow(schedule.via + 1)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as archive:
        for name, array in columns.items():  # a fixed date, so the bytes depend on the content only
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            with archive.open(info, "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.ascontiguousarray(array), allow_pickle=False)
    return buffer.getvalue()


def save_npz(path: str | os.PathLike, schedule: Schedule, machine: Machine) -> None:
    write_bytes_atomic(path, schedule_to_npz(schedule, machine))


def load_npz(path: str | os.PathLike, machine: Machine) -> Schedule:
    """The schedule in the compact file ``path``; one ``InputError`` naming the file otherwise."""
    cap = limits.value("input_bytes")
    with open_regular(path) as handle:
        size = os.fstat(handle.fileno()).st_size
        if size > cap:
            raise too_large(path, f"holds {format_size(size)},")
        return schedule_from_npz(handle, machine, str(path))


def schedule_from_npz(source: bytes | BinaryIO, machine: Machine, name: str = "<schedule>") -> Schedule:
    """The schedule in compact form (bytes or a seekable binary file), checked as ``load_npz`` says."""
    handle = io.BytesIO(source) if isinstance(source, bytes) else source
    try:
        with zipfile.ZipFile(handle) as archive:
            return _read(archive, machine, name)
    except InputError:
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, OSError, ValueError,
            KeyError, UnicodeDecodeError) as exc:
        raise InputError(f"not a readable compact schedule (.npz): {exc}", source=name) from None


class _Members:
    """Reads ``.npy`` members, refusing any but 1-D arrays of at most ``rows`` rows of a plain type."""

    def __init__(self, archive: zipfile.ZipFile, name: str):
        self.archive, self.name = archive, name
        self.names = {info.filename for info in archive.infolist()}

    def __contains__(self, column: str) -> bool:
        return f"{column}.npy" in self.names

    def read(self, column: str, kinds: str, rows: int | None, width: int = 1, cap: str = "transfers") -> np.ndarray:
        if column not in self:
            raise InputError("missing column", source=self.name, field=column)
        with self.archive.open(f"{column}.npy") as member:
            version = np.lib.format.read_magic(member)
            read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                           else np.lib.format.read_array_header_2_0)
            shape, fortran, dtype = read_header(member)
            wanted = (rows,) if width == 1 else (rows, width)
            if (dtype.kind not in kinds or dtype.itemsize > 8 or dtype.hasobject or fortran
                    or len(shape) != len(wanted) or (rows is not None and shape != wanted)
                    or (width != 1 and shape[1] != width)):
                raise InputError(f"must be {'a column of ' + str(rows) if rows is not None else 'an array of'} "
                                 f"{'rows' if width == 1 else f'rows of {width}'} ({kinds!r} types of at most "
                                 f"8 bytes); got shape {shape} of {dtype}", source=self.name, field=column)
            count = math.prod(shape)
            limits.check(cap, count // width, f"{count // width} rows in column {column!r}", "optcoll reads")
            data = member.read(count * dtype.itemsize)
        if len(data) != count * dtype.itemsize:
            raise InputError("the column ends early (cut short?)", source=self.name, field=column)
        return np.frombuffer(data, dtype=dtype).reshape(shape)


def _header(members: _Members) -> dict[str, Any]:
    raw = members.read("header", "u", None, cap="input_bytes").tobytes()
    try:
        header = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        raise InputError(f"not JSON: {exc}", source=members.name, field="header") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT or header.get("encoding") != ENCODING:
        raise InputError(f"not an optcoll schedule (expected \"format\": \"{FORMAT}\", \"encoding\": "
                         f"\"{ENCODING}\")", source=members.name, field="header")
    if header.get("version") != VERSION:
        raise InputError(f"unsupported version {header.get('version')!r} (this optcoll reads {VERSION})",
                         source=members.name, field="header.version")
    unknown = sorted(set(header) - set(_HEADER_KEYS))
    if unknown:
        raise InputError(f"unknown key {unknown[0]!r}", source=members.name, field="header")
    n = header.get("transfers")
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise InputError(f"must be a count of transfers, got {n!r}", source=members.name, field="header.transfers")
    limits.check("transfers", n, f"{n} transfers", "optcoll verifies")
    if header.get("time_unit", "s") != "s" or header.get("model") not in ("timed", "step"):
        raise InputError("model must be timed or step, and time_unit \"s\"", source=members.name, field="header")
    rounds = header.get("rounds")
    if header["model"] == "step" and not (isinstance(rounds, list) and all(
            isinstance(r, int) and not isinstance(r, bool) and 1 <= r < 2**63 for r in rounds)):
        raise InputError("a step schedule needs rounds: a list of positive integers", source=members.name,
                         field="header.rounds")
    if not isinstance(header.get("meta") or {}, dict):
        raise InputError("must be an object", source=members.name, field="header.meta")
    return header


def _read(archive: zipfile.ZipFile, machine: Machine, name: str) -> Schedule:
    members = _Members(archive, name)
    header = _header(members)
    n, step_model = header["transfers"], header["model"] == "step"
    chunk = members.read("chunk", "u", n).astype(np.int64)
    link = members.read("link", "u", n).astype(np.int64)
    op = members.read("op", "u", n).astype(np.uint8)
    bad = np.flatnonzero(op > REDUCE)
    if bad.size:
        raise InputError(f"unknown op {int(op[bad[0]])} (0 copy, 1 reduce)", source=name, field=f"op[{int(bad[0])}]")
    _check_links(members, link, machine)
    if step_model:
        start = np.full(n, np.nan)
    else:
        values = members.read("start_values", "f", None)
        index = members.read("start_index", "u", n)
        bad = np.flatnonzero(~np.isfinite(values) | (values < 0))
        if bad.size:
            raise InputError(f"value {float(values[bad[0]])!r} is not a finite time ≥ 0", source=name,
                             field=f"start_values[{int(bad[0])}]")
        if index.size and int(index.max()) >= values.size:
            i = int(np.argmax(index))
            raise InputError(f"index {int(index[i])} is past the {values.size} start values", source=name,
                             field=f"start_index[{i}]")
        start = values.astype(np.float64)[index]
    if step_model or "step" in members:
        step = members.read("step", "u", n).astype(np.int64)
    else:
        step = np.zeros(n, dtype=np.int64)
    if (chunk < 0).any() or (step < 0).any():  # uint64 ids past 2^63 wrap
        raise InputError("ids must be below 2^63", source=name, field="chunk")
    rounds = tuple(header["rounds"]) if step_model else None
    return Schedule(chunk, link, start, op, step, rounds, header.get("meta") or {}, _via(members, n))


def _via(members: _Members, n: int) -> np.ndarray | None:
    """The rows named as forwarded arrivals (-1: none), None when no transfer names one (as JSON)."""
    if "via" not in members:
        return None
    via = members.read("via", "u", n).astype(np.int64) - 1
    past = np.flatnonzero((via >= n) | (via < -1))  # uint64 past 2^63 wraps below -1
    if past.size:
        i = int(past[0])
        raise InputError(f"names transfer {int(via[i])}, but the schedule has {n} transfers (rows 0..{n - 1})",
                         source=members.name, field=f"via[{i}]")
    return via if (via >= 0).any() else None


def _check_links(members: _Members, link: np.ndarray, machine: Machine) -> None:
    """Every link exists, and has the endpoints the file recorded for it."""
    bad = np.flatnonzero((link < 0) | (link >= machine.num_links))
    if bad.size:
        i = int(bad[0])
        raise InputError(f"link {int(link[i])} does not exist in machine {machine.name!r} ({machine.num_links} "
                         f"links)", source=members.name, field=f"link[{i}]")
    ends = members.read("link_ends", "u", None, width=3).astype(np.int64)
    used = _used(link, machine)
    if ends.shape[0] != used.size or not np.array_equal(ends[:, 0], used):
        raise InputError("must list each link the schedule uses once, in id order", source=members.name,
                         field="link_ends")
    wrong = np.flatnonzero((machine.link_src[used] != ends[:, 1]) | (machine.link_dst[used] != ends[:, 2]))
    if wrong.size:
        e, src, dst = (int(x) for x in ends[wrong[0]])
        raise InputError(f"names link {e} as {src}->{dst}, but in machine {machine.name!r} that link is "
                         f"{int(machine.link_src[e])}->{int(machine.link_dst[e])} (schedule made for another "
                         f"machine?)", source=members.name, field="link_ends")
