"""The AxoNN report: 4D configurations ranked under the ring model, optcoll's bounds and verified
schedules, with a per-collective breakdown; and the entry point ``optcoll axonn`` calls."""
from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from optcoll.analysis.axonn.cluster import Cluster, cluster_from_model
from optcoll.analysis.axonn.grid import AXONN_ORDER, parse_shape
from optcoll.analysis.axonn.layer import TransformerLayer
from optcoll.analysis.axonn.measured import BandwidthTable, bandwidth_table
from optcoll.analysis.axonn.network import DEFAULT_PRODUCERS, NetworkEvaluator
from optcoll.analysis.axonn.ranking import (MODELS, ConfigResult, Ranking, evaluate,
                                            rank_configurations)
from optcoll.analysis.axonn.ringmodel import SHARING
from optcoll.errors import InputError
from optcoll.fileio import write_text_atomic
from optcoll.text.document import Block, Heading, Paragraph, Table, bullets, to_markdown
from optcoll.text.document import table as doc_table
from optcoll.units import format_bandwidth, format_size

_TITLES = {"ring": "ring model", "bound": "bound", "schedule": "schedule",
           "bound-isolated": "bound, alone", "schedule-isolated": "schedule, alone"}


def _ms(seconds: float | None) -> str:
    return "–" if seconds is None else f"{seconds * 1e3:.4g}"


def _fabric(cluster: Cluster) -> str:
    if cluster.intra == "nvswitch":
        return "NVSwitch"
    share = cluster.nvlink_bandwidth / max(cluster.gpus_per_node - 1, 1)
    return f"full mesh, {format_bandwidth(share)} per GPU pair"


def _setup(cluster: Cluster, layer: TransformerLayer, sharing: str,
           evaluator: NetworkEvaluator | None, order: str, table: BandwidthTable | None) -> list[str]:
    c = cluster
    lines = [f"Cluster **{c.name or c.machine.name}**: {c.nodes} nodes × {c.gpus_per_node} GPUs "
             f"= {c.gpus} GPUs; NVLink {format_bandwidth(c.nvlink_bandwidth)} per GPU per direction "
             f"({_fabric(c)}); "
             f"{c.gpus_per_node // c.gpus_per_nic} NIC(s) per node at {format_bandwidth(c.nic_bandwidth)} "
             f"(node injection {format_bandwidth(c.node_injection_bandwidth)}); latencies NVLink "
             f"{c.nvlink_latency * 1e6:g} us, NIC {c.nic_latency * 1e6:g} us per hop.",
             f"Layer: {layer.describe()}.",
             f"Placement: rank order {order} (fastest first; AxoNN's: X inside a node first).",
             "Ring model (AxoNN): AG/RS (p−1)/p·M/β, AR 2(p−1)/p·M/β; " + (
                 f"β = NVLink bandwidth inside a node, else node injection shared by rule **{sharing}**."
                 if table is None else f"β from the {table.describe()}, by group size and level "
                 "(rank distance between members); configurations it has no entry for are skipped."),
             "Times are per layer and training step, in ms, summed over the layer's collectives "
             "(count × time), as AxoNN's model sums them."]
    if evaluator is None:
        lines.append("Bounds and schedules: not computed (ring model only).")
        return lines
    lines.append(f"Network numbers: optcoll's timed model (occupancy {evaluator.model.occupancy}), "
                 f"C = {evaluator.chunks_per_rank} chunks per rank. *bound*: best proven lower "
                 "bound with every group of the dimension running at once (*alone*: one group by "
                 "itself).")
    if evaluator.schedules:
        lines.append(f"*schedule*: best verified schedule of {', '.join(evaluator.producers)} "
                     f"(seed {evaluator.seed}); concurrent groups are one combined collective, so "
                     "they really share NICs and the spine.")
    else:
        lines.append("Schedules: not computed (bounds only).")
    return lines


def _ranking_table(ranking: Ranking, models: list[str], top: int | None) -> Table:
    ranks = {m: ranking.positions(m) for m in models}
    header = ["X×Y×Z×D", *(f"{_TITLES[m]} (ms)" for m in models),
              *(f"rank: {_TITLES[m]}" for m in models if m != "ring")]
    rows = []
    for result in ranking.ranked("ring")[:top]:
        shape = result.grid.shape
        rows.append([result.grid.label(), *(_ms(result.total(m)) for m in models),
                     *(str(ranks[m][shape]) for m in models if m != "ring")])
    return doc_table(["ring rank", *header], [[str(k), *row] for k, row in enumerate(rows, 1)])


