"""The chunking NCCL runs one of its algorithms at, for an instance's size (docs/model.md §4, §6.1).

A gap report that ran NCCL's algorithms at the instance's C (one chunk per rank in most suites)
would blame NCCL for a granularity it never uses: NCCL cuts the buffer into its protocol's
pipelining unit (``expect.predict.pipelining_unit``: an LL FIFO step of 32 KiB, an LL128 step of
576000 B, a Simple slice of 1 MiB, an NVLS step), so for a buffer of M bytes over N ranks it runs
at C = ⌈M / (N · unit)⌉ (at least 1).

The protocol is the one NCCL's own cost model (``expect.nccl.estimates``, NCCL 2.30.7's tuning)
gives that algorithm at that size on the machine's GPU generation; for an algorithm NCCL's model
does not run there (PAT with several GPUs per node, CollNet), the protocol of NCCL's own pick for
the call; on a machine outside the calibration (TPU, Trainium, tori, hypercubes) Simple, the
protocol NCCL uses for large buffers, is assumed and said so. Only the C comes from the
calibration: it is how NCCL cuts the buffer, not a calibrated rate, so the schedule still runs
on the physical machine. C is capped so that one verification tracks at most
``MAX_CHUNK_COPIES`` chunk copies (N² · C); a capped C is reported as such.

Modelled for AllGather, ReduceScatter and AllReduce over every rank, the collectives NCCL's cost
model covers; any other instance keeps its own C (``nccl_chunking`` returns None).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields

from optcoll.instances.instance import Instance
from optcoll.units import format_size

#: The largest catalog machines at 1 GiB: 256 NPUs at NCCL's Simple C of 4 (about 2 s to verify
#: one ring there), 128 NPUs at C = 8.
MAX_CHUNK_COPIES = 1 << 18
KINDS = ("allgather", "reducescatter", "allreduce")
#: How the protocol was found (``Chunking.protocol_from``).
NCCL_MODEL, NCCL_PICK, ASSUMED = "nccl", "pick", "assumed"


@dataclass(frozen=True)
class Chunking:
    """C for one NCCL algorithm at one size, and why."""

    producer: str  # the optcoll producer (nccl-ring, ...)
    protocol: str  # ll | ll128 | simple
    protocol_from: str  # NCCL_MODEL | NCCL_PICK | ASSUMED
    unit_bytes: float  # bytes one pipeline step moves (all NVLS channels together)
    wanted: int  # C = ⌈M / (N · unit)⌉
    chunks: int  # the C run: ``wanted`` capped by MAX_CHUNK_COPIES

    @property
    def capped(self) -> bool:
        return self.chunks < self.wanted

    def describe(self) -> str:
        """'Simple, 1 MiB units → C = 8' (with why the protocol, and a cap, where they apply)."""
        why = {NCCL_MODEL: "", NCCL_PICK: " (the protocol of NCCL's pick for the call)",
               ASSUMED: " (assumed: no NCCL calibration for this machine)"}[self.protocol_from]
        cap = f", capped at C = {self.chunks} to verify" if self.capped else ""
        return (f"{_PROTOCOL_NAMES[self.protocol]}{why}, {format_size(self.unit_bytes)} units "
                f"→ C = {self.wanted}{cap}")

    def to_params(self) -> dict:
        """Everything but the producer, as ``Chunking(producer, **params)`` reads it back."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "producer"}


_PROTOCOL_NAMES = {"ll": "LL", "ll128": "LL128", "simple": "Simple"}


def modelled(instance: Instance) -> bool:
    """Whether NCCL's own chunking is modelled for this instance (module docstring)."""
    c = instance.collective
    return c.kind in KINDS and c.root is None and c.num_ranks == instance.machine.num_npus


def nccl_chunking(instance: Instance, producer: str) -> Chunking | None:
    """The C NCCL runs ``producer`` (one of ``registry.NCCL``) at for this instance's size, or
    None where it is not modelled."""
    if not modelled(instance):
        return None
    from optcoll.analysis.expect.nccl import PRODUCERS, estimates
    from optcoll.analysis.expect.predict import context, pipelining_unit
    from optcoll.machines.calibration import PROTOCOLS, catalog_machines, generation_of

    machine, kind = instance.machine, instance.collective.kind
    size = int(instance.collective.size_bytes)
    n = machine.num_npus
    algorithm = next((a for a, p in PRODUCERS.items() if p == producer), producer.removeprefix("nccl-"))
    if machine.name in catalog_machines():
        ctx = context(machine, generation_of(machine.name))
        own = estimates(kind, size, ctx.nccl, algorithm if algorithm in PRODUCERS else None)
        if own and algorithm in PRODUCERS:
            protocol, source = own[0].protocol, NCCL_MODEL
        else:
            protocol, source = estimates(kind, size, ctx.nccl)[0].protocol, NCCL_PICK
        unit = pipelining_unit(algorithm, protocol, size, ctx)[1]
    else:
        protocol, source, unit = "simple", ASSUMED, PROTOCOLS["simple"].chunk_bytes.value
    wanted = max(1, math.ceil(size / (n * unit)))
    chunks = max(1, min(wanted, MAX_CHUNK_COPIES // (n * n)))
    return Chunking(producer, protocol, source, float(unit), wanted, chunks)
