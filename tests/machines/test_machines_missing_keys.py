"""A machine file with several keys missing names all of them in one error (one run, not one
run per key), the first as the field."""
import pytest

from optcoll.errors import InputError
from optcoll.machines.modelfile import load_model_file


@pytest.mark.parametrize("text, says", [
    ('[topology]\nkind = "torus2d"\n',
     "topology.dims: missing (also missing: topology.bandwidth, topology.latency)"),
    ('[machine]\nnpus = 2\n[[links]]\nsrc = 0\n[[links]]\ndst = 1\nbandwidth = "1 GB/s"\n',
     "links[0].dst: missing (also missing: links[0].bandwidth, links[0].latency, links[1].src, links[1].latency)"),
    ('[machine]\nnpus = 2\n[[switches]]\nmulticast = true\n[[switches]]\nreduce = true\n[[links]]\nsrc = 0\n'
     'dst = 1\nbandwidth = "1 GB/s"\nlatency = "1 us"\n',
     "switches[0].name: missing (also missing: switches[1].name)"),
    ('[topology]\nkind = "cluster"\n[[topology.groups]]\nnic_bandwidth = "400 Gbit/s"\n',
     "topology.groups[0].nodes: missing (also missing: topology.groups[0].node)"),
    ('[topology]\nkind = "torus2d"\ndims = [4, 4]\nbandwidth = "1 GB/s"\n', "topology.latency: missing"),
])
def test_every_missing_key_in_one_error(tmp_path, text, says):
    path = tmp_path / "box.toml"
    path.write_text(text)
    with pytest.raises(InputError) as caught:
        load_model_file(path)
    assert caught.value.one_line() == f"{path}: {says}"
