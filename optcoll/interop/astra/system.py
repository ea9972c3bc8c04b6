"""The parts of ASTRA-sim's system.json that decide a native collective's timing.

Followed: ASTRA-sim 518bd51, ``astra-sim/system/Sys.cc`` (``Sys::Sys`` defaults, lines 140-260;
``Sys::initialize_sys``, lines 313-435) and ``astraccl/CollectiveImplLookup.cc``.

Read:

- ``all-reduce-implementation`` / ``reduce-scatter-…`` / ``all-gather-…`` / ``all-to-all-…``:
  one algorithm per network dimension: ``ring``, ``direct`` (``directN``: at most N messages in
  flight), ``halvingDoubling``, ``doubleBinaryTree``; or, first in the list, ``oneRing``,
  ``oneDirect`` (``oneDirectN``) or ``oneHalvingDoubling``: that algorithm once over all NPUs in
  id order, the rest of the list unused (``GeneralComplexTopology`` stops at it).
- ``collective-optimization``: ``localBWAware`` (multi-dimensional AllReduce = ReduceScatter up the
  dimensions, AllReduce in the last, AllGather back down) or ``baseline``. ASTRA-sim leaves it
  uninitialised when absent (``None`` here): one dimension runs the same either way, but a
  multi-dimensional AllReduce then never finishes (measured on 518bd51), which the predictor
  refuses.
- ``endpoint-delay`` (ns, default 10: ``Sys::Sys`` sets ``communication_delay = 10``): charged by
  the memory bus each time a message is handed to or from the network. 0 makes ASTRA-sim abort
  (an event at the current time trips astra-network-analytical's ``EventQueue::proceed``
  assertion, EventQueue.cpp:33), so at least 1 is required.
- ``local-mem-bw`` (GB/s, read as ``× 1e9`` B/s): a received message that must be reduced spends
  ``3 · (uint64)(bytes / (local-mem-bw·1e9) · 1e9)`` ns more on the bus, one memory write and two
  reads (``PacketBundle::call``, ``PacketBundle.cc`` lines 53-62). Absent, ASTRA-sim divides by
  zero and casts infinity to uint64, which x86-64 builds turn into 0 (the reduction is free):
  ``reduction_ns`` says the same, and ``notes`` says why.
- ``active-chunks-per-dimension`` (default 1): streams running at once per dimension and NPU.
- ``preferred-dataset-splits``: the collective is cut into this many streams; ASTRA-sim divides by
  it (0 when absent: a crash), so it is required in a file and 1 in ``ASTRA_DEFAULTS``.
- ``scheduling-policy``: LIFO or FIFO order of waiting streams.

Accepted and ignored because they do not touch a native collective's time without the shared-bus
model: ``local-reduction-delay``, ``L``/``o``/``g``/``G``, compute/roofline and tracing keys, and
``boost-mode`` (in ASTRA-sim's own example files, read by nothing). Any other key is refused: a
misspelt key is silently ignored by ASTRA-sim, which then runs with a default nobody meant.
``model-shared-bus: 1`` is refused rather than mis-modelled.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from optcoll.errors import InputError
from optcoll.inputfiles import known_keys, read_json

KINDS = {"allreduce": "all-reduce", "reducescatter": "reduce-scatter", "allgather": "all-gather",
         "alltoall": "all-to-all"}
ALGORITHMS = ("ring", "direct", "halvingDoubling", "doubleBinaryTree")
#: Keys ASTRA-sim reads that do not change a native collective's time in the analytical backends.
IGNORED_KEYS = ("local-reduction-delay", "L", "o", "g", "G", "peak-perf", "roofline-enabled",
                "trace-enabled", "replay-only", "track-local-mem", "local-mem-trace-filename",
                "boost-mode")
KNOWN_KEYS = (("scheduling-policy", "collective-optimization", "endpoint-delay", "local-mem-bw",
               "active-chunks-per-dimension", "preferred-dataset-splits", "model-shared-bus",
               "per-node-custom-implementation")
              + tuple(f"{stem}-implementation{custom}" for stem in KINDS.values() for custom in ("", "-custom"))
              + IGNORED_KEYS)
#: ASTRA-sim's endpoint delay when system.json does not set it (``Sys::Sys``).
DEFAULT_ENDPOINT_DELAY = 10


@dataclass(frozen=True)
class Impl:
    """One dimension's native algorithm; ``window`` limits ``direct`` (None: all peers at once);
    ``whole``: a ``one*`` algorithm, run once over all NPUs."""

    name: str
    window: int | None = None
    whole: bool = False

    def __str__(self) -> str:
        text = f"direct{self.window}" if self.window is not None else self.name
        return f"one{text[0].upper()}{text[1:]}" if self.whole else text


def parse_impl(text: Any, source: str, where: str) -> Impl:
    if not isinstance(text, str):
        raise InputError(f"must be an algorithm name, got {text!r}", source=source, field=where)
    whole = text.startswith("one") and text[3:4].isupper()
    name = text[3].lower() + text[4:] if whole else text
    if name.startswith("direct") and name != "direct":
        digits = name[6:]
        if not digits.isdigit() or int(digits) < 1:
            raise InputError(f"{text!r}: a direct window must be a positive integer (e.g. direct4)",
                             source=source, field=where)
        return Impl("direct", int(digits), whole)
    if name not in ALGORITHMS or whole and name == "doubleBinaryTree":
        known = ALGORITHMS + ("oneRing", "oneDirect", "oneHalvingDoubling")
        raise InputError(f"unknown algorithm {text!r}; ASTRA-sim knows {', '.join(known)}",
                         source=source, field=where)
    return Impl(name, None, whole)


@dataclass(frozen=True)
class SystemConfig:
    implementations: dict[str, tuple[Impl, ...]] = field(default_factory=dict)
    collective_optimization: str | None = None
    scheduling_policy: str = "LIFO"
    endpoint_delay: int = DEFAULT_ENDPOINT_DELAY
    active_chunks_per_dimension: int = 1
    preferred_dataset_splits: int = 1
    local_mem_bw_gbps: float | None = None
    custom: tuple[str, ...] = ()
    source: str = "system.json"

    def implementation(self, kind: str, ndim: int) -> tuple[Impl, ...]:
        key = f"{KINDS[kind]}-implementation"
        if kind in self.custom:
            raise InputError(f"{key}-custom makes ASTRA-sim replay a Chakra ET for {kind}; `optcoll astra "
                             "replay` predicts that, this predictor the native algorithms only",
                             source=self.source, field=f"{key}-custom")
        impls = self.implementations.get(kind)
        if impls is None:
            raise InputError(f"is missing: ASTRA-sim needs an algorithm per dimension for {kind}",
                             source=self.source, field=key)
        if impls[0].whole and len(impls) <= ndim:
            return impls[:1]
        if len(impls) != ndim or any(i.whole for i in impls):
            raise InputError(f"lists {len(impls)} algorithm(s) for a {ndim}-dimensional network"
                             + (" (a one* algorithm goes first)" if any(i.whole for i in impls) else ""),
                             source=self.source, field=key)
        return impls

    def reduction_ns(self, nbytes: int) -> int:
        """The bus time of reducing a received message of ``nbytes`` (module docstring): the same
        double arithmetic as ``PacketBundle::call``, one truncation per memory access."""
        if self.local_mem_bw_gbps is None:
            return 0
        bytes_per_s = self.local_mem_bw_gbps * 1000000000
        return 3 * int(float(nbytes) / bytes_per_s * 1e9)

    def notes(self) -> tuple[str, ...]:
        if self.local_mem_bw_gbps is None:
            return ("no local-mem-bw: reductions cost 0 ns (ASTRA-sim divides by zero there, and x86-64 "
                    "builds turn the result into 0)",)
        return ()


#: ASTRA-sim's own defaults (``Sys::Sys``) where it has them; one dataset split and LIFO where it
#: has none (it would divide by zero, or read an uninitialised policy).
ASTRA_DEFAULTS = SystemConfig(source="ASTRA-sim defaults")


def _int(data: dict, key: str, default: int | None, minimum: int, source: str) -> int:
    if key not in data:
        if default is None:
            raise InputError("is missing (ASTRA-sim divides the collective by it)", source=source, field=key)
        return default
    value = data[key]
    whole = isinstance(value, int) or isinstance(value, float) and value.is_integer()  # not inf, nan
    if isinstance(value, bool) or not whole:
        raise InputError(f"must be an integer, got {value!r}", source=source, field=key)
    if value < minimum:
        why = " (ASTRA-sim aborts at 0: an event at the current time)" if key == "endpoint-delay" else ""
        raise InputError(f"must be at least {minimum}{why}, got {value!r}", source=source, field=key)
    return int(value)


def _bandwidth(data: dict, key: str, source: str) -> float | None:
    if key not in data:
        return None
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InputError(f"must be a number of GB/s, got {value!r}", source=source, field=key)
    if value <= 0:
        raise InputError(f"must be positive (GB/s; ASTRA-sim divides by it), got {value!r}",
                         source=source, field=key)
    return float(value)


def parse_system(data: Any, source: str = "system.json") -> SystemConfig:
    if not isinstance(data, dict):
        raise InputError("must be a JSON object", source=source)
    known_keys(data, "", KNOWN_KEYS, source)
    impls = {}
    for kind, stem in KINDS.items():
        key = f"{stem}-implementation"
        if key in data:
            values = data[key]
            if not isinstance(values, list) or not values:
                raise InputError("must be a non-empty list with one algorithm per dimension",
                                 source=source, field=key)
            impls[kind] = tuple(parse_impl(v, source, f"{key}[{d}]") for d, v in enumerate(values))
    every = tuple(KINDS) if "per-node-custom-implementation" in data else ()
    custom = every or tuple(kind for kind, stem in KINDS.items() if f"{stem}-implementation-custom" in data)
    optimization = data.get("collective-optimization")
    if optimization not in (None, "baseline", "localBWAware"):
        raise InputError(f"must be baseline or localBWAware, got {optimization!r}", source=source,
                         field="collective-optimization")
    policy = data.get("scheduling-policy", "LIFO")
    if policy not in ("LIFO", "FIFO"):
        raise InputError(f"must be LIFO or FIFO (EXPLICIT priorities are not modelled), got {policy!r}",
                         source=source, field="scheduling-policy")
    if data.get("model-shared-bus", 0) not in (0, False):
        raise InputError("the LogGP shared-bus model is not modelled; set it to 0", source=source,
                         field="model-shared-bus")
    return SystemConfig(impls, optimization, policy,
                        _int(data, "endpoint-delay", DEFAULT_ENDPOINT_DELAY, 1, source),
                        _int(data, "active-chunks-per-dimension", 1, 1, source),
                        _int(data, "preferred-dataset-splits", None, 1, source),
                        _bandwidth(data, "local-mem-bw", source), custom, source)


def read_system(path: str | Path) -> SystemConfig:
    return parse_system(read_json(path), str(path))
