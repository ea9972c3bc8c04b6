"""The parts of ASTRA-sim's system.json that decide a native collective's timing.

Read (ASTRA-sim 2.0 ``Sys::initialize_sys`` semantics):

- ``all-reduce-implementation`` / ``reduce-scatter-…`` / ``all-gather-…`` / ``all-to-all-…``:
  one algorithm per network dimension: ``ring``, ``direct`` (``directN``: at most N messages in
  flight), ``halvingDoubling``, ``doubleBinaryTree``.
- ``collective-optimization``: ``localBWAware`` (multi-dimensional AllReduce = ReduceScatter up the
  dimensions, AllReduce in the last, AllGather back down) or ``baseline`` (an AllReduce in every
  dimension on the full buffer). ASTRA-sim leaves it uninitialised when absent; we take baseline.
- ``endpoint-delay`` (ns, default 10): charged by the memory bus each time a message is handed to
  or from the network (before every send and after every receive).
- ``active-chunks-per-dimension`` (default 1): streams running at once per dimension and NPU.
- ``preferred-dataset-splits``: the collective is cut into this many streams (chunks); required,
  ASTRA-sim divides by it.
- ``scheduling-policy``: LIFO or FIFO order of waiting streams.

Not read because it does not touch a native collective's time without the shared-bus model:
``local-reduction-delay`` (only the LogGP shared bus uses it), compute/roofline keys, tracing.
``model-shared-bus: 1`` and the ``one*`` algorithms are refused rather than mis-modelled.

``reduction_delay`` is no system.json key: it is the time a received message that must be reduced
spends in ``PacketBundle`` (a memory write and two reads, 10 ns each when no memory model is
attached in ASTRA-sim's ``Sys::mem_read``/``mem_write``), 30 ns by default.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from optcoll.errors import InputError
from optcoll.inputfiles import read_json

KINDS = {"allreduce": "all-reduce", "reducescatter": "reduce-scatter", "allgather": "all-gather",
         "alltoall": "all-to-all"}
ALGORITHMS = ("ring", "direct", "halvingDoubling", "doubleBinaryTree")
DEFAULT_REDUCTION_DELAY = 30


@dataclass(frozen=True)
class Impl:
    """One dimension's native algorithm; ``window`` limits ``direct`` (None: all peers at once)."""

    name: str
    window: int | None = None

    def __str__(self) -> str:
        return f"direct{self.window}" if self.window is not None else self.name


def parse_impl(text: Any, source: str, where: str) -> Impl:
    if not isinstance(text, str):
        raise InputError(f"must be an algorithm name, got {text!r}", source=source, field=where)
    if text in ("oneRing", "oneDirect", "oneHalvingDoubling") or text.startswith("oneDirect"):
        raise InputError(f"{text} (one algorithm over all NPUs) is not modelled by optcoll's predictor; "
                         f"use one of {', '.join(ALGORITHMS)}", source=source, field=where)
    if text.startswith("direct") and text != "direct":
        digits = text[6:]
        if not digits.isdigit() or int(digits) < 1:
            raise InputError(f"{text!r}: a direct window must be a positive integer (e.g. direct4)",
                             source=source, field=where)
        return Impl("direct", int(digits))
    if text not in ALGORITHMS:
        raise InputError(f"unknown algorithm {text!r}; ASTRA-sim knows {', '.join(ALGORITHMS)}",
                         source=source, field=where)
    return Impl(text)


@dataclass(frozen=True)
class SystemConfig:
    implementations: dict[str, tuple[Impl, ...]] = field(default_factory=dict)
    collective_optimization: str = "baseline"
    scheduling_policy: str = "LIFO"
    endpoint_delay: int = 10
    active_chunks_per_dimension: int = 1
    preferred_dataset_splits: int = 1
    reduction_delay: int = DEFAULT_REDUCTION_DELAY
    custom: tuple[str, ...] = ()
    source: str = "system.json"

    def implementation(self, kind: str, ndim: int) -> tuple[Impl, ...]:
        key = f"{KINDS[kind]}-implementation"
        if kind in self.custom:
            raise InputError(f"{key}-custom makes ASTRA-sim replay a Chakra ET for {kind}; the predictor "
                             "models the native algorithms only", source=self.source, field=f"{key}-custom")
        impls = self.implementations.get(kind)
        if impls is None:
            raise InputError(f"is missing: ASTRA-sim needs an algorithm per dimension for {kind}",
                             source=self.source, field=key)
        if len(impls) != ndim:
            raise InputError(f"lists {len(impls)} algorithm(s) for a {ndim}-dimensional network",
                             source=self.source, field=key)
        return impls


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
        raise InputError(f"must be at least {minimum}, got {value!r}", source=source, field=key)
    return int(value)


def parse_system(data: Any, source: str = "system.json",
                 reduction_delay: int = DEFAULT_REDUCTION_DELAY) -> SystemConfig:
    if not isinstance(data, dict):
        raise InputError("must be a JSON object", source=source)
    impls = {}
    for kind, stem in KINDS.items():
        key = f"{stem}-implementation"
        if key in data:
            values = data[key]
            if not isinstance(values, list) or not values:
                raise InputError("must be a non-empty list with one algorithm per dimension",
                                 source=source, field=key)
            impls[kind] = tuple(parse_impl(v, source, f"{key}[{d}]") for d, v in enumerate(values))
    custom = tuple(kind for kind, stem in KINDS.items() if f"{stem}-implementation-custom" in data)
    optimization = data.get("collective-optimization", "baseline")
    if optimization not in ("baseline", "localBWAware"):
        raise InputError(f"must be baseline or localBWAware, got {optimization!r}", source=source,
                         field="collective-optimization")
    policy = data.get("scheduling-policy", "LIFO")
    if policy not in ("LIFO", "FIFO"):
        raise InputError(f"must be LIFO or FIFO (EXPLICIT priorities are not modelled), got {policy!r}",
                         source=source, field="scheduling-policy")
    if data.get("model-shared-bus", 0) not in (0, False):
        raise InputError("the LogGP shared-bus model is not modelled; set it to 0", source=source,
                         field="model-shared-bus")
    for key, allowed in (("intra-dimension-scheduling", "FIFO"), ("inter-dimension-scheduling", "ascending")):
        if key in data and data[key] != allowed:
            raise InputError(f"only {allowed} is modelled, got {data[key]!r}", source=source, field=key)
    if not isinstance(reduction_delay, int) or reduction_delay < 0:
        raise InputError(f"must be a non-negative integer (ns), got {reduction_delay!r}",
                         field="reduction_delay")
    return SystemConfig(impls, optimization, policy, _int(data, "endpoint-delay", 10, 0, source),
                        _int(data, "active-chunks-per-dimension", 1, 1, source),
                        _int(data, "preferred-dataset-splits", None, 1, source), reduction_delay,
                        custom, source)


def read_system(path: str | Path, reduction_delay: int = DEFAULT_REDUCTION_DELAY) -> SystemConfig:
    return parse_system(read_json(path), str(path), reduction_delay)
