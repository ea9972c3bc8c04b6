"""Reading the files people hand to optcoll: every way reading or parsing one can fail becomes one
``InputError`` naming the file.

Why one module: each file form (TOML models and instances, JSON schedules, YAML network.yml, XML,
nvidia-smi text) used to map its own subset of the failures to messages, and the rest escaped as
tracebacks: a directory where a file belongs, bytes that are not UTF-8, gzip that is cut short,
an integer with more digits than Python converts (a ``ValueError``), nesting deep enough to
exhaust the parser's recursion. Duplicate keys are errors in every form, as TOML already makes
them: a silently ignored first value is a typo nobody sees.
"""
from __future__ import annotations

import difflib
import gzip
import json
import os
import tomllib
import zlib
from collections.abc import Callable, Collection, Hashable
from pathlib import Path
from typing import Any

from optcoll.errors import InputError

_BOM = "\ufeff"


def read_bytes(path: str | os.PathLike) -> bytes:
    """The file's bytes, gunzipped when its name ends in ``.gz``."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise InputError("file not found", source=str(path)) from None
    except IsADirectoryError:
        raise InputError("is a directory, not a file", source=str(path)) from None
    except OSError as exc:
        raise InputError(f"cannot read the file: {exc.strerror or exc}", source=str(path)) from None
    if path.suffix != ".gz":
        return raw
    try:
        return gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as exc:  # BadGzipFile is an OSError
        raise InputError(f"not a readable gzip file: {exc}", source=str(path)) from None


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
