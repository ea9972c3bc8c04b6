"""MSCCL++ execution plans (JSON, microsoft/mscclpp 1f5f065): read, validate as the executor loads
them, and import as verified schedules on a machine.

Public API:

* ``read_plan(path) -> Plan`` / ``parse_plan(data, source)`` (``schema.py``; plans of MSCCL++ < 0.8.0
  refused saying so)
* ``check_plan(plan) -> notes`` (``validate.py``: structural load-time checks) and
  ``sizes_for(plan, M)`` (``geometry.py``: the size checks at a message size)
* ``import_mscclpp_plan(path_or_plan, machine, *, size, ranks, model) -> MscclppImport``
  (``importer.py``, run by ``simulate.py`` over ``routes.py``)
* ``export_mscclpp(machine, collective, schedule, *, model) -> MscclppExport`` (``export.py``: a
  verified schedule as a plan, via ``gpuview.py`` and ``plan_builder.py``, checked by re-import)
"""
from optcoll.interop.mscclpp.export import MscclppExport, export_mscclpp, save_mscclpp_plan
from optcoll.interop.mscclpp.geometry import sizes_for
from optcoll.interop.mscclpp.importer import MscclppImport, import_mscclpp_plan
from optcoll.interop.mscclpp.schema import Plan, parse_plan, read_plan
from optcoll.interop.mscclpp.validate import check_plan

__all__ = ["export_mscclpp", "save_mscclpp_plan", "MscclppExport", "read_plan", "parse_plan", "Plan", "check_plan", "sizes_for", "import_mscclpp_plan", "MscclppImport"]
