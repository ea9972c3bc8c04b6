"""What produced a number: optcoll's version and sources, the solver libraries, the machine.

Recorded with every ground-truth result, and part of every sweep cache key, so a stored result
is never mistaken for one the present code and libraries would give.
"""
from __future__ import annotations

import functools
import hashlib
import platform
from pathlib import Path

import optcoll


def environment() -> dict[str, str]:
    """Versions that a recorded number depends on."""
    return {"optcoll": optcoll.__version__, "python": platform.python_version(),
            **solver_libraries(), "machine": platform.machine()}


def solver_libraries() -> dict[str, str]:
    import numpy
    import ortools
    import z3

    return {"ortools": ortools.__version__, "z3": z3.get_version_string(), "numpy": numpy.__version__}


@functools.cache
def source_digest(root: Path = Path(optcoll.__file__).parent) -> str:
    """SHA-256 of the Python sources under ``root`` (default: optcoll's own), paths and bytes
    in path order.

    Cached results are keyed by it, so a result is never reused after the code that produced it
    changed, even when the version number did not (an editable install in development).
    """
    sha = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        sha.update(path.relative_to(root).as_posix().encode() + b"\0")
        sha.update(path.read_bytes() + b"\0")
    return sha.hexdigest()
