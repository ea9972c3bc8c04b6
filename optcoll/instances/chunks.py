"""Chunks per rank left to the tool (docs/model.md §4: C sets the granularity).

An instance fixes C (``chunks_per_rank = 2``) or leaves it free: ``chunks_per_rank = "free"``
(the set ``FREE_CHUNKS``) or an explicit list (``[1, 2, 4]``). A C-free instance is carried at
its smallest allowed C with the set in ``Instance.chunk_choices``; ``optcoll.producers.chunks``
gives the fixed instance at one C (what every producer, bound and the verifier see) and the
least of the per-C lower bounds, the only one that bounds every schedule of a C-free instance.
"""
from __future__ import annotations

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
