"""MSCCL++ plans: every plan of the executor's CI and of its DSL imports and verifies on a machine
(or is refused with a true, named reason); times checked by hand; bad plans refused in one line."""
import copy
import json
from pathlib import Path

import pytest

from optcoll.bounds import best_lower_bound
from optcoll.errors import InputError
from optcoll.interop.mscclpp.importer import import_mscclpp_plan
from optcoll.interop.mscclpp.schema import parse_plan, read_plan
from optcoll.interop.mscclpp.validate import check_plan
from optcoll.machines.catalog import load_machine
from optcoll.verify import verify

DATA = Path(__file__).parent / "data"
CI = DATA / "mscclpp-1f5f065"
DSL = DATA / "mscclpp-dsl-1f5f065"
MiB = 2**20
NVLS = ("reduce_nvls", "reduce_nvls_pipeline")


def _time(plan, machine, size):
    imported = import_mscclpp_plan(plan, machine, size=size)
    result = verify(imported.machine, imported.collective, imported.schedule, imported.model)
    assert imported.faithful, imported.problems
    assert result.valid, result.violation.message
    return result.time


def _size(path):
    """The size the executor's CI runs them at (``--size 32M`` per GPU input): M for optcoll."""
    return 64 * MiB if "transfer" in path.name else 32 * MiB


@pytest.mark.parametrize("path", sorted(CI.glob("*.json")), ids=lambda p: p.stem)
def test_every_executor_ci_plan_imports_and_verifies(path):
    plan = read_plan(path)
    assert check_plan(plan) == []
    machines = ["dgxh100"] + ([] if path.stem in NVLS else ["mi300x"])
    for name in machines:
        assert _time(plan, load_machine(name), _size(path)) > 0


@pytest.mark.parametrize("stem", NVLS)
def test_nvls_plans_need_a_switch_that_reduces_and_multicasts(stem):
    with pytest.raises(InputError, match="reduces and multicasts"):
        import_mscclpp_plan(CI / f"{stem}.json", load_machine("mi300x"), size=32 * MiB)


def test_allgather_packets_on_mi300x_take_one_link_time_for_twice_their_bytes():
    # each GPU puts its 32 MiB as LL16 packets straight into its peer's scratch: 64 MiB on the wire,
    # α + 2b/B on a 64 GB/s link
    assert _time(CI / "transfer_pack.json", load_machine("mi300x"), 64 * MiB) == pytest.approx(0.5e-6 + 2 * 32 * MiB / 64e9)
    imported = import_mscclpp_plan(CI / "transfer_pack.json", load_machine("mi300x"), size=64 * MiB)
    assert imported.machine.name == "mi300x (LL packets)" and any("LL16Packet" in n for n in imported.notes)


def test_a_plan_mixing_packets_and_plain_puts_is_refused_naming_both():
    data = json.loads((CI / "transfer_pack.json").read_text())
    op = next(o for tb in data["gpus"][0]["threadblocks"] for o in tb["ops"] if o["name"] == "ppkt")
    op["name"] = "put"
    with pytest.raises(InputError, match="sends LL packets .* and put at gpus"):
        import_mscclpp_plan(parse_plan(data, "mixed.json"), load_machine("mi300x"), size=64 * MiB)


def test_nvls_allreduce_time_by_hand():
    # 2 GPUs on the DGX H100 switch, one 16 MiB chunk each, a hop α + b/B = 0.5 us + 16 MiB / 450 GB/s.
    # After the relaxed signal/wait barrier (1 us: two hops of latency), each GPU's glres sends its own
    # and its peer's contribution up (the two chunks follow each other on each uplink), gets the sum
    # back, stores it into the switch and the switch multicasts it to both: five hop times end to end.
    hop = 0.5e-6 + 16 * MiB / 450e9
    assert _time(CI / "reduce_nvls.json", load_machine("dgxh100"), 32 * MiB) == pytest.approx(1e-6 + 5 * hop)


def test_pipelined_nvls_is_cut_into_the_pipeline_units():
    imported = import_mscclpp_plan(CI / "reduce_nvls_pipeline.json", load_machine("dgxh100"), size=32 * MiB)
    assert imported.collective.chunk_bytes == MiB  # unit_size 1 MiB: 16 iterations of each 16 MiB chunk


@pytest.mark.parametrize("path", sorted(DSL.glob("*.json.gz")), ids=lambda p: p.name.split(".")[0])
def test_dsl_written_plans_import_and_verify(path):
    plan = read_plan(path)
    check_plan(plan)
    size = 16 * MiB if plan.collective == "allgather" else 8 * MiB
    machine = "dgxh100" if "nvls" in path.name else "mi300x"
    assert _time(plan, load_machine(machine), size) > 0


def test_partial_sums_of_one_chunk_crossing_the_switch_at_once_verify_as_puts_it_only_routes():
    # the DSL's 8-GPU all-pairs AllReduce on the DGX H100: partial sums of one chunk from two GPUs
    # cross the one switch node at the same instant. The plan has no switch channel, so the NVSwitch
    # only routes its puts (each hop out of it names the arrival it forwards): it verifies, no
    # faster than the AllReduce's bound without in-network reduction (the machine's NVLS unused)
    machine = load_machine("dgxh100")
    imported = import_mscclpp_plan(DSL / "allreduce.json.gz", machine, size=8 * MiB)
    assert imported.problems == () and not any(s.multicast or s.reduce for s in imported.machine.switches)
    result = verify(imported.machine, imported.collective, imported.schedule, imported.model)
    assert result.valid
    bound = best_lower_bound(imported.machine, imported.collective, imported.model)
    assert bound.value > best_lower_bound(machine, imported.collective, imported.model).value
    assert result.time >= bound.value


