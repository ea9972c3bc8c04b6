"""Atomic writes: results and schedules are written to a temporary file and renamed into place,
so an interrupt, a crash or a full disk never leaves a half-written file where a good one was.

The content is made in memory first and written with ``os.write`` into a temporary file beside
the target, flushed to disk (``fsync``: after a power cut the rename must not point at empty
blocks), then renamed over the target. Any failure of the operating system (no space left, no
permission, a read-only disk) removes the temporary file and becomes ``WriteFailed``: one line
naming the file, which the CLI prints instead of a traceback; the target keeps its old content.
"""
from __future__ import annotations

import gzip
import io
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO

from optcoll.errors import InputError


class WriteFailed(InputError):
    """A file could not be written; nothing was changed where it should have gone."""


def open_text(path: Path, mode: str) -> IO[str]:
    """Opens a text file, transparently gzip-compressed when the name ends in ``.gz``."""
    if path.suffix == ".gz":
        return gzip.open(path, mode + "t", encoding="utf-8")  # type: ignore[return-value]
    return open(path, mode, encoding="utf-8")


def _replace_atomic(path: str | os.PathLike, fill: Callable[[Path], None]) -> None:
    """Runs ``fill(temporary path)``, then renames the temporary file over ``path``. ``fill``
    writes the file by name (e.g. a solver's own export); ``write_bytes_atomic`` is the usual
    way in."""
    path = Path(path)
    tmp: Path | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        tmp = Path(name)
        umask = os.umask(0)
        os.umask(umask)
        try:
            os.fchmod(fd, 0o666 & ~umask)  # mkstemp makes 0600; results are ordinary files
        finally:
            os.close(fd)
        fill(tmp)
        os.replace(tmp, path)
    except BaseException as exc:
        if tmp is not None:
            tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            reason = exc.strerror or str(exc)
            raise WriteFailed(f"cannot write it: {reason}; nothing was changed there",
                              source=str(path)) from exc
        raise


def _write_all(tmp: Path, data: bytes) -> None:
    fd = os.open(tmp, os.O_WRONLY | os.O_TRUNC)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> None:
    """``data`` into ``path``, all or nothing."""
    _replace_atomic(path, lambda tmp: _write_all(tmp, data))


def write_atomic(path: str | os.PathLike, writer: Callable[[IO[str]], None]) -> None:
    """Runs ``writer(handle)`` on a text buffer, then writes it to ``path`` all or nothing
    (gzip-compressed, without a timestamp, when the name ends in ``.gz``)."""
    buffer = io.StringIO()
    writer(buffer)
    write_text_atomic(path, buffer.getvalue())


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    data = text.encode("utf-8")
    if Path(path).suffix == ".gz":
        data = gzip.compress(data, mtime=0)
    write_bytes_atomic(path, data)
