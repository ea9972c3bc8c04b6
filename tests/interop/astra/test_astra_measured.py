"""`optcoll astra predict` against times the real ASTRA-sim reported (data/astra_measured.json,
how it was run in data/README.md): ring, direct, direct2, halvingDoubling and doubleBinaryTree
per dimension, and oneRing, oneDirect, oneDirect2 and oneHalvingDoubling over all NPUs;
AllReduce, ReduceScatter, AllGather and AlltoAll; Ring, FullyConnected and Switch networks and two
2-D ones; both analytical backends; four system.json settings. Each time must match to the
nanosecond, and where ASTRA-sim exits or never finishes the predictor must refuse."""
import json
from pathlib import Path

import pytest

from optcoll.errors import InputError
from optcoll.interop.astra.network import parse_network
from optcoll.interop.astra.predictor import predict
from optcoll.interop.astra.system import KINDS, parse_system

DOC = json.loads((Path(__file__).parent / "data" / "astra_measured.json").read_text())
NETWORKS = {name: parse_network(spec) for name, spec in DOC["networks"].items()}


def _case(row):
    network, algorithm, kind, size, backend, system, measured = row
    data = {**DOC["systems"][system],
            f"{KINDS[kind]}-implementation": [algorithm] * len(NETWORKS[network].dims)}
    return NETWORKS[network], parse_system(data, f"systems[{system}]"), kind, size, backend, measured


def test_the_table_covers_what_it_claims():
    rows = DOC["rows"]
    measured = [r for r in rows if isinstance(r[6], int)]
    assert len(measured) >= 1150
    assert {r[1] for r in measured} == {"ring", "direct", "direct2", "halvingDoubling", "doubleBinaryTree",
                                        "oneRing", "oneDirect", "oneDirect2", "oneHalvingDoubling"}
    assert {r[2] for r in measured} == set(KINDS)
    assert {r[4] for r in measured} == {"unaware", "aware"}
    assert {n.dims[0].topology for n in NETWORKS.values()} == {"Ring", "FullyConnected", "Switch"}
    assert sum(len(NETWORKS[r[0]].dims) == 2 for r in measured) >= 100


def test_every_measured_time_is_predicted_to_the_nanosecond():
    wrong = []
    for row in DOC["rows"]:
        network, system, kind, size, backend, measured = _case(row)
        if isinstance(measured, int):
            got = predict(network, system, kind, size, backend).total_ns
            if got != measured:
                wrong.append((row, got))
    assert wrong == []


@pytest.mark.parametrize("failure, words", [
    ("exits 255: congestion_aware only supports 1-dim topology", "congestion-aware backend refuses"),
    ("exits 1: HalvingDoubling: unknown communication type", "halvingDoubling has no AlltoAll"),
    ("never finishes: the collective's nodes stay unreleased", "never finishes"),
])
def test_where_astra_sim_fails_the_predictor_refuses(failure, words):
    rows = [r for r in DOC["rows"] if r[6] == failure]
    assert rows
    for row in rows:
        network, system, kind, size, backend, _ = _case(row)
        with pytest.raises(InputError, match=words):
            predict(network, system, kind, size, backend)
