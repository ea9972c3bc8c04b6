"""Side by side: ASTRA-sim's native algorithms (predicted) vs optcoll's bound, greedy and baselines.

Sizes are optcoll's M (the full buffer as nccl-tests counts it); ASTRA-sim is given its own
comm_size for the same collective (AllGather: M/N per NPU, the others: M). optcoll's numbers are
times in its timed model (store-and-forward, a link busy for α + b/B per whole chunk) of schedules
that passed the shared verifier; bounds are given for that model and for serialization occupancy
(α pipelined), the congestion-aware backend's link model.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from optcoll.bounds import best_lower_bound
from optcoll.collectives.builtins import canonical_kind, make_collective
from optcoll.errors import InputError
from optcoll.interop.astra.network import AstraNetwork, network_of, read_network
from optcoll.interop.astra.predictor import comm_size_of, predict
from optcoll.interop.astra.system import ALGORITHMS, Impl, SystemConfig
from optcoll.fileio import write_text_atomic
from optcoll.instances.instance import Instance, TimeModel
from optcoll.machines.machine import Machine
from optcoll.producers.base import NotApplicable
from optcoll.schedules.schedule import Schedule
from optcoll.text.document import Block, Heading, Paragraph, bullets, table, to_markdown
from optcoll.units import format_size
from optcoll.verify import verify

Producer = Callable[[Instance, int], Schedule]

#: ASTRA-sim settings for the comparison: as near the network alone as ASTRA-sim runs (endpoint
#: delay 1 ns, its least: 0 aborts; no reduction cost; one stream), so its times and optcoll's
#: measure nearly the same thing; pass another SystemConfig to change.
NETWORK_ONLY = SystemConfig(collective_optimization="localBWAware", scheduling_policy="LIFO",
                            endpoint_delay=1, active_chunks_per_dimension=1,
                            preferred_dataset_splits=1, local_mem_bw_gbps=None, source="astra_compare")


def default_producers() -> dict[str, Producer]:
    """From the registry: the TACOS greedy as "tacos" and every classical baseline (the improved
    greedy "tacos+" is optcoll's own, not a baseline). Every key but "tacos" counts as a baseline."""
    from optcoll.producers.registry import SYNTHESIZERS

    return {name: synth for name, synth in SYNTHESIZERS.items() if name != "tacos+"}


@dataclass(frozen=True)
class CompareRow:
    network: str
    collective: str
    size_bytes: int  # optcoll's M
    astra_comm_size: int
    astra_ns: dict[tuple[str, str], int | None]  # (algorithm, backend) → ns, None: not applicable
    bound_link_s: float
    bound_serial_s: float
    greedy_s: float | None
    baseline: tuple[str, float] | None


def _network(item: AstraNetwork | Machine | str | Path) -> AstraNetwork:
    if isinstance(item, AstraNetwork):
        return item
    if isinstance(item, Machine):
        return network_of(item)
    return read_network(item)


def _astra_times(network: AstraNetwork, system: SystemConfig, kind: str, comm_size: int,
                 backends: Sequence[str]) -> dict[tuple[str, str], int | None]:
    out: dict[tuple[str, str], int | None] = {}
    ndim = len(network.dims)
    for name in ALGORITHMS:
        if name == "doubleBinaryTree" and kind != "allreduce":  # ASTRA-sim would run an AllReduce
            out.update({(name, backend): None for backend in backends})
            continue
        impls = {k: (Impl(name),) * ndim for k in ("allreduce", "reducescatter", "allgather")}
        config = replace(system, implementations=impls, custom=())
        for backend in backends:
            try:
                out[(name, backend)] = predict(network, config, kind, comm_size, backend).total_ns
            except InputError:  # e.g. halvingDoubling on a non-power-of-two dimension
                out[(name, backend)] = None
    return out


def _verified_time(instance: Instance, producer: Producer, seed: int) -> float | None:
    """The verified time (inf if the verifier rejects it), None where the producer does not apply."""
    try:
        schedule = producer(instance, seed)
    except NotApplicable:
        return None
    result = verify(instance.machine, instance.collective, schedule, instance.model)
    return result.time if result.valid else math.inf


def compare_rows(networks: Sequence[AstraNetwork | Machine | str | Path], collectives: Sequence[str],
                 sizes: Sequence[int], *, system: SystemConfig = NETWORK_ONLY,
                 backends: Sequence[str] = ("unaware", "aware"), chunks_per_rank: int = 1,
                 producers: Mapping[str, Producer] | None = None, seed: int = 0) -> list[CompareRow]:
    producers = dict(default_producers() if producers is None else producers)
    rows = []
    for item in networks:
        network = _network(item)
        machine = network.machine()
        n = machine.num_npus
        for coll in collectives:
            kind = canonical_kind(coll)
            for size in sizes:
                comm = comm_size_of(kind, int(size), n)
                collective = make_collective(kind, range(n), size, chunks_per_rank)
                instance = Instance(f"{network.name}-{kind}", machine, collective)
                bound_link = best_lower_bound(machine, collective, TimeModel()).value
                bound_serial = best_lower_bound(machine, collective, TimeModel(occupancy="serialization")).value
                greedy = _verified_time(instance, producers["tacos"], seed) if "tacos" in producers else None
                base = [(name, t) for name, p in producers.items() if name != "tacos"
                        for t in [_verified_time(instance, p, seed)] if t is not None]
                rows.append(CompareRow(network.name, kind, int(size), comm,
                                       _astra_times(network, system, kind, comm, backends),
                                       bound_link, bound_serial, greedy, min(base, key=lambda b: b[1]) if base else None))
    return rows


def _us(seconds: float | None) -> str:
    if seconds is None:
        return "n/a"
    return "invalid" if not math.isfinite(seconds) else f"{seconds * 1e6:.2f}"


def _astra_cell(ns: int | None, bound_s: float) -> str:
    """µs, marked ↓ when below the serialization lower bound (impossible for any model in which a
    link carries one message at a time)."""
    if ns is None:
        return "n/a"
    return f"{ns / 1e3:.2f}" + ("↓" if ns < bound_s * 1e9 * (1 - 1e-12) else "")


def format_report(rows: list[CompareRow], networks: Mapping[str, str], system: SystemConfig,
                  backends: Sequence[str], chunks_per_rank: int, command: str | None = None) -> str:
    mem = 'none (free reductions)' if system.local_mem_bw_gbps is None else f'{system.local_mem_bw_gbps:g} GB/s'
    blocks: list[Block] = [
        Heading("ASTRA-sim native algorithms vs optcoll", 1),
        *([Paragraph(f"Generated by `{command}`.")] if command else []),
        Paragraph("Times in µs. ASTRA-sim columns are optcoll's prediction of ASTRA-sim 518bd51's analytical "
                  "backends (`optcoll astra predict`, checked to the ns against the real binaries), `unaware / "
                  "aware`, for the same algorithm in every dimension; multi-dimensional AllReduce is "
                  f"`localBWAware`. ASTRA-sim settings: endpoint-delay {system.endpoint_delay} ns, local-mem-bw "
                  f"{mem}, {system.preferred_dataset_splits} dataset split(s), "
                  f"{system.active_chunks_per_dimension} active chunk(s) per dimension. The congestion-aware "
                  "backend refuses networks of more than one dimension (n/a)."),
        Paragraph("optcoll columns: the best lower bound in optcoll's timed model (link busy α + b/B per "
                  "transfer) and with serialization occupancy (busy b/B, α pipelined, like the aware "
                  "backend's links); the verified time of the greedy (TACOS-style, `tacos`) and of the best "
                  f"baseline, with C = {chunks_per_rank} chunk(s) per rank."),
        Paragraph("How to read it:"),
        bullets("The congestion-unaware backend lets concurrent messages share a link at full bandwidth, "
                "so it can beat a bandwidth lower bound; values marked ↓ are below the serialization-occupancy "
                "lower bound, i.e. impossible once a link carries one message at a time. It is never "
                "ground truth for bandwidth-bound schedules.",
                "optcoll's timed model is store-and-forward with whole-chunk link occupancy and free "
                "forwarding; ASTRA-sim adds its own per-message floors (whole ns) and, when configured, "
                "endpoint and reduction delays. The aware backend occupies a link only for b/B, so compare "
                "it with the serialization bound.",
                "Sizes: M is the full buffer (AllGather output, AllReduce vector); ASTRA-sim's comm_size "
                "for AllGather is M/N per NPU.")]
    head = ["collective", "M", *[f"{a} ({'/'.join(backends)})" for a in ALGORITHMS],
            "bound (link)", "bound (serial.)", "greedy", "best baseline"]
    for name, text in networks.items():
        cells = []
        for row in (r for r in rows if r.network == name):
            line = [row.collective, format_size(row.size_bytes)]
            for algo in ALGORITHMS:
                values = [row.astra_ns.get((algo, b)) for b in backends]
                line.append(" / ".join(_astra_cell(v, row.bound_serial_s) for v in values))
            line += [_us(row.bound_link_s), _us(row.bound_serial_s), _us(row.greedy_s),
                     "n/a" if row.baseline is None else f"{_us(row.baseline[1])} ({row.baseline[0]})"]
            cells.append(line)
        blocks += [Heading(name), Paragraph(text), table(head, cells)]
    return to_markdown(blocks)


def astra_compare(networks: Sequence[AstraNetwork | Machine | str | Path], collectives: Sequence[str],
                  sizes: Sequence[int], out_path: str | Path, *, system: SystemConfig = NETWORK_ONLY,
                  backends: Sequence[str] = ("unaware", "aware"), chunks_per_rank: int = 1,
                  producers: Mapping[str, Producer] | None = None, seed: int = 0,
                  command: str | None = None) -> list[CompareRow]:
    """Writes the Markdown comparison to ``out_path`` (atomically) and returns its rows;
    ``command``: the command line to record in its header.

    ``networks``: ASTRA networks, network.yml paths or expressible machines; ``sizes``: optcoll's
    M in bytes; ``producers``: name → producer, "tacos" the greedy, every other one a baseline
    (default: the greedy only).
    """
    resolved = [_network(item) for item in networks]
    names = [net.name for net in resolved]
    if len(set(names)) != len(names):
        raise InputError(f"network names must differ, got {names}", field="networks")
    rows = compare_rows(resolved, collectives, sizes, system=system, backends=backends,
                        chunks_per_rank=chunks_per_rank, producers=producers, seed=seed)
    text = format_report(rows, {net.name: f"{net.describe()}: {net.num_npus} NPUs." for net in resolved},
                         system, backends, chunks_per_rank, command)
    write_text_atomic(out_path, text)
    return rows
