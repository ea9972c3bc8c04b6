"""NCCL tuner-plugin tables from a per-size choice of algorithm, protocol and channels.

NCCL runs no external schedule, but a tuner plugin may steer its choice per call. NVIDIA's example
plugin (NVIDIA/nccl, ``plugins/tuner/example``, formerly ``ext-tuner/example``; checked at NCCL
2.30.7) reads a CSV, ``nccl_tuner.conf``, one rule per line::

    collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks,numPipeOps,regBuff

Its loader skips lines starting with ``#`` and empty lines and takes every other line as a rule
(so a header must be a comment), reads the byte bounds with ``strtoull`` (both inclusive; 64-bit),
and applies the first rule whose collective, size range, node and rank counts match: it sets that
(algorithm, protocol) entry of NCCL's cost table to 0 and, unless channels is -1, the channel
count. Unknown algorithm or protocol names silently become ring and simple, so names are checked
here, not there. The same directory's ``scripts/optimize_config.py`` turns a performance CSV
(``collective,size_bytes,algorithm,protocol,channels,nodes,ranks,pipeOps,regBuff,
bandwidth_gbps,latency_us``) into such a table; ``optimizer_rows`` writes that input.

A choice is made at sampled sizes. Between two samples a and b the rule of the nearer one (on a
log scale: the cut is at √(a·b)) applies; below the first and above the last sample the end
choices extend to 0 and to 2⁶⁴−1. Adjacent ranges with the same choice are merged.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from optcoll.errors import InputError

#: NCCL's algorithm names as the plugin spells them, with optcoll's producer names for them.
ALGORITHMS = {"tree": "tree", "ring": "ring", "collnet_direct": "collnet_direct",
              "collnet_chain": "collnet_chain", "nvls": "nvls", "nvls_tree": "nvls_tree", "pat": "pat",
              "nccl-tree": "tree", "nccl-ring": "ring", "nccl-collnet": "collnet_direct",
              "nccl-nvls": "nvls", "nccl-nvls-tree": "nvls_tree", "nccl-pat": "pat"}
#: Index of each algorithm and protocol in NCCL's cost table (src/include/plugin/tuner: NCCL_ALGO_*,
#: NCCL_PROTO_*), for callers that fill or read that table.
ALGORITHM_INDEX = {"tree": 0, "ring": 1, "collnet_direct": 2, "collnet_chain": 3, "nvls": 4,
                   "nvls_tree": 5, "pat": 6}
PROTOCOL_INDEX = {"ll": 0, "ll128": 1, "simple": 2}
#: The collectives the plugin's CSV names (ncclFunc_t order).
COLLECTIVES = ("broadcast", "reduce", "allgather", "reducescatter", "allreduce")
MAX_BYTES = 2**64 - 1
CONF_COLUMNS = ("collective_type", "min_bytes", "max_bytes", "algorithm", "protocol", "channels",
                "nNodes", "nRanks", "numPipeOps", "regBuff")
OPTIMIZER_COLUMNS = ("collective", "size_bytes", "algorithm", "protocol", "channels", "nodes", "ranks",
                     "pipeOps", "regBuff", "bandwidth_gbps", "latency_us")


def algorithm_name(name: str) -> str:
    """NCCL's spelling of an algorithm given by NCCL's or optcoll's name."""
    try:
        return ALGORITHMS[name.lower()]
    except KeyError:
        raise InputError(f"NCCL's tuner knows no algorithm {name!r}; it knows "
                         f"{', '.join(ALGORITHM_INDEX)}", field="algorithm") from None


def protocol_name(name: str) -> str:
    """NCCL's spelling (ll, ll128, simple) of a protocol named in any case."""
    lowered = name.lower()
    if lowered not in PROTOCOL_INDEX:
        raise InputError(f"NCCL's tuner knows no protocol {name!r}; it knows ll, ll128, simple",
                         field="protocol")
    return lowered


def collective_name(name: str) -> str:
    lowered = name.lower().replace("_", "").replace("-", "")
    if lowered not in COLLECTIVES:
        raise InputError(f"NCCL's tuner takes {', '.join(COLLECTIVES)}, not {name!r}", field="collective")
    return lowered


