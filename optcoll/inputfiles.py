"""Reading the files people hand to optcoll: every way reading or parsing one can fail becomes one
``InputError`` naming the file.

Why one module: each file form (TOML models and instances, JSON schedules, YAML network.yml, XML,
nvidia-smi text) used to map its own subset of the failures to messages, and the rest escaped as
tracebacks: a directory where a file belongs, bytes that are not UTF-8, gzip that is cut short,
an integer with more digits than Python converts (a ``ValueError``), nesting deep enough to
exhaust the parser's recursion. Duplicate keys are errors in every form, as TOML already makes
them: a silently ignored first value is a typo nobody sees.

Only regular files are read (a FIFO would block forever, /dev/zero never ends), and never more
than the ``input_bytes`` cap of ``optcoll.limits``, as stored and after gunzip, which streams.
"""
from __future__ import annotations

import difflib
import json
import os
import stat
import tomllib
import zlib
from collections.abc import Callable, Collection, Hashable
from pathlib import Path
from typing import Any, BinaryIO

from optcoll import limits
from optcoll.errors import InputError
from optcoll.units import format_size

_BOM = "\ufeff"
#: Bytes read (and gunzipped) at a time.
_BLOCK = 1 << 20
_KINDS = ((stat.S_ISDIR, "is a directory"), (stat.S_ISFIFO, "is a FIFO (named pipe)"),
          (stat.S_ISCHR, "is a character device"), (stat.S_ISBLK, "is a block device"),
          (stat.S_ISSOCK, "is a socket"))


