"""ASTRA-sim 2.0 interop: network.yml, Chakra ET export of verified schedules, a predictor of the
analytical backends' native-algorithm timing (the side-by-side report is
``optcoll.analysis.tools.astra``).

- ``network``: ``read_network``/``parse_network`` → ``AstraNetwork`` (``.machine()``),
  ``network_of(machine)``/``write_network`` for machines that are ASTRA-sim networks.
- ``etexport``: ``export_chakra(machine, collective, schedule, prefix)`` → ``<prefix>.<p>.et`` +
  ``<prefix>.system.json``; ``chakra``: the trace messages and ``read_trace``.
- ``system`` + ``predictor``: ``read_system`` → ``SystemConfig``; ``predict(network, system,
  collective, comm_size, backend)`` → ``Prediction``, with ``comm_size_of(kind, M, N)`` for a
  collective of M bytes (AllGather: M/N, ASTRA-sim's per-NPU input).
"""
