"""The recorded ``[results]`` of an instance file, rewritten without touching the rest.

Why in the instance file and not a sidecar: the issue asks that each instance records its ground
truth, and one file is what people copy, review and diff. Why not rewrite the whole file from the
parsed dict: that would drop the comments and layout of the hand-written tables. So the file is
split at its first ``[results...]`` header: the text before it is kept byte for byte, the tail is
regenerated with tomli_w. The tail must therefore hold the results tables only (optcoll always
writes them last); anything else there is an error rather than silently rewritten. After writing,
the file is parsed again and its hand-written tables must be unchanged.
"""
from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import tomli_w

from optcoll.errors import InputError
from optcoll.fileio import write_text_atomic
from optcoll.inputfiles import read_text

_RESULTS_HEADER = re.compile(r"^[ \t]*\[\[?[ \t]*results[ \t]*[\].]", re.MULTILINE)


def split_results(text: str, source: str) -> tuple[str, dict[str, Any]]:
    """(the hand-written head, the parsed results table)."""
    match = _RESULTS_HEADER.search(text)
    head, tail = (text, "") if match is None else (text[:match.start()], text[match.start():])
    try:
        head_data, tail_data = tomllib.loads(head), tomllib.loads(tail)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"cannot separate the recorded [results] from the rest: {exc}",
                         source=source) from None
    if "results" in head_data:
        raise InputError("a results key appears before the [results] table", source=source,
                         field="results")
    extra = sorted(set(tail_data) - {"results"})
    if extra:
        raise InputError(f"[{extra[0]}] follows [results]; the recorded results must come last "
                         "(optcoll rewrites everything from [results] on)", source=source,
                         field=extra[0])
    return head, tail_data.get("results", {})


def read_results(path: Path) -> dict[str, Any]:
    return split_results(read_text(path), str(path))[1]


def _clean(value: Any) -> Any:
    """TOML has no null: drop None entries, recursively."""
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value if v is not None]
    return value


def write_results(path: Path, results: dict[str, Any]) -> None:
    """Replaces the file's ``[results]`` atomically, keeping every other byte before it."""
    text = read_text(path)
    head, _ = split_results(text, str(path))
    body = tomli_w.dumps({"results": _clean(results)}) if results else ""
    new = head.rstrip("\n") + "\n" + ("\n" + body if body else "")
    before = {k: v for k, v in tomllib.loads(text).items() if k != "results"}
    after = tomllib.loads(new)
    if {k: v for k, v in after.items() if k != "results"} != before:  # pragma: no cover - guard
        raise RuntimeError(f"{path}: rewriting [results] would change the instance; not written")
    write_text_atomic(path, new)
