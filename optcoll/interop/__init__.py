"""Interop with the public tools: the forms optcoll reads from and writes for them (MSCCL-IR XML,
ASTRA-sim network.yml, system.json and Chakra ET traces, ``nvidia-smi topo -m`` topologies), and
the timing models of the tools it is compared with (ASTRA-sim's analytical backends, the MSCCL
executor's rules).

Exports read verified schedules only (docs/model.md §7); imports hand their schedules to the
shared verifier like every producer.
"""
