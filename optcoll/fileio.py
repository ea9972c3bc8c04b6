"""Atomic writes: results and schedules are written to a temporary file and renamed into place,
so an interrupt, a crash or a full disk never leaves a half-written file where a good one was."""
from __future__ import annotations

import gzip
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO


def open_text(path: Path, mode: str) -> IO[str]:
    """Opens a text file, transparently gzip-compressed when the name ends in ``.gz``."""
    if path.suffix == ".gz":
        return gzip.open(path, mode + "t", encoding="utf-8")  # type: ignore[return-value]
    return open(path, mode, encoding="utf-8")


def _replace_atomic(path: str | os.PathLike, fill: Callable[[Path], None]) -> None:
    """Runs ``fill(temporary path)``, then renames the temporary file over ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=path.suffix)
    os.close(fd)
    tmp_path = Path(tmp)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp_path, 0o666 & ~umask)  # mkstemp makes 0600; results are ordinary files
    try:
        fill(tmp_path)
        os.replace(tmp_path, path)
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        raise


def write_atomic(path: str | os.PathLike, writer: Callable[[IO[str]], None]) -> None:
    """Runs ``writer(handle)`` into a temporary file beside ``path``, then renames it over ``path``."""
    def fill(tmp_path: Path) -> None:
        with open_text(tmp_path, "w") as handle:
            writer(handle)
            handle.flush()

    _replace_atomic(path, fill)


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> None:
    """Binary files (Chakra traces) written the same all-or-nothing way."""
    _replace_atomic(path, lambda tmp_path: tmp_path.write_bytes(data))


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    write_atomic(path, lambda handle: handle.write(text))
