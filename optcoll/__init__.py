"""optcoll: provably optimal or tightly bounded collective-communication schedules.

Layers (DESIGN.md section 7), one subpackage each:
machines, collectives → instances → producers (exact, greedy, baselines, imports)
→ verify → results → reports, check, exports; bounds sit beside the verifier as the yardstick.
"""
__version__ = "0.1.0"