def test_old_camelcase_plan_says_which_version_in_one_line():
    with pytest.raises(InputError) as info:
        read_plan(DATA / "mscclpp-v0.7.0" / "allreduce.json")
    text = str(info.value)
    assert "MSCCL++ < 0.8.0" in text and "regenerate" in text and "\n" not in text


def _raw(stem="reduce"):
    return json.loads((CI / f"{stem}.json").read_text())


def _refusal(data):
    with pytest.raises(InputError) as info:
        check_plan(parse_plan(data, "bad.json"))
    return str(info.value)


def test_unpaired_channel_is_refused_naming_it():
    data = _raw()
    data["gpus"][1]["channels"] = []  # GPU 1 no longer lists its memory channel back to GPU 0
    for tb in data["gpus"][1]["threadblocks"]:
        tb["channels"], tb["ops"] = [], [op for op in tb["ops"] if "channel_ids" not in op and "channel_type" not in op]
    text = _refusal(data)
    assert text.startswith("bad.json: gpus[0].channels[0]:") and "no partner" in text


def test_chunk_index_out_of_range_is_refused_naming_it():
    data = _raw()
    data["gpus"][0]["threadblocks"][0]["ops"][0]["src_buff"][0]["index"] = 3  # 3..4 of 4 chunks
    text = _refusal(data)
    assert text.startswith("bad.json: gpus[0].threadblocks[0].ops[0].src_buff[0].index:") and "out of range" in text


def test_unknown_op_is_refused_naming_it():
    data = _raw("reduce_nvls")
    data["gpus"][0]["threadblocks"][0]["ops"][5]["name"] = "glre"  # the DSL's unfused switch reduce
    with pytest.raises(InputError) as info:
        parse_plan(copy.deepcopy(data), "bad.json")
    assert str(info.value).startswith("bad.json: gpus[0].threadblocks[0].ops[5].name: unknown op 'glre'")


def test_message_size_range_and_alignment_are_the_executors():
    from optcoll.interop.mscclpp.geometry import sizes_for

    data = _raw()
    data["max_message_size"] = 16 * MiB
    with pytest.raises(InputError, match="outside the plan's range"):
        sizes_for(parse_plan(data, "bad.json"), 32 * MiB)
    with pytest.raises(InputError, match="alignment"):
        sizes_for(read_plan(CI / "reduce.json"), 32 * MiB + 16)  # 2^21 + 1 units of 16 B: not 4 equal chunks



def test_more_than_16_remote_buffers_in_a_thread_block_are_refused_naming_it():
    # microsoft/mscclpp 1f5f065 execution_common.hpp: RemoteBuffers holds MAX_CHANNEL (16) buffers per
    # memory and per port channels, filled per thread block without a bound check
    data = _raw()
    gpu = data["gpus"][0]
    gpu["remote_buffers"] += [{"rank": 1, "type": "o", "access_channel_types": ["memory"]} for _ in range(16)]
    tb = gpu["threadblocks"][0]
    tb["remote_buffer_refs"] = [{"access_channel_type": "memory", "remote_buffer_ids": list(range(17))}]
    text = _refusal(data)
    assert text.startswith("bad.json: gpus[0].threadblocks[0].remote_buffer_refs:") and "17 remote buffers" in text
    tb["remote_buffer_refs"][0]["remote_buffer_ids"] = list(range(16))
    check_plan(parse_plan(data, "ok.json"))


def test_a_gstore_allgather_pays_its_own_echo_one_hop_over_the_suites_schedule():
    # every GPU multicasts its chunk through the NVSwitch with gstore; an NVLS group includes its
    # issuer (validate: rank_groups hold the GPU itself), so each GPU's downlink takes 8 chunks, not
    # 7: 9 hops (2.689 ms at 1 GiB), as the put-per-branch export, against the machines suite's
    # multicast schedule of 8 hops (2.390 ms). So gstore is not what makes that schedule exportable.
    n = 8
    gpus = [{"id": g, "input_chunks": 1, "output_chunks": n, "scratch_chunks": 0,
             "channels": [{"channel_type": "switch", "buffer_type": "o", "rank_groups": [{"size": n, "ranks": list(range(n))}]}],
             "threadblocks": [{"id": 0, "channels": [{"channel_type": "switch", "channel_ids": [0]}],
                               "ops": [{"name": "gstore", "src_buff": [{"type": "i", "index": 0, "size": 1}],
                                        "dst_buff": [{"switch_channel_id": 0, "index": g, "size": 1}],
                                        "channel_type": "switch"}]}]} for g in range(n)]
    plan = parse_plan({"name": "gstore", "collective": "allgather", "protocol": "Simple", "inplace": False,
                       "gpus": gpus}, "gstore.json")
    hop = 0.5e-6 + 2**27 / 450e9
    assert _time(plan, load_machine("dgxh100"), 2**30) == pytest.approx(9 * hop)
