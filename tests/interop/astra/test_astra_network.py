"""network.yml import/export: ASTRA-sim's units (GB/s read as GiB/s, ns), field-named errors, and
structural recognition of machines built by any generator."""
import numpy as np
import pytest

from optcoll.errors import InputError
from optcoll.interop.astra.network import (astra_dims_of, format_network, network_of, network_view,
                                           parse_network, read_network, write_network)
from optcoll.machines.catalog import load_machine
from optcoll.machines import generators as g
from optcoll.machines.modelfile import load_machine_file
from optcoll.units import parse_time

MODELS = __import__("pathlib").Path(__file__).resolve().parents[3] / "models"
RING4_SWITCH8 = """# the model file's network, as ASTRA-sim writes it
topology: [ Ring, Switch ]
npus_count: [ 4, 8 ]
bandwidth: [ 200, 50 ]  # GB/s
latency: [ 500, 500 ]  # ns
"""


def same_links(a, b):
    key = lambda m: sorted(zip(m.link_src.tolist(), m.link_dst.tolist(), m.link_latency.tolist(),
                               m.link_bandwidth.tolist()))
    return a.num_npus == b.num_npus and len(a.switches) == len(b.switches) and key(a) == key(b)


def test_units_are_gib_per_second_and_ns():
    net = parse_network({"topology": "Ring", "npus_count": 8, "bandwidth": 50, "latency": 500})
    m = net.machine()
    # 50 "GB/s" = 50 · 2^30 B/s; 500 ns is the same float as units.parse_time("500 ns")
    assert set(m.link_bandwidth.tolist()) == {50 * 2**30}
    assert set(m.link_latency.tolist()) == {parse_time("500 ns")}
    assert net.dims[0].bytes_per_ns == 50 * 2**30 / 1e9
    assert m.num_links == 16  # bidirectional ring of 8


def test_file_matches_the_model_file(tmp_path):
    path = tmp_path / "network.yml"
    path.write_text(RING4_SWITCH8)
    net = read_network(path)
    assert [d.topology for d in net.dims] == ["Ring", "Switch"] and net.num_npus == 32
    assert same_links(net.machine(), load_machine_file(MODELS / "astra_ring4_switch8.toml"))


@pytest.mark.parametrize("data, field, words", [
    ({"topology": ["Ring"], "npus_count": [8], "bandwidth": [50]}, "latency", "missing"),
    ({"topology": ["Ring", "Switch"], "npus_count": [8], "bandwidth": [50, 50], "latency": [1, 1]},
     "npus_count", "1 entries"),
    ({"topology": ["Torus"], "npus_count": [8], "bandwidth": [50], "latency": [1]}, "topology[0]", "Torus"),
    ({"topology": ["Ring"], "npus_count": [1], "bandwidth": [50], "latency": [1]}, "npus_count[0]", "larger than 1"),
    ({"topology": ["Ring"], "npus_count": [4], "bandwidth": [0], "latency": [1]}, "bandwidth[0]", "positive"),
    ({"topology": ["Ring"], "npus_count": [4], "bandwidth": [5], "latency": [-1]}, "latency[0]", "non-negative"),
    ({"topology": ["Ring"], "npus_count": [4], "bandwidth": [5], "latency": [1], "links": [2]}, "links", "unknown"),
])
def test_errors_name_file_and_field(data, field, words):
    with pytest.raises(InputError) as err:
        parse_network(data, source="net.yml")
    assert err.value.source == "net.yml" and err.value.field == field and words in str(err.value)


def test_bad_yaml_names_the_file(tmp_path):
    path = tmp_path / "bad.yml"
    path.write_text("topology: [ Ring\n")
    with pytest.raises(InputError, match="bad.yml"):
        read_network(path)


@pytest.mark.parametrize("machine, topologies", [
    (g.ring(8, 1e9, 1e-6), ["Ring"]),
    (g.torus([4, 4], 1e9, 1e-6), ["Ring", "Ring"]),
    (g.torus([4, 3], [1e9, 2e9], [1e-6, 2e-6]), ["Ring", "Ring"]),
    (g.fully_connected(5, 1e9, 1e-6), ["FullyConnected"]),
    (g.switch(6, 1e9, 1e-6), ["Switch"]),
    (g.hypercube(3, 1e9, 1e-6), ["Ring", "Ring", "Ring"]),
    (g.astra([g.AstraDim("FullyConnected", 8, 1e11, 2e-7), g.AstraDim("Ring", 4, 2.5e10, 1e-6)]),
     ["FullyConnected", "Ring"]),
])
def test_recognises_generated_networks(machine, topologies):
    dims = astra_dims_of(machine)
    assert [d.topology for d in dims] == topologies
    assert same_links(g.astra(dims), machine)  # switch ids agree here; labels may differ


