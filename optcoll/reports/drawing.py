"""Drawing a machine as an SVG: NPUs as labelled circles, switches as squares, links as lines.

A cable (as many links u→v as v→u) is one undirected line; one-way or unbalanced links are arrows
bent to the left of their direction so the two ways do not overlap. Parallel links make a thicker
line with a "×k" mark; link colours tell bandwidth classes apart. An edge whose straight line would
run through another node (a torus wraparound) is bent around it.
No pyplot: a private Figure keeps drawing free of global state, and the SVG is made reproducible
(fixed id salt, no date) and written atomically.
"""
from __future__ import annotations

import io
import os
import textwrap

import matplotlib
import networkx as nx
import numpy as np
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from optcoll.fileio import write_text_atomic
from optcoll.machines.machine import Machine
from optcoll.units import bandwidth_text

_MAX_ANNOTATED_EDGES = 600  # beyond this, arrowheads and "×k" marks are left out
_MAX_LABELLED_NODES = 160
_COLOURS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c")


def _layout(machine: Machine) -> np.ndarray:
    if machine.positions is not None:
        return np.array(machine.positions, dtype=float)
    graph = nx.Graph()
    graph.add_nodes_from(range(machine.num_nodes))
    graph.add_edges_from(zip(machine.link_src.tolist(), machine.link_dst.tolist()))
    pos = nx.spring_layout(graph, seed=0)
    return np.array([pos[v] for v in range(machine.num_nodes)], dtype=float)


def _unit(xy: np.ndarray) -> float:
    """The smallest distance between two nodes: the scale of the drawing."""
    if len(xy) < 2:
        return 1.0
    from scipy.spatial import cKDTree

    distances, _ = cKDTree(xy).query(xy, k=2)
    smallest = float(distances[:, 1].min())
    return smallest if smallest > 0 else 1.0


def _blocked(xy: np.ndarray, pairs: list[tuple[int, int]], clearance: float) -> np.ndarray:
    """For each pair, whether the straight segment between them passes within ``clearance`` of
    another node (a torus wraparound running along its row, say), so it must be drawn bent."""
    if not pairs or len(pairs) * len(xy) > 4_000_000:
        return np.zeros(len(pairs), dtype=bool)
    ends = np.array(pairs)
    a, b = xy[ends[:, 0]][:, None, :], xy[ends[:, 1]][:, None, :]
    chord = b - a
    t = np.clip(((xy[None] - a) * chord).sum(-1) / np.maximum((chord**2).sum(-1), 1e-300), 0.0, 1.0)
    distance = np.hypot(*(a + t[..., None] * chord - xy[None]).transpose(2, 0, 1))
    distance[np.arange(len(pairs)), ends[:, 0]] = np.inf
    distance[np.arange(len(pairs)), ends[:, 1]] = np.inf
    return distance.min(axis=1) < clearance


def _curve(a: np.ndarray, b: np.ndarray, bend: float, points: int = 17) -> np.ndarray:
    """A quadratic Bézier from a to b whose middle sits ``bend`` to the left of the chord."""
    chord = b - a
    length = float(np.hypot(*chord)) or 1.0
    left = np.array([-chord[1], chord[0]]) / length
    control = (a + b) / 2 + 2 * bend * left
    t = np.linspace(0.0, 1.0, points)[:, None]
    return (1 - t) ** 2 * a + 2 * (1 - t) * t * control + t**2 * b


def draw_machine(machine: Machine, path: str | os.PathLike, *, title: str | None = None) -> None:
    """Writes ``machine`` as an SVG file at ``path`` (readable up to ~64 nodes; any size works)."""
    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": "optcoll", "svg.fonttype": "none"}):
        machine_figure(machine, title).savefig(buffer, format="svg", bbox_inches="tight",
                                               metadata={"Date": None})
    write_text_atomic(path, buffer.getvalue())


