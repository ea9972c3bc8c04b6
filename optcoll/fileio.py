"""Writing output files: all or nothing for files, in place for pipes and devices, whole folders.

* A regular file (or a new one) is written to a temporary file beside it, flushed to disk
  (``fsync``: after a power cut the rename must not point at empty blocks), then renamed over it:
  an interrupt, a crash or a full disk never leaves a half-written file where a good one was.
  The file keeps its permissions (and owner, where allowed); a symlink to it stays a symlink
  (the file it names is replaced).
* A FIFO or a character device (``/dev/null``, a terminal, ``/dev/stdout`` through a symlink) is
  written in place, never replaced: renaming over it would turn the device into a regular file
  (as root) or swallow what a reader waits for. A FIFO nobody opens for reading within
  ``FIFO_WAIT`` seconds is refused rather than waited on forever; a file that is this process's
  own stdout or stderr is written through that descriptor. Anything else that is not a regular
  file (a directory, a socket, a block device) is refused.
* ``write_folder_atomic`` writes a set of files (a report) into a temporary folder beside the
  target, then swaps it in whole: a full disk mid-way leaves the old folder exactly as it was.
* Temporary files and folders are named ``.NAME.PID.RANDOM.tmp``. One left behind by a killed
  run (older than this run, its process gone) is removed by the next write into its folder.

Any failure of the operating system becomes ``WriteFailed``: one line naming the file, which the
CLI prints instead of a traceback.
"""
from __future__ import annotations

import ctypes
import errno
import fcntl
import gzip
import io
import os
import re
import shutil
import stat
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from optcoll.errors import InputError
from optcoll.inputfiles import special_kind

#: Seconds a FIFO output may wait for a reader to open it.
FIFO_WAIT = 5.0
#: When this run started: temporaries older than it, of a process that is gone, are stale.
_STARTED = time.time()
_STALE_NAME = re.compile(r"^\..+?\.(?:(?P<pid>\d+)\.)?[a-z0-9_]{8}\.tmp$")
_swept: set[Path] = set()


class WriteFailed(InputError):
    """A file could not be written; nothing was changed where it should have gone."""


def _failed(path: Path, exc: OSError, *, in_place: str = "") -> WriteFailed:
    reason = exc.strerror or str(exc)
    where = f" ({in_place}, written in place)" if in_place else "; nothing was changed there"
    return WriteFailed(f"cannot write it: {reason}{where}", source=str(path))


@dataclass(frozen=True)
class _Target:
    """Where and how ``path`` is written: replaced (``real``, keeping ``st``'s mode), streamed in
    place (a FIFO or device), or through one of this process's descriptors (``fd``)."""

    path: Path
    real: Path
    st: os.stat_result | None = None
    fd: int | None = None

    @property
    def in_place(self) -> bool:
        return self.fd is not None or (self.st is not None and not stat.S_ISREG(self.st.st_mode))


def _target(path: Path) -> _Target:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return _Target(path, Path(os.path.realpath(path)))
    except OSError as exc:
        raise _failed(path, exc) from None
    for fd in (1, 2):  # "-o /dev/stdout", or the file the shell redirected stdout to
        try:
            own = os.fstat(fd)
        except OSError:
            continue
        if (own.st_dev, own.st_ino) == (st.st_dev, st.st_ino):
            return _Target(path, path, st, fd)
    kind = special_kind(st.st_mode)
    if kind is None:
        return _Target(path, Path(os.path.realpath(path)), st)
    if stat.S_ISFIFO(st.st_mode) or stat.S_ISCHR(st.st_mode):
        return _Target(path, path, st)
    raise WriteFailed(f"{kind}, not a regular file; nothing was written", source=str(path))


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _open_in_place(target: _Target) -> int:
    """A descriptor to write ``target`` (a FIFO or character device) where it is."""
    flags = os.O_WRONLY | getattr(os, "O_CLOEXEC", 0)
    if not stat.S_ISFIFO(target.st.st_mode):
        return os.open(target.path, flags)
    deadline = time.monotonic() + FIFO_WAIT
    while True:
        try:
            fd = os.open(target.path, flags | os.O_NONBLOCK)  # fails at once with no reader
            break
        except OSError as exc:
            if exc.errno != errno.ENXIO:
                raise
            if time.monotonic() > deadline:
                raise WriteFailed(f"a FIFO (named pipe) that no process opened for reading within "
                                  f"{FIFO_WAIT:g} s; nothing was written", source=str(target.path)) from None
            time.sleep(0.05)
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    return fd


def _write_in_place(target: _Target, data: bytes) -> None:
    kind = special_kind(target.st.st_mode) or "your stdout or stderr"
    try:
        if target.fd is not None:
            for stream in (sys.stdout, sys.stderr):
                stream.flush()
            _write_all(target.fd, data)
            return
        fd = _open_in_place(target)
        try:
            _write_all(fd, data)
        finally:
            os.close(fd)
    except OSError as exc:
        raise _failed(target.path, exc, in_place=kind.removeprefix("is ")) from None