def _findings(ranking: Ranking, models: list[str]) -> list[str]:
    lines = []
    for m in models:
        best = ranking.ranked(m)[0]
        lines.append(f"Best under {_TITLES[m]}: {best.grid.label()} ({_ms(best.total(m))} ms).")
    ring_best = ranking.ranked("ring")[0].grid.shape
    for m in models:
        if m != "ring":
            lines.append(f"The ring model's pick is #{ranking.positions(m)[ring_best]} of "
                         f"{len(ranking.results)} under {_TITLES[m]}.")
    if "bound" in models:
        below = [r for r in ranking.results if r.total("ring") < r.total("bound")]  # type: ignore[operator]
        lines.append(f"The ring model promises less than the proven lower bound (too optimistic) "
                     f"for {len(below)} of {len(ranking.results)} configurations.")
    if "schedule" in models:
        gaps = [r.total("schedule") / r.total("bound") for r in ranking.results]  # type: ignore[operator]
        lines.append(f"Verified schedule / bound: {min(gaps):.3g}× to {max(gaps):.3g}× "
                     "(the gap the greedy leaves, or the bound's slack).")
    return lines


def _breakdown(result: ConfigResult) -> Table:
    header = ["layer", "collective", "dim", "p", "groups", "M", "count", "β", "ring (ms)",
              "bound alone", "bound", "schedule alone", "schedule", "by", "bound from"]
    rows = []
    for r in result.calls:
        m = r.measured
        rows.append([r.call.linear, f"{r.call.kind}: {r.call.what}", r.call.dim, str(r.group_size),
                     str(r.groups), format_size(r.call.size_bytes), str(r.call.count),
                     format_bandwidth(r.bandwidth), _ms(r.ring),
                     *(_ms(r.time(k)) for k in ("bound-isolated", "bound", "schedule-isolated",
                                                "schedule")),
                     (m.producer or "–") if m else "–", m.bound_name if m else "–"])
    return doc_table(header, rows)


def axonn_report(cluster: Cluster, layer: TransformerLayer, *, path: str | os.PathLike | None = None,
                 sharing: str = "axonn", evaluator: NetworkEvaluator | None = None,
                 shape: str | None = None, min_tensor_parallel: int = 1, top: int | None = None,
                 measure_top: int | None = None, order: str = AXONN_ORDER,
                 table: BandwidthTable | None = None,
                 progress: Callable[[int, int, str], None] | None = None) -> str:
    """Markdown: every configuration ranked (or, with ``shape`` "X,Y,Z,D", that one only), and the
    per-collective breakdown of the ring model's best (or of ``shape``). ``measure_top`` k: the
    network (``evaluator``) measures only the ring model's k best, for GPU counts where measuring
    every configuration takes too long. Written atomically to ``path`` when given; returned."""
    if sharing not in SHARING:
        raise InputError(f"unknown sharing rule {sharing!r}; known: {', '.join(SHARING)}",
                         field="sharing")
    blocks: list[Block] = [
        Heading(f"AxoNN 4D configurations on {cluster.name or cluster.machine.name}, {cluster.gpus} GPUs", 1),
        bullets(*_setup(cluster, layer, sharing, evaluator, order, table))]
    if shape is not None:
        chosen = evaluate(cluster, layer, parse_shape(shape, order), sharing=sharing,
                          evaluator=evaluator, table=table)
        models = [m for m in MODELS if chosen.total(m) is not None]
        blocks += [Heading(f"Configuration {chosen.grid.label()}"),
                   bullets(*(f"{_TITLES[m]}: {_ms(chosen.total(m))} ms" for m in models))]
    else:
        partial = measure_top is not None and evaluator is not None
        ranking = rank_configurations(cluster, layer, sharing=sharing,
                                      evaluator=None if partial else evaluator,
                                      min_tensor_parallel=min_tensor_parallel, order=order, table=table,
                                      progress=progress)
        shown = "all" if top is None or top >= len(ranking.results) else f"top {top}"
        blocks += [Heading("Ranking"),
                   Paragraph(f"{len(ranking.results)} configurations with X·Y·Z ≥ {min_tensor_parallel} "
                             f"({shown} shown, ordered by the ring model)."),
                   _ranking_table(ranking, ranking.models(), top)]
        if partial:
            picked = ranking.ranked("ring")[:measure_top]
            ranking = Ranking(tuple(evaluate(cluster, layer, r.grid, sharing=sharing,
                                             evaluator=evaluator, table=table) for r in picked), ())
            blocks += [Heading(f"The ring model's {len(picked)} best on the network"),
                       Paragraph("Measuring every configuration on this network takes too long; these are "
                                 "the ring model's favourites, re-ranked."),
                       _ranking_table(ranking, ranking.models(), None)]
        blocks.append(bullets(*_findings(ranking, ranking.models())))
        if ranking.skipped:
            blocks += [Paragraph("Not runnable by AxoNN (divisibility, or no measured bandwidth):"),
                       bullets(*(f"{grid.label()}: {why}" for grid, why in ranking.skipped))]
        chosen = ranking.ranked("ring")[0]
        blocks.append(Heading(f"Breakdown of the ring model's pick, {chosen.grid.label()}"))
    blocks.append(_breakdown(chosen))
    text = to_markdown(blocks)
    if path is not None:
        write_text_atomic(path, text)
    return text


