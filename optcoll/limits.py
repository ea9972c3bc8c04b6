"""Caps on what a few bytes of input may ask of optcoll: one mechanism for all of them.

Why: a file of a few bytes can name a machine of a million nodes, a gzip stream that expands a
thousandfold, or a schedule of 10⁸ transfers; without a cap the command runs out of memory or
never ends instead of saying what it refused. Every cap has a default sized to what optcoll can
finish (README, "Security and robustness", lists them) and is raised the same way: the
environment variable ``OPTCOLL_MAX_<NAME>`` (e.g. ``OPTCOLL_MAX_INPUT_BYTES="1 GiB"``). A refusal
is an ``InputError`` naming the count, the cap and that variable.

A command whose own budget is smaller than the global cap (``model show`` describes a machine in
seconds, so it builds at most ``show_nodes`` nodes) narrows a cap for its duration with
``narrowed``; the refusal then names the command and the narrower cap's variable.
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from optcoll.errors import InputError


@dataclass(frozen=True)
class Cap:
    """A limit: its name (``OPTCOLL_MAX_<NAME>`` raises it), default, unit and what it counts."""

    name: str
    default: int
    counts: str
    unit: str = ""

    @property
    def variable(self) -> str:
        return f"OPTCOLL_MAX_{self.name.upper()}"

    def value(self) -> int:
        """The default, or the environment variable's value (a count, or a size for bytes)."""
        text = os.environ.get(self.variable)
        if text is None or not text.strip():
            return self.default
        try:
            if self.unit == "bytes" and not text.strip().isdigit():
                from optcoll.units import parse_size

                value = parse_size(text)
            else:
                value = int(text.replace("_", ""))
        except (InputError, ValueError):
            value = 0
        if not 1 <= value < 2**63:
            raise InputError(f"must be a positive {'size such as 1 GiB' if self.unit == 'bytes' else 'integer'}"
                             f", got {text!r}", field=self.variable)
        return int(value)

    def shown(self, value: int) -> str:
        if self.unit == "bytes":
            from optcoll.units import format_size

            return format_size(value)
        return f"{value}" + (f" {self.unit}" if self.unit else "")


CAPS: dict[str, Cap] = {cap.name: cap for cap in (
    Cap("input_bytes", 64 * 2**20, "bytes of one input file, as stored and after gunzip", "bytes"),
    Cap("transfers", 2**24, "transfers in one schedule (JSON or MSCCL-IR file)"),
    Cap("nodes", 2**20, "nodes (NPUs and switches) of a machine"),
    Cap("links", 2**24, "directed links of a machine"),
    Cap("chunk_copies", 2**24, "N²·C, the (chunk, rank) pairs of a collective (also pareto's --max-chunks)"),
    Cap("layout_slots", 2**22, "GPUs × chunks per loop of an MSCCL-IR buffer layout"),
    Cap("show_nodes", 2**16, "nodes of a machine `model show` and `model draw` build"),
    Cap("show_links", 2**18, "links of a machine `model show` and `model draw` build"),
    Cap("show_search", 2**27, "NPUs × (nodes + links): the breadth-first searches of `model show`'s diameter"),
    Cap("show_cut", 2**22, "NPUs × links: the max-flows of `model show`'s worst cut"),
    Cap("predict_messages", 2**23, "messages `astra predict` simulates (about 40 µs each)"),
)}

#: Narrower caps in force (cap name → (the narrower cap, the command it belongs to)).
_NARROWED: ContextVar[dict[str, tuple[Cap, str]]] = ContextVar("optcoll_narrowed_caps", default={})


@contextmanager
def narrowed(command: str, **caps: str) -> Iterator[None]:
    """Within the block, each cap ``name`` is at most the cap ``caps[name]`` (``model show``:
    ``narrowed("model show", nodes="show_nodes", links="show_links")``)."""
    token = _NARROWED.set({**_NARROWED.get(), **{name: (CAPS[other], command)
                                                  for name, other in caps.items()}})
    try:
        yield
    finally:
        _NARROWED.reset(token)


def value(name: str) -> int:
    """The value of cap ``name`` (its default or its environment variable)."""
    return CAPS[name].value()


def _binding(name: str, count: int) -> tuple[Cap, str | None] | None:
    """The cap ``count`` is over, with the command that narrowed it: the global cap first (raising
    a command's narrower cap would not help), then the narrower one; None when within both."""
    if count > CAPS[name].value():
        return CAPS[name], None
    narrower = _NARROWED.get().get(name)
    if narrower is not None and count > narrower[0].value():
        return narrower
    return None


def within(name: str, count: int) -> bool:
    return _binding(name, count) is None


def _at_most(cap: Cap) -> str:
    return f"at most {cap.shown(cap.value())}; raise it with {cap.variable}"


def at_most(name: str) -> str:
    """"at most 256 MiB; raise it with OPTCOLL_MAX_INPUT_BYTES": the cap, for messages."""
    return _at_most(CAPS[name])


def refusal(name: str, what: str, beyond: str = "optcoll handles", count: int | None = None) -> InputError:
    """The one-line error for ``what`` (e.g. "1048576 nodes", ``count`` of them) over cap ``name``:
    "... is more than ``beyond`` (at most ...; raise it with OPTCOLL_MAX_...)"."""
    cap, command = (_binding(name, count) if count is not None else None) or (CAPS[name], None)
    beyond = f"`{command}` handles" if command else beyond
    return InputError(f"{what} is more than {beyond} ({_at_most(cap)})")


def check(name: str, count: int, what: str, beyond: str = "optcoll handles") -> None:
    """Raises ``refusal`` when ``count`` is over cap ``name`` (or a command's narrower one)."""
    if not within(name, count):
        raise refusal(name, what, beyond, count)