@dataclass(frozen=True)
class SizeChoice:
    """What to run at one message size (bytes as nccl-tests counts them) and its predicted time."""

    size: int
    algorithm: str
    protocol: str
    channels: int
    time: float  # seconds, in the yardstick the choice was made in


@dataclass(frozen=True)
class TunerRule:
    """One line of ``nccl_tuner.conf``; -1 in nodes, ranks, pipe_ops or reg_buff matches any."""

    collective: str
    min_bytes: int
    max_bytes: int
    algorithm: str
    protocol: str
    channels: int
    nodes: int = -1
    ranks: int = -1
    pipe_ops: int = -1
    reg_buff: int = -1

    def line(self) -> str:
        return ",".join(str(v) for v in (self.collective, self.min_bytes, self.max_bytes, self.algorithm,
                                         self.protocol, self.channels, self.nodes, self.ranks,
                                         self.pipe_ops, self.reg_buff))


def tuner_rules(collective: str, choices: Iterable[SizeChoice], *, nodes: int = -1,
                ranks: int = -1) -> list[TunerRule]:
    """The size ranges of ``choices`` (sampled sizes) as rules, nearest sample on a log scale."""
    coll = collective_name(collective)
    ordered = sorted(choices, key=lambda c: c.size)
    if not ordered:
        raise InputError("no sizes to make a tuner table from", field="sizes")
    if len({c.size for c in ordered}) != len(ordered):
        raise InputError("two choices for one size", field="sizes")
    cuts = [math.isqrt(a.size * b.size) for a, b in zip(ordered, ordered[1:])]
    lows, highs = [0, *(cut + 1 for cut in cuts)], [*cuts, MAX_BYTES]
    rules: list[TunerRule] = []
    for choice, low, high in zip(ordered, lows, highs):
        rule = TunerRule(coll, low, high, algorithm_name(choice.algorithm), protocol_name(choice.protocol),
                         int(choice.channels), nodes, ranks)
        last = rules[-1] if rules else None
        if last is not None and (last.algorithm, last.protocol, last.channels) == (
                rule.algorithm, rule.protocol, rule.channels):
            rules[-1] = TunerRule(coll, last.min_bytes, high, rule.algorithm, rule.protocol, rule.channels,
                                  nodes, ranks)
        else:
            rules.append(rule)
    return rules


def tuner_conf(rules: Sequence[TunerRule], comments: Sequence[str] = ()) -> str:
    """The text of ``nccl_tuner.conf``: comment lines (the column names among them), then rules."""
    head = [*(f"# {c}" for c in comments), "# " + ",".join(CONF_COLUMNS)]
    return "\n".join([*head, *(r.line() for r in rules)]) + "\n"


@dataclass(frozen=True)
class Candidate:
    """One predicted (algorithm, protocol, channels) at one size: a row of the optimizer's input."""

    collective: str
    size: int
    algorithm: str
    protocol: str
    channels: int
    time: float  # seconds
    nodes: int = -1
    ranks: int = -1


def optimizer_csv(candidates: Iterable[Candidate]) -> str:
    """The input of NCCL's ``optimize_config.py``: bandwidth_gbps is the algorithm bandwidth in
    GB/s (10⁹ B/s, size over time; at one size it ranks like busbw) and latency_us the time in µs."""
    lines = [",".join(OPTIMIZER_COLUMNS)]
    for c in sorted(candidates, key=lambda c: (c.size, c.time, c.algorithm, c.protocol)):
        if not (c.time > 0 and math.isfinite(c.time)):
            raise InputError(f"a candidate time must be positive and finite, got {c.time!r}", field="time")
        lines.append(",".join(str(v) for v in (
            collective_name(c.collective), c.size, algorithm_name(c.algorithm), protocol_name(c.protocol),
            c.channels, c.nodes, c.ranks, -1, -1, f"{c.size / c.time / 1e9:.6g}", f"{c.time * 1e6:.6g}")))
    return "\n".join(lines) + "\n"
