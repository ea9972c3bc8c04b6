"""Sweeps: many (instance, producer) jobs, cached by content hash, run locally or on Dask.

``find_suite`` names the instances, ``Job`` one producer run, ``run_sweep`` runs what the
``ResultCache`` does not hold yet.
"""
from optcoll.sweeps.cache import ResultCache, default_cache_dir
from optcoll.sweeps.jobs import FAILED, NOT_APPLICABLE, Job, JobResult, execute
from optcoll.sweeps.runner import SweepStats, run_sweep
from optcoll.sweeps.suite import InstanceSpec, Suite, builtin_suite_names, find_suite, instances_dir

__all__ = ["FAILED", "NOT_APPLICABLE", "InstanceSpec", "Job", "JobResult", "ResultCache", "Suite",
           "SweepStats", "builtin_suite_names", "default_cache_dir", "execute", "find_suite",
           "instances_dir", "run_sweep"]
