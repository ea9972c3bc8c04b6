"""Import/export forms read from or written for the public tools (MSCCL-IR XML, ASTRA-sim, Chakra).

Exports read verified schedules only (DESIGN.md section 7).
"""
