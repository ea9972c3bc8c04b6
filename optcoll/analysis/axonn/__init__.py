"""AxoNN's 4D hybrid parallelism judged on the real network (issue 7, interop).

For a cluster and a transformer layer: every 4D grid (X, Y, Z tensor × D data) of the GPUs, its
process groups, the collectives the layer issues on them, and their time under AxoNN's ring
model, under optcoll's lower bounds, and for verified schedules with concurrent groups sharing
the network; configurations ranked under each (``axonn_report``; the CLI calls
``axonn_command``).
"""
from optcoll.analysis.axonn.cluster import Cluster, cluster_from_model
from optcoll.analysis.axonn.grid import AXONN_ORDER, DIMS, ParallelGrid, configurations, parse_shape
from optcoll.analysis.axonn.layer import Call, Linear, TransformerLayer, infeasible, layer_calls
from optcoll.analysis.axonn.network import (DEFAULT_PRODUCERS, Measured, NetworkEvaluator,
                                            union_collective)
from optcoll.analysis.axonn.ranking import (MODELS, CallResult, ConfigResult, Ranking, evaluate,
                                            rank_configurations)
from optcoll.analysis.axonn.report import axonn_command, axonn_report
from optcoll.analysis.axonn.ringmodel import RING_FACTOR, SHARING, group_bandwidths, ring_time

__all__ = ["Cluster", "cluster_from_model", "AXONN_ORDER", "DIMS", "ParallelGrid", "configurations",
           "parse_shape", "Call", "Linear", "TransformerLayer", "infeasible", "layer_calls",
           "DEFAULT_PRODUCERS", "Measured", "NetworkEvaluator", "union_collective", "MODELS",
           "CallResult", "ConfigResult", "Ranking", "evaluate", "rank_configurations",
           "axonn_command", "axonn_report", "RING_FACTOR", "SHARING", "group_bandwidths",
           "ring_time"]
