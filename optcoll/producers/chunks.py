"""A C-free instance at one C, and its lower bound (docs/model.md §4 and §6).

``optcoll.instances.chunks`` reads the allowed set; here ``at_chunks`` gives the fixed instance
at one C, which is what every producer, bound and the verifier see. A schedule of a C-free
instance may use any allowed C, so only the least of the per-C lower bounds bounds them all
(``least_bound``); a per-C bound is never applied to a schedule at another C.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from optcoll.errors import InputError
from optcoll.instances.chunks import choices
from optcoll.instances.instance import Instance


def at_chunks(instance: Instance, chunks: int) -> Instance:
    """The fixed-C instance at ``chunks`` pieces per rank."""
    from optcoll.producers.exact.step.chunking import rechunk

    return replace(instance, collective=rechunk(instance.collective, chunks), chunk_choices=())


def chosen(instance: Instance, params: dict[str, Any]) -> Instance:
    """The fixed instance a result of ``instance`` ran at: its ``params["chunks_per_rank"]`` when
    C is free (``InputError`` when the result does not say, or names a C outside the set)."""
    if not instance.chunk_choices:
        return instance
    c = params.get("chunks_per_rank")
    if c not in instance.chunk_choices:
        raise InputError(f"the result names chunks_per_rank {c!r}, not one of the allowed "
                         f"{list(instance.chunk_choices)}", field="params.chunks_per_rank")
    return at_chunks(instance, c)


def with_choices(instance: Instance, allowed: int | tuple[int, ...]) -> Instance:
    """The instance with C fixed at ``allowed`` (an int) or free over the set ``allowed``."""
    if isinstance(allowed, int):
        return at_chunks(instance, allowed)
    return replace(at_chunks(instance, allowed[0]), chunk_choices=allowed if len(allowed) > 1 else ())


def least_bound(instance: Instance):
    """The lower bound of a C-free instance: the least over the allowed C of the best analytic
    bound at each C (the smaller C on a tie), as a ``Bound`` whose name and detail say which C
    gave it; a fixed-C instance's best bound as it is."""
    from optcoll.bounds import best_lower_bound

    allowed = choices(instance)
    per_c = []
    for c in allowed:
        fixed = at_chunks(instance, c)
        per_c.append((best_lower_bound(fixed.machine, fixed.collective, fixed.model), c))
    bound, c = min(per_c, key=lambda pair: (pair[0].value, pair[1]))
    if len(allowed) == 1:
        return bound
    return replace(bound, name=f"{bound.name} at C={c}",
                   detail=f"{bound.detail}; {least_words(allowed)}", exact=False)


def least_words(allowed: tuple[int, ...]) -> str:
    return f"least over C in {{{', '.join(map(str, allowed))}}} of the best bound per C"
