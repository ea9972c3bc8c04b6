import json

import pytest

from cli_paths import REPO

QUICK = REPO / "instances" / "quick"
DATA = REPO / "tests" / "interop" / "msccl" / "data"


def test_synth_then_msccl_round_trip_keeps_the_time(run, tmp_path):
    inst = QUICK / "dgx1-allgather-c2.toml"
    code, out, _ = run("synth", inst, "--algo", "tacos", "--runs", "3", "--out", tmp_path / "s.json", "--json")
    synth_time = json.loads(out)["time"]
    assert code == 0
    code, _, _ = run("msccl", "export", inst, tmp_path / "s.json", "-o", tmp_path / "s.xml")
    assert code == 0
    code, out, _ = run("msccl", "validate", tmp_path / "s.xml")
    assert code == 0 and "valid MSCCL-IR" in out
    code, out, _ = run("msccl", "import", tmp_path / "s.xml", "--machine", "dgx1", "--size", "1 GiB", "--json")
    data = json.loads(out)
    assert code == 0 and data["valid"] and abs(data["time"] - synth_time) <= 1e-9 * synth_time


def test_msccl_validate_reports_findings_with_exit_1(run, tmp_path):
    text = (DATA / "allgather_ring_8.xml").read_text().replace('send="1"', 'send="7"', 1)
    (tmp_path / "broken.xml").write_text(text)
    code, out, _ = run("msccl", "validate", tmp_path / "broken.xml", "--json")
    assert code == 1 and json.loads(out)["findings"]


def test_msccl_runtimes_on_the_command_line(run, tmp_path):
    real = DATA / "msccl-tools" / "allreduce_a100_ring_8_ch1_i1.xml"
    code, out, _ = run("msccl", "validate", real)
    assert code == 0 and "valid" in out
    # the first runtime wants a name, which msccl-tools always writes; the executor no redop
    code, out, _ = run("msccl", "validate", real, "--runtime", "msccl")
    assert code == 0
    tabs = tmp_path / "tabs.xml"
    tabs.write_text(real.read_text().replace("  <gpu", "\t<gpu"))
    code, out, _ = run("msccl", "validate", tabs)
    assert code == 1 and "expecting '<', got a tab" in out
    # a thread block over the executor's 64 steps: bad input for an import aimed at it, one line
    steps = "".join(f'<step s="{k}" type="nop" srcbuf="i" srcoff="-1" dstbuf="o" dstoff="-1" cnt="0" '
                    f'depid="-1" deps="-1" hasdep="0"/>' for k in range(15, 80))
    long = tmp_path / "long.xml"
    long.write_text(real.read_text().replace("</tb>", f"{steps}</tb>", 1))
    code, out, err = run("msccl", "import", long, "--machine", "ring8", "--size", "8 MiB")
    assert code == 2 and str(long) in err and "gpu 0 tb 0" in err and len(err.strip().splitlines()) == 1
    code, out, _ = run("msccl", "import", long, "--machine", "ring8", "--size", "8 MiB", "--runtime", "msccl")
    assert code == 0


def test_astra_network_round_trip_and_predict(run, tmp_path):
    code, _, _ = run("astra", "export-network", "torus4x4", "-o", tmp_path / "n.yml")
    assert code == 0
    code, _, _ = run("astra", "import-network", tmp_path / "n.yml", "-o", tmp_path / "n.toml")
    assert code == 0
    code, out, _ = run("model", "show", tmp_path / "n.toml", "--json")
    assert json.loads(out)["npus"] == 16
    code, out, _ = run("astra", "predict", "--network", tmp_path / "n.yml", "--collective", "allgather",
                       "--size", "16MiB", "--json")
    assert code == 0 and json.loads(out)["total_ns"] > 0
    # --size is the collective's M as everywhere in optcoll; ASTRA-sim's own comm_size (AllGather: M/N)
    # is --comm-size, and the two agree
    data = json.loads(out)
    assert (data["size_bytes"], data["comm_size"]) == (16 * 2**20, 2**20)
    code, same, _ = run("astra", "predict", "--network", tmp_path / "n.yml", "--collective", "allgather",
                        "--comm-size", "1MiB", "--json")
    assert code == 0 and json.loads(same)["total_ns"] == data["total_ns"]
    for extra in (("--size", "16MiB", "--comm-size", "1MiB"), (), ("--size", "1000001 B")):
        code, _, err = run("astra", "predict", "--network", tmp_path / "n.yml", "--collective", "allgather",
                           *extra)
        assert code == 2 and len(err.strip().splitlines()) == 1 and "--size" in err
    code, out, _ = run("astra", "export-network", "dgxh100-rail-2x8", "-o", tmp_path / "rail.yml", "--json")
    assert code == 0 and len(json.loads(out)["left_out"]) == 2
    code, _, err = run("astra", "export-network", "dgx1", "-o", tmp_path / "d.yml")
    assert code == 2 and "optcoll: error" in err


