"""TOML model files: every built-in model loads and round-trips; bad input names file and field."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from optcoll.errors import InputError
from optcoll.machines import generators as g
from optcoll.machines.modelpaths import models_dir
from optcoll.machines.machine import Machine
from optcoll.machines.modelfile import load_machine_file, machine_to_toml

MODEL_FILES = sorted(models_dir().glob("*.toml"))
GiB = 2**30


def same_machine(a: Machine, b: Machine, *, names: bool = True, exact: bool = True) -> None:
    """Same graph and figures; ``exact=False`` allows the last-bit difference between a parsed
    "500 ns" (500 * 1e-9) and the literal 500e-9."""
    for column in ("link_src", "link_dst"):
        assert np.array_equal(getattr(a, column), getattr(b, column)), column
    for column in ("link_bandwidth", "link_latency"):
        x, y = getattr(a, column), getattr(b, column)
        assert np.array_equal(x, y) if exact else np.allclose(x, y, rtol=1e-12, atol=0), column
    assert (a.num_npus, a.switches, a.npu_labels, a.positions) == (b.num_npus, b.switches, b.npu_labels,
                                                                   b.positions)
    if names:
        assert (a.name, a.description) == (b.name, b.description)


def write(tmp_path: Path, text: str, name: str = "x.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_models_directory_has_the_promised_models():
    names = {p.stem for p in MODEL_FILES}
    assert names >= {"dgx1", "dgx2", "nvswitch8", "cluster2x8", "ring8", "torus4x4", "torus8x8",
                     "hypercube4", "hypercube6", "mesh5x5", "hetmesh5x5", "torus4x4x4",
                     "astra_ring4_switch8", "ring4", "fc4", "line4"}


@pytest.mark.parametrize("path", MODEL_FILES, ids=lambda p: p.stem)
def test_every_model_loads_and_round_trips(path, tmp_path):
    machine = load_machine_file(path)
    assert machine.name == path.stem
    assert machine.description.strip()
    assert machine.num_links > 0
    assert path.read_text(encoding="utf-8").lstrip().startswith("#"), "say where the figures come from"
    again = load_machine_file(write(tmp_path, machine_to_toml(machine), f"{path.stem}.toml"))
    same_machine(machine, again)


@pytest.mark.parametrize("name, expected", [
    ("torus4x4", lambda: g.torus([4, 4], 50 * GiB, 0.5e-6)),
    ("torus8x8", lambda: g.torus([8, 8], 50 * GiB, 0.5e-6)),
    ("torus4x4x4", lambda: g.torus([4, 4, 4], 50 * GiB, 0.5e-6)),
    ("mesh5x5", lambda: g.mesh([5, 5], 50 * GiB, 0.5e-6)),
    ("hetmesh5x5", lambda: g.mesh([5, 5], [50 * GiB, 75 * GiB], 0.5e-6)),
    ("hypercube6", lambda: g.hypercube(6, 50 * GiB, 0.5e-6)),
    ("ring8", lambda: g.ring(8, 50 * GiB, 0.5e-6)),
    ("fc4", lambda: g.fully_connected(4, 50 * GiB, 0.5e-6)),
    ("dgx1", lambda: g.dgx1(25e9, 0.5e-6)),
    ("dgx2", lambda: g.dgx2(150e9, 0.5e-6)),
    ("nvswitch8", lambda: g.nvswitch(8, 300e9, 0.5e-6)),
    ("cluster2x8", lambda: g.multinode(2, 8, nvlink_bandwidth=300e9, nvlink_latency=0.5e-6,
                                       nic_bandwidth=25e9, nic_latency=2e-6)),
    ("astra_ring4_switch8", lambda: g.astra([g.AstraDim("Ring", 4, 200 * GiB, 500e-9),
                                             g.AstraDim("Switch", 8, 50 * GiB, 500e-9)])),
])
def test_models_are_the_generators_they_name(name, expected):
    same_machine(load_machine_file(models_dir() / f"{name}.toml"), expected(), names=False, exact=False)


def test_explicit_line_equals_generator():
    line = load_machine_file(models_dir() / "line4.toml")
    reference = g.line(4, 50 * GiB, 0.5e-6)
    assert np.array_equal(line.link_src, reference.link_src)
    assert np.array_equal(line.link_dst, reference.link_dst)
    assert line.positions is None


def test_failed_nvlinks_model():
    m = load_machine_file(models_dir() / "dgx1_nvlink_down.toml")
    assert m.num_links == 48 - 2 - 2
    assert len(m.links_between(0, 1)) == 1 == len(m.links_between(1, 0))
    assert not m.links_between(3, 7) and not m.links_between(7, 3)


def test_switch_model_flags():
    m = load_machine_file(models_dir() / "star4_sharp.toml")
    assert m.switches[0].label == "sw" and m.switches[0].multicast and m.switches[0].reduce


GOOD_EXPLICIT = """
[machine]
name = "tiny"
npus = 3
labels = ["a", "b", "c"]
positions = [[0, 0], [1, 0], [2, 0], [1, 1]]