def axonn_command(machine: str, gpus: int, layer_size: int, *, seq_len: int = 2048,
                  batch: int = 256, bytes_per_element: int = 2, grad_bytes: int = 4,
                  recompute: bool = True, shape: str | None = None, out: str | None = None,
                  sharing: str = "axonn", chunks_per_rank: int = 2,
                  producers: Sequence[str] = DEFAULT_PRODUCERS, schedules: bool = True,
                  bounds: bool = True, min_tensor_parallel: int = 1, top: int | None = None,
                  measure_top: int | None = None, seed: int = 0, bandwidths: str = "nominal",
                  progress: Callable[[int, int, str], None] | None = None) -> str:
    """What ``optcoll axonn --machine MODEL --gpus N --layer-size H ...`` runs: ``layer_size`` is
    the hidden size H. ``bounds=False`` gives the ring model alone; ``schedules=False`` skips (c).
    ``bandwidths``: the ring model's β: "nominal", "measured" (the machine's built-in table) or a
    table file (``measured``); ``progress`` as in ``rank_configurations``. Returns the Markdown
    (also written to ``out`` when given)."""
    table = bandwidth_table(bandwidths, machine)
    cluster = cluster_from_model(machine, gpus)
    layer = TransformerLayer(layer_size, seq_len, batch, bytes_per_element, grad_bytes, recompute)
    evaluator = None
    if bounds:
        evaluator = NetworkEvaluator(cluster, chunks_per_rank, tuple(producers), schedules, seed)
    elif schedules:
        raise InputError("schedules need bounds too (drop --no-bounds or add --no-schedules)",
                         field="schedules")
    return axonn_report(cluster, layer, path=out, sharing=sharing, evaluator=evaluator, shape=shape,
                        min_tensor_parallel=min_tensor_parallel, top=top, measure_top=measure_top,
                        table=table, progress=progress)


#: The reports under ``reports/``: file name → ``axonn_command`` arguments. 64 GPUs: AxoNN's
#: 10B-parameter GPT layer (Megatron-AxoNN's table: H 5120, at least 8-way tensor parallelism),
#: every model. 1024 GPUs: its 80B layer (H 12288, at least 64-way); there greedy schedules for
#: every configuration take too long on two cores, so the ring model ranks all and optcoll's
#: bounds re-rank its 10 best.
DEFAULT_REPORTS: dict[str, dict[str, Any]] = {
    "axonn-perlmutter-64.md": dict(machine="perlmutter", gpus=64, layer_size=5120, seq_len=2048,
                                   batch=256, min_tensor_parallel=8),
    "axonn-perlmutter-1024.md": dict(machine="perlmutter", gpus=1024, layer_size=12288,
                                     seq_len=2048, batch=2048, min_tensor_parallel=64,
                                     schedules=False, measure_top=10, top=40),
}


def write_default_reports(directory: str | os.PathLike = "reports") -> list[str]:
    """Regenerates ``DEFAULT_REPORTS`` in ``directory``; returns the paths written."""
    paths = []
    for name, kwargs in DEFAULT_REPORTS.items():
        path = os.path.join(directory, name)
        axonn_command(**kwargs, out=path)
        paths.append(path)
    return paths
