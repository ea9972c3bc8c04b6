"""Analytic lower bounds: times no valid schedule can beat, each with the witness that proves it.

``lower_bounds`` lists them (latency, ingress, egress, cut, broadcast-maxflow, capacity, one-port,
allreduce and the AllReduce volume, transfer and cut forms), each with the assumptions it needs
(``not_applied`` says which a machine rules out), ``best_lower_bound`` takes the largest, ``worst_cut`` is ForestColl's exact
AllGather bottleneck cut. ``flow`` holds the exact integer max-flow helpers.

The names below are loaded on first use (PEP 562): importing a light submodule such as
``optcoll.bounds.demand`` must not pull in scipy's graph routines through the others, which
every step-model command would pay for at start-up.
"""
from importlib import import_module

_HOMES = {"not_applied": "allreduce", "best_lower_bound": "api", "lower_bounds": "api", "Bound": "bound",
          "CutResult": "bound", "evaluate_cut": "cuts", "max_ratio_cut": "cuts", "worst_cut": "cuts"}

__all__ = sorted(_HOMES)


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{_HOMES[name]}"), name)
