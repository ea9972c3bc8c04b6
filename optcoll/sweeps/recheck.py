"""Cached records are re-verified when read: a number comes out of the cache only if the shared
verifier still gives it (docs/model.md §5: every schedule passes the verifier before a number
about it is believed).

The cache's checksum (``sweeps.cache``) catches a record cut short or edited by hand; this module
re-runs the verifier on the cached schedule of every record that states a time and requires the
same time, and a recorded lower bound not above it. A record that fails is never shown: the
sweep computes the job again and says how many records it replaced and why.
"""
from __future__ import annotations

from typing import Any

from optcoll.errors import InputError
from optcoll.results.record import MEET_TOLERANCE
from optcoll.sweeps.cache import Damaged, ResultCache
from optcoll.sweeps.jobs import FAILED, Job


def recheck(job: Job, record: dict[str, Any], cache: ResultCache) -> None:
    """Raises ``Damaged`` (saying why) when ``record``'s time is not its schedule's verified time."""
    result = record.get("result")
    if record.get("status") == FAILED or not isinstance(result, dict) or result.get("time") is None:
        return
    from optcoll.producers.chunks import chosen
    from optcoll.verify import verify

    try:  # C left free: the schedule is at the C the result chose
        instance = chosen(job.spec.instance, result.get("params") or {})
    except InputError as exc:
        raise Damaged(f"it does not say which C it chose: {exc.one_line()}") from None
    schedule = cache.schedule(job.key, instance.machine)
    if schedule is None:
        raise Damaged("it states a time but has no schedule")
    verification = verify(instance.machine, instance.collective, schedule, instance.model)
    if not verification.valid:
        raise Damaged(f"its schedule is invalid: {verification.violation.message}")
    if verification.time != result["time"]:
        raise Damaged(f"its schedule verifies at {verification.time!r} s, not the {result['time']!r} s "
                      "it states")
    bound = result.get("lower_bound")
    if bound is not None and verification.time < bound * (1 - MEET_TOLERANCE) - 1e-15:
        raise Damaged(f"its lower bound {bound!r} s is above its verified time {verification.time!r} s")
