"""Fixtures shared by the schedule file tests (JSON and compact forms)."""
import pytest

from optcoll.machines.machine import MachineBuilder


@pytest.fixture
def pair_machine():
    """Two NPUs: two parallel links 0->1 (ids 0 and 1), one link 1->0 (id 2)."""
    b = MachineBuilder("pair2", 2)
    b.add_link(0, 1, bandwidth=1e9, latency=1e-6, count=2)
    b.add_link(1, 0, bandwidth=1e9, latency=1e-6)
    return b.build()
