"""The report's figures as SVG text (matplotlib, headless, byte-stable for equal data)."""
from __future__ import annotations

import io

from optcoll.reports.data import EXACT, ParetoData, Report, SizesData
from optcoll.units import format_size

_MARKERS = "o^sDvP*Xh<>dp8H"


def _svg(fig) -> str:
    import matplotlib.pyplot as plt

    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    return buffer.getvalue()


def _figure(width: float, height: float, **subplots):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.hashsalt"] = "optcoll"  # stable element ids: equal data, equal bytes
    plt.rcParams["svg.fonttype"] = "none"  # text stays text (small, searchable)
    return plt.subplots(figsize=(width, height), **subplots)


def gap_plot(report: Report) -> str:
    """Gap to the best proven bound, per instance (rows) and producer (markers); symlog axis."""
    rows = report.rows
    fig, ax = _figure(9.0, 1.2 + 0.32 * len(rows))
    labels = [label for label in report.labels
              if any(label in r.producers and r.producers[label].gap is not None for r in rows)]
    spread = 0.6 / max(1, len(labels))
    for i, label in enumerate(labels):
        ys, xs = [], []
        for y, row in enumerate(rows):
            result = row.producers.get(label)
            if result is not None and result.gap is not None:
                ys.append(y + (i - (len(labels) - 1) / 2) * spread)
                xs.append(100 * result.gap)
        ax.scatter(xs, ys, label=label, marker=_MARKERS[i % len(_MARKERS)], s=22,
                   color="black" if label == EXACT else None, zorder=3)
    ax.set_yticks(range(len(rows)), [row.name for row in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("symlog", linthresh=1.0)
    ax.set_xlim(left=-0.5)  # gaps are never negative
    ax.set_xlabel("gap to the best proven lower bound (%), symlog scale")
    ax.axvline(0, color="grey", lw=0.8)
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=7, ncol=1, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _svg(fig)


def _style(label: str) -> dict:
    if label.startswith("optimal"):
        return {"lw": 2.2, "ls": "-"}
    if label.startswith("tacos"):
        return {"lw": 1.5, "ls": "--"}
    return {"lw": 1.0, "ls": ":"}


def sizes_plot(data: SizesData) -> str:
    """Time versus message size (log-log), and each curve relative to the best optimum at that
    size: where one curve dips below another, latency- and bandwidth-optimal algorithms cross."""
    fig, (top, bottom) = _figure(9.0, 8.0, nrows=2, sharex=True,
                                 gridspec_kw={"height_ratios": [3, 2]})
    optimal = [c for c in data.curves if c.label.startswith("optimal")]
    reference = [min((t for t in ts if t is not None), default=None)
                 for ts in zip(*(c.times for c in optimal))] if optimal else []
    for i, curve in enumerate(data.curves):
        points = [(s, t) for s, t in zip(curve.sizes, curve.times) if t is not None]
        if not points:
            continue
        xs, ys = zip(*points)
        style = _style(curve.label)
        top.plot(xs, ys, label=curve.label, marker=_MARKERS[i % len(_MARKERS)], ms=3, **style)
        if reference:
            rel = [(s, t / r) for s, t, r in zip(curve.sizes, curve.times, reference)
                   if t is not None and r]
            if rel:
                bottom.plot(*zip(*rel), marker=_MARKERS[i % len(_MARKERS)], ms=3, **style)
    bound_points = [(s, b) for s, b in zip(data.curves[0].sizes if data.curves else (), data.bounds)
                    if b is not None]
    if bound_points:
        top.plot(*zip(*bound_points), color="black", lw=0.8, label="best analytic lower bound")
    top.set_xscale("log", base=2)
    top.set_yscale("log")
    top.set_ylabel("time (s)")
    top.set_title(f"{data.collective} on {data.network}: time versus message size")
    top.grid(alpha=0.3, which="both")
    top.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    bottom.set_yscale("log")
    bottom.set_ylabel("time / best optimum")
    bottom.grid(alpha=0.3, which="both")
    sizes = data.curves[0].sizes if data.curves else ()
    bottom.set_xticks(list(sizes), [format_size(s).replace(" ", "") for s in sizes], rotation=45,
                      fontsize=7)
    bottom.set_xlabel("message size M")
    return _svg(fig)


def pareto_plot(data: ParetoData) -> str:
    """The step model's Pareto front: steps S against bandwidth cost R/C, each point labelled."""
    fig, ax = _figure(6.5, 4.5)
    points = [p for p in data.points if p.get("steps") and p.get("rounds") and p.get("chunks")]
    xs = [p["steps"] for p in points]
    ys = [p["rounds"] / p["chunks"] for p in points]
    ax.step(xs, ys, where="post", color="grey", lw=0.8)
    proven = [bool(p.get("proven")) for p in points]
    ax.scatter([x for x, k in zip(xs, proven) if k], [y for y, k in zip(ys, proven) if k],
               color="black", zorder=3, label="proven Pareto-optimal")
    ax.scatter([x for x, k in zip(xs, proven) if not k], [y for y, k in zip(ys, proven) if not k],
               facecolors="none", edgecolors="black", zorder=3, label="found, not proven")
    for p, x, y in zip(points, xs, ys):
        tag = " (bandwidth-optimal)" if p.get("bandwidth_optimal") else ""
        ax.annotate(f"S={p['steps']}, R={p['rounds']}, C={p['chunks']}{tag}", (x, y), fontsize=7,
                    xytext=(4, 4), textcoords="offset points")
    ax.legend(fontsize=7)
    ax.set_xlabel("steps S (latency cost: S·α)")
    ax.set_ylabel("rounds per chunk R/C (bandwidth cost: R/C · M/(N·B))")
    ax.set_title(f"step-model Pareto front: {data.instance}")
    if xs:
        ax.set_xticks(range(min(xs), max(xs) + 1))
        ax.set_xlim(min(xs) - 0.5, max(xs) + 1.5)
    ax.grid(alpha=0.3)
    return _svg(fig)


def expect_plot(rows, kind: str, title: str, ranks: int, measured_label: str | None = None) -> str:
    """Bus bandwidth against size (``optcoll expect``): the physical bound, the best verified
    schedule and NCCL's choice in the calibrated model, and the measurement where there is one."""
    from optcoll.interop.nccltests import busbw_factor

    factor = busbw_factor(kind, ranks)
    fig, ax = _figure(8.0, 4.8)
    sizes = [r.size for r in rows]
    curves = [("physical bound", [r.bound for r in rows], {"color": "black", "lw": 1.2, "ls": "--"}),
              ("best verified (calibrated)", [r.best.seconds for r in rows], {"lw": 2.0}),
              ("NCCL choice (calibrated)", [r.predicted for r in rows], {"lw": 1.4, "ls": ":"})]
    if any(r.measured for r in rows):
        curves.append((f"measured ({measured_label or 'file'})",
                       [r.measured for r in rows], {"marker": "o", "ms": 3, "lw": 0.8}))
    for label, times, style in curves:
        points = [(s, factor * s / t / 1e9) for s, t in zip(sizes, times) if t]
        if points:
            xs, ys = zip(*points)
            ax.plot(xs, ys, label=label, **style)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("message size M (bytes)")
    ax.set_ylabel(f"bus bandwidth (GB/s, nccl-tests' {kind} factor)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _svg(fig)
