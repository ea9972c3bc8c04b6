"""Interop commands: MSCCL-IR XML, ASTRA-sim (network.yml, Chakra ET, predictor), nvidia-smi, NCCL topology XML."""
from __future__ import annotations

import sys

import click


from optcoll.cli.commands_core import load_instance_and_schedule, model
from optcoll.cli.limits import BANDWIDTH, BYTES, TIME, as_flags, out_option, progress_option
from optcoll.cli.output import Ticker, WholeHelpGroup, done, echo, emit_json, json_option, say_overwrites
from optcoll.errors import InputError
from optcoll.instances.budget import MAX_SEED
from optcoll.units import format_time

RUNTIMES = ["executor", "msccl", "rccl"]


@click.group(cls=WholeHelpGroup)
def msccl() -> None:
    """MSCCL-IR XML: export verified schedules, validate and import XML."""


@msccl.command("export")
@click.argument("instance_path", metavar="INSTANCE", type=click.Path(dir_okay=False))
@click.argument("schedule_path", metavar="SCHEDULE", type=click.Path(dir_okay=False))
@click.option("-o", "--out", required=True, type=click.Path(dir_okay=False), help="XML file to write.")
@click.option("--runtime", type=click.Choice(RUNTIMES), default="executor", show_default=True,
              help="Target runtime: the MSCCL executor, the first MSCCL runtime, or RCCL (coll names, limits).")
@click.option("--proto", type=click.Choice(["auto", "Simple", "LL", "LL128"]), default="auto", show_default=True,
              help="NCCL protocol the XML asks for; auto: LL up to 512 KiB (as RCCL's own files), else Simple.")
@click.option("--min-bytes", type=BYTES, default=None,
              help="Smallest message the runtime may pick it for (default: the instance's size).")
@click.option("--max-bytes", type=BYTES, default=None,
              help="Largest message the runtime may pick it for, '0 B' for no limit (default: the instance's size).")
@click.option("--inplace", is_flag=True, help="In-place buffer layout (default out-of-place).")
@click.option("--name", default=None, help="Algorithm name (default: the instance name).")
@json_option
def msccl_export(instance_path, schedule_path, out, runtime, proto, min_bytes, max_bytes, inplace, name,
                 as_json) -> None:
    """Write a verified schedule as MSCCL-IR XML the runtime loads (checked by re-importing it).

    On switched and multi-node machines each route through switches becomes one send to the
    peer GPU; the XML is re-imported with the routes expanded hop by hop on the same machine.
    """
    from optcoll.interop.msccl import save_msccl_xml

    _, inst, schedule = load_instance_and_schedule(instance_path, schedule_path)
    with as_flags(min_bytes="--min-bytes", max_bytes="--max-bytes", proto="--proto"):
        exported = save_msccl_xml(out, inst.machine, inst.collective, schedule, model=inst.model,
                                  runtime=runtime, proto=None if proto == "auto" else proto,
                                  min_bytes=None if min_bytes is None else int(min_bytes),
                                  max_bytes=None if max_bytes is None else int(max_bytes),
                                  inplace=inplace, name=name or inst.name)
    done(as_json, f"wrote {out} ({exported.summary()})", out=out, time=exported.time,
         reimported=exported.reimported, multicast=exported.multicast)


@msccl.command("validate")
@click.argument("xml_path", metavar="XML", type=click.Path(dir_okay=False))
@click.option("--runtime", type=click.Choice(RUNTIMES), default="executor", show_default=True,
              help="The MSCCL executor (msccl-executor-nccl), the first MSCCL runtime, or RCCL's MSCCL.")
@json_option
def msccl_validate(xml_path, runtime, as_json) -> None:
    """Check an MSCCL-IR XML file against the runtime's loader rules (exit 1 on findings)."""
    from optcoll.interop.msccl import validate_msccl_xml

    findings = validate_msccl_xml(xml_path, runtime=runtime)
    if as_json:
        emit_json({"valid": not findings, "findings": findings})
    else:
        echo("\n".join(findings) if findings else f"{xml_path}: valid MSCCL-IR")
    sys.exit(1 if findings else 0)


