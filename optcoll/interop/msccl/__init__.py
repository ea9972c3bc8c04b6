"""MSCCL-IR XML: export verified schedules, validate any file's structure, import files as schedules.

Public API:

* ``export_msccl_xml(machine, collective, schedule, **options) -> str`` / ``save_msccl_xml(path, ...)``
* ``validate_msccl_xml(path_or_text, *, runtime, root) -> list[str]`` (runtime "executor" or
  "msccl": ``runtimes.py``)
* ``import_msccl_xml(path_or_text, machine, *, size | collective, ranks, root, inplace, model,
  runtime) -> MscclImport`` (collective, schedule, findings, problems, model)
"""
from optcoll.interop.msccl.export import build_msccl_algo, export_msccl_xml, save_msccl_xml
from optcoll.interop.msccl.importer import MscclImport, import_msccl_xml
from optcoll.interop.msccl.ir import Algo, parse_algo, to_xml
from optcoll.interop.msccl.runtimes import EXECUTOR, MSCCL, Runtime
from optcoll.interop.msccl.validate import validate_msccl_xml

__all__ = ["export_msccl_xml", "save_msccl_xml", "build_msccl_algo", "validate_msccl_xml",
           "Runtime", "EXECUTOR", "MSCCL", "import_msccl_xml", "MscclImport", "Algo", "parse_algo", "to_xml"]
