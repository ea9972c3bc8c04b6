"""Synthesizer specs: how ``optcoll check`` plugs in a synthesizer it did not write.

``py:MODULE:FUNCTION``   a Python callable taking an ``Instance`` and returning a ``Schedule``;
                         MODULE is a dotted module name or a path to a ``.py`` file.
``cmd:TEMPLATE``         a command run without a shell; placeholders (``PLACEHOLDERS``) are
                         filled per instance and it must write the schedule to ``{out}``.
``dir:PATH``             pre-made schedule files named after each instance file's stem.
``builtin:NAME``         one of optcoll's own synthesizers (``optcoll.producers.registry``).

The prefix may be left off when only one reading fits. Everything that can be checked before
running anything (the module imports, the function exists, the command's program is found, the
directory exists, the placeholders are known) is checked by ``parse_synth``: a bad spec is bad
input (exit 2), not a failed instance.
"""
from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import os
import re
import shlex
import shutil
import string
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from optcoll.errors import InputError

KINDS = ("py", "cmd", "dir", "builtin")

#: What a command template may name, filled per instance.
PLACEHOLDERS = {
    "instance": "the instance file (TOML), absolute path",
    "out": "where to write the schedule: {out}, {out}.json, {out}.json.gz or {out}.xml",
    "machine": "the machine as an optcoll model file (TOML), absolute path",
    "collective": "the collective's kind (allgather, reducescatter, allreduce, ...)",
    "size": "the buffer M in bytes, as nccl-tests counts it",
    "chunks": "chunks per rank C",
    "name": "the instance's name",
    "seed": "the instance's [budget] seed",
}

_FIELD = "--synth"
_PY = re.compile(r"(?P<module>[^\s:]+):(?P<attr>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)")


@dataclass(frozen=True)
class SynthSpec:
    """A validated spec. ``target``: "module:function" (a file path made absolute), the command
    template, the directory (absolute) or the registry name."""

    kind: str
    target: str

    def __str__(self) -> str:
        return f"{self.kind}:{self.target}"

    @property
    def argv(self) -> list[str]:
        """A command spec's template split into arguments (placeholders still in them)."""
        return shlex.split(self.target)

    @property
    def fields(self) -> frozenset[str]:
        """The placeholders a command template uses."""
        return frozenset(name for arg in self.argv for _, name, _, _ in string.Formatter().parse(arg)
                         if name is not None)


def parse_synth(text: str) -> SynthSpec:
    """A validated ``SynthSpec``; ``InputError`` naming ``--synth`` when it cannot run."""
    text = text.strip()
    if "\0" in text:
        raise InputError("contains a NUL character, which no path or command can", field=_FIELD)
    kind, sep, rest = text.partition(":")
    if sep and kind in KINDS:
        return _VALIDATE[kind](rest.strip())
    readings = _readings(text)
    if len(readings) == 1:
        return _VALIDATE[readings[0]](text)
    if not readings:
        raise InputError(f"cannot tell what {text!r} is; write py:MODULE:FUNCTION, cmd:TEMPLATE, "
                         f"dir:PATH or builtin:NAME", field=_FIELD)
    raise InputError(f"{text!r} is ambiguous: it could be {' or '.join(readings)}; add the prefix "
                     f"({', '.join(k + ':' for k in readings)})", field=_FIELD)


def _readings(text: str) -> list[str]:
    from optcoll.producers.registry import SYNTHESIZERS

    readings = []
    if _PY.fullmatch(text):
        readings.append("py")
    if any(c.isspace() for c in text) or "{" in text:
        readings.append("cmd")
    if text and Path(text).is_dir():
        readings.append("dir")
    if text in SYNTHESIZERS:
        readings.append("builtin")
    return readings


def _py(target: str) -> SynthSpec:
    match = _PY.fullmatch(target)
    if not match:
        raise InputError(f"py:{target} is not MODULE:FUNCTION (a dotted module or a .py file, a "
                         f"colon, a function name)", field=_FIELD)
    module, attr = match["module"], match["attr"]
    if _is_file(module):
        path = Path(module).expanduser().resolve()
        if not path.is_file():
            raise InputError(f"no Python file {module!r}", field=_FIELD)
        module = str(path)
    spec = SynthSpec("py", f"{module}:{attr}")
    load_callable(spec.target)
    return spec


def _is_file(module: str) -> bool:
    return module.endswith(".py") or os.sep in module or "/" in module


@functools.lru_cache(maxsize=None)
def load_callable(target: str) -> Callable:
    """The function a py spec names, imported once per process (workers fork after the parent
    validated the spec, so they usually find the module already imported)."""
    module_name, _, attr = target.rpartition(":")
    try:
        module = _import_file(module_name) if _is_file(module_name) else \
            importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - any failure to import is a bad spec
        raise InputError(f"cannot import {module_name!r}: {type(exc).__name__}: {exc}",
                         field=_FIELD) from None
    value = module
    for part in attr.split("."):
        if not hasattr(value, part):
            raise InputError(f"{module_name!r} has no attribute {attr!r}", field=_FIELD)
        value = getattr(value, part)
    if not callable(value):
        raise InputError(f"{module_name}:{attr} is a {type(value).__name__}, not a function",
                         field=_FIELD)
    return value


def _import_file(path: str):
    """A module loaded from a file path, registered under a name derived from the path."""
    digest = hashlib.sha256(path.encode()).hexdigest()[:12]
    stem = re.sub(r"\W", "_", Path(path).stem)
    name = f"_optcoll_check_{stem}_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"not a Python module: {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _cmd(target: str) -> SynthSpec:
    spec = SynthSpec("cmd", target)
    try:
        argv = spec.argv
        fields = spec.fields
        parsed = [part for arg in argv for part in string.Formatter().parse(arg)]
    except ValueError as exc:
        raise InputError(f"cannot read the command template {target!r}: {exc}", field=_FIELD) from None
    if not argv:
        raise InputError("the command template is empty", field=_FIELD)
    for _, name, format_spec, conversion in parsed:
        if name is not None and (name not in PLACEHOLDERS or format_spec or conversion):
            raise InputError(f"unknown placeholder {{{name}{'!' + conversion if conversion else ''}"
                             f"{':' + format_spec if format_spec else ''}}} in the command; known: "
                             f"{', '.join('{' + p + '}' for p in PLACEHOLDERS)} (write {{{{ and }}}} "
                             f"for literal braces)", field=_FIELD)
    if "out" not in fields:
        raise InputError("the command must write its schedule where {out} says: put {out} (or "
                         "{out}.json, {out}.json.gz, {out}.xml) in the template", field=_FIELD)
    program = argv[0]
    if "{" in program or shutil.which(program) is None:
        raise InputError(f"program {program!r} not found (or not executable)", field=_FIELD)
    return spec


def _dir(target: str) -> SynthSpec:
    path = Path(target).expanduser()
    if not path.is_dir():
        raise InputError(f"no schedule directory {target!r}", field=_FIELD)
    return SynthSpec("dir", str(path.resolve()))


def _builtin(target: str) -> SynthSpec:
    from optcoll.producers.registry import SYNTHESIZERS

    if target not in SYNTHESIZERS:
        raise InputError(f"unknown built-in synthesizer {target!r}; known: {', '.join(SYNTHESIZERS)}",
                         field=_FIELD)
    return SynthSpec("builtin", target)


_VALIDATE: dict[str, Callable[[str], SynthSpec]] = {
    "py": _py, "cmd": _cmd, "dir": _dir, "builtin": _builtin}