def machine_figure(machine: Machine, title: str | None = None) -> Figure:
    """The drawing as a matplotlib Figure (for other formats or embedding in reports)."""
    xy = _layout(machine)
    unit = _unit(xy)
    groups = _cables(machine)
    bandwidths = sorted({bw for _, _, bw in groups})
    colour = {bw: _COLOURS[i] if len(bandwidths) <= len(_COLOURS) else "#555555"
              for i, bw in enumerate(bandwidths)}
    span = np.ptp(xy, axis=0) / unit if len(xy) > 1 else np.zeros(2)
    inch = min(0.75, 28.0 / max(1.0, float(span.max())))  # inches per unit, figure at most ~30 in
    width, height = (float(s) * inch + 1.5 for s in span)
    node_pt = 0.5 * inch * 72  # node diameter in points
    fig = Figure(figsize=(max(width, 4.0), max(height, 3.0)))
    ax = fig.add_subplot()
    ax.set_aspect("equal")
    ax.axis("off")
    segments = _draw_links(ax, xy, unit, groups, colour)
    _draw_nodes(ax, machine, xy, unit, node_pt)
    if 1 < len(bandwidths) <= len(_COLOURS):
        ax.legend(handles=[Line2D([], [], color=colour[bw], label=bandwidth_text(bw)) for bw in bandwidths],
                  loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7, frameon=False)
    heading = title if title is not None else machine.name
    if title is None and machine.description:
        heading += "\n" + "\n".join(textwrap.wrap(machine.description, 90))
    ax.set_title(heading, fontsize=8)
    extent = np.vstack([xy, *segments])
    pad = 0.6 * unit
    ax.set_xlim(extent[:, 0].min() - pad, extent[:, 0].max() + pad)
    ax.set_ylim(extent[:, 1].min() - pad, extent[:, 1].max() + pad)
    return fig


def _cables(machine: Machine) -> dict[tuple[int, int, float], list[int]]:
    """Links by unordered node pair and bandwidth: (u, v, bw) -> [links u->v, links v->u]."""
    groups: dict[tuple[int, int, float], list[int]] = {}
    for u, v, bw in zip(machine.link_src.tolist(), machine.link_dst.tolist(),
                        machine.link_bandwidth.tolist()):
        groups.setdefault((min(u, v), max(u, v), bw), [0, 0])[0 if u < v else 1] += 1
    return groups


def _draw_links(ax, xy: np.ndarray, unit: float, groups: dict[tuple[int, int, float], list[int]],
                colour: dict[float, str]) -> list[np.ndarray]:
    """One line per balanced cable, one bent arrow per direction otherwise; the curves drawn."""
    lengths = [float(np.hypot(*(xy[v] - xy[u]))) for u, v, _ in groups]
    blocked = _blocked(xy, [(u, v) for u, v, _ in groups], 0.3 * unit)
    segments, widths, colours, marks, heads = [], [], [], [], []
    for (u, v, bw), length, detour in zip(groups, lengths, blocked):
        forward, backward = groups[(u, v, bw)]
        bend = 0.4 * unit if detour else 0.0
        if forward == backward:
            ways = [(u, v, forward, bend)]
        else:  # one-way or unbalanced: each direction bent to its own left
            ways = [(a, b, k, bend + 0.08 * length)
                    for a, b, k in ((u, v, forward), (v, u, backward)) if k]
        for a, b, count, bend in ways:
            curve = _curve(xy[a], xy[b], bend)
            segments.append(curve)
            widths.append(1.0 + 1.2 * (count - 1))
            colours.append(colour[bw])
            middle = curve[len(curve) // 2]
            if count > 1:
                marks.append((middle, f"×{count}"))
            if forward != backward:
                heads.append((curve[len(curve) // 2 + 1], middle, colour[bw]))
    ax.add_collection(LineCollection(segments, linewidths=widths, colors=colours, zorder=1))
    if len(groups) <= _MAX_ANNOTATED_EDGES:
        for (x, y), text in marks:
            ax.text(x, y, text, fontsize=6, ha="center", va="center", zorder=2,
                    bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.8})
        for tip, tail, c in heads:
            ax.annotate("", xy=tip, xytext=tail, zorder=2,
                        arrowprops={"arrowstyle": "-|>", "color": c, "lw": 1, "mutation_scale": 9})
    return segments


def _draw_nodes(ax, machine: Machine, xy: np.ndarray, unit: float, node_pt: float) -> None:
    """NPUs as circles, switches as squares, labels where there are few enough to read."""
    n = machine.num_npus
    ax.scatter(xy[:n, 0], xy[:n, 1], s=node_pt**2, marker="o", c="#f2f2f2", edgecolors="#222222",
               linewidths=1, zorder=3)
    if machine.switches:
        ax.scatter(xy[n:, 0], xy[n:, 1], s=(1.3 * node_pt) ** 2, marker="s", c="#ffe9a8",
                   edgecolors="#222222", linewidths=1, zorder=3)
    if machine.num_nodes > _MAX_LABELLED_NODES:
        return
    for v in range(machine.num_nodes):
        label = machine.label(v)
        size = min(8.0, 1.7 * node_pt / max(3, len(label)))
        if v >= n:  # switch names are long: write them beside the square
            ax.text(xy[v, 0], xy[v, 1] - 0.45 * unit, label, fontsize=min(7.0, node_pt / 3),
                    ha="center", va="top", zorder=4)
        elif size >= 3:
            ax.text(xy[v, 0], xy[v, 1], label, fontsize=size, ha="center", va="center", zorder=4)