def _is_stale(entry: os.DirEntry) -> bool:
    match = _STALE_NAME.match(entry.name)
    if match is None:
        return False
    try:
        if entry.stat(follow_symlinks=False).st_mtime >= _STARTED:
            return False
        if match["pid"]:
            os.kill(int(match["pid"]), 0)
            return False  # its process still runs (another optcoll writing here)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return True


def remove_stale_temporaries(folder: Path) -> None:
    """Removes stale temporaries of optcoll's naming from ``folder`` (once per run and folder);
    every write does this in its own folder first."""
    if folder in _swept:
        return
    _swept.add(folder)
    try:
        stale = [entry for entry in os.scandir(folder) if _is_stale(entry)]
    except OSError:
        return
    for entry in stale:
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
        else:
            Path(entry.path).unlink(missing_ok=True)


def _temporary_name(real: Path) -> str:
    return f".{real.name}.{os.getpid()}."


def _replace(target: _Target, fill: Callable[[Path], None]) -> None:
    real = target.real
    tmp: Path | None = None
    try:
        real.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temporaries(real.parent)
        fd, name = tempfile.mkstemp(dir=real.parent, prefix=_temporary_name(real), suffix=".tmp")
        tmp = Path(name)
        try:
            if target.st is None:  # a new file: an ordinary one (mkstemp makes it 0600)
                os.fchmod(fd, 0o666 & ~_umask())
            else:
                os.fchmod(fd, stat.S_IMODE(target.st.st_mode))
                if (target.st.st_uid, target.st.st_gid) != (os.getuid(), os.getgid()):
                    try:
                        os.fchown(fd, target.st.st_uid, target.st.st_gid)
                    except PermissionError:
                        pass  # only root gives a file away; it is still written
        finally:
            os.close(fd)
        fill(tmp)
        os.replace(tmp, real)
    except BaseException as exc:
        if tmp is not None:
            tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise _failed(target.path, exc) from None
        raise


def _fill_with(data: bytes) -> Callable[[Path], None]:
    def fill(tmp: Path) -> None:
        fd = os.open(tmp, os.O_WRONLY | os.O_TRUNC)
        try:
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
    return fill


def write_file_atomic(path: str | os.PathLike, fill: Callable[[Path], None]) -> None:
    """Runs ``fill(temporary path)``, which writes the file by name (e.g. a solver's own export),
    then puts it at ``path`` as the module docstring says; ``write_bytes_atomic`` is the usual
    way in."""
    target = _target(Path(path))
    if not target.in_place:
        _replace(target, fill)
        return
    with tempfile.TemporaryDirectory(prefix="optcoll-out-") as scratch:
        tmp = Path(scratch) / target.path.name
        fill(tmp)
        data = tmp.read_bytes()
    _write_in_place(target, data)


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> None:
    """``data`` into ``path``, all or nothing (in place for a FIFO or device)."""
    target = _target(Path(path))
    if target.in_place:
        _write_in_place(target, data)
    else:
        _replace(target, _fill_with(data))


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


# -- folders ---------------------------------------------------------------------------------------


def _exchange(a: Path, b: Path) -> bool:
    """Swaps two paths in one step (Linux ``renameat2(RENAME_EXCHANGE)``); False where the system
    or the file system cannot."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
        return False
    raise OSError(code, os.strerror(code), str(b))


def write_folder_atomic(path: str | os.PathLike, files: Mapping[str, bytes],
                        replaceable: Callable[[str], bool]) -> None:
    """The folder ``path`` holding exactly ``files`` (name → bytes), all or nothing: written into a
    temporary folder beside it, then swapped in. An existing folder is replaced only when every
    entry in it is ``replaceable`` (what an earlier run of the same writer leaves); one holding
    anything else is refused, so a mistyped ``--out .`` never deletes a person's files."""
    out = Path(os.path.realpath(path))
    if out.exists():
        if not out.is_dir():
            raise WriteFailed("is not a folder; nothing was written", source=str(path))
        foreign = sorted(p.name for p in out.iterdir() if not replaceable(p.name))
        if foreign:
            raise WriteFailed(f"holds files this command did not write ({', '.join(foreign[:3])}"
                              f"{', ...' if len(foreign) > 3 else ''}); name a new or empty folder or "
                              "one it wrote before; nothing was written", source=str(path))
    tmp: Path | None = None
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temporaries(out.parent)
        tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=_temporary_name(out), suffix=".tmp"))
        mode = stat.S_IMODE(out.stat().st_mode) if out.exists() else 0o777 & ~_umask()
        for name, data in files.items():
            try:
                write_bytes_atomic(tmp / name, data)
            except WriteFailed as exc:
                raise WriteFailed(exc.detail, source=str(Path(path) / name)) from None
        os.chmod(tmp, mode)
        if not out.exists():
            os.rename(tmp, out)
            tmp = None
        elif _exchange(tmp, out):
            pass  # tmp now holds the old folder, removed below
        else:
            old = Path(tempfile.mkdtemp(dir=out.parent, prefix=_temporary_name(out), suffix=".tmp"))
            os.rename(out, old / out.name)
            os.rename(tmp, out)
            tmp = old
    except OSError as exc:
        raise _failed(Path(path), exc) from None
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def _umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask
