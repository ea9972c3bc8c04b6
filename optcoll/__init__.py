"""optcoll: provably optimal or tightly bounded collective-communication schedules.

Layers (docs/model.md §7), one subpackage each, bottom to top (pyproject's import-linter
contract keeps them): text and plumbing → machines, collectives → schedules → instances → verify,
bounds → interop, results → producers → analysis → sweeps → truth → reports, check → bench → cli.
"""
__version__ = "0.1.0"
