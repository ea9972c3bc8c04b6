"""Whether a job under a clock may call a compiled (numba) kernel: only when its machine code is
ready (docs/model.md §6: a time limit or Ctrl-C ends a job with what it has).

Why: numba compiles a kernel at its first call and keeps the machine code in its on-disk cache
until the source changes. That first compile takes 20-40 s of CPU (over a minute of wall time on
a loaded machine) and nothing can stop it: on a 512-GPU AllReduce with a 60 s limit it ran 67 s
inside the first start producer and the job ended 24 s late with no schedule at all. So under a
job's clock (``clock.running``) a path whose kernels are not ready runs interpreted instead
(the same schedule or verdict, slower, checking the clock as it goes), and the job's clock
records it (``Clock.interpreted``) so the result can say so; ``optcoll warm`` compiles every
kernel once, outside any limit. Outside a clock (``synth``, ``expect``, ``warm`` itself) a
kernel is compiled on first use as before.

Ready means: compiled or loaded in this process, or present in numba's cache no older than its
source (numba's own test for a stale entry compares the source's modification time).
"""
from __future__ import annotations

import os
from types import ModuleType

from optcoll.instances.clock import current

#: Compiled modules found ready in this process (they stay ready).
_ready: set[str] = set()


def ready(module: ModuleType) -> bool:
    """Whether every kernel of ``module`` (its numba dispatchers, bar those always inlined into
    their callers) has machine code in this process or in numba's on-disk cache."""
    if module.__name__ in _ready:
        return True
    source = os.path.getmtime(module.__file__)
    for kernel in vars(module).values():
        if not hasattr(kernel, "signatures") or getattr(kernel, "__module__", None) != module.__name__:
            continue
        if kernel.signatures or kernel.targetoptions.get("inline") == "always":
            continue
        try:
            index = kernel._cache._cache_file._index_path  # numba's cache index of this function
        except AttributeError:  # a numba whose cache is laid out otherwise: compile as before
            return True
        if not os.path.exists(index) or os.path.getmtime(index) < source:
            return False
    _ready.add(module.__name__)
    return True


def may_run(module: ModuleType) -> bool:
    """Whether to take ``module``'s compiled path now: outside a job's clock always; under one,
    only when its kernels are ready (module docstring). A refusal is booked on the job's clock."""
    clock = current()
    if clock is None or ready(module):
        return True
    clock.root.interpreted.add(module.__name__.rsplit(".", 2)[-2])
    return False