@msccl.command("import")
@click.argument("xml_path", metavar="XML", type=click.Path(dir_okay=False))
@click.option("--machine", "machine_ref", required=True, help="Machine model (name or .toml).")
@click.option("--size", required=True, type=BYTES,
              help="Buffer size M as nccl-tests counts it, e.g. '1 GiB' (MSCCL-IR XML does not state it).")
@click.option("-o", "--out", type=click.Path(dir_okay=False), help="Write the schedule (.json/.json.gz).")
@click.option("--runtime", type=click.Choice([*RUNTIMES, "any"]), default="executor", show_default=True,
              help="Refuse (exit 2) what this runtime's loader refuses; any: only what execution needs.")
@json_option
def msccl_import(xml_path, machine_ref, size, out, runtime, as_json) -> None:
    """Read MSCCL-IR XML as a schedule on a machine, verify it and report its time."""
    from optcoll.interop.msccl import import_msccl_xml
    from optcoll.machines.catalog import load_machine
    from optcoll.schedules.files import save_schedule
    from optcoll.verify import verify

    machine = load_machine(machine_ref)
    imported = import_msccl_xml(xml_path, machine, size=size, runtime=None if runtime == "any" else runtime)
    result = verify(imported.machine, imported.collective, imported.schedule, imported.model)
    ok = result.valid and imported.faithful
    if out:
        save_schedule(out, imported.schedule, machine)
    if as_json:
        emit_json({"valid": ok, "time": result.time if result.valid else None,
                   "occupancy": imported.model.occupancy,
                   "collective": imported.collective.kind, "transfers": len(imported.schedule),
                   "violation": result.violation.message if result.violation else None,
                   "problems": list(imported.problems), "findings": list(imported.findings)})
    else:
        echo(f"{xml_path}: {imported.collective.describe()}, {len(imported.schedule)} transfers")
        for line in imported.findings:
            echo(f"  note: {line}")
        for line in imported.problems:
            echo(f"  PROBLEM: {line}")
        echo(f"valid: time {format_time(result.time)}" if result.valid
                   else f"INVALID [{result.violation.kind}]: {result.violation.message}")
    sys.exit(0 if ok else 1)


@msccl.command("report-dir")
@click.argument("directory", type=click.Path(file_okay=False, exists=True))
@click.option("--machine", "machine_ref", default="mi300x", show_default=True, help="Machine model (name or .toml).")
@click.option("--source", default="ROCm/rccl 0cbce2a tools/msccl-algorithms",
              show_default=True, help="Where the files come from (for the report's title).")
@out_option("The report to write.", default="reports/rccl-algorithms.md", show_default=True)
@json_option
def msccl_report_dir(directory, machine_ref, source, out, as_json) -> None:
    """Judge every MSCCL XML of a directory (RCCL's production algorithms) on a machine.

    Each file verified at both ends of its message range, next to optcoll's best schedule and
    bound for the same collective and size, and AMD's size crossovers against the model's.
    """
    from optcoll.analysis.tools.rccl import report
    from optcoll.fileio import write_text_atomic
    from optcoll.machines.catalog import load_machine

    say_overwrites(out)
    command = f"optcoll msccl report-dir {directory} --machine {machine_ref} -o {out}"
    text, rows = report(directory, load_machine(machine_ref), command, source)
    write_text_atomic(out, text)
    done(as_json, f"wrote {out} ({len(rows)} files)", out=out, files=len(rows))


@click.group(cls=WholeHelpGroup)
def astra() -> None:
    """ASTRA-sim 2.0: network.yml, Chakra ET traces, the analytical-backend predictor."""


@astra.command("predict")
@click.option("--network", "network_path", required=True, type=click.Path(dir_okay=False),
              help="ASTRA-sim analytical network.yml.")
@click.option("--system", "system_path", type=click.Path(dir_okay=False),
              help="system.json (default: ASTRA-sim's own defaults: endpoint-delay 10 ns, one "
                   "dataset split, no local-mem-bw).")
@click.option("--collective", required=True, help="allreduce, reducescatter, allgather or alltoall.")
@click.option("--size", default=None, type=BYTES,
              help="The collective's size M as nccl-tests counts it (AllGather: the output), e.g. 8MiB.")
