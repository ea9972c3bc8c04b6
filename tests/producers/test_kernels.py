"""``optcoll warm`` compiles every numba kernel a solve can reach, so that no time-limited run
pays a first compile (20-40 s of CPU on a 512-GPU AllReduce, inside its first start producer)."""
from __future__ import annotations

import importlib

import numpy as np

from optcoll.producers.kernels import KERNELS, warm

#: Every module of optcoll whose functions numba compiles.
COMPILED = ("optcoll.verify.compiled", "optcoll.producers.baselines.compiled",
            "optcoll.producers.greedy.kernel", "optcoll.producers.greedy.routes")


def test_after_warm_every_kernel_is_in_numbas_on_disk_cache():
    """After ``warm`` every jitted function of the compiled modules has its entry in numba's
    on-disk cache (numba compiles a function at its first call, so only running its path puts it
    there; with a cold cache, ``NUMBA_CACHE_DIR=/tmp/x optcoll warm`` writes all 34); those
    inlined into their callers (``inline="always"``) are cached as part of them."""
    import os

    from numba.core.registry import CPUDispatcher

    spent = warm()
    assert [what for what, _ in spent] == [what for what, _ in KERNELS]
    for name in COMPILED:
        module = importlib.import_module(name)
        kernels = {attr: value for attr, value in vars(module).items()
                   if isinstance(value, CPUDispatcher) and value.__module__ == name
                   and value.targetoptions.get("inline") != "always"}
        assert kernels, name
        missing = [attr for attr, kernel in kernels.items()
                   if not os.path.exists(kernel._cache._cache_file._index_path)]  # numba's own cache file
        assert not missing, f"{name}: not in numba's cache after warm: {missing}"


def _fake_kernel_module(tmp_path, name: str = "fake_compiled"):
    """A module with one dispatcher-like kernel never compiled here, whose cache index is
    ``tmp_path / "index.nbi"``, and its source file."""
    import types
    from types import SimpleNamespace

    source = tmp_path / f"{name}.py"
    source.write_text("# kernels\n")
    module = types.ModuleType(name)
    module.__file__ = str(source)
    module.kernel = SimpleNamespace(signatures=[], targetoptions={}, __module__=name,
                                    _cache=SimpleNamespace(_cache_file=SimpleNamespace(
                                        _index_path=str(tmp_path / "index.nbi"))))
    return module, source


def test_a_kernel_is_ready_when_numbas_cache_holds_it_no_older_than_its_source(tmp_path):
    import os

    from optcoll.instances.kernels import ready

    module, source = _fake_kernel_module(tmp_path)
    assert not ready(module)  # no cache entry: a call would compile it first
    index = tmp_path / "index.nbi"
    index.write_bytes(b"")
    os.utime(index, (1.0, 1.0))  # older than the source: numba would recompile
    assert not ready(module)
    os.utime(index, None)
    os.utime(source, (1.0, 1.0))
    assert ready(module)


def test_under_a_jobs_clock_a_path_whose_kernels_are_not_ready_runs_interpreted(monkeypatch):
    """With the cache taken as cold, the verifier checks a 130,560-transfer AllReduce with its event
    engine under a job's clock (the same verdict and time) and the clock records it; outside a
    clock it compiles as before. The list scheduler does the same (the same schedule)."""
    import optcoll.instances.kernels as kernels
    from optcoll.collectives.builtins import make_collective
    from optcoll.instances.budget import Budget
    from optcoll.instances.clock import Clock, running
    from optcoll.instances.instance import Instance
    from optcoll.machines import generators as G
    from optcoll.producers.registry import get_synthesizer
    from optcoll.verify.verifier import verify

    machine = G.torus([16, 16], 50 * 2.0**30, 0.5e-6)
    inst = Instance("t16", machine, make_collective("allreduce", range(256), 2.0**30, 1))
    made = get_synthesizer("ring")(inst, 0)
    compiled = verify(machine, inst.collective, made)
    monkeypatch.setattr(kernels, "ready", lambda module: False)
    clock = Clock(Budget(600.0))
    with running(clock):
        checked = verify(machine, inst.collective, made)
        again = get_synthesizer("ring")(inst, 0)
    assert (compiled.path, checked.path) == ("compiled", "events") and checked.time == compiled.time
    assert all(np.array_equal(getattr(again, f), getattr(made, f)) for f in ("chunk", "link", "start"))
    assert clock.interpreted == {"verify", "baselines"}
    assert verify(machine, inst.collective, made).path == "compiled"  # no clock: compiled on first use
