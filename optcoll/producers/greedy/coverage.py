"""Which compiled path (numba) covers a spread problem, and whether it pays, decided without
loading numba.

The compiled kernel costs about 0.5 s of CPU in each new process before it runs (numba's import,
0.23 s, and reading its cached machine code), more than the interpreted engine needs for a small
problem at about 5 µs per delivery. Measured here, cold, tacos on torus AllGathers (CPU s,
interpreted against compiled): 8×8 (4,032 deliveries) 0.02 against 0.24 with numba already
loaded; 12×12 (20,592) 0.11 against 0.52; 16×16 (65,280) 0.36 against 0.53; 20×20 (159,600)
0.88 against 0.65. The kernel gives the very same schedule (tests/producers/test_greedy_kernel.py),
so the choice changes speed only: it is made by the number of deliveries, at
``KERNEL_MIN_DELIVERIES``, about where the two cost the same.
"""
from __future__ import annotations

import numpy as np

from optcoll.producers.spread import COPY, SpreadProblem

#: Deliveries (chunk, destination pairs) from which the compiled kernel is used (module
#: docstring; figures in reports/bench-exact.md, "Greedy kernel threshold").
KERNEL_MIN_DELIVERIES = 100_000


def kernel_covers(problem: SpreadProblem) -> bool:
    """Whether the greedy kernel covers the problem: every node a copying destination, no port
    limits."""
    return not (problem.has_relays or problem.send_ports or problem.recv_ports
                or np.any(problem.mode != COPY))


def routes_cover(problem: SpreadProblem) -> bool:
    """Whether tacos+'s compiled router covers the problem: one destination and one holder per
    chunk, no port limits."""
    return (not problem.send_ports and not problem.recv_ports and problem.num_chunks > 0
            and bool(np.all(problem.post.counts() == 1)) and bool(np.all(problem.pre.counts() == 1)))


def kernel_pays(problem: SpreadProblem, compiled: bool | None) -> bool:
    """Whether to run the kernel: ``compiled`` True forces it where it covers the problem, False
    never, None (the default) where it covers a problem of at least ``KERNEL_MIN_DELIVERIES``."""
    if compiled is False or not kernel_covers(problem):
        return False
    if compiled is True:
        return True
    if problem.needs[0].size < KERNEL_MIN_DELIVERIES:
        return False
    from optcoll.instances.kernels import may_run
    from optcoll.producers.greedy import kernel  # numba: loaded only here

    return may_run(kernel)  # not compiled first under a job's clock