@click.option("--comm-size", default=None, type=BYTES,
              help="Instead of --size: ASTRA-sim's own comm_size (AllGather: each NPU's input, M/N).")
@click.option("--backend", type=click.Choice(["unaware", "aware"]), default="unaware", show_default=True,
              help="ASTRA-sim's analytical backend: congestion-unaware or congestion-aware.")
@click.option("--algorithm", default=None,
              help="ring, direct[N], halvingDoubling or doubleBinaryTree in every dimension, or "
                   "oneRing, oneDirect[N], oneHalvingDoubling over all NPUs (default with no "
                   "--system: ring; overrides the system's lists).")
@json_option
def astra_predict(network_path, system_path, collective, size, comm_size, backend, algorithm, as_json) -> None:
    """ASTRA-sim's analytical time for its native algorithms, to the nanosecond."""
    from dataclasses import asdict, replace

    from optcoll.collectives.builtins import canonical_kind
    from optcoll.interop.astra.network import read_network
    from optcoll.interop.astra.predictor import comm_size_of, predict
    from optcoll.interop.astra.system import ASTRA_DEFAULTS, KINDS, parse_impl, read_system
    from optcoll.producers.exact.memory import default_limit

    _collective_kinds([collective])
    if (size is None) == (comm_size is None):
        raise InputError("give the collective's size M (or, instead, --comm-size: ASTRA-sim's comm_size)",
                         field="--size")
    network = read_network(network_path)
    if comm_size is None:
        try:
            comm_size = comm_size_of(canonical_kind(collective), int(size), network.num_npus)
        except InputError as exc:
            raise InputError(exc.detail, field="--size") from None
    system = read_system(system_path) if system_path else ASTRA_DEFAULTS
    if algorithm or not system_path:
        impls = (parse_impl(algorithm or "ring", "--algorithm", "--algorithm"),) * len(network.dims)
        system = replace(system, implementations={k: impls for k in KINDS})
    prediction = predict(network, system, collective, int(comm_size), backend, max_memory=default_limit())
    if as_json:
        emit_json(asdict(prediction))
    else:
        echo(prediction.summary())


def _collective_kinds(names) -> None:
    """Checks ``--collective`` values before anything is read: a bad one names the flag."""
    from optcoll.collectives.builtins import canonical_kind

    for name in names:
        try:
            canonical_kind(name)
        except InputError as exc:
            raise exc.located(field="--collective") from None


@astra.command("chakra")
@click.argument("instance_path", metavar="INSTANCE", type=click.Path(dir_okay=False))
@click.argument("schedule_path", metavar="SCHEDULE", type=click.Path(dir_okay=False))
@out_option("Output prefix: writes PREFIX.<npu>.et and PREFIX.system.json.", required=True, metavar="PREFIX")
@json_option
def astra_chakra(instance_path, schedule_path, out, as_json) -> None:
    """Export a verified schedule as Chakra ET traces for ASTRA-sim's custom collectives."""
    from optcoll.interop.astra.etexport import export_chakra

    _, inst, schedule = load_instance_and_schedule(instance_path, schedule_path)
    exported = export_chakra(inst.machine, inst.collective, schedule, out, inst.model)
    done(as_json, f"wrote {len(exported.files)} trace files and {exported.system_json}",
         traces=[str(f) for f in exported.files], system_json=str(exported.system_json))


@astra.command("replay")
@click.argument("instance_path", metavar="INSTANCE", type=click.Path(dir_okay=False))
@click.argument("schedule_path", metavar="SCHEDULE", type=click.Path(dir_okay=False))
@click.option("--network", "network_path", type=click.Path(dir_okay=False),
              help="ASTRA-sim network.yml to replay on (default: the instance's machine, when it is one).")
@click.option("--backend", type=click.Choice(["unaware", "aware"]), default="unaware", show_default=True,
              help="ASTRA-sim's analytical backend: congestion-unaware or congestion-aware.")
@click.option("--traces", "prefix", default=None,
              help="Replay PREFIX.<npu>.et files (from `optcoll astra chakra`) instead of exporting anew.")
