"""NVIDIA's example tuner plugin, built from an NCCL source snapshot and driven through ctypes.

The plugin needs no GPU: ``init`` reads ``NCCL_TUNER_CONFIG_FILE`` and ``getCollInfo`` edits a
cost table (NCCL_NUM_ALGORITHMS × NCCL_NUM_PROTOCOLS floats) the way NCCL core would hand it over.
The snapshot is found through ``OPTCOLL_NCCL_SOURCE`` (a checkout, or a bare git directory such
as the one the project's fetch tool writes) or at the default mirror path; nothing of NCCL's is
kept in this repository. Callers skip with the reason ``build`` gives when there is no snapshot or
no C compiler.
"""
from __future__ import annotations

import ctypes
import os
import shutil
import io
import subprocess
import tarfile
from pathlib import Path

DEFAULT_MIRROR = Path("/work/.mirror/NVIDIA+nccl/repo")
#: Where the example has lived: ``ext-tuner/example`` up to 2.2x, ``plugins/tuner/example`` since.
PLUGIN_DIRS = ("plugins/tuner/example", "ext-tuner/example")
NUM_ALGORITHMS, NUM_PROTOCOLS = 7, 3


def _extract(source: Path, into: Path) -> Path | None:
    """The example plugin's folder, copied out of a checkout or a bare git directory."""
    for sub in PLUGIN_DIRS:
        if (source / sub / "plugin.c").is_file():
            shutil.copytree(source / sub, into / "example")
            return into / "example"
    if (source / "HEAD").is_file() and shutil.which("git"):
        for sub in PLUGIN_DIRS:
            archive = subprocess.run(["git", "--git-dir", str(source), "archive", "HEAD", sub],
                                     capture_output=True, timeout=60)
            if archive.returncode == 0:
                with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
                    tar.extractall(into, filter="data")
                return into / sub
    return None


def example_folder(workdir: Path) -> tuple[Path | None, str]:
    """(a copy of the example plugin's folder under ``workdir``, "") or (None, why not)."""
    source = Path(os.environ.get("OPTCOLL_NCCL_SOURCE", DEFAULT_MIRROR))
    if not source.exists():
        return None, f"no NCCL source snapshot at {source} (set OPTCOLL_NCCL_SOURCE)"
    folder = _extract(source, workdir)
    if folder is None:
        return None, f"{source} has no tuner example in {' or '.join(PLUGIN_DIRS)}"
    return folder, ""


def build(workdir: Path) -> tuple[Path | None, str]:
    """(the built shared object, "") or (None, why it could not be built)."""
    compiler = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if compiler is None:
        return None, "no C compiler"
    folder, why = example_folder(workdir)
    if folder is None:
        return None, why
    library = workdir / "libnccl-tuner-example.so"
    done = subprocess.run([compiler, "-Inccl", "-fPIC", "-shared", "-o", str(library), "plugin.c"],
                          cwd=folder, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        return None, f"the example plugin did not compile: {done.stderr.strip()[:300]}"
    return library, ""


class _TunerV5(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p),
                ("init", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint64,
                                          ctypes.c_size_t, ctypes.c_size_t, ctypes.c_void_p,
                                          ctypes.c_void_p, ctypes.c_void_p)),
                ("getCollInfo", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t,
                                                 ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
                                                 ctypes.c_int, ctypes.POINTER(ctypes.c_int))),
                ("finalize", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p))]


FUNCTIONS = {"broadcast": 0, "reduce": 1, "allgather": 2, "reducescatter": 3, "allreduce": 4}


class ExampleTuner:
    """One communicator's tuner context, as NCCL would create it."""

    def __init__(self, library: Path, conf: Path, *, ranks: int, nodes: int):
        os.environ["NCCL_TUNER_CONFIG_FILE"] = str(conf)
        self._lib = ctypes.CDLL(str(library))
        self.plugin = _TunerV5.in_dll(self._lib, "ncclTunerPlugin_v5")
        self.context = ctypes.c_void_p()
        status = self.plugin.init(ctypes.byref(self.context), 0, ranks, nodes, None, None, None)
        if status != 0:
            raise RuntimeError(f"the plugin's init returned {status}")

    def choose(self, collective: str, size: int, *, pipe_ops: int = 1,
               reg_buff: int = 0) -> tuple[int, int, int] | None:
        """(algorithm index, protocol index, channels) the plugin steers NCCL to, or None when no
        rule matched (the cost table comes back untouched: every entry 1.0)."""
        table = (ctypes.c_float * (NUM_ALGORITHMS * NUM_PROTOCOLS))(*([1.0] * NUM_ALGORITHMS * NUM_PROTOCOLS))
        channels = ctypes.c_int(-7)
        status = self.plugin.getCollInfo(self.context, FUNCTIONS[collective], size, pipe_ops,
                                         ctypes.cast(table, ctypes.c_void_p), NUM_ALGORITHMS,
                                         NUM_PROTOCOLS, reg_buff, ctypes.byref(channels))
        if status != 0:
            raise RuntimeError(f"the plugin's getCollInfo returned {status}")
        chosen = [i for i, cost in enumerate(table) if cost == 0.0]
        if not chosen:
            return None
        assert len(chosen) == 1, chosen
        return chosen[0] // NUM_PROTOCOLS, chosen[0] % NUM_PROTOCOLS, channels.value

    def close(self) -> None:
        self.plugin.finalize(self.context)
