from pathlib import Path

import pytest

from optcoll.errors import InputError
from optcoll.instances.instancefile import load_instance

QUICK = Path(__file__).resolve().parents[2] / "instances" / "quick"


def write(tmp_path: Path, text: str, name: str = "inst.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_every_quick_instance_loads():
    paths = sorted(p for p in QUICK.glob("*.toml") if p.name != "suite.toml")
    assert len(paths) >= 10
    for path in paths:
        inst = load_instance(path)
        assert inst.name == path.stem and inst.collective.num_chunks > 0


def test_full_instance(tmp_path):
    inst = load_instance(write(tmp_path, """
[instance]
name = "sub"
machine = "dgx1"
collective = "broadcast"
size = "8 MiB"
chunks_per_rank = 4
root = 4
ranks = [0, 4, 5]
[model]
occupancy = "serialization"
send_ports = 1
recv_ports = 1
reduce_cost = "0.01 ns/B"
[budget]
time_limit = "2 min" 
threads = 1
seed = 7
work_limit = 2.5
"""))
    c = inst.collective
    assert c.ranks == (0, 4, 5) and c.root == 4 and c.chunk_bytes == 2 * 2**20
    assert inst.model.occupancy == "serialization" and inst.model.reduce_cost == pytest.approx(1e-11)
    assert inst.budget.seed == 7 and inst.budget.threads == 1 and inst.budget.work_limit == 2.5


def test_custom_collective_and_machine_path(tmp_path):
    write(tmp_path, '[topology]\nkind = "line"\nn = 3\nbandwidth = "1 GB/s"\nlatency = "1 us"\n', "m.toml")
    inst = load_instance(write(tmp_path, """
[instance]
machine = "m.toml"
collective = "custom"
[custom]
pre = [[0], [1]]
post = [[1], [2]]
chunk_size = "1 MiB"
"""))
    assert inst.collective.kind == "custom" and inst.collective.needs[1].tolist() == [1, 2]


BAD = {
    "malformed": ("[instance\nmachine = 'dgx1'", "malformed TOML"),
    "unknown-model": ('[instance]\nmachine = "dgx9"\ncollective = "allgather"\nsize = "1 MiB"', "instance.machine"),
    "unknown-collective": ('[instance]\nmachine = "dgx1"\ncollective = "allgathr"\nsize = "1 MiB"',
                           "instance.collective"),
    "unitless-size": ('[instance]\nmachine = "dgx1"\ncollective = "allgather"\nsize = 1024', "instance.size"),
    "negative-size": ('[instance]\nmachine = "dgx1"\ncollective = "allgather"\nsize = "-1 MiB"', "instance.size"),
    "unknown-key": ('[instance]\nmachine = "dgx1"\ncollective = "allgather"\nsize = "1 MiB"\nchunks = 2',
                    "instance.chunks"),
    "unknown-section": ('[instance]\nmachine = "dgx1"\ncollective = "allgather"\nsize = "1 MiB"\n[solver]\n',
                        "solver"),
    "missing-root": ('[instance]\nmachine = "dgx1"\ncollective = "scatter"\nsize = "1 MiB"', "instance.root"),
    "bad-rank": ('[instance]\nmachine = "dgx1"\ncollective = "allgather"\nsize = "1 MiB"\nranks = [0, 9]',
                 "instance.ranks"),
    "bad-occupancy": ('[instance]\nmachine = "dgx1"\ncollective = "allgather"\nsize = "1 MiB"\n'
                      '[model]\noccupancy = "wormhole"', "model.occupancy"),
    "bad-ports": ('[instance]\nmachine = "dgx1"\ncollective = "allgather"\nsize = "1 MiB"\n'
                  '[model]\nsend_ports = 0', "model.send_ports"),
    "bad-time-limit": ('[instance]\nmachine = "dgx1"\ncollective = "allgather"\nsize = "1 MiB"\n'
                       '[budget]\ntime_limit = 60', "budget.time_limit"),
    "bad-work-limit": ('[instance]\nmachine = "dgx1"\ncollective = "allgather"\nsize = "1 MiB"\n'
                       '[budget]\nwork_limit = "10 s"', "budget.work_limit"),
    "zero-work-limit": ('[instance]\nmachine = "dgx1"\ncollective = "allgather"\nsize = "1 MiB"\n'
                        '[budget]\nwork_limit = 0', "budget.work_limit"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_instances_name_file_and_field(tmp_path, case):
    text, where = BAD[case]
    path = write(tmp_path, text)
    with pytest.raises(InputError) as info:
        load_instance(path)
    message = info.value.one_line()
    assert str(path) in message and where in message and "\n" not in message


def test_disconnected_network_is_bad_input(tmp_path):
    write(tmp_path, """
[machine]
npus = 3
[[links]]
src = 0
dst = 1
bandwidth = "1 GB/s"
latency = "1 us"
bidirectional = true
""", "split.toml")
    with pytest.raises(InputError, match="disconnected network.*npu2"):
        load_instance(write(tmp_path, '[instance]\nmachine = "split.toml"\ncollective = "allgather"\n'
                                      'size = "3 MiB"'))
    # a sub-communicator inside the connected part is fine
    inst = load_instance(write(tmp_path, '[instance]\nmachine = "split.toml"\ncollective = "allgather"\n'
                                         'size = "2 MiB"\nranks = [0, 1]', "ok.toml"))
    assert inst.collective.num_ranks == 2


def test_strong_connectivity_check_agrees_with_networkx():
    """The instance loader's own two-search check (no scipy at start-up) against networkx on
    random directed graphs, connected and not."""
    import networkx as nx
    import numpy as np

    from optcoll.instances.instancefile import _strongly_connected

    rng = np.random.default_rng(5)
    for trial in range(200):
        n = int(rng.integers(1, 9))
        edges = rng.integers(0, n, size=(int(rng.integers(0, 3 * n + 1)), 2))
        graph = nx.DiGraph()
        graph.add_nodes_from(range(n))
        graph.add_edges_from(map(tuple, edges.tolist()))
        assert _strongly_connected(edges[:, 0], edges[:, 1], n) == nx.is_strongly_connected(graph), trial
