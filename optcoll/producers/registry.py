"""Every heuristic and classical synthesizer by name: what ``optcoll synth --algo NAME`` runs.

Most produce spread schedules (``optcoll.producers.spread``) and get every collective from
``optcoll.producers.compose``: ReduceScatter and Reduce by time reversal on the reversed
machine, AllReduce as a reduction to each chunk's home followed by a copy from it. The
algorithms whose AllReduce is not of that form (NCCL's tree, NVLS, NVLS-tree, CollNet) emit
their reductions directly as flows (``baselines.flows``). Only the two greedy synthesizers use
the seed; the classical ones are deterministic. ``NCCL`` lists NCCL's own algorithms, which
reports compare with the optimum as a group.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from optcoll.collectives.builtins import KINDS
from optcoll.collectives.collective import Collective
from optcoll.errors import InputError
from optcoll.instances.instance import Instance
from optcoll.producers import compose
from optcoll.producers.base import NotApplicable, Synthesizer
from optcoll.producers.baselines import algorithms
from optcoll.producers.baselines.bine import bine
from optcoll.producers.baselines.flows import Exchange, Flow, schedule_flows
from optcoll.producers.baselines.inswitch import KINDS as INSWITCH_KINDS, inswitch
from optcoll.producers.baselines.listsched import list_schedule
from optcoll.producers.baselines.nccl.innetwork import collnet, nvls, nvls_tree
from optcoll.producers.baselines.nccl.pat import pat
from optcoll.producers.baselines.nccl.ring import nccl_ring
from optcoll.producers.baselines.nccl.tree import nccl_tree
from optcoll.producers.baselines.orbittrees import orbit_trees
from optcoll.producers.baselines.railexchange import rail_exchange
from optcoll.producers.baselines.swing import swing
from optcoll.producers.baselines.trivance import trivance
from optcoll.producers.flow import produce as flow
from optcoll.producers.greedy.engine import spread_greedy
from optcoll.producers.greedy.plus import spread_plus
from optcoll.producers.spread import SpreadProblem
from optcoll.schedules.schedule import Schedule
from optcoll.results.record import verified

#: Everything with chunks of one size (AlltoAllv's chunks carry their own sizes).
ALL = (frozenset(KINDS) - {"alltoallv"}) | {"custom"}


@dataclass(frozen=True)
class _Spec:
    name: str
    description: str
    #: None for a synthesizer that emits flows (``flows``) instead of spread schedules.
    spreader: compose.Spreader | None
    kinds: frozenset[str]
    homes: compose.Homes | None = None
    randomized: bool = False
    #: AllReduce's AllGather phase is its ReduceScatter mirrored when the network allows it
    #: (``compose`` module docstring): TACOS's own AllReduce, and half the greedy's work.
    mirror: bool = False
    #: Emits every collective it implements directly as flows.
    flows: Callable[[Instance], list[Flow | Exchange]] | None = None


def _baseline(algorithm: Callable[[SpreadProblem], algorithms.Messages]) -> compose.Spreader:
    def spread(problem: SpreadProblem, rng: np.random.Generator) -> Schedule:
        messages = algorithm(problem)
        schedule = list_schedule(problem, messages.chunk, messages.src, messages.dst, messages.stage)
        return schedule.with_meta(**messages.notes)
    return spread


def _at_first_rank(collective: Collective) -> np.ndarray:
    """Tree AllReduce: Reduce to the first rank, then Broadcast from it."""
    if collective.kind != "allreduce":
        return compose.default_homes(collective)
    return np.full(collective.num_chunks, collective.ranks[0], dtype=np.int64)


def _at_tree_roots(collective: Collective) -> np.ndarray:
    """Double-binary-tree AllReduce: chunk c reduced at the root of tree c mod 2."""
    if collective.kind != "allreduce":
        return compose.default_homes(collective)
    return algorithms.double_tree_homes(collective.ranks, collective.num_chunks)


def _flows(name: str, description: str, flows: Callable[[Instance], list[Flow | Exchange]],
           kinds: frozenset[str]) -> _Spec:
    return _Spec(name, description, None, kinds, flows=flows)


_GATHERS = frozenset({"allgather", "reducescatter", "allreduce"})
_TREES = frozenset({"broadcast", "reduce", "gather", "scatter"})
_SPECS = [
    _Spec("tacos", "TACOS greedy link-chunk matching (MICRO'24), seeded; any machine and collective",
          spread_greedy, ALL, randomized=True, mirror=True),
    _Spec("tacos+", "our improved greedy: most-constrained link, fewest-routes and rarest chunk "
          "first; relays by load and rotation; one-destination chunks (AlltoAll) on routes planned "
          "against each other's load; any machine and collective", spread_plus, ALL, randomized=True, mirror=True),
    _Spec("ring", "unidirectional ring, pipelined (a physical Hamiltonian cycle when one is found)",
          _baseline(algorithms.ring), ALL),
    _Spec("ring-bidir", "bidirectional ring: each destination the shorter way round",
          _baseline(algorithms.ring_bidir), ALL),
    _Spec("multiring", "several edge-disjoint rings used both ways, chunk c on ring c mod R "
          "(NCCL channels)", _baseline(algorithms.multiring), ALL),
    _Spec("direct", "every chunk straight to each destination (shortest paths when not adjacent)",
          _baseline(algorithms.direct), ALL),
    _Spec("recursive-doubling", "recursive doubling AllGather, recursive halving ReduceScatter, "
          "Rabenseifner AllReduce (power-of-two ranks)", _baseline(algorithms.recursive_doubling),
          _GATHERS),
    _Spec("bruck", "Bruck AllGather (any N, ceil(log2 N) stages) and AlltoAll",
          _baseline(algorithms.bruck), _GATHERS | {"alltoall"}),
    _Spec("double-binary-tree", "NCCL double binary tree: Broadcast, Reduce, AllReduce (reduce up "
          "and broadcast down two complementary trees)", _baseline(algorithms.double_binary_tree),
          frozenset({"broadcast", "reduce", "allreduce"}), homes=_at_tree_roots),
    _Spec("binomial-tree", "binomial tree Broadcast, Reduce, Gather, Scatter; AllReduce as Reduce "
          "+ Broadcast", _baseline(algorithms.binomial_tree),
          frozenset({"broadcast", "reduce", "gather", "scatter", "allreduce"}), homes=_at_first_rank),
    _Spec("pairwise", "pairwise exchange AlltoAll (N-1 stages)", _baseline(algorithms.pairwise),
          frozenset({"alltoall"})),
    _Spec("hierarchical", "ASTRA-sim multi-dimensional: ReduceScatter up the dimensions, "
          "AllGather back down, a ring per dimension (dimensions found from the links)",
          _baseline(algorithms.hierarchical), _GATHERS),
    _Spec("nccl-ring", "NCCL ring: its channels (rail-rotated rings across nodes, packed directed "
          "rings in an NVLink mesh), chunk c on channel c mod nchannels",
          _baseline(nccl_ring), _GATHERS | {"broadcast", "reduce"}),
    _flows("nccl-tree", "NCCL tree AllReduce: double binary tree across nodes, chains inside "
           "(BALANCED_TREE), reduce up and broadcast down, pipelined", nccl_tree,
           frozenset({"allreduce"})),
    _Spec("nccl-pat", "NCCL PAT (>= 2.23): AllGather/ReduceScatter along distance-halving binomial "
          "trees, ceil(log2 N) hops per block", _baseline(pat),
          frozenset({"allgather", "reducescatter"})),
    _flows("nccl-nvls", "NCCL NVLS in one node: reduce in and multicast from an NVSwitch that "
           "reduces and multicasts (multimem ld_reduce + st)", nvls, _GATHERS),
    _flows("nccl-nvls-tree", "NCCL NVLS-tree: NVLS inside every node, double binary tree of the "
           "heads across nodes", nvls_tree, frozenset({"allreduce"})),
    _flows("nccl-collnet", "NCCL CollNet: heads reduce their node, a reducing network switch "
           "(SHARP-like) reduces across nodes and returns the sum", collnet,
           frozenset({"allreduce"})),
    _flows("inswitch", "pipelined in-switch AllReduce: every member reduces chunk k into a switch that "
           "reduces and multicasts, which multicasts the sum straight back (also its ReduceScatter "
           "and AllGather halves)", inswitch, INSWITCH_KINDS),
    _flows("rail-exchange", "direct AllReduce across nodes: reduce into each node's rail GPU (through "
           "a reducing NVSwitch), exchange node partials (2 nodes; staggered where a staircase helps) or "
           "ReduceScatter + AllGather them per rail (or, on 2^m nodes, a halving tree whose roots exchange), "
           "spread inside the node (multicast)", rail_exchange,
           frozenset({"allreduce"})),
    _Spec("swing", "Swing (NSDI'24): swinging peers x +- rho(s), 2D ports on a D-dimensional torus "
          "(even sizes), bandwidth-optimal ReduceScatter + AllGather", _baseline(swing), _GATHERS),
    _Spec("trivance", "Trivance (2026): both ring directions, distances tripling, ceil(log3 N) "
          "steps per ReduceScatter/AllGather", _baseline(trivance), _GATHERS),
    _Spec("bine", "Bine trees (SC'25): negabinary binomial trees (Broadcast, Reduce, Gather, "
          "Scatter; power-of-two N) and butterflies (AllGather, ReduceScatter, AllReduce; even N)",
          _baseline(bine), _GATHERS | _TREES),
]


def _runner(spec: _Spec) -> Callable[[Instance, int], Schedule]:
    def run(instance: Instance, seed: int) -> Schedule:
        kind = instance.collective.kind if instance.collective.kind in KINDS else "custom"
        if kind not in spec.kinds:
            raise NotApplicable(f"{spec.name} does not implement {kind}; it implements "
                                f"{', '.join(sorted(spec.kinds))}")
        if instance.model.kind != "timed":
            raise NotApplicable(f"{spec.name} produces timed schedules; the instance asks for the "
                                f"{instance.model.kind} model")
        if spec.flows is not None:
            return schedule_flows(instance, spec.flows(instance))
        assert spec.spreader is not None
        return compose.synthesize(instance, spec.spreader, seed, spec.homes, spec.mirror)
    return run


#: The LP-guided producer (``optcoll.producers.flow``): unicast collectives only, chunks of any size.
_FLOW = Synthesizer("mcf", "LP-guided: multi-commodity-flow routes, list-scheduled (copied by "
                    "symmetry where the network allows); unicast collectives (AlltoAll, AlltoAllv, "
                    "Scatter, Gather, point-to-point custom)", flow.flow_schedule)
#: Trees per representative chunk, every other chunk an image under the machine's symmetry group.
_ORBIT = Synthesizer("orbit-trees", "direct AllReduce on a machine whose symmetries act regularly on "
                     "the ranks and whose links take one time (tori, rings, hypercubes): per "
                     "representative chunk a reduce in-tree and a spread out-tree in steps, the other "
                     "chunks their images, one transfer per link orbit and step (CP-SAT, work-limited)",
                     lambda instance, seed: orbit_trees(instance))
SYNTHESIZERS: dict[str, Synthesizer] = {
    **{spec.name: Synthesizer(spec.name, spec.description, _runner(spec)) for spec in _SPECS},
    _FLOW.name: _FLOW, _ORBIT.name: _ORBIT}
#: The collectives each synthesizer implements ("custom" = user pre/postconditions).
IMPLEMENTS: dict[str, frozenset[str]] = {
    **{spec.name: spec.kinds for spec in _SPECS},
    _FLOW.name: flow.KINDS, _ORBIT.name: frozenset({"allreduce"})}
#: The synthesizers whose result depends on the seed (``best_of`` runs the others once).
RANDOMIZED = frozenset(spec.name for spec in _SPECS if spec.randomized)
#: NCCL's own algorithms (reports show the best of them next to the optimum).
NCCL = tuple(spec.name for spec in _SPECS if spec.name.startswith("nccl-"))


def get_synthesizer(name: str) -> Synthesizer:
    if name not in SYNTHESIZERS:
        raise InputError(f"unknown synthesizer {name!r}; known: {', '.join(SYNTHESIZERS)}",
                         field="algo")
    return SYNTHESIZERS[name]


def best_of(instance: Instance, synth: Synthesizer, runs: int = 1, seed0: int = 0,
            portfolio: bool = False) -> tuple[Schedule, list[float]]:
    """The best verified schedule over seeds seed0 .. seed0+runs-1, and every run's verified time
    (TACOS's own tests take the minimum over 20 runs). Deterministic synthesizers run once.

    ``portfolio``: every other synthesizer that implements the collective also runs (the seeded
    ones at seed0) and the earliest-finishing verified schedule of all is kept, so the result is
    never worse than any classical algorithm; ``times`` stay those of ``synth``'s own runs and
    the schedule's ``producer`` says who made it.
    """
    if runs < 1:
        raise InputError(f"runs must be at least 1, got {runs}", field="runs")
    seeds = range(seed0, seed0 + (runs if synth.name in RANDOMIZED else 1))
    best: tuple[float, Schedule] | None = None
    times = []
    for seed in seeds:
        schedule = synth(instance, seed)
        time = verified(instance, schedule, synth.name).time
        times.append(time)
        if best is None or time < best[0]:
            best = (time, schedule)
    assert best is not None
    if portfolio:
        others = [entry for entry in run_portfolio(instance, seed0, exclude=(synth.name,)) if entry.time < best[0]]
        if others:
            best = (others[0].time, others[0].schedule)
    return best[1].with_meta(runs=len(times), best_seed=best[1].meta.get("seed")), times


@dataclass(frozen=True)
class PortfolioEntry:
    """One producer's verified schedule in a portfolio."""

    name: str
    time: float  # verified seconds
    schedule: Schedule


def run_portfolio(instance: Instance, seed: int, names: Sequence[str] | None = None,
                  exclude: Sequence[str] = ()) -> list[PortfolioEntry]:
    """Every synthesizer of ``names`` (default: the registry, in its order) that implements the
    instance's collective and applies to its machine, run once at ``seed``, each schedule
    verified; fastest first (registry order on a tie). A schedule the verifier rejects raises:
    a producer's bug is never hidden by the portfolio's other members."""
    kind = instance.collective.kind if instance.collective.kind in KINDS else "custom"
    found = []
    for order, name in enumerate(SYNTHESIZERS if names is None else names):
        if name in exclude or kind not in IMPLEMENTS[name]:
            continue
        try:
            schedule = SYNTHESIZERS[name](instance, seed)
        except NotApplicable:
            continue
        time = verified(instance, schedule, name).time
        found.append((time, order, PortfolioEntry(name, time, schedule)))
    return [entry for _, _, entry in sorted(found, key=lambda item: item[:2])]
