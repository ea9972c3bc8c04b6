"""Analytic lower bounds: times no valid schedule can beat, each with the witness that proves it.

``lower_bounds`` lists them (latency, ingress, egress, cut, broadcast-maxflow, capacity, one-port,
allreduce and the AllReduce volume, transfer and cut forms), each with the assumptions it needs
(``not_applied`` says which a machine rules out), ``best_lower_bound`` takes the largest, ``worst_cut`` is ForestColl's exact
AllGather bottleneck cut. ``flow`` holds the exact integer max-flow helpers.
"""
from optcoll.bounds.allreduce import not_applied
from optcoll.bounds.api import best_lower_bound, lower_bounds
from optcoll.bounds.bound import Bound, CutResult
from optcoll.bounds.cuts import evaluate_cut, max_ratio_cut, worst_cut

__all__ = ["Bound", "CutResult", "best_lower_bound", "evaluate_cut", "lower_bounds",
           "max_ratio_cut", "not_applied", "worst_cut"]
