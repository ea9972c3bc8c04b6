"""Process-group collectives measured on the real network: optcoll's bounds and verified schedules.

Two views of one dimension's collective (every group of the dimension runs it at once):

- *isolated*: one group alone on the machine (a sub-communicator; the other GPUs, NVSwitches and
  NICs may relay for it). Groups equal up to renumbering nodes are alike on a multinode cluster
  (every node is built the same), so one representative per class is measured; the slowest
  class is reported, since the step waits for every group.
- *concurrent*: one combined collective whose chunks are the union of every group's chunks, so
  groups really share NICs and the spine. Its bound is the best of optcoll's bounds for the
  union (for AllReduce also for its ReduceScatter and AllGather parts, which every AllReduce
  schedule contains) and of the isolated bound (restricted to one group's chunks, a concurrent
  schedule is a valid schedule for that group). Its schedule is the best verified one among the
  given producers; a concurrent AllReduce is the best concurrent ReduceScatter followed by the
  best concurrent AllGather, verified as one AllReduce.

Times are in optcoll's timed model (``TimeModel``, TACOS-compatible by default) with C chunks
per rank; bounds are for that model.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from optcoll.analysis.axonn.cluster import Cluster
from optcoll.analysis.axonn.layer import AG, AR, RS
from optcoll.bounds import best_lower_bound
from optcoll.bounds.bound import Bound
from optcoll.collectives.builtins import make_collective, make_custom
from optcoll.collectives.collective import Collective
from optcoll.errors import InputError
from optcoll.instances.instance import Instance, TimeModel
from optcoll.machines.machine import Machine
from optcoll.producers.base import NotApplicable
from optcoll.producers.compose import makespan
from optcoll.producers.registry import best_of, get_synthesizer
from optcoll.schedules.schedule import Schedule
from optcoll.verify import require_valid

Groups = tuple[tuple[int, ...], ...]
DEFAULT_PRODUCERS = ("tacos", "tacos+", "multiring", "direct")


def union_collective(kind: str, groups: Sequence[Sequence[int]], size_bytes: float,
                     chunks_per_rank: int = 1) -> Collective:
    """Every group's ``kind`` collective of M = ``size_bytes`` at once, as one custom collective.

    Chunk (g·p + i)·C + j is piece j of member i of group g, as ``make_collective`` numbers one
    group's chunks; the combining kinds reduce each chunk over its own group only.
    """
    if kind not in (AG, RS, AR):
        raise InputError(f"concurrent groups run {AG}, {RS} or {AR}, not {kind!r}", field="kind")
    sizes = {len(g) for g in groups}
    if len(sizes) != 1:
        raise InputError(f"concurrent groups must have one size, got {sorted(sizes)}", field="groups")
    p, c = sizes.pop(), int(chunks_per_rank)
    pre: list[list[int]] = []
    post: list[list[int]] = []
    for group in groups:
        members = list(group)
        for member in members:
            mine = [[member]] * c
            pre += mine if kind == AG else [members] * c
            post += mine if kind == RS else [members] * c
    ranks = sorted(r for g in groups for r in g)
    return make_custom(ranks, pre, post, size_bytes / (p * c), combining=kind != AG,
                       name=f"concurrent-{kind}")


@dataclass(frozen=True)
class Measured:
    """One dimension's collective on the real network (seconds; None: schedules not computed)."""

    isolated_bound: float
    concurrent_bound: float
    bound_name: str
    isolated_time: float | None = None
    concurrent_time: float | None = None
    producer: str | None = None


@dataclass
class NetworkEvaluator:
    """Measures collectives of process groups on ``cluster.machine``, remembering every answer
    (configurations share many groups and sizes)."""

    cluster: Cluster
    chunks_per_rank: int = 2
    producers: tuple[str, ...] = DEFAULT_PRODUCERS
    schedules: bool = True
    seed: int = 0
    model: TimeModel = TimeModel()
    _cache: dict[tuple[str, Groups, float], Measured] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.chunks_per_rank, bool) or not isinstance(self.chunks_per_rank, int) \
                or self.chunks_per_rank < 1:
            raise InputError(f"must be a positive integer, got {self.chunks_per_rank!r}",
                             field="chunks_per_rank")
        for name in self.producers:
            get_synthesizer(name)  # unknown names fail here, not halfway through a ranking
        if self.schedules and not self.producers:
            raise InputError("schedules need at least one producer", field="producers")

    @property
    def machine(self) -> Machine:
        return self.cluster.machine

    def _instance(self, collective: Collective) -> Instance:
        return Instance(collective.kind, self.machine, collective, self.model)

    def _bound(self, collective: Collective) -> Bound:
        return best_lower_bound(self.machine, collective, self.model)

    def _best(self, collective: Collective) -> tuple[Schedule, float, str]:
        """The fastest verified schedule among the producers that apply."""
        instance = self._instance(collective)
        best: tuple[Schedule, float, str] | None = None
        for name in self.producers:
            try:
                schedule, times = best_of(instance, get_synthesizer(name), 1, self.seed)
            except NotApplicable:
                continue
            if best is None or min(times) < best[1]:
                best = (schedule, min(times), name)
        if best is None:
            raise InputError(f"none of {', '.join(self.producers)} applies to {collective.kind}",
                             field="producers")
        return best

    def _representatives(self, groups: Groups) -> list[tuple[int, ...]]:
        """One group per class of groups equal up to renumbering nodes."""
        gpn = self.cluster.gpus_per_node
        seen: dict[tuple[tuple[int, int], ...], tuple[int, ...]] = {}
        for group in groups:
            relabel: dict[int, int] = {}
            key = tuple((relabel.setdefault(r // gpn, len(relabel)), r % gpn) for r in group)
            seen.setdefault(key, group)
        return list(seen.values())

    def measure(self, kind: str, groups: Sequence[Sequence[int]], size_bytes: float) -> Measured:
        key = (kind, tuple(tuple(int(r) for r in g) for g in groups), float(size_bytes))
        if key not in self._cache:
            self._cache[key] = self._measure(*key)
        return self._cache[key]

    def _measure(self, kind: str, groups: Groups, size_bytes: float) -> Measured:
        c = self.chunks_per_rank
        alone = [make_collective(kind, g, size_bytes, c) for g in self._representatives(groups)]
        isolated = max((self._bound(coll) for coll in alone), key=lambda b: b.value)
        union = union_collective(kind, groups, size_bytes, c)
        parts = [union_collective(k, groups, size_bytes, c) for k in (RS, AG)] if kind == AR else []
        candidates = [(f"concurrent {b.name}", b) for b in map(self._bound, [union, *parts])]
        candidates.append((f"isolated {isolated.name}", isolated))
        bound_name, bound = max(candidates, key=lambda item: item[1].value)
        if not self.schedules:
            return Measured(isolated.value, bound.value, bound_name)
        isolated_time = max(self._best(coll)[1] for coll in alone)
        if kind == AR:
            (rs, _, rs_by), (ag, _, ag_by) = (self._best(part) for part in parts)
            joined = Schedule.concat(rs, ag, makespan(rs, self._instance(parts[0])))
            time = require_valid(self.machine, union, joined, self.model).time
            producer = rs_by if rs_by == ag_by else f"{rs_by} + {ag_by}"
        else:
            _, time, producer = self._best(union)
        return Measured(isolated.value, bound.value, bound_name, isolated_time, time, producer)
