"""α as NCCL sees it: the per-step hardware latencies of NCCL's tuning model, by name.

A latency in a model file may be written ``"nccl:PROTOCOL:HARDWARE"`` or
``"nccl:PROTOCOL:HARDWARE:ALGORITHM"`` instead of a time, e.g. ``latency = "nccl:simple:nvlink"``
(3.4 µs) or ``"nccl:ll128:net:tree"`` (8.5 µs). It resolves to the latency NCCL's cost model
charges per algorithm step on that kind of link for that protocol: ``hwLatencies`` in
``ncclTunerConstantsDefaults``, NCCL 2.30.7, ``src/graph/tuning.cc`` (commit 5067397c of
github.com/NVIDIA/nccl). ALGORITHM defaults to ``ring``, whose steps are the ones NCCL counts per
link (2(N-1) for AllReduce); HARDWARE ``nvlink`` is NCCL's ``NVLINK``, ``pci`` its ``PCI``, ``net``
its ``NET``. NCCL also adds a per-call base latency (``baseLatencies``, e.g. 8.4 µs for ring
Simple); it is per collective call, not per link, so it is not part of α and is only named in the
source text. Combinations NCCL does not run (its table holds 0 there, e.g. NVLS with LL) are errors.
"""
from __future__ import annotations

from dataclasses import dataclass

from optcoll.errors import InputError

NCCL_VERSION = "2.30.7"
SOURCE = f"NCCL {NCCL_VERSION} src/graph/tuning.cc, ncclTunerConstantsDefaults (commit 5067397c)"
PREFIX = "nccl:"
PROTOCOLS = ("ll", "ll128", "simple")
HARDWARE = ("nvlink", "pci", "net")
ALGORITHMS = ("tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat")

#: hwLatencies[hardware][algorithm] = (LL, LL128, Simple) in microseconds.
HW_LATENCY_US: dict[str, dict[str, tuple[float, float, float]]] = {
    "nvlink": {"tree": (0.6, 1.25, 4.0), "ring": (0.6, 1.9, 3.4), "collnet_direct": (0, 0, 3.7),
               "collnet_chain": (0, 0, 2.8), "nvls": (0, 0, 25), "nvls_tree": (0, 0, 25),
               "pat": (0, 0, 4.0)},
    "pci": {"tree": (1.0, 1.9, 4.0), "ring": (1.0, 2.5, 5.7), "collnet_direct": (0, 0, 3.7),
            "collnet_chain": (0, 0, 2.8), "nvls": (0, 0, 0), "nvls_tree": (0, 0, 0),
            "pat": (0, 0, 4.0)},
    "net": {"tree": (5.0, 8.5, 14), "ring": (2.7, 4.0, 14.0), "collnet_direct": (0, 0, 31),
            "collnet_chain": (0, 0, 30), "nvls": (0, 0, 18), "nvls_tree": (0, 0, 20.9),
            "pat": (0, 0, 14)},
}
#: baseLatencies[algorithm] = (LL, LL128, Simple) in microseconds (per call, shown, never used).
BASE_LATENCY_US: dict[str, tuple[float, float, float]] = {
    "tree": (6.8, 14.0, 8.4), "ring": (6.6, 14.0, 8.4), "collnet_direct": (0, 0, 0),
    "collnet_chain": (0, 0, 0), "nvls": (0, 0, 0), "nvls_tree": (0, 0, 0), "pat": (8.0, 8.0, 8.0)}


@dataclass(frozen=True)
class NcclLatency:
    """A resolved preset: what was written, the latency in seconds, and where it comes from."""

    spec: str
    seconds: float
    source: str

    def describe(self) -> str:
        return f"{self.spec} = {self.seconds * 1e6:g} us ({self.source})"


def is_preset(value: object) -> bool:
    return isinstance(value, str) and value.strip().lower().startswith(PREFIX)


def _choice(value: str, options: tuple[str, ...], what: str, text: str) -> str:
    if value not in options:
        raise InputError(f"{text!r}: unknown NCCL {what} {value!r}; one of {', '.join(options)}")
    return value


def resolve(text: str) -> NcclLatency:
    """The preset named by ``text`` (module docstring); ``InputError`` naming what is wrong."""
    parts = text.strip().lower().split(":")
    if len(parts) not in (3, 4) or parts[0] != PREFIX[:-1]:
        raise InputError(f"{text!r}: an NCCL latency is nccl:PROTOCOL:HARDWARE[:ALGORITHM], e.g. "
                         "'nccl:simple:nvlink'")
    proto = _choice(parts[1], PROTOCOLS, "protocol", text)
    hardware = _choice(parts[2], HARDWARE, "hardware", text)
    algo = _choice(parts[3] if len(parts) == 4 else "ring", ALGORITHMS, "algorithm", text)
    column = PROTOCOLS.index(proto)
    micros = HW_LATENCY_US[hardware][algo][column]
    if not micros:
        raise InputError(f"{text!r}: NCCL does not run {algo} with protocol {proto} on {hardware} "
                         f"(its tuning table holds 0 there)")
    spec = f"nccl:{proto}:{hardware}:{algo}"
    base = BASE_LATENCY_US[algo][column]
    source = (f"{SOURCE}: hwLatencies[{hardware.upper()}][{algo.upper()}][{proto.upper()}]"
              + (f"; NCCL adds a per-call base latency of {base:g} us, not part of α" if base else ""))
    return NcclLatency(spec, micros * 1e-6, source)
