"""AxoNN's analytical model: ring-algorithm bandwidth terms per process group.

A collective over a group of p GPUs moving M bytes (optcoll's M) costs
AllGather / ReduceScatter (p−1)/p · M/β and AllReduce 2(p−1)/p · M/β, no latency term
(the AxoNN paper, arXiv 2305.13525, and its configuration model in Megatron-AxoNN
``examples/comm_model.py``). β is the bandwidth the group sees where its members sit:

- all members on one node: the GPU's NVLink bandwidth;
- otherwise the node's injection bandwidth (its NICs) divided among the groups that cross the
  boundary of that node at the same time, by the sharing rule:

  ``"axonn"``: divided evenly among the concurrent groups of this dimension with members on
  the node that cross it (the worst node of the group counts). For AxoNN's placement this is
  Megatron-AxoNN's placement-aware model, node bandwidth / min(GPUs per node, stride);
  ``"none"``: no sharing; every crossing group sees the whole node's injection bandwidth.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from optcoll.analysis.axonn.cluster import Cluster
from optcoll.analysis.axonn.layer import AG, AR, RS
from optcoll.errors import InputError

#: Collective kind → ring bandwidth factor: time = factor · (p−1)/p · M/β.
RING_FACTOR = {AG: 1.0, RS: 1.0, AR: 2.0}


def ring_time(kind: str, p: int, size_bytes: float, bandwidth: float) -> float:
    """The ring model's time for one collective over p GPUs (0 for a group of one)."""
    if kind not in RING_FACTOR:
        raise InputError(f"the ring model knows {', '.join(RING_FACTOR)}, not {kind!r}", field="kind")
    return RING_FACTOR[kind] * (p - 1) / p * size_bytes / bandwidth


def _crossing_share(nodes: np.ndarray, crossing: np.ndarray) -> np.ndarray:
    """Per group: the most crossing groups met on any one of its nodes (1 for local groups)."""
    worst = np.ones(nodes.shape[0], dtype=np.int64)
    if not crossing.any():
        return worst
    owner = np.repeat(np.flatnonzero(crossing), nodes.shape[1])
    pairs = np.unique(np.stack([owner, nodes[crossing].ravel()], axis=1), axis=0)
    per_node = np.bincount(pairs[:, 1])
    np.maximum.at(worst, pairs[:, 0], per_node[pairs[:, 1]])
    return worst


SHARING: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "axonn": _crossing_share,
    "none": lambda nodes, crossing: np.ones(nodes.shape[0], dtype=np.int64),
}


def group_bandwidths(cluster: Cluster, groups: Sequence[Sequence[int]], sharing: str = "axonn"
                     ) -> np.ndarray:
    """β (B/s) per group when all ``groups`` (one dimension's, running at once) communicate."""
    if sharing not in SHARING:
        raise InputError(f"unknown sharing rule {sharing!r}; known: {', '.join(SHARING)}",
                         field="sharing")
    nodes = np.asarray(groups, dtype=np.int64) // cluster.gpus_per_node
    crossing = nodes.min(axis=1) != nodes.max(axis=1)
    share = SHARING[sharing](nodes, crossing)
    return np.where(crossing, cluster.node_injection_bandwidth / share, cluster.intra_bandwidth)
