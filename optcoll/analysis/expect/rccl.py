"""RCCL's own choice where its MSCCL algorithms are on, and their time in the calibrated model.

RCCL (``calibration.RCCL_MSCCL``: ROCm/rccl 0cbce2a) tries its loaded MSCCL XML files before its
NCCL-derived ring/tree: ``mscclInternalSchedulerSelectAlgo`` takes the first file whose
collective, rank count and buffer layout (in-place or out-of-place) match the call and whose
``minBytes`` ≤ nBytes ≤ ``maxBytes`` (``maxBytes`` 0: no upper end), where nBytes = count ×
element size × the file's size multiplier (the message as nccl-tests counts it, M) and count ×
multiplier must be a multiple of ``nchunksperloop``; only sum-like ops (< ncclAvg). The shipped
files' ranges do not overlap, so the load order (``readdir``) does not matter. Elsewhere RCCL
falls back to its NCCL-style choice (``nccl.estimates``).

A file's time: the XML imported on the calibrated machine of its own protocol (LL, LL128 or
Simple; switches only route) with every link at the generation's MSCCL executor efficiency
(``Generation.msccl_efficiency``: RCCL's interpreter moves less per link than its ring kernels),
run as RCCL's loader reads it, verified, plus the protocol's per-call latency and the launch cost
(as for any schedule, ``predict``). An nccl-tests/rccl-tests row
measures in-place and out-of-place separately; the prediction is the faster of the two files.
"""
from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from pathlib import Path

from optcoll.analysis.expect.predict import TIME_MODEL, Choice, Context, call_latency
from optcoll.bundled import bundled_dir
from optcoll.interop.msccl import import_msccl_xml, parse_algo
from optcoll.interop.msccl.ir import Algo
from optcoll.interop.msccl.layout import kind_of
from optcoll.verify import verify

ELEMENT = 4  # bytes of a float: rccl-tests' default type


@lru_cache(maxsize=4)
def loaded(name: str) -> tuple[tuple[Path, Algo], ...]:
    """Every XML of the bundled folder ``algorithms/<name>``, parsed, by file name."""
    folder = bundled_dir("algorithms") / name
    return tuple((p, parse_algo(p)[0]) for p in sorted(folder.glob("*.xml*")))


def selected(ctx: Context, kind: str, size: int, inplace: bool) -> tuple[Path, Algo] | None:
    """The file RCCL runs for this call (module docstring), or None (its fallback)."""
    if not ctx.generation.msccl or size % ELEMENT:
        return None
    units = size // ELEMENT  # count × the size multiplier: nBytes is M
    for path, algo in loaded(ctx.generation.msccl):
        if (kind_of(algo.coll) == kind and algo.ngpus == ctx.physical.num_npus
                and (algo.inplace if inplace else algo.outofplace) and units > 0
                and units % algo.nchunksperloop == 0
                and algo.min_bytes <= size and (algo.max_bytes == 0 or size <= algo.max_bytes)):
            return path, algo
    return None


def _executor_machine(ctx: Context, protocol: str):
    key = ("msccl", protocol)
    if key not in ctx.calibrated:
        rated = ctx.rated(protocol, False).machine
        ctx.calibrated[key] = replace(rated, link_bandwidth=rated.link_bandwidth * ctx.generation.msccl_efficiency.value,
                                      name=f"{rated.name} [MSCCL executor]")
    return ctx.calibrated[key]


def file_choice(ctx: Context, kind: str, size: int, path: Path, algo: Algo, inplace: bool) -> Choice:
    """The file at ``size`` (``algo``: as ``loaded`` parsed it) on the calibrated machine of its
    protocol, verified."""
    protocol = algo.proto.lower()
    rated = _executor_machine(ctx, protocol)
    imported = import_msccl_xml(path, rated, size=float(size), runtime="rccl", model=TIME_MODEL, inplace=inplace)
    result = verify(imported.machine, imported.collective, imported.schedule, TIME_MODEL)
    if not result.valid or imported.problems:
        why = result.violation.message if not result.valid else imported.problems[0]
        raise RuntimeError(f"{path.name} does not run on {rated.name}: {why}")
    chunks = imported.collective.chunks_per_rank
    return Choice("rccl-msccl", path.name.removesuffix(".gz").removesuffix(".xml"), protocol, algo.nchannels,
                  chunks, size / (ctx.physical.num_npus * chunks), False,
                  float(result.time) + call_latency("rccl-msccl", protocol))


def rccl_choice(ctx: Context, kind: str, size: int) -> Choice | None:
    """The faster of the files RCCL runs in-place and out-of-place at this size, or None."""
    found = [file_choice(ctx, kind, size, *sel, inplace)
             for inplace in (True, False) if (sel := selected(ctx, kind, size, inplace)) is not None]
    return min(found, key=lambda c: (c.seconds, c.algorithm)) if found else None
