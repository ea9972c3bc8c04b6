"""The two MSCCL runtimes that execute MSCCL-IR XML, and the rules each one's loader enforces.

- ``executor``: the MSCCL executor (Azure/msccl-executor-nccl c6f6b36,
  ``src/misc/msccl/msccl_parser.cc`` ``mscclGetAlgoFromXmlFile``; limits from
  ``src/include/msccl/msccl_struct.h``, ``src/include/device.h`` and ``makefiles/common.mk``).
- ``msccl``: the first MSCCL runtime (microsoft/msccl b23e9cd, ``src/graph/topo.cc``
  ``mscclGetAlgoFromXmlFile``; limits from ``src/include/msccl.h``).
- ``rccl``: RCCL's MSCCL (ROCm/rccl 0cbce2a, ``src/misc/msccl/msccl_parser.cc``: the executor's
  parser, three lines apart; ``src/include/msccl/msccl_struct.h``: at most 64 thread blocks per
  GPU; ``src/include/device.h``: 128 channels, checked as ``chan > 128`` before indexing a
  128-entry array, so 127 is the last that fits).

Both read the file with the same hand-written reader (``reader.py``). Attributes a loader reads
without a default are required (a missing one makes it refuse the file); ``redop`` is read by
neither. Steps: ``s`` below ``max_steps`` (the executor's default build: 64); thread-block ids
dense from 0 and below ``max_blocks``; channels below 32 (both check ``chan > 32``, then index a
32-entry array with it, so 32 itself overruns it); ``cnt`` below 72 (and at least 1 for the first
runtime, which counts it at ``cnt - 1``); at most 32 thread blocks sending, and 32 receiving, per
channel.
"""
from __future__ import annotations

from dataclasses import dataclass

from optcoll.errors import InputError

EXECUTOR_STEP_TYPES = ("s", "r", "rcs", "rrs", "rrc", "rrcs", "cpy", "re", "nop")


@dataclass(frozen=True)
class Runtime:
    name: str
    source: str
    required: tuple[str, ...]  # <algo> attributes
    colls: frozenset[str]  # the coll values it loads
    step_types: tuple[str, ...]
    max_steps: int = 64
    max_blocks: int = 1024
    max_channels: int = 32
    max_count: int = 72
    min_count: int = 0
    max_peers_per_channel: int = 32
    peers_below_ngpus: bool = False  # thread block peers checked against ngpus
    chunks_match_loop: bool = False  # i_chunks/o_chunks checked against nchunksperloop
    #: optcoll collective kind -> the coll it writes (None: this runtime cannot run it)
    spelling: tuple[tuple[str, str | None], ...] = ()

    def coll_for(self, kind: str) -> str:
        coll = dict(self.spelling).get(kind)
        if coll is None:
            raise InputError(f"the {self.name} runtime has no {kind} collective", field="runtime")
        return coll


EXECUTOR = Runtime(
    "executor", "Azure/msccl-executor-nccl c6f6b36 src/misc/msccl/msccl_parser.cc",
    ("nchunksperloop", "nchannels", "ngpus", "proto", "coll", "minBytes", "maxBytes", "inplace",
     "outofplace"),
    frozenset({"reduce", "broadcast", "allreduce", "reducescatter", "allgather", "send", "recv",
               "gather", "scatter", "alltoall", "alltoallv"}),
    EXECUTOR_STEP_TYPES,
    spelling=tuple((k, k) for k in ("allgather", "reducescatter", "allreduce", "alltoall", "broadcast",
                                    "reduce", "gather", "scatter")) + (("custom", None),))

MSCCL = Runtime(
    "msccl", "microsoft/msccl b23e9cd src/graph/topo.cc",
    ("name", "ngpus", "nchunksperloop", "nchannels", "proto", "coll", "inplace"),
    frozenset({"allreduce", "allgather", "reduce", "broadcast", "alltoall", "reduce_scatter", "custom"}),
    EXECUTOR_STEP_TYPES + ("ra",), max_steps=256, max_blocks=108 * 2, min_count=1,
    peers_below_ngpus=True, chunks_match_loop=True,
    spelling=(("allgather", "allgather"), ("reducescatter", "reduce_scatter"), ("allreduce", "allreduce"),
              ("alltoall", "alltoall"), ("broadcast", "broadcast"), ("reduce", "reduce"),
              ("gather", "custom"), ("scatter", "custom"), ("custom", "custom")))

RCCL = Runtime(
    "rccl", "ROCm/rccl 0cbce2a src/misc/msccl/msccl_parser.cc", EXECUTOR.required, EXECUTOR.colls,
    EXECUTOR_STEP_TYPES, max_blocks=64, max_channels=128, spelling=EXECUTOR.spelling)

RUNTIMES = {r.name: r for r in (EXECUTOR, MSCCL, RCCL)}


def runtime_named(name: str | Runtime) -> Runtime:
    if isinstance(name, Runtime):
        return name
    if name not in RUNTIMES:
        raise InputError(f"unknown runtime {name!r}; use {', '.join(RUNTIMES)}", field="runtime")
    return RUNTIMES[name]
