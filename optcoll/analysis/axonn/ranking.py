"""Every 4D configuration of a GPU count, costed per collective and ranked under each model.

A configuration's communication time per layer is the sum over the layer's collectives of
count × time, as AxoNN's model adds them (overlap with compute and between dimensions is left
out, as there). Per collective:

- ``ring``: AxoNN's ring model (slowest group; ``ringmodel``), with nominal bandwidths or a
  measured table (``measured``);
- ``bound`` / ``bound-isolated``: optcoll's best lower bound with every group of the dimension
  running at once / with one group alone (``network``);
- ``schedule`` / ``schedule-isolated``: the best verified schedule, the same two ways.
"""
from __future__ import annotations

from collections.abc import Callable

from dataclasses import dataclass

from optcoll.analysis.axonn.cluster import Cluster
from optcoll.analysis.axonn.grid import AXONN_ORDER, ParallelGrid, configurations
from optcoll.analysis.axonn.layer import Call, TransformerLayer, infeasible, layer_calls
from optcoll.analysis.axonn.measured import BandwidthTable
from optcoll.analysis.axonn.network import Measured, NetworkEvaluator
from optcoll.analysis.axonn.ringmodel import group_bandwidths, ring_time
from optcoll.errors import InputError

MODELS = ("ring", "bound", "schedule", "bound-isolated", "schedule-isolated")
_FIELD = {"bound": "concurrent_bound", "schedule": "concurrent_time",
          "bound-isolated": "isolated_bound", "schedule-isolated": "isolated_time"}


@dataclass(frozen=True)
class CallResult:
    """One collective of the layer: its groups, the ring model's β and time, the network's view."""

    call: Call
    group_size: int
    groups: int
    bandwidth: float
    ring: float
    measured: Measured | None

    def time(self, model: str) -> float | None:
        """One execution's time under ``model`` (None when that model was not computed)."""
        if model == "ring":
            return self.ring
        if self.measured is None:
            return None
        return getattr(self.measured, _FIELD[model])


@dataclass(frozen=True)
class ConfigResult:
    grid: ParallelGrid
    calls: tuple[CallResult, ...]

    def total(self, model: str) -> float | None:
        """Seconds of communication per layer and training step under ``model``."""
        if model not in MODELS:
            raise InputError(f"unknown model {model!r}; known: {', '.join(MODELS)}", field="model")
        times = [(r.call.count, r.time(model)) for r in self.calls]
        if any(t is None for _, t in times):
            return None
        return sum(count * t for count, t in times)  # type: ignore[operator]


def unmeasured(table: BandwidthTable | None, layer: TransformerLayer, grid: ParallelGrid) -> str | None:
    """Why ``table`` cannot cost ``grid`` (a group it has no entry for), or None."""
    for call in layer_calls(layer, grid) if table is not None else ():
        p, level = grid.size(call.dim), grid.stride(call.dim)
        if table.bandwidth(level, p) is None:
            return f"{table.name} has no bandwidth for {call.dim} groups of {p} at level {level}"
    return None


def evaluate(cluster: Cluster, layer: TransformerLayer, grid: ParallelGrid, *, sharing: str = "axonn",
             evaluator: NetworkEvaluator | None = None, table: BandwidthTable | None = None
             ) -> ConfigResult:
    """Costs every collective of ``layer`` on ``grid`` (``evaluator`` None: ring model only);
    ``table``: measured bandwidths by group size and level instead of the nominal ones."""
    if grid.gpus != cluster.gpus:
        raise InputError(f"configuration {grid.label()} uses {grid.gpus} GPUs but the cluster has "
                         f"{cluster.gpus}", field="shape")
    missing = unmeasured(table, layer, grid)
    if missing is not None:
        raise InputError(missing, field="--bandwidths")
    results = []
    for call in layer_calls(layer, grid):
        groups = grid.groups(call.dim)
        p = len(groups[0])
        beta = (float(group_bandwidths(cluster, groups, sharing).min()) if table is None
                else table.bandwidth(grid.stride(call.dim), p))
        measured = evaluator.measure(call.kind, groups, call.size_bytes) if evaluator else None
        results.append(CallResult(call, p, len(groups), beta, ring_time(call.kind, p, call.size_bytes, beta),
                                  measured))
    return ConfigResult(grid, tuple(results))


@dataclass(frozen=True)
class Ranking:
    """Feasible configurations (lexicographic order) and the ones AxoNN could not run, with why."""

    results: tuple[ConfigResult, ...]
    skipped: tuple[tuple[ParallelGrid, str], ...]

    def ranked(self, model: str) -> list[ConfigResult]:
        """Fastest first; ties broken by (X, Y, Z, D) so the order is deterministic."""
        scored = [(r.total(model), r.grid.shape, r) for r in self.results]
        if any(total is None for total, _, _ in scored):
            raise InputError(f"the {model} model was not computed for this ranking", field="model")
        return [r for _, _, r in sorted(scored, key=lambda item: (item[0], item[1]))]

    def positions(self, model: str) -> dict[tuple[int, int, int, int], int]:
        """Configuration shape → its rank (1 = fastest) under ``model``."""
        return {r.grid.shape: k for k, r in enumerate(self.ranked(model), start=1)}

    def models(self) -> list[str]:
        """The models every configuration has a total for."""
        return [m for m in MODELS if all(r.total(m) is not None for r in self.results)]


def rank_configurations(cluster: Cluster, layer: TransformerLayer, *, sharing: str = "axonn",
                        evaluator: NetworkEvaluator | None = None, min_tensor_parallel: int = 1,
                        order: str = AXONN_ORDER, table: BandwidthTable | None = None,
                        progress: Callable[[int, int, str], None] | None = None) -> Ranking:
    """Every 4D grid of the cluster's GPUs with X·Y·Z ≥ ``min_tensor_parallel`` (AxoNN's search
    skips grids whose model shard would not fit in memory), costed by ``evaluate``; ``progress``
    gets (grids done, grids in all, the grid) after each."""
    results, skipped = [], []
    grids = list(configurations(cluster.gpus, order))
    for done, grid in enumerate(grids):
        if progress is not None:
            progress(done, len(grids), grid.label())
        if grid.x * grid.y * grid.z < min_tensor_parallel:
            continue
        reason = infeasible(layer, grid) or unmeasured(table, layer, grid)
        if reason is not None:
            skipped.append((grid, reason))
            continue
        results.append(evaluate(cluster, layer, grid, sharing=sharing, evaluator=evaluator, table=table))
    if progress is not None:
        progress(len(grids), len(grids), "")
    if not results:
        raise InputError(f"no 4D configuration of {cluster.gpus} GPUs can run this layer",
                         field="gpus")
    return Ranking(tuple(results), tuple(skipped))