[[switches]]
name = "sw"
multicast = true

[[links]]
src = 0
dst = "sw"
bandwidth = "400 Gbit/s"
latency = "1 us"
count = 2
bidirectional = true

[[links]]
src = "sw"
dst = 2
bandwidth = "100 MB/s"
latency = "700 ns"

[[links]]
src = 1
dst = 0
bandwidth = "1 GiB/s"
latency = "0 s"
"""


def test_explicit_graph_fields(tmp_path):
    m = load_machine_file(write(tmp_path, GOOD_EXPLICIT))
    assert (m.name, m.num_npus, m.npu_labels) == ("tiny", 3, ("a", "b", "c"))
    assert m.switches[0].multicast and not m.switches[0].reduce
    assert m.link_src.tolist() == [0, 3, 0, 3, 3, 1] and m.link_dst.tolist() == [3, 0, 3, 0, 2, 0]
    assert m.link_bandwidth.tolist() == [50e9] * 4 + [100e6, 2**30]
    assert m.link_latency.tolist() == pytest.approx([1e-6] * 4 + [700e-9, 0.0], rel=1e-15)
    assert m.positions[3] == (1.0, 1.0)
    same_machine(m, load_machine_file(write(tmp_path, machine_to_toml(m), "y.toml")))


def test_failures_of_npus_renumber_and_keep_labels(tmp_path):
    text = '[topology]\nkind = "ring"\nn = 6\nbandwidth = "1 GB/s"\nlatency = "1 us"\n' \
           '[failures]\nnpus = [2]\nlinks = [{ src = 4, dst = 5, bidirectional = false }]\n'
    m = load_machine_file(write(tmp_path, text, "broken_ring.toml"))
    assert m.name == "broken_ring" and m.num_npus == 5
    assert m.npu_labels == ("npu0", "npu1", "npu3", "npu4", "npu5")
    assert m.num_links == 12 - 4 - 1
    assert not m.links_between(3, 4) and m.links_between(4, 3)


def test_failures_name_switches(tmp_path):
    text = '[topology]\nkind = "nvswitch"\nn = 4\n[failures]\nlinks = [[1, "nvswitch"]]\n'
    m = load_machine_file(write(tmp_path, text))
    assert m.num_links == 6 and not m.links_between(1, 4)


TOPO = '[topology]\nkind = "torus2d"\ndims = [4, 4]\nbandwidth = "50 GiB/s"\nlatency = "0.5 us"\n'
RING = '[topology]\nkind = "ring"\nn = 4\nbandwidth = "50 GiB/s"\nlatency = "0.5 us"\n'


def links_file(*links: str, npus: int = 4, switches: str = "") -> str:
    body = "".join(f"[[links]]\n{link}\n" for link in links)
    return f"[machine]\nnpus = {npus}\n{switches}{body}"


OK_LINK = 'src = 0\ndst = 1\nbandwidth = "1 GB/s"\nlatency = "1 us"'

BAD = [
    # (file text, field path, words the message must contain)
    ("[topology\nkind = 1", None, "malformed TOML"),
    ("linkz = 1\n" + TOPO, "linkz", "did you mean 'links'"),
    ("[machine]\nnmae = 'x'\n" + TOPO, "machine.nmae", "did you mean 'name'"),
    (TOPO.replace("bandwidth", "bandwith"), "topology.bandwith", "did you mean 'bandwidth'"),
    (TOPO.replace('"50 GiB/s"', "50"), "topology.bandwidth", "with a unit"),
    (TOPO.replace('"0.5 us"', '"0.5"'), "topology.latency", "needs a unit"),
    (TOPO.replace('"0.5 us"', '"-1 us"'), "topology.latency", "must be non-negative"),
    (TOPO.replace('"50 GiB/s"', '"50 GiB"'), "topology.bandwidth", "per second"),
    (TOPO.replace("[4, 4]", '"4x4"'), "topology.dims", "must be an array"),
    (TOPO.replace("[4, 4]", "[4, 0]"), "topology.dims[1]", "at least 1"),
    (TOPO.replace("[4, 4]", "[4, 4, 4]"), "topology.dims", "must list 2 sizes"),
    (TOPO.replace("[4, 4]", "[4, 4.5]"), "topology.dims[1]", "must be an integer"),
    (TOPO.replace('"torus2d"', '"torus2"'), "topology.kind", "did you mean 'torus2d'"),
    (TOPO.replace('kind = "torus2d"\n', ""), "topology.kind", "missing"),
    (TOPO.replace("dims = [4, 4]\n", ""), "topology.dims", "missing"),
    (RING.replace("n = 4", "n = true"), "topology.n", "must be an integer"),
    (RING + "bidirectional = 1\n", "topology.bidirectional", "true or false"),
    ('[topology]\nkind = "mesh2d"\ndims = [3, 3]\nbandwidth = ["1 GB/s", 5]\nlatency = "1 us"\n',
     "topology.bandwidth[1]", "with a unit"),
    ('[topology]\nkind = "astra"\n[[topology.dims]]\ntopology = "Torus"\nnpus_count = 4\n'
     'bandwidth = "1 GB/s"\nlatency = "1 us"\n', "topology.dims[0].topology", "unknown topology"),
    ('[topology]\nkind = "astra"\n[[topology.dims]]\ntopology = "Ring"\n'
     'bandwidth = "1 GB/s"\nlatency = "1 us"\n', "topology.dims[0].npus_count", "missing"),
    ('[topology]\nkind = "astra"\n[[topology.dims]]\ntopology = "Ring"\nnpus_count = 4\nbw = 1\n'
     'bandwidth = "1 GB/s"\nlatency = "1 us"\n', "topology.dims[0].bw", "unknown key"),
    ("topology = 3\n", "topology", "must be a table"),
    ("[machine]\nname = 'x'\n", None, "needs either a [topology]"),
    ("[machine]\nnpus = 4\n" + TOPO, "machine.npus", "explicit graphs"),
    (TOPO + "[[links]]\n" + OK_LINK + "\n", "links", "cannot be combined"),
    ("[machine]\nnpus = 2\n", "links", "missing"),
    ("[machine]\nnpus = 0\n[[links]]\n" + OK_LINK, "machine.npus", "at least 1"),
    ("[machine]\nname = 7\n" + TOPO, "machine.name", "must be a string"),
    ("[machine]\ndescription = ['a']\n" + TOPO, "machine.description", "must be a string"),
    ("[machine]\nnpus = 2\nlabels = ['a']\n[[links]]\n" + OK_LINK, "machine.labels", "one label per NPU"),
    ("[machine]\nnpus = 2\npositions = [[0, 0]]\n[[links]]\n" + OK_LINK, "machine.positions", "one [x, y]"),
    ("[machine]\nnpus = 2\npositions = [[0, 0], [1, 'a']]\n[[links]]\n" + OK_LINK,
     "machine.positions[1]", "[x, y] numbers"),
    (links_file(OK_LINK, OK_LINK, OK_LINK, OK_LINK.replace('"1 GB/s"', '"-5 GB/s"')),
     "links[3].bandwidth", "bandwidth '-5 GB/s' must be positive"),
    (links_file(OK_LINK.replace("dst = 1", "dst = 9")), "links[0].dst", "NPU 9 does not exist"),
    (links_file(OK_LINK.replace("dst = 1", "dst = -1")), "links[0].dst", "NPU -1 does not exist"),
    (links_file(OK_LINK.replace("dst = 1", 'dst = "sw9"'), switches='[[switches]]\nname = "sw"\n'),
     "links[0].dst", "no switch named 'sw9' (switches: sw)"),
    (links_file(OK_LINK.replace("dst = 1", "dst = 0")), "links[0]", "self-loop"),
    (links_file(OK_LINK.replace('src = 0', 'src = 0.0')), "links[0].src", "must be an integer"),
    (links_file(OK_LINK + "\ncount = true"), "links[0].count", "must be an integer"),
    (links_file(OK_LINK + "\ncount = 0"), "links[0].count", "at least 1"),
    (links_file(OK_LINK + "\nbidirectional = 'yes'"), "links[0].bidirectional", "true or false"),
    (links_file(OK_LINK.replace("latency", "lat")), "links[0].lat", "unknown key"),
    (links_file(OK_LINK.replace('latency = "1 us"', "")), "links[0].latency", "missing"),
    (links_file(OK_LINK, switches='[[switches]]\nname = "s"\n[[switches]]\nname = "s"\n'),
     "switches[1].name", "duplicate switch"),
    (links_file(OK_LINK, switches='[[switches]]\nname = "s"\nmulticast = "no"\n'),
     "switches[0].multicast", "true or false"),
    ("[machine]\nnpus = 2\nlinks = 5\n", "machine.links", "unknown key"),
    ("[machine]\nnpus = 2\n[links]\nsrc = 0\n", "links", "must be an array"),
    (RING + "[failures]\nlinks = [[0, 2]]\n", "failures.links[0]", "no working link(s) npu0 -> npu2"),
    (RING + "[failures]\nlinks = [[0, 1, 2]]\n", "failures.links[0]", "must be [u, v]"),
    (RING + "[failures]\nlinks = [[0, 1], [1, 0]]\n", "failures.links[1]", "no working link(s)"),
    (RING + "[failures]\nlinks = [{ src = 0, dst = 1, count = 2 }]\n", "failures.links[0]",
     "only 1 working link(s)"),
    (RING + "[failures]\nlinks = [[0, 'spine']]\n", "failures.links[0][1]", "no switch named"),
    (RING + "[failures]\nlinks = [{ src = 0 }]\n", "failures.links[0].dst", "missing"),
    (RING + "[failures]\nnpus = [4]\n", "failures.npus[0]", "NPU 4 does not exist"),
    (RING + "[failures]\nnpus = [1, 1]\n", "failures.npus[1]", "listed twice"),
    (RING + "[failures]\nnpu = [1]\n", "failures.npu", "did you mean 'npus'"),
]


@pytest.mark.parametrize("text, field, words", BAD, ids=[f"{i}-{c[1]}" for i, c in enumerate(BAD)])
def test_bad_files_name_file_and_field(tmp_path, text, field, words):
    path = write(tmp_path, text)
    with pytest.raises(InputError) as err:
        load_machine_file(path)
    message = str(err.value)
    assert err.value.source == str(path)
    assert err.value.field == field
    prefix = f"{path}: {field}: " if field else f"{path}: "
    assert message.startswith(prefix), message
    assert words in message, message
    assert "\n" not in message


def test_brief_example_message_exactly(tmp_path):
    path = write(tmp_path, links_file(OK_LINK, OK_LINK, OK_LINK, OK_LINK.replace('"1 GB/s"', '"-5 GB/s"')))
    with pytest.raises(InputError) as err:
        load_machine_file(path)
    assert str(err.value) == f"{path}: links[3].bandwidth: bandwidth '-5 GB/s' must be positive"


def test_non_utf8_and_missing_files(tmp_path):
    path = tmp_path / "latin1.toml"
    path.write_bytes('[machine]\ndescription = "caf\u00e9"\n'.encode("latin-1"))
    with pytest.raises(InputError, match=r"latin1.toml: not UTF-8 text \(line 2, byte 28 is 0xe9\)"):
        load_machine_file(path)
    with pytest.raises(InputError, match="nowhere.toml: file not found"):
        load_machine_file(tmp_path / "nowhere.toml")


def test_generator_defaults_apply(tmp_path):
    m = load_machine_file(write(tmp_path, '[topology]\nkind = "dgx1"\n', "d.toml"))
    assert set(m.link_bandwidth) == {g.NVLINK2_BANDWIDTH} and set(m.link_latency) == {g.NVLINK_LATENCY}
    assert m.name == "d" and "DGX-1" in m.description