def special_kind(mode: int) -> str | None:
    """How a file that is not a regular file reads in a message ("is a FIFO (named pipe)"), or
    None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    return next((text for test, text in _KINDS if test(mode)), "is not a regular file")


def open_regular(path: str | os.PathLike) -> BinaryIO:
    """``path`` opened for reading when it is a regular file (after symlinks): a FIFO would block
    forever, /dev/zero never ends, a directory has no content."""
    try:
        kind = special_kind(os.stat(path).st_mode)
        if kind is None:  # opened without blocking, checked again: it may have been swapped
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
            kind = special_kind(os.fstat(fd).st_mode)
            if kind is None:
                return os.fdopen(fd, "rb")
            os.close(fd)
    except FileNotFoundError:
        raise InputError("file not found", source=str(path)) from None
    except OSError as exc:
        raise InputError(f"cannot read the file: {exc.strerror or exc}", source=str(path)) from None
    raise InputError(f"{kind}, not a regular file; optcoll reads input from regular files only",
                     source=str(path))


def too_large(path: str | os.PathLike, what: str) -> InputError:
    """The refusal of a file over the ``input_bytes`` cap; ``what`` says how large ("holds 2 GiB,")."""
    return InputError(f"{what} more than optcoll reads from one file ({limits.at_most('input_bytes')})",
                      source=str(path))


def _read_capped(handle: BinaryIO, path: Path, cap: int) -> bytes:
    raw = handle.read(cap + 1)  # the size stat said may be stale (a growing file, /proc)
    if len(raw) > cap:
        raise too_large(path, "holds")
    return raw


def _gunzip(handle: BinaryIO, path: Path, cap: int) -> bytes:
    """The gzip members of ``handle`` decompressed as they stream in, never more than ``cap``
    bytes in or out (a few kilobytes can expand to gigabytes)."""
    out, taken, data = bytearray(), 0, b""
    member = zlib.decompressobj(wbits=31)  # gzip header and trailer
    started = False
    try:
        while True:
            if not data:
                data = handle.read(_BLOCK)
                taken += len(data)
                if taken > cap:
                    raise too_large(path, "holds")
                if not data:
                    break
            if member.eof:  # between members: zero padding, or another member (appended files)
                if not data.strip(b"\0"):
                    data = b""
                    continue
                member = zlib.decompressobj(wbits=31)
            started = True
            out += member.decompress(data, cap + 1 - len(out))
            if len(out) > cap:
                raise too_large(path, "gunzips to")
            data = member.unused_data if member.eof else member.unconsumed_tail
    except zlib.error as exc:
        raise InputError(f"not a readable gzip file: {exc}", source=str(path)) from None
    if member.eof:
        return bytes(out)
    raise InputError("not a readable gzip file: " + ("it ends before its end-of-stream marker (cut short?)"
                                                     if started else "it is empty"), source=str(path))


def read_bytes(path: str | os.PathLike) -> bytes:
    """The bytes of a regular file, gunzipped when its name ends in ``.gz``, at most the
    ``input_bytes`` cap (``optcoll.limits``) as stored and after gunzip."""
    path = Path(path)
    cap = limits.value("input_bytes")
    with open_regular(path) as handle:
        size = os.fstat(handle.fileno()).st_size
        if size > cap:
            raise too_large(path, f"holds {format_size(size)},")
        try:
            return _gunzip(handle, path, cap) if path.suffix == ".gz" else _read_capped(handle, path, cap)
        except OSError as exc:
            raise InputError(f"cannot read the file: {exc.strerror or exc}", source=str(path)) from None


def _decode(raw: bytes, source: str) -> str:
    """UTF-8 text (a leading byte-order mark dropped); otherwise the line and byte that are not."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise InputError(f"not UTF-8 text (line {line}, byte {exc.start} is {raw[exc.start]:#04x})",
                         source=source) from None
    return text[1:] if text.startswith(_BOM) else text


def read_text(path: str | os.PathLike) -> str:
    return _decode(read_bytes(path), str(path))


def _parse(text: str, source: str, invalid: str, parse: Callable[[str], Any]) -> Any:
    """``parse(text)`` with its failures as one-line ``InputError``s starting ``invalid``."""
    try:
        return parse(text)
    except InputError as exc:
        raise exc.located(source) from None
    except RecursionError:
        raise InputError(f"{invalid}: nested too deeply", source=source) from None
    except ValueError as exc:  # TOMLDecodeError, JSONDecodeError, over-long integers
        raise InputError(f"{invalid}: {exc}", source=source) from None


def read_toml(path: str | os.PathLike) -> dict[str, Any]:
    return _parse(read_text(path), str(path), "malformed TOML", tomllib.loads)


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for key, value in pairs:
        if key in data:
            raise InputError(f"duplicate key {key!r}", field=key)
        data[key] = value
    return data


def read_json(path: str | os.PathLike) -> Any:
    """JSON (``.json`` or gzip-compressed ``.json.gz``); NaN and Infinity parse, callers that need
    finite numbers check them."""
    return _parse(read_text(path), str(path), "not valid JSON",
                  lambda text: json.loads(text, object_pairs_hook=_unique_object))


def read_yaml(path: str | os.PathLike) -> Any:
    """Plain YAML data (``safe_load``: no Python objects); duplicate keys are errors."""
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):
            seen = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                if not isinstance(key, Hashable):
                    continue  # SafeLoader's own error names an unhashable key
                if key in seen:
                    raise InputError(f"duplicate key {key!r} (line {key_node.start_mark.line + 1})",
                                     field=str(key))
                seen.add(key)
            return super().construct_mapping(node, deep)

    def load(text: str) -> Any:
        try:
            return yaml.load(text, Loader=UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
            raise ValueError(f"{exc.problem or exc.context}{where}") from None
        except yaml.YAMLError as exc:
            raise ValueError(str(exc)) from None

    return _parse(read_text(path), str(path), "not valid YAML", load)


# -- tables of parsed TOML/JSON/YAML ---------------------------------------------------------------


def kind_of(value: Any) -> str:
    """How a parsed value reads in a message: "a table", "an integer", ..."""
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
            list: "an array", dict: "a table"}.get(type(value), type(value).__name__)


def join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def known_keys(value: Any, path: str, allowed: Collection[str], source: str | None, *,
               sections: bool = False) -> dict[str, Any]:
    """``value`` when it is a table whose keys are all ``allowed``: a misspelt key is an error
    naming its field (with the allowed key it most resembles), never silently ignored.
    ``sections``: the keys are a TOML file's top level, where a table is named as a [section]."""
    if not isinstance(value, dict):
        raise InputError(f"must be a table, got {kind_of(value)}", source=source, field=path or None)
    for key in value:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), list(allowed), n=1)
            if sections and isinstance(value[key], dict):
                what, hint = f"section [{key}]", f" (did you mean [{close[0]}]?)" if close else ""
            else:
                what, hint = "key", f" (did you mean {close[0]!r}?)" if close else ""
            raise InputError(f"unknown {what}{hint}; allowed: {', '.join(allowed)}", source=source,
                             field=join(path, key))
    return value
