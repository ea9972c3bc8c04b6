"""Sweeps: many (instance, producer) jobs, cached by content hash, run locally or on Dask.

``optcoll.instances.suite.find_suite`` names the instances, ``Job`` one producer run, ``run_sweep`` runs what the
``ResultCache`` does not hold yet.

The names below load with their module on first use: a command that only asks
``sweeps.progress`` whether to show progress (every ``solve``) need not load the runner, the cache
and multiprocessing (about 0.05 s of CPU).
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from optcoll.sweeps.cache import ResultCache, default_cache_dir
    from optcoll.sweeps.jobs import FAILED, NOT_APPLICABLE, Job, JobResult, execute
    from optcoll.sweeps.runner import SweepStats, run_sweep

_HOME = {"ResultCache": "cache", "default_cache_dir": "cache", "FAILED": "jobs", "NOT_APPLICABLE": "jobs",
         "Job": "jobs", "JobResult": "jobs", "execute": "jobs", "SweepStats": "runner", "run_sweep": "runner"}

__all__ = ["FAILED", "NOT_APPLICABLE", "Job", "JobResult", "ResultCache", "SweepStats",
           "default_cache_dir", "execute", "run_sweep"]


def __getattr__(name: str) -> Any:
    if name in _HOME:
        return getattr(importlib.import_module(f"optcoll.sweeps.{_HOME[name]}"), name)
    raise AttributeError(f"module 'optcoll.sweeps' has no attribute {name!r}")