@json_option
def astra_replay(instance_path, schedule_path, network_path, backend, prefix, as_json) -> None:
    """ASTRA-sim's time for a schedule exported as Chakra ET, next to optcoll's verified time."""
    from optcoll.interop.astra.chakra import read_trace
    from optcoll.interop.astra.etexport import chakra_traces
    from optcoll.interop.astra.network import network_of, read_network
    from optcoll.interop.astra.replay import explain

    _, inst, schedule = load_instance_and_schedule(instance_path, schedule_path)
    built = chakra_traces(inst.machine, inst.collective, schedule, inst.model)
    traces, sources = built.traces, None
    if prefix:
        sources = [f"{prefix}.{p}.et" for p in range(inst.collective.num_ranks)]
        traces = tuple(read_trace(path) for path in sources)
    try:
        own = network_of(inst.machine).dims
    except InputError as exc:
        if not network_path:
            raise InputError(f"{exc.detail}; pass --network with an ASTRA-sim network.yml to replay on",
                             field="--network") from None
        own = None
    network = read_network(network_path) if network_path else network_of(inst.machine)
    report = explain(network, traces, backend, built.time, ranks=inst.collective.ranks, sources=sources,
                     same_machine=network.dims == own)
    if as_json:
        emit_json(report.to_dict())
    else:
        echo(report.summary())


@astra.command("import-network")
@click.argument("network_path", metavar="NETWORK_YML", type=click.Path(dir_okay=False))
@click.option("-o", "--out", required=True, type=click.Path(dir_okay=False), help="Model .toml to write.")
@json_option
def astra_import_network(network_path, out, as_json) -> None:
    """Turn an ASTRA-sim network.yml into an optcoll machine model file."""
    from optcoll.interop.astra.network import read_machine
    from optcoll.fileio import write_text_atomic
    from optcoll.machines.modelfile import machine_to_toml

    machine = read_machine(network_path)
    write_text_atomic(out, machine_to_toml(machine))
    done(as_json, f"wrote {out} ({machine.num_npus} NPUs, {machine.num_links} links)", out=out,
         npus=machine.num_npus, links=machine.num_links)


@astra.command("export-network")
@click.argument("ref", metavar="MODEL")
@click.option("-o", "--out", required=True, type=click.Path(dir_okay=False), help="network.yml to write.")
@json_option
def astra_export_network(ref, out, as_json) -> None:
    """Write a machine model as ASTRA-sim network.yml: exactly, or its per-NPU dimensions with what
    is left out (a rail cluster's spine, NVLS switch capabilities) named; else say why not."""
    from optcoll.interop.astra.network import write_network
    from optcoll.machines.catalog import load_machine

    view = write_network(load_machine(ref), out)
    text = "\n".join([f"wrote {out}: {view.network.describe()}"] + [f"  left out: {s}" for s in view.left_out])
    done(as_json, text, out=out, network=view.network.describe(), left_out=list(view.left_out))


@astra.command("compare")
@click.argument("networks", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--collective", "collectives", multiple=True, default=["allgather", "reducescatter", "allreduce"],
              show_default=True, help="A collective to compare (repeat the option for more).")
@click.option("--size", "sizes", multiple=True, default=["1 MiB", "64 MiB"], show_default=True,
              type=BYTES, help="The collective's size M, e.g. '1 MiB' (repeat the option for more).")
@out_option("The comparison report to write.", default="reports/astra-compare.md", show_default=True)
@json_option
def astra_compare_cmd(networks, collectives, sizes, out, as_json) -> None:
    """Side by side: ASTRA-sim's native algorithms vs optcoll's bound, greedy and baselines."""
    from optcoll.analysis.tools.astra import astra_compare
    from optcoll.producers.registry import SYNTHESIZERS

    _collective_kinds(collectives)
    say_overwrites(out)
    command = " ".join(["optcoll astra compare", *networks, *(f"--collective {c}" for c in collectives),
                        *(f"--size '{int(s)} B'" for s in sizes), f"--out {out}"])
    rows = astra_compare(list(networks), list(collectives), [int(s) for s in sizes], out,
                         producers=SYNTHESIZERS, command=command)
    done(as_json, f"wrote {out} ({len(rows)} rows)", out=out, rows=len(rows))


