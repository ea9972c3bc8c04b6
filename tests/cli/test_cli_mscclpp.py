"""`optcoll mscclpp import/validate`: a real plan verified, old and bad plans refused in one line."""
import json
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "interop" / "mscclpp" / "data"
CI = DATA / "mscclpp-1f5f065"


def test_cli_import_and_bad_input(run, tmp_path):
    code, out, _ = run("mscclpp", "import", CI / "reduce_nvls.json", "--machine", "dgxh100", "--size", "32 MiB",
                       "--json")
    assert code == 0 and json.loads(out)["valid"]
    code, _, err = run("mscclpp", "import", DATA / "mscclpp-v0.7.0" / "allreduce.json", "--machine", "dgxh100",
                       "--size", "32 MiB")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "MSCCL++ < 0.8.0" in err
    data = json.loads((CI / "reduce.json").read_text())
    data["gpus"][0]["threadblocks"][0]["ops"][2]["name"] = "teleport"
    (tmp_path / "bad.json").write_text(json.dumps(data))
    code, _, err = run("mscclpp", "validate", tmp_path / "bad.json")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "ops[2].name: unknown op 'teleport'" in err
