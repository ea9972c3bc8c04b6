"""Shared by the robustness tests that aim commands at special files (issue 21): good inputs, special
files to aim commands at, and what every case asserts (exit code, the one line, nothing replaced).

Special files are made without root: FIFOs, symlinks to /dev/null, /dev/full and /dev/stdout,
Unix sockets, sparse files (a size on disk of nothing), and gzip streams built block by block.
"""
from __future__ import annotations

import os
import shutil
import socket
import stat
import threading
import zlib
from dataclasses import dataclass
from pathlib import Path

from fault_helpers import HERE

GOOD = HERE / "corpus" / "good"
QUICK = HERE.parents[1] / "instances" / "quick"
#: The address space a bounded-memory case may use (Python, numpy and the CLI take ~300 MiB).
MEMORY = 1536 * 2**20
NETWORK_YML = "topology: [ Ring ]\nnpus_count: [ 4 ]\nbandwidth: [ 50 ]\nlatency: [ 500 ]\n"


@dataclass(frozen=True)
class Inputs:
    """Good input files in a temporary folder: every command of the cases reads these."""

    root: Path

    @property
    def instance(self) -> Path:
        return self.root / "ring4-allgather.toml"

    @property
    def schedule(self) -> Path:
        return self.root / "ring4-allgather.json"

    @property
    def smi(self) -> Path:
        return self.root / "nvidia_smi_dgx1.txt"

    @property
    def network(self) -> Path:
        return self.root / "network.yml"

    @property
    def truth(self) -> Path:
        """An instance with recorded ground truth (a copy of the quick suite's ring4 AlltoAll)."""
        return self.root / "suite" / "ring4-alltoall-c1.toml"


def make_inputs(root: Path) -> Inputs:
    shutil.copytree(GOOD, root)
    (root / "network.yml").write_text(NETWORK_YML)
    suite = root / "suite"
    (suite / "schedules").mkdir(parents=True)
    shutil.copy(QUICK / "ring4-alltoall-c1.toml", suite)
    shutil.copy(QUICK / "schedules" / "ring4-alltoall-c1.json.gz", suite / "schedules")
    return Inputs(root)


def kind(path: Path) -> str:
    """What ``path`` is, for before/after comparisons (symlinks not followed)."""
    mode = os.lstat(path).st_mode
    for test, name in ((stat.S_ISLNK, "symlink"), (stat.S_ISFIFO, "fifo"), (stat.S_ISCHR, "chardev"),
                       (stat.S_ISSOCK, "socket"), (stat.S_ISDIR, "dir"), (stat.S_ISREG, "file")):
        if test(mode):
            return name
    return "other"


class FifoReader:
    """A thread reading a FIFO to its end (what ``cat fifo`` does): the writer finds a reader."""

    def __init__(self, path: Path):
        self.data = b""
        self.thread = threading.Thread(target=self._read, args=(path,), daemon=True)
        self.thread.start()

    def _read(self, path: Path) -> None:
        with open(path, "rb") as handle:
            self.data = handle.read()

    def result(self, timeout: float = 30) -> bytes:
        self.thread.join(timeout)
        return self.data


def release(path: Path) -> None:
    """Unblocks a ``FifoReader`` whose writer never came (opening the FIFO for writing once)."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        pass


def unix_socket(path: Path) -> socket.socket:
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    return server


def sparse(path: Path, size: int) -> Path:
    """A file of ``size`` bytes that takes no disk space (all zeros)."""
    with open(path, "wb") as handle:
        handle.truncate(size)
    return path


def gzip_bomb(path: Path, size: int, head: bytes = b"", block: int = 1 << 22) -> Path:
    """A gzip file whose content is ``head`` and then zeros up to ``size`` bytes, compressed
    block by block (a few hundred kilobytes on disk, never ``size`` in memory)."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = bytes(block)
    with open(path, "wb") as handle:
        handle.write(compressor.compress(head))
        left = size - len(head)
        while left > 0:
            handle.write(compressor.compress(zeros[:min(block, left)]))
            left -= block
        handle.write(compressor.flush())
    return path


def many_transfers_gz(path: Path, transfers: int, block: int = 1 << 20) -> Path:
    """A gzip-compressed optcoll schedule of ``transfers`` transfers of chunk 0 on link 0 at time
    0 (columns of zeros: it compresses a thousandfold), written without holding it in memory."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    with open(path, "wb") as handle:
        def put(text: bytes) -> None:
            handle.write(compressor.compress(text))

        put(b'{"format": "optcoll-schedule", "version": 1, "transfers": {')
        for i, column in enumerate((b"chunk", b"link", b"start")):
            put((b", " if i else b"") + b'"' + column + b'": [0')
            left = transfers - 1
            while left > 0:
                count = min(block, left)
                put(b",0" * count)
                left -= count
            put(b"]")
        put(b"}}")
        handle.write(compressor.flush())
    return path