@model.command("from-nvidia-smi")
@click.argument("text_path", metavar="TOPO_TXT", type=click.Path(dir_okay=False))
@click.option("--gpu", default=None, metavar="MODEL",
              help="The GPU (V100, A100, A800, H100, H200, H800, H20, B200, B300, GB200): its NVLink count "
                   "and per-link bandwidth, from its datasheet.")
@click.option("--nvlink-bandwidth", default=None, type=BANDWIDTH,
              help="Per NVLink and direction (instead of --gpu): 25 GB/s for NVLink 2-4 (V100, A100, H100), "
                   "50 GB/s for NVLink 5 (B200).")
@click.option("--nvlinks-per-gpu", default=None, type=click.IntRange(min=1),
              help="NVLink ports of the GPU (instead of --gpu): tells direct links from an NVSwitch fabric.")
@click.option("--nvlink-latency", default="0.5 us", show_default=True, type=TIME, help="Per NVLink hop.")
@click.option("--pcie-bandwidth", default=None, type=BANDWIDTH,
              help="Also model the PCIe switches and host domains, links of this bandwidth per direction.")
@click.option("--pcie-latency", default="0 s", show_default=True, type=TIME, help="Per PCIe link, with --pcie-bandwidth.")
@click.option("--nvls", is_flag=True, help="The NVSwitches multicast and reduce (NVLS: H100 and later).")
@click.option("--nodes", type=click.IntRange(min=1), default=1, show_default=True,
              help="Build a cluster of this many boxes joined through their NICs.")
@click.option("--nic-bandwidth", default=None, type=BANDWIDTH,
              help="With --nodes: per NIC and direction, e.g. '400 Gbit/s'.")
@click.option("--nic-latency", default="2 us", show_default=True, type=TIME, help="Per NIC link, with --nodes.")
@click.option("--network-kind", "network", type=click.Choice(["rail", "leaf"]), default="rail", show_default=True,
              help="With --nodes: rail (NIC r on rail r's leaf switch) or leaf (one switch).")
@click.option("--network-latency", default="1 us", show_default=True, type=TIME,
              help="Per leaf-spine link.")
@click.option("-o", "--out", required=True, type=click.Path(dir_okay=False), help="Model .toml to write.")
@json_option
def model_from_nvidia_smi(text_path, gpu, nvlink_bandwidth, nvlinks_per_gpu, nvlink_latency, pcie_bandwidth, pcie_latency, nvls,
                          nodes, nic_bandwidth, nic_latency, network, network_latency, out, as_json) -> None:
    """Read `nvidia-smi topo -m` output into a machine model file.

    NV# on every GPU pair of an NVSwitch box is each GPU's link count into the switches (NV12 on
    an A100, NV18 on an H100), not links per pair; NV# on some pairs are direct links (DGX-1).
    """
    from optcoll.fileio import write_text_atomic
    from optcoll.interop.nvidia_smi import load_nvidia_smi
    from optcoll.machines.modelfile import machine_to_toml

    machine = load_nvidia_smi(text_path, gpu=gpu, nvlink_bandwidth=nvlink_bandwidth, nvlinks_per_gpu=nvlinks_per_gpu,
                              nvlink_latency=nvlink_latency,
                              pcie_bandwidth=pcie_bandwidth, pcie_latency=pcie_latency, nvls=nvls,
                              nodes=nodes, nic_bandwidth=nic_bandwidth, nic_latency=nic_latency,
                              network=network, network_latency=network_latency)
    write_text_atomic(out, machine_to_toml(machine))
    done(as_json, f"wrote {out} ({machine.num_npus} GPUs, {machine.num_links} links): {machine.description}",
         out=out, npus=machine.num_npus, links=machine.num_links, description=machine.description)


@model.command("from-nccl-topo")
@click.argument("xml_path", metavar="TOPO_XML", type=click.Path(dir_okay=False))
@click.option("--latency", default="0.5 us", show_default=True, type=TIME, help="Per NVLink/xGMI hop (an estimate).")
@click.option("--nodes", type=click.IntRange(min=1), default=1, show_default=True,
              help="Build a rail cluster of this many boxes through the file's NICs (their speed attributes).")