@pytest.mark.parametrize("system, field", [
    ('{"preferred-dataset-splits": 1, "all-reduce-implementaion": ["ring"]}', "all-reduce-implementaion"),
    ('{"preferred-dataset-splits": 1, "local-mem-bw": -50}', "local-mem-bw"),
])
def test_astra_predict_refuses_a_bad_system_json_in_one_line(run, tmp_path, system, field):
    (tmp_path / "sys.json").write_text(system)
    code, _, err = run("astra", "predict", "--network", REPO / "examples" / "astra" / "ring8.yml", "--system",
                       tmp_path / "sys.json", "--collective", "allreduce", "--size", "1 MiB")
    assert code == 2 and len(err.strip().splitlines()) == 1 and f"sys.json: {field}:" in err


def test_chakra_and_nvidia_smi(run, tmp_path):
    inst = QUICK / "ring8-allgather-c1.toml"
    run("synth", inst, "--algo", "ring", "--out", tmp_path / "r.json")
    code, out, _ = run("astra", "chakra", inst, tmp_path / "r.json", "-o", tmp_path / "et" / "ag")
    assert code == 0 and len(list((tmp_path / "et").glob("ag.*.et"))) == 8
    # the files written replay to the time of exporting anew; 64 MiB over ring(8): 7 steps of
    # 500 + 2^23 / (50 · 2^30 / 1e9) = 156750 ns, with nothing to floor
    for extra in ((), ("--traces", tmp_path / "et" / "ag")):
        code, out, _ = run("astra", "replay", inst, tmp_path / "r.json", "--json", *extra)
        data = json.loads(out)
        assert code == 0 and data["astra_ns"] == 7 * 156750 and data["verified_ns"] == pytest.approx(
            data["astra_ns"])
    code, _, err = run("astra", "replay", QUICK / "dgx1-allgather-c1.toml", REPO / "instances" / "quick" /
                       "schedules" / "dgx1-allgather-c1.json.gz")
    assert code == 2 and "--network" in err and len(err.strip().splitlines()) == 1
    code, _, _ = run("model", "from-nvidia-smi", DATA / "nvidia_smi_dgx1.txt", "--nvlink-bandwidth", "25 GB/s",
                     "-o", tmp_path / "smi.toml")
    code, out, _ = run("model", "show", tmp_path / "smi.toml", "--json")
    assert code == 0 and json.loads(out)["links"] == 48


def test_axonn_ranking_command(run, tmp_path):
    """The ranking, its --out copy and the refusals; one Perlmutter node (4 GPUs) keeps it quick,
    the README tour ranks 8 GPUs (tests/cli/test_readme_tour.py)."""
    out = tmp_path / "axonn.md"
    code, text, _ = run("axonn", "--machine", "perlmutter", "--gpus", "4", "--layer-size", "512",
                        "--no-schedules", "--out", out)
    assert code == 0 and "## Ranking" in text and out.read_text().strip() == text.strip()
    code, _, err = run("axonn", "--machine", "dgx1", "--gpus", "8", "--layer-size", "512", "--no-schedules")
    assert code == 2 and "multinode" in err
    code, text, _ = run("axonn", "--machine", "perlmutter", "--gpus", "8", "--layer-size", "512",
                        "--no-schedules", "--bandwidths", "measured", "--shape", "4,2,1,1")
    assert code == 0 and "Megatron-AxoNN" in text and "225 GiB/s" in text
    code, _, err = run("axonn", "--machine", "cluster2x8", "--gpus", "16", "--layer-size", "512",
                       "--no-schedules", "--bandwidths", "measured")
    assert code == 2 and "--bandwidths" in err and len(err.strip().splitlines()) == 1
