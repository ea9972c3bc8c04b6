"""Writing a report directory: README.md (rendered by code-hosting pages when the directory is
opened), report.html (self-contained, SVG inline), results.csv, report.json and the SVG figures,
swapped in as one folder (``fileio.write_folder_atomic``) so no mix of two reports is ever left."""
from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any

from optcoll.fileio import write_folder_atomic
from optcoll.reports import plots
from optcoll.reports.content import build_blocks
from optcoll.reports.data import Report
from optcoll.text.document import to_html, to_markdown

FILES = ("README.md", "report.html", "results.csv", "report.json")
CSV_COLUMNS = ("suite", "instance", "network", "npus", "collective", "size_bytes", "chunks_per_rank",
               "chunk_choices", "chunk_bytes", "model", "instance_status", "lower_bound_s", "lower_bound_source",
               "best_s", "producer", "status", "time_s", "gap", "wall_time_s", "recorded", "seeds",
               "seed_times_s", "reason", "params", "own_chunking", "gap_against_s")


def figures(report: Report) -> dict[str, tuple[str, str]]:
    out = {"gaps.svg": ("Gap to the best proven lower bound per instance and producer.",
                        plots.gap_plot(report))}
    for data in report.sizes:
        out[f"sizes-{data.suite}.svg"] = (
            f"{data.instance}: time versus message size for the optimum per chunk count, the greedy "
            "synthesizers and the baselines (bottom: relative to the best optimum at each size).",
            plots.sizes_plot(data))
    for data in report.pareto:
        if data.points:
            out[f"pareto-{data.suite}.svg"] = (f"{data.instance}: Pareto front of the step model.",
                                               plots.pareto_plot(data))
    return out


def csv_text(report: Report) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in report.rows:
        for label in report.labels:
            p = row.producers.get(label)
            if p is None:
                continue
            writer.writerow({
                "suite": row.suite, "instance": row.name, "network": row.network, "npus": row.npus,
                "collective": row.collective, "size_bytes": repr(row.size_bytes),
                "chunks_per_rank": row.chunks_per_rank,
                "chunk_choices": " ".join(map(str, row.chunk_choices)), "chunk_bytes": repr(row.chunk_bytes),
                "model": row.model, "instance_status": row.status, "lower_bound_s": _num(row.bound),
                "lower_bound_source": row.bound_source, "best_s": _num(row.best), "producer": label,
                "status": p.status, "time_s": _num(p.time), "gap": _num(p.gap),
                "wall_time_s": _num(p.wall_time), "recorded": p.recorded, "seeds": len(p.seeds),
                "seed_times_s": " ".join(repr(t) for t in p.seeds), "reason": p.reason or "",
                "params": json.dumps(p.params, sort_keys=True), "own_chunking": p.own_chunking,
                "gap_against_s": _num(row.nccl_bound if p.own_chunking else row.bound)})
    return buffer.getvalue()


def _num(value: float | None) -> str:
    return "" if value is None else repr(value)


def _json_safe(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def report_file(name: str) -> bool:
    """A name ``write_report`` writes (a report folder holds nothing else)."""
    return name in FILES or name.endswith(".svg")


def write_report(report: Report, out: str | Path, command: str) -> list[Path]:
    """Writes the report's files as the folder ``out``, whole or not at all (an earlier report
    there is replaced; a folder holding other files is refused); returns the paths written."""
    out = Path(out)
    figs = figures(report)
    blocks = build_blocks(report, figs, command)
    texts = {"README.md": to_markdown(blocks), "report.html": to_html(blocks, report.title),
             "results.csv": csv_text(report),
             "report.json": json.dumps(_json_safe(report.to_dict()), indent=1, sort_keys=True) + "\n",
             **{name: svg for name, (_, svg) in figs.items()}}
    write_folder_atomic(out, {name: text.encode("utf-8") for name, text in texts.items()}, report_file)
    return [out / name for name in texts]
