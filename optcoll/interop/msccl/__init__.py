"""MSCCL-IR XML: export verified schedules, validate any file's structure, import files as schedules.

Public API:

* ``export_msccl(machine, collective, schedule, **options) -> MscclExport`` (text, times) /
  ``export_msccl_xml(...) -> str`` / ``save_msccl_xml(path, ...)``; switched and multi-node
  machines through the GPU-only view of ``routes.py``
* ``validate_msccl_xml(path_or_text, *, runtime, root) -> list[str]`` (runtime "executor",
  "msccl" or "rccl": ``runtimes.py``)
* ``import_msccl_xml(path_or_text, machine, *, size | collective, ranks, root, inplace, model,
  runtime) -> MscclImport`` (collective, schedule, findings, problems, model)
"""
from optcoll.interop.msccl.export import (MscclExport, build_msccl_algo, export_msccl, export_msccl_xml,
                                          protocol_for_size, save_msccl_xml)
from optcoll.interop.msccl.importer import MscclImport, import_msccl_xml
from optcoll.interop.msccl.ir import Algo, parse_algo, to_xml
from optcoll.interop.msccl.runtimes import EXECUTOR, MSCCL, RCCL, Runtime
from optcoll.interop.msccl.validate import validate_msccl_xml

__all__ = ["export_msccl", "MscclExport", "export_msccl_xml", "save_msccl_xml", "build_msccl_algo",
           "protocol_for_size", "validate_msccl_xml", "Runtime", "EXECUTOR", "MSCCL", "RCCL", "import_msccl_xml", "MscclImport", "Algo", "parse_algo", "to_xml"]