@click.option("--nic-latency", default="2 us", show_default=True, type=TIME, help="Per NIC link, with --nodes.")
@click.option("-o", "--out", required=True, type=click.Path(dir_okay=False), help="Model .toml to write.")
@json_option
def model_from_nccl_topo(xml_path, latency, nodes, nic_latency, out, as_json) -> None:
    """Read NCCL's topology XML (NCCL_TOPO_DUMP_FILE; RCCL's too) into a machine model file.

    Link counts come from the file; the rate of one link is the nominal one of the GPU generation
    the file names (its datasheet), not NCCL's effective figure.
    """
    from optcoll.fileio import write_text_atomic
    from optcoll.interop.nccl_topo import load_nccl_topo
    from optcoll.machines.modelfile import machine_to_toml

    machine = load_nccl_topo(xml_path, latency=latency, nodes=nodes, nic_latency=nic_latency)
    write_text_atomic(out, "".join(f"# source: {line}\n" for line in machine.sources) + machine_to_toml(machine))
    done(as_json, f"wrote {out} ({machine.num_npus} GPUs, {machine.num_links} links): {machine.description}",
         out=out, npus=machine.num_npus, links=machine.num_links, description=machine.description)


@click.command()
@click.option("--machine", "machine_ref", required=True, help="A multinode machine model (name or .toml).")
@click.option("--gpus", required=True, type=click.IntRange(min=1), help="GPU count (sets the number of nodes).")
@click.option("--layer-size", required=True, type=click.IntRange(min=1), help="Transformer hidden size H.")
@click.option("--seq-len", default=2048, show_default=True, type=click.IntRange(min=1), help="Sequence length in tokens.")
@click.option("--batch", default=256, show_default=True, type=click.IntRange(min=1),
              help="Global batch size in sequences.")
@click.option("--shape", default=None, help="Only this grid, e.g. 1,4,16,1 (X,Y,Z,D).")
@click.option("--sharing", type=click.Choice(["axonn", "none"]), default="axonn", show_default=True,
              help="How groups crossing nodes share the NIC bandwidth in the ring model.")
@click.option("--bandwidths", default="nominal", show_default=True,
              help="The ring model's bandwidths: nominal (the model's links), measured (AxoNN's own "
                   "table for the machine: perlmutter), or a TOML table by group size and level.")
@click.option("--min-tensor-parallel", default=1, show_default=True, type=click.IntRange(min=1),
              help="Only grids whose tensor-parallel size X·Y·Z is at least this.")
@click.option("--no-schedules", is_flag=True, help="Ring model and bounds only (fast).")
@click.option("--top", type=click.IntRange(min=1), default=None, help="Rows to show.")
@click.option("--seed", default=0, show_default=True, type=click.IntRange(0, MAX_SEED),
              help="Seed of the greedy synthesizers behind the schedules.")
@out_option("Also write the Markdown report here.")
@progress_option
@json_option
def axonn(machine_ref, gpus, layer_size, seq_len, batch, shape, sharing, bandwidths, min_tensor_parallel,
          no_schedules, top, seed, out, progress, as_json) -> None:
    """Rank AxoNN 4D configurations: ring model vs optcoll bounds vs verified schedules."""
    from optcoll.analysis.axonn import axonn_command

    with as_flags(gpus="--gpus", hidden="--layer-size", seq_len="--seq-len", batch="--batch", shape="--shape",
                  sharing="--sharing", min_tensor_parallel="--min-tensor-parallel", top="--top", seed="--seed"), \
            Ticker("axonn configurations", progress) as ticker:
        text = axonn_command(machine_ref, gpus, layer_size, seq_len=seq_len, batch=batch, shape=shape,
                             out=out, sharing=sharing, schedules=not no_schedules,
                             min_tensor_parallel=min_tensor_parallel, top=top, seed=seed, bandwidths=bandwidths,
                             progress=ticker)
    done(as_json, text, markdown=text, out=out)


COMMANDS = [msccl, astra, axonn]
