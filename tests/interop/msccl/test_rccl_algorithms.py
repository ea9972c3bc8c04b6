"""RCCL's production MSCCL algorithms (algorithms/rccl/README.md: ROCm/rccl 0cbce2a) load under
RCCL's loader rules and verify on the MI300X catalog machine, never beating optcoll's bound."""
from pathlib import Path

import pytest

from optcoll.analysis.tools.rccl import SERIALIZATION, judge_file
from optcoll.interop.msccl import import_msccl_xml, validate_msccl_xml
from optcoll.machines.catalog import load_machine
from optcoll.verify import verify

DATA = Path(__file__).parents[3] / "algorithms" / "rccl"
FILES = sorted(DATA.glob("*.xml.gz"))


def test_all_twelve_files_are_kept():
    assert len(FILES) == 12


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_rccl_loads_and_runs_every_file(path):
    assert validate_msccl_xml(path, runtime="rccl") == []


@pytest.mark.parametrize("path", [p for p in FILES if p.name.startswith("alltoall")], ids=lambda p: p.name)
def test_alltoall_files_verify_on_mi300x_at_the_bound(path):
    row = judge_file(path, load_machine("mi300x"))
    for point in row.points:
        assert point.time is not None, point.why
        assert point.time >= point.bound * (1 - 1e-9)
        assert point.time == pytest.approx(point.bound)  # AMD's all-pairs AlltoAll meets the bound here


def test_an_allreduce_file_verifies_and_respects_the_bound_at_its_own_chunking():
    from optcoll.bounds.api import best_lower_bound

    machine = load_machine("mi300x")
    path = DATA / "allreduce-allpairs-8n-ll-32tb-op.xml.gz"
    imported = import_msccl_xml(path, machine, size=65536.0, runtime="rccl", model=SERIALIZATION)
    result = verify(imported.machine, imported.collective, imported.schedule, SERIALIZATION)
    assert result.valid and imported.faithful
    assert imported.collective.num_chunks == 256
    assert result.time >= best_lower_bound(machine, imported.collective, SERIALIZATION).value * (1 - 1e-9)
