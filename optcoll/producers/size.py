"""How large any schedule of an instance must be, and the refusal of a synthesis that cannot fit.

Why: a 4096-NPU AlltoAll on a 64×64 torus moves 16.8 M chunks about 32 hops each, so every
schedule of it has at least 5·10^8 transfers; building one would run the machine out of memory
minutes in, with no message. The floor here is a count no valid schedule can go below, so a
refusal never turns away a schedule that could exist; the bytes are the memory the schedule's
columns and their verification take per transfer, as measured.

The floor, per chunk c (holders P = pre(c), destinations D = post(c) \\ P):

* a chunk that is copied: every destination receives it at least once (|D|); a chunk with one
  holder and one destination crosses as many links as the destination is hops away (the hop
  counts are computed only when there are millions of such chunks);
* a chunk that is reduced: every contribution but at most one leaves its holder at least once
  (|P| − 1), and every destination receives at least once (|D|).
"""
from __future__ import annotations

import numpy as np

from optcoll.errors import InputError
from optcoll.instances.instance import Instance
from optcoll.producers.exact.memory import available, default_limit
from optcoll.units import format_size

#: Peak bytes per transfer of a schedule being synthesised or verified, the lesser of the two as
#: measured on tacos+'s 4096-NPU torus AllReduce (33.5 M transfers; ``optcoll bench core --scale``:
#: 3.0 GiB peak RSS synthesising, 96 B a transfer; 2.47 GiB verifying, 79 B): the lesser, so a
#: refusal never turns away a schedule that this measure says could fit.
BYTES_PER_TRANSFER = 79
#: Below this many transfers by the simple count, the hop counts are not worth computing.
HOPS_FROM = 1 << 22


class TooLarge(InputError):
    """A synthesis refused before it starts: every schedule of the instance needs more memory."""


def transfers_floor(instance: Instance) -> int:
    """No valid schedule of ``instance`` has fewer transfers (module docstring)."""
    coll, width = instance.collective, instance.machine.num_nodes
    pre_counts = coll.pre.counts()
    pre_c, pre_v = coll.pre.pairs()
    post_c, post_v = coll.post.pairs()
    # Both lists are sorted by (chunk, node): a destination holds its chunk already when its key
    # is among the holders' keys.
    pre_keys, post_keys = pre_c * width + pre_v, post_c * width + post_v
    at = np.minimum(np.searchsorted(pre_keys, post_keys), max(pre_keys.size - 1, 0))
    new = pre_keys[at] != post_keys if pre_keys.size else np.ones(post_keys.size, dtype=bool)
    wanted = np.bincount(post_c[new], minlength=coll.num_chunks)
    if coll.combining:
        return int(np.sum(np.maximum(pre_counts - 1, 0) + wanted))
    # A chunk with one holder and one destination (AlltoAll, Scatter) is as many transfers from
    # it as the destination is hops from its holder (pre_v[c]).
    single = np.flatnonzero((wanted == 1) & (pre_counts == 1))
    if single.size < HOPS_FROM:
        return int(wanted.sum())
    one = np.isin(post_c, single, assume_unique=False) & new
    distance = instance.machine.hop_counts()[pre_v[coll.pre.indptr[post_c[one]]], post_v[one]]
    return int(wanted.sum() - single.size + np.maximum(distance, 1).sum())


def require_fits(instance: Instance, limit: int | None = None) -> None:
    """Refuses (``TooLarge``) an instance whose every schedule needs more than ``limit`` bytes
    (None: the default share of the memory available now, as for solver models)."""
    limit = default_limit() if limit is None else limit
    if limit is None:
        return
    floor = transfers_floor(instance)
    need = floor * BYTES_PER_TRANSFER
    if need > limit:
        free = available()
        raise TooLarge(f"every schedule of {instance.name} ({instance.machine.num_npus} NPUs, "
                       f"{instance.collective.kind}) has at least {floor:,} transfers, about "
                       f"{format_size(need)} to synthesise and verify ({BYTES_PER_TRANSFER} bytes per transfer), "
                       f"more than the {format_size(limit)} allowed"
                       + (f" ({format_size(free)} of memory available now)" if free is not None else "")
                       + "; nothing was built")
