"""Sweeps: many (instance, producer) jobs, cached by content hash, run locally or on Dask.

``optcoll.instances.suite.find_suite`` names the instances, ``Job`` one producer run, ``run_sweep`` runs what the
``ResultCache`` does not hold yet.
"""
from optcoll.sweeps.cache import ResultCache, default_cache_dir
from optcoll.sweeps.jobs import FAILED, NOT_APPLICABLE, Job, JobResult, execute
from optcoll.sweeps.runner import SweepStats, run_sweep

__all__ = ["FAILED", "NOT_APPLICABLE", "Job", "JobResult", "ResultCache", "SweepStats",
           "default_cache_dir", "execute", "run_sweep"]
