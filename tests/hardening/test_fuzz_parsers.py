"""Every parser on mutated valid files and random values: it parses or raises ``InputError`` (one
line, naming the file where there is one), never any other exception."""
from __future__ import annotations

import gzip
import json
import tomllib
from pathlib import Path

import pytest
import tomli_w
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from bad_input_cases import CORPUS
from fuzz_inputs import mutated_bytes, mutated_data, mutated_xml
from optcoll.check.config import load_check_config
from optcoll.producers.external.spec import _PY as PY_SPEC
from optcoll.producers.external.spec import KINDS, parse_synth
from optcoll.producers.external.spec import _is_file as is_file_module
from optcoll.errors import InputError
from optcoll.interop.astra.network import parse_network, read_machine
from optcoll.interop.astra.system import parse_system, read_system
from optcoll.interop.msccl import import_msccl_xml, validate_msccl_xml
from optcoll.interop.nvidia_smi import load_nvidia_smi
from optcoll.instances.instancefile import instance_from_dict, load_instance
from optcoll.machines.catalog import load_machine
from optcoll.machines.modelfile import load_machine_file, machine_from_dict
from optcoll.schedules.jsonfile import load_schedule, schedule_from_dict
from optcoll.instances.suite import find_suite
from optcoll.units import parse_bandwidth, parse_size, parse_time

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "interop" / "msccl" / "data"
SETTINGS = settings(max_examples=75, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

RICH_MODEL = """\
[machine]
name = "rich"
npus = 3
labels = ["a", "b", "c"]
positions = [[0, 0], [1, 0], [0, 1], [1, 1]]

[[switches]]
name = "sw"
multicast = true

[[links]]
src = 0
dst = "sw"
bandwidth = "25 GB/s"
latency = "0.5 us"
count = 2
bidirectional = true

[[links]]
src = 1
dst = "sw"
bandwidth = "400 Gbit/s"
latency = "700 ns"
bidirectional = true

[[links]]
src = 2
dst = 0
bandwidth = "50 GiB/s"
latency = "0 s"

[failures]
links = [[1, "sw"], { src = 0, dst = "sw", count = 1, bidirectional = false }]
"""
NETWORKS = ["topology: [ Ring, Switch ]\nnpus_count: [ 4, 2 ]\n"
            "bandwidth: [ 50, 25 ]\nlatency: [ 500, 1000 ]\n",
            "topology: [ FullyConnected, Ring, Switch ]\nnpus_count: [ 2, 3, 2 ]\n"
            "bandwidth: [ 200, 100.5, 50 ]\nlatency: [ 0, 700, 1700 ]\n"]
SYSTEM = {"all-reduce-implementation": ["ring", "direct"], "all-gather-implementation": ["ring", "ring"],
          "reduce-scatter-implementation": ["halvingDoubling", "ring"], "collective-optimization": "baseline",
          "scheduling-policy": "LIFO", "endpoint-delay": 10, "active-chunks-per-dimension": 1,
          "preferred-dataset-splits": 1}
SUITE = """\
[suite]
description = "fuzzed"
runs = 3

[plots.sizes]
instance = "ring4-allgather"
chunks = [1, 2]
from = "1 KiB"
to = "1 MiB"
points = 4

[plots.pareto]
instance = "ring4-allgather"
max_chunks = 3

[check]
max_gap = 1.2

[check.instances.ring4-allgather]
max_gap = 1.5
"""


def _model_seeds() -> list[tuple[str, bytes]]:
    files = sorted((REPO / "models").glob("*.toml")) + [CORPUS / "model" / "two_islands.toml"]
    return [(p.name, p.read_bytes()) for p in files] + [("rich.toml", RICH_MODEL.encode())]


MODELS = _model_seeds()
INSTANCES = [(p.name, p.read_bytes()) for p in sorted((REPO / "instances" / "quick").glob("*.toml"))
             if p.name != "suite.toml"]
RING4, RING8 = load_machine("ring4"), load_machine("ring8")


def _schedules() -> list[tuple[dict, object]]:
    timed = json.loads((CORPUS / "good" / "ring4-allgather.json").read_text())
    stored = json.loads(gzip.decompress(
        (REPO / "instances" / "quick" / "schedules" / "ring8-allgather-c1.json.gz").read_bytes()))
    columns = timed["transfers"]
    step = {"format": "optcoll-schedule", "version": 1, "model": "step", "rounds": [1, 1, 2],
            "transfers": {"chunk": columns["chunk"], "src": columns["src"], "dst": columns["dst"],
                          "step": [1 + k // 4 for k in range(12)], "op": ["copy"] * 12}}
    return [(timed, RING4), (stored, RING8), (step, RING4)]


SCHEDULES = _schedules()
XMLS = [p.read_bytes() for p in sorted(DATA.glob("*.xml"))]
SMI = [p.read_bytes() for p in sorted(DATA.glob("nvidia_smi_*.txt"))]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


def parses_or_refuses(read, *, names_a_file: bool = True):
    """``read()``'s value, or None when it raises ``InputError``: one non-empty line that names a
    file (the one read, or one it led to, like an instance's machine) when ``names_a_file``. Any
    other exception propagates and fails the test."""
    try:
        return read()
    except InputError as exc:
        line = exc.one_line()
        assert line.strip() and "\n" not in line, repr(line)
        assert exc.source or not names_a_file, f"no file named: {line}"
        return None


def _write(scratch: Path, name: str, data: bytes) -> Path:
    path = scratch / name
    path.write_bytes(data)
    return path


# -- machine models, instances ---------------------------------------------------------------------


@SETTINGS
@given(seed=st.sampled_from(MODELS), data=st.data())
def test_machine_model_files_with_mutated_bytes(scratch, seed, data):
    """Model files (every built-in model, an explicit graph with switches, failures and positions)
    with bytes flipped, cut, inserted and lines deleted, duplicated or swapped."""
    name, text = seed
    path = _write(scratch, name, data.draw(mutated_bytes(text)))
    parses_or_refuses(lambda: load_machine_file(path))


@SETTINGS
@given(seed=st.sampled_from(MODELS), data=st.data())
def test_machine_model_tables_with_mutated_values(seed, data):
    """Parsed model tables with keys deleted or misspelt and values replaced by random ones of
    any TOML type (generator calls get small integers only: see fuzz_inputs)."""
    parsed = tomllib.loads(seed[1].decode())
    mutated = data.draw(mutated_data(parsed, dates=True, wide_ints="topology" not in parsed))
    parses_or_refuses(lambda: machine_from_dict(mutated, "fuzzed.toml"))


@SETTINGS
@given(seed=st.sampled_from(INSTANCES), data=st.data())
def test_instance_files_with_mutated_bytes(scratch, seed, data):
    """The quick suite's instance files (with their recorded [results]) mutated byte-wise."""
    name, text = seed
    path = _write(scratch, name, data.draw(mutated_bytes(text)))
    parses_or_refuses(lambda: load_instance(path))


@SETTINGS
@given(seed=st.sampled_from(INSTANCES), data=st.data())
def test_instance_tables_with_mutated_values(seed, data):
    """Parsed instance tables with keys deleted or misspelt and values of random types."""
    mutated = data.draw(mutated_data(tomllib.loads(seed[1].decode()), dates=True))
    parses_or_refuses(lambda: instance_from_dict(mutated, "fuzzed.toml", REPO / "instances" / "quick"))


# -- schedules -------------------------------------------------------------------------------------


@SETTINGS
@given(seed=st.sampled_from(range(len(SCHEDULES))), data=st.data())
def test_schedule_files_with_mutated_bytes(scratch, seed, data):
    """Schedule JSON (timed, stored by truth update, step model) mutated byte-wise, read from
    .json and, compressed, from .json.gz."""
    schedule, machine = SCHEDULES[seed]
    text = data.draw(mutated_bytes(json.dumps(schedule, indent=1).encode()))
    path = _write(scratch, "s.json", text)
    parses_or_refuses(lambda: load_schedule(path, machine))
    packed = _write(scratch, "s.json.gz", gzip.compress(text, mtime=0))
    parses_or_refuses(lambda: load_schedule(packed, machine))


@SETTINGS
@given(seed=st.sampled_from(range(len(SCHEDULES))), data=st.data())
def test_compressed_schedules_with_mutated_bytes(scratch, seed, data):
    """The gzip stream of a schedule itself mutated (header, deflate data, checksum)."""
    schedule, machine = SCHEDULES[seed]
    raw = gzip.compress(json.dumps(schedule).encode(), mtime=0)
    path = _write(scratch, "z.json.gz", data.draw(mutated_bytes(raw)))
    parses_or_refuses(lambda: load_schedule(path, machine))


@SETTINGS
@given(seed=st.sampled_from(range(len(SCHEDULES))), data=st.data())
def test_schedule_objects_with_mutated_values(seed, data):
    """Parsed schedules with columns deleted or misspelt and values of random JSON types."""
    schedule, machine = SCHEDULES[seed]
    mutated = data.draw(mutated_data(schedule, json=True))
    parses_or_refuses(lambda: schedule_from_dict(mutated, machine, "fuzzed.json"))


# -- MSCCL XML, ASTRA-sim, nvidia-smi --------------------------------------------------------------


@settings(SETTINGS, max_examples=40)
@given(seed=st.sampled_from(XMLS), data=st.data())
def test_msccl_xml_with_mutated_bytes(scratch, seed, data):
    """msccl-tools' ring AllGather and AllReduce XML mutated byte-wise: validating reports findings,
    importing (which runs the program) returns a schedule or refuses."""
    path = _write(scratch, "algo.xml", data.draw(mutated_bytes(seed)))
    findings = parses_or_refuses(lambda: validate_msccl_xml(path))
    assert findings is None or all(isinstance(f, str) and f for f in findings)
    parses_or_refuses(lambda: import_msccl_xml(path, RING8, size=8e6))


@settings(SETTINGS, max_examples=60)
@given(seed=st.sampled_from(XMLS), data=st.data())
def test_msccl_xml_with_mutated_attributes_and_elements(scratch, seed, data):
    """Well-formed MSCCL XML with attributes replaced (small, negative, huge, non-numeric) or
    deleted and elements deleted or duplicated: findings, a schedule or a refusal."""
    path = _write(scratch, "algo.xml", data.draw(mutated_xml(seed)))
    findings = parses_or_refuses(lambda: validate_msccl_xml(path))
    assert findings is None or all(isinstance(f, str) and f for f in findings)
    parses_or_refuses(lambda: import_msccl_xml(path, RING8, size=8e6))


@SETTINGS
@given(seed=st.sampled_from(NETWORKS), data=st.data())
def test_astra_network_files_with_mutated_bytes(scratch, seed, data):
    """network.yml mutated byte-wise, read all the way to optcoll's machine."""
    path = _write(scratch, "network.yml", data.draw(mutated_bytes(seed.encode())))
    parses_or_refuses(lambda: read_machine(path))


@SETTINGS
@given(seed=st.sampled_from(NETWORKS), data=st.data())
def test_astra_network_mappings_with_mutated_values(seed, data):
    """Parsed network.yml with keys deleted or misspelt and values of random YAML types."""
    import yaml

    mutated = data.draw(mutated_data(yaml.safe_load(seed), json=True, dates=True))
    parses_or_refuses(lambda: parse_network(mutated, "fuzzed.yml").machine())


@SETTINGS
@given(data=st.data())
def test_astra_system_json_with_mutated_bytes_and_values(scratch, data):
    """ASTRA-sim system.json: bytes mutated (read from a file) and values of random JSON types."""
    path = _write(scratch, "system.json", data.draw(mutated_bytes(json.dumps(SYSTEM, indent=1).encode())))
    parses_or_refuses(lambda: read_system(path))
    mutated = data.draw(mutated_data(SYSTEM, json=True))
    parses_or_refuses(lambda: parse_system(mutated, "fuzzed.json"))


@SETTINGS
@given(seed=st.sampled_from(SMI), pcie=st.sampled_from([None, 12e9]), data=st.data())
def test_nvidia_smi_text_with_mutated_bytes(scratch, seed, pcie, data):
    """`nvidia-smi topo -m` output (DGX-1, DGX A100) mutated byte-wise."""
    path = _write(scratch, "topo.txt", data.draw(mutated_bytes(seed)))
    parses_or_refuses(lambda: load_nvidia_smi(path, nvlink_bandwidth=25e9, nvlink_latency=5e-7,
                                              pcie_bandwidth=pcie))


# -- suites, synthesizer specs, units --------------------------------------------------------------


@settings(SETTINGS, max_examples=60)
@given(data=st.data())
def test_suite_toml_with_mutated_values(scratch, data):
    """suite.toml ([suite], [plots], [check]) with keys deleted or misspelt and values of random
    TOML types, read as optcoll report/truth/check read it."""
    suite_dir = scratch / "suite"
    suite_dir.mkdir(exist_ok=True)
    (suite_dir / "ring4-allgather.toml").write_bytes((CORPUS / "good" / "ring4-allgather.toml").read_bytes())
    mutated = data.draw(mutated_data(tomllib.loads(SUITE), dates=True))
    _write(scratch, "suite/suite.toml", tomli_w.dumps(mutated).encode())
    suite = parses_or_refuses(lambda: find_suite(str(suite_dir)))
    if suite is not None:
        parses_or_refuses(lambda: load_check_config(suite))


def _imports_a_module_by_name(text: str) -> bool:
    """Whether ``parse_synth(text)`` would import a module named in it (not a file): importing
    runs the module's code, so random names stay out of the fuzzer."""
    kind, sep, rest = text.strip().partition(":")
    body = rest.strip() if sep and kind in KINDS else text.strip()
    if sep and kind in KINDS and kind != "py":
        return False
    match = PY_SPEC.fullmatch(body)
    return bool(match) and not is_file_module(match["module"])


@SETTINGS
@given(seed=st.sampled_from(["builtin:tacos", "cmd:cat {instance} {out}.json", "dir:/nonexistent/dir",
                             "py:/nonexistent/synth.py:synthesize", "ring", "cmd:'unclosed {out}"]),
       data=st.data())
def test_synthesizer_specs_with_mutated_text(seed, data):
    """`check --synth` specs (builtin:, cmd:, dir:, py: with a file) mutated; specs that would
    import a module by a random dotted name are left out (importing runs its code)."""
    text = data.draw(_mutated_text(seed))
    assume(not _imports_a_module_by_name(text))
    parses_or_refuses(lambda: parse_synth(text), names_a_file=False)


UNIT_SEEDS = ["1 GiB", "400 Gbit/s", "0.5 us", "1e9999999 GB/s", "1e-9999999 s", "1e99999999999999999999 B",
              "1e9999999999999999999", "-0 B", "5 parsecs", ".5e3 ms"]


def _mutated_text(seed: str) -> st.SearchStrategy:
    return mutated_bytes(seed.encode()).map(lambda b: b.decode("utf-8", "replace"))


@settings(SETTINGS, max_examples=200)
@given(text=st.one_of(st.text(max_size=20), st.sampled_from(UNIT_SEEDS).flatmap(_mutated_text)),
       parse=st.sampled_from([parse_size, parse_bandwidth, parse_time]))
def test_unit_values_are_numbers_or_refused(text, parse):
    """Random strings and mutated unit values: a finite float ≥ 0 or an InputError, never a crash."""
    value = parses_or_refuses(lambda: parse(text), names_a_file=False)
    assert value is None or (value >= 0 and value < float("inf"))
