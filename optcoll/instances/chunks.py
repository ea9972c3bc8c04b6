"""Chunks per rank left to the tool (DESIGN.md section 4: C sets the granularity).

An instance fixes C (``chunks_per_rank = 2``) or leaves it free: ``chunks_per_rank = "free"``
(the set ``FREE_CHUNKS``) or an explicit list (``[1, 2, 4]``). A C-free instance is carried at
its smallest allowed C with the set in ``Instance.chunk_choices``; ``at_chunks`` gives the fixed
instance at one C, which is what every producer, bound and the verifier see. A schedule of a
C-free instance may use any allowed C, so only the least of the per-C lower bounds bounds them all
(``least_bound``); a per-C bound is never applied to a schedule at another C.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from optcoll.errors import InputError
from optcoll.instances.instance import Instance

#: ``chunks_per_rank = "free"``: powers of two up to 8. Finer chunks pipeline better over
#: multi-hop and multi-rail paths (NCCL's rings use C up to 8 channels' worth); beyond 8 a
#: 1 GiB buffer over 16 ranks still has 8 MiB chunks, but the exact solver's model grows with
#: N²·C and stops proving anything on the catalog machines, and latency-bound sizes lose.
FREE_CHUNKS = (1, 2, 4, 8)
FREE = "free"


def parse_chunks(value: Any, where: str, source: str | None = None) -> int | tuple[int, ...]:
    """An int (C fixed), or the sorted allowed set from ``"free"`` or a list; ``InputError``
    naming ``where`` (a field, or a flag as the user wrote it) for anything else."""
    def bad(detail: str) -> InputError:
        return InputError(detail, source=source, field=where)

    def positive(item: Any) -> int:
        if isinstance(item, bool) or not isinstance(item, int):
            raise bad(f"must be an integer (or \"free\", or a list of integers), got {item!r}")
        if item < 1:
            raise bad(f"must be at least 1, got {item}")
        return item

    if isinstance(value, str):
        if value == FREE:
            return FREE_CHUNKS
        raise bad(f"must be an integer, \"free\" or a list such as [1, 2, 4]; got {value!r}")
    if isinstance(value, list):
        if not value:
            raise bad("lists no chunk count")
        items = [positive(item) for item in value]
        twice = next((c for i, c in enumerate(items) if c in items[:i]), None)
        if twice is not None:
            raise bad(f"lists {twice} twice")
        return tuple(sorted(items))
    return positive(value)


def parse_chunks_flag(text: str, flag: str = "--chunks") -> int | tuple[int, ...]:
    """``--chunks 4``, ``--chunks free`` or ``--chunks 1,2,4``."""
    text = text.strip()
    if text == FREE:
        return FREE_CHUNKS
    parts = [part.strip() for part in text.split(",")]
    try:
        numbers = [int(part) for part in parts]
    except ValueError:
        raise InputError(f"must be an integer, \"free\" or a list such as 1,2,4; got {text!r}",
                         field=flag) from None
    return parse_chunks(numbers if "," in text else numbers[0], flag)


def choices(instance: Instance) -> tuple[int, ...]:
    """The allowed C values, in increasing order (one for a fixed-C instance)."""
    return instance.chunk_choices or (instance.collective.chunks_per_rank,)


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
