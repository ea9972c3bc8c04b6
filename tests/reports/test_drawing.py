"""draw_machine writes a well-formed, reproducible SVG for small, directed, and large machines."""
from __future__ import annotations

import xml.etree.ElementTree as ET

import networkx as nx
import pytest

from optcoll.machines import generators as g
from optcoll.machines.catalog import load_machine
from optcoll.reports.drawing import draw_machine

SVG = "{http://www.w3.org/2000/svg}"


def texts(path) -> list[str]:
    root = ET.parse(path).getroot()
    assert root.tag == f"{SVG}svg"
    return [t.text for t in root.iter(f"{SVG}text") if t.text]


@pytest.mark.parametrize("name", ["dgx1", "cluster2x8", "astra_ring4_switch8", "hetmesh5x5", "line4"])
def test_models_draw_with_labels(name, tmp_path):
    machine = load_machine(name)
    path = tmp_path / f"{name}.svg"
    draw_machine(machine, path)
    words = texts(path)
    assert all(label in words for label in machine.labels), "every node is labelled"
    assert any(name in w for w in words), "the title names the machine"


def test_parallel_links_and_bandwidth_legend(tmp_path):
    draw_machine(load_machine("dgx1"), tmp_path / "d.svg")
    assert "×2" in texts(tmp_path / "d.svg")
    draw_machine(load_machine("hetmesh5x5"), tmp_path / "h.svg")
    assert {"50 GiB/s", "75 GiB/s"} <= set(texts(tmp_path / "h.svg"))


def test_drawing_is_reproducible(tmp_path):
    machine = g.from_networkx(nx.petersen_graph(), bandwidth=1e9, latency=0.0)  # spring layout
    draw_machine(machine, tmp_path / "a.svg")
    draw_machine(machine, tmp_path / "b.svg")
    assert (tmp_path / "a.svg").read_bytes() == (tmp_path / "b.svg").read_bytes()


def test_one_way_links_get_arrowheads(tmp_path):
    draw_machine(g.ring(5, 1e9, 0.0, bidirectional=False), tmp_path / "u.svg")
    draw_machine(g.ring(5, 1e9, 0.0), tmp_path / "b.svg")
    heads = (tmp_path / "u.svg").read_text().count("<g id=\"patch_")
    cables = (tmp_path / "b.svg").read_text().count("<g id=\"patch_")
    assert heads - cables == 5


def test_big_machine_still_produces_a_file(tmp_path):
    draw_machine(g.torus([32, 32], 1e9, 0.0), tmp_path / "big.svg")
    assert texts(tmp_path / "big.svg")  # the title at least
    assert (tmp_path / "big.svg").stat().st_size > 10_000


def test_title_override_and_nested_directory(tmp_path):
    path = tmp_path / "sub" / "dir" / "r.svg"
    draw_machine(g.ring(4, 1e9, 0.0), path, title="my ring")
    assert "my ring" in texts(path)