def test_export_round_trip(tmp_path):
    machine = load_machine_file(MODELS / "astra_ring4_switch8.toml")
    written = write_network(machine, tmp_path / "out.yml")
    text = (tmp_path / "out.yml").read_text()
    assert "topology: [ Ring, Switch ]" in text and "bandwidth: [ 200, 50 ]" in text
    assert "latency: [ 500, 500 ]" in text
    back = read_network(tmp_path / "out.yml")
    assert written.left_out == () and back.dims == written.network.dims and same_links(back.machine(), machine)


@pytest.mark.parametrize("machine, words", [
    (g.dgx1(), "not an ASTRA-sim"),
    (g.mesh([3, 3], 1e9, 1e-6), "not an ASTRA-sim"),
    (g.ring(6, 1e9, 1e-6, bidirectional=False), "not an ASTRA-sim"),
    (g.switch(4, 1e9, 1e-6, multicast=True), "multicast"),
    (g.ring(8, 1e9, 1e-6).without(links=[0]), "not an ASTRA-sim"),
])
def test_inexpressible_machines_say_why(machine, words):
    with pytest.raises(InputError, match=words):
        network_of(machine)


def test_format_uses_plain_numbers():
    net = network_of(g.ring(4, 100 * 2**30, parse_time("0.5 us")))
    assert format_network(net).splitlines()[-2:] == ["bandwidth: [ 100 ]", "latency: [ 500 ]"]
    assert np.isclose(net.dims[0].latency_ns, 500)


def _plain(machine):
    """Signature of a machine's links with switches named by the NPUs they serve, flags dropped,
    bandwidths to 10 digits (network.yml keeps 12 digits of GiB/s)."""
    def key(v):
        return v if v < machine.num_npus else frozenset(
            int(u) for u in machine.link_dst[machine.out_links[v]] if u < machine.num_npus)
    return sorted((repr(key(int(u))), repr(key(int(v))), float(a), float(f"{b:.10g}")) for u, v, a, b in zip(
        machine.link_src, machine.link_dst, machine.link_latency, machine.link_bandwidth))


@pytest.mark.parametrize("name, nodes", [("dgxh100-rail-2x8", 2), ("dgxh100-rail-4x8", 4)])
def test_rail_cluster_exports_as_nvswitch_times_rail_switch_without_its_spine(tmp_path, name, nodes):
    machine = load_machine(name)
    view = write_network(machine, tmp_path / "rail.yml")
    dims = view.network.dims
    assert [(d.topology, d.npus_count) for d in dims] == [("Switch", 8), ("Switch", nodes)]
    # 900 GB/s bidirectional NVLink = 450e9 B/s per direction; 400 Gbit/s NIC = 50e9 B/s; GiB/s in the file
    assert dims[0].bandwidth_gbps == pytest.approx(450e9 / 2**30) and dims[0].latency_ns == 500
    assert dims[1].bandwidth_gbps == pytest.approx(50e9 / 2**30) and dims[1].latency_ns == 2000
    assert any("spine" in line for line in view.left_out) and any("NVLS" in line for line in view.left_out)
    text = (tmp_path / "rail.yml").read_text()
    assert "# left out: switch(es) spine" in text
    # read back: exactly the cluster's GPU-facing links (NVSwitch per node, one switch per rail)
    spine = [e for e in range(machine.num_links) if "spine" in (machine.label(int(machine.link_src[e])),
                                                                 machine.label(int(machine.link_dst[e])))]
    assert spine and _plain(read_network(tmp_path / "rail.yml").machine()) == _plain(machine.without(links=spine))
    with pytest.raises(InputError, match="not an ASTRA-sim"):  # not the same machine
        network_of(machine)


@pytest.mark.parametrize("name, words", [
    ("cluster2x8", "not an ASTRA-sim"),  # every NIC on one switch: no per-dimension structure
    ("hetero-dgxa100-dgxh100-rail-2x8", "with or without its spine"),  # two node generations
])
def test_clusters_astra_cannot_express_say_why_in_one_line(name, words):
    with pytest.raises(InputError, match=words) as info:
        network_view(load_machine(name))
    assert "\n" not in str(info.value)


def test_an_exact_network_leaves_nothing_out():
    view = network_view(g.torus([4, 4], 1e9, 1e-6))
    assert view.left_out == () and [d.topology for d in view.network.dims] == ["Ring", "Ring"]
