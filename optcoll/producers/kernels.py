"""optcoll's compiled kernels (numba), compiled ahead of any timed run: ``optcoll warm``.

Why: numba compiles a kernel the first time a process calls it and keeps the machine code in its
on-disk cache (``cache=True``: ``__pycache__`` beside the source, or ``NUMBA_CACHE_DIR``) until
the source changes. That first compile takes 20-40 s of CPU for the list/flow schedulers and the
verifier's engine together, and lands inside whatever job first needs them: on a 512-GPU
AllReduce it made the first start producer take 29 s instead of 2 s. A time limit counts it like
any other work (the job's clock is wall time from the command's start), so a cold cache leaves
less time to the phases after it; ``warm`` pays it once, outside any limit, after an install or
an upgrade (``bench limits`` runs it before it measures).

Each kernel is compiled by running its own path on a small problem, through the same public
calls a solve makes with the compiled path forced, so every kernel a solve can reach is compiled
(numba compiles a function when it is first called, not when its module loads).
"""
from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from optcoll.collectives.builtins import make_collective
from optcoll.instances.instance import Instance
from optcoll.machines import generators as G

#: Small enough to run in a fraction of a second, large enough that the library takes its compiled
#: paths once numba is loaded (``listsched.LOADED_FROM`` messages or flows).
_BANDWIDTH, _LATENCY = 50 * 2.0**30, 0.5e-6


def _instance(machine, kind: str) -> Instance:
    return Instance(f"warm-{kind}", machine, make_collective(kind, range(machine.num_npus), 2.0**20, 1))


def _verifier() -> None:
    """The verifier's compiled engine (forced), on a copying and on a combining collective."""
    from optcoll.producers.registry import get_synthesizer
    from optcoll.verify.verifier import verify_with

    for kind in ("allgather", "allreduce"):
        inst = _instance(G.torus([4, 4], _BANDWIDTH, _LATENCY), kind)
        schedule = get_synthesizer("ring")(inst, 0)
        assert verify_with(inst.machine, inst.collective, schedule, inst.model, engine="compiled").valid


def _schedulers() -> None:
    """The list scheduler (a ring's 4,032 messages on an 8x8 torus) and the flow scheduler
    (rail-exchange's exchanges on four DGX H100), compiled once numba is loaded."""
    from optcoll.machines.catalog import load_machine
    from optcoll.producers.registry import get_synthesizer

    get_synthesizer("ring")(_instance(G.torus([8, 8], _BANDWIDTH, _LATENCY), "allgather"), 0)
    get_synthesizer("rail-exchange")(_instance(load_machine("dgxh100-rail-4x8"), "allreduce"), 0)


def _greedies() -> None:
    """The greedy's kernel (tacos and tacos+, forced) and tacos+'s router (one destination per
    chunk: an AlltoAll, the kernel not forced)."""
    from optcoll.producers.greedy.engine import spread_greedy
    from optcoll.producers.greedy.plus import spread_plus
    from optcoll.producers.spread import of_collective

    machine = G.torus([4, 4], _BANDWIDTH, _LATENCY)
    problem = of_collective(_instance(machine, "allgather"))
    spread_greedy(problem, np.random.default_rng(0), compiled=True)
    spread_plus(problem, np.random.default_rng(0), compiled=True)
    spread_plus(of_collective(_instance(machine, "alltoall")), np.random.default_rng(0), compiled=False)


#: What ``warm`` compiles, each by running it.
KERNELS: tuple[tuple[str, Callable[[], None]], ...] = (
    ("verifier's compiled engine", _verifier),
    ("list and flow schedulers", _schedulers),
    ("greedy kernel and tacos+ router", _greedies),
)


def warm(echo: Callable[[str], None] = lambda line: None) -> list[tuple[str, float]]:
    """Compiles (or loads from numba's cache) every kernel; (what, seconds) for each."""
    spent = []
    for name, run in KERNELS:
        began = time.perf_counter()
        run()
        spent.append((name, time.perf_counter() - began))
        echo(f"{name}: {spent[-1][1]:.1f} s")
    return spent
