"""Instance files (TOML): a machine reference, a collective, size, C, time model and budget.

    [instance]
    name = "dgx1-allgather"          # optional; defaults to the file name
    machine = "dgx1"                 # a built-in model name or a path relative to this file
    collective = "allgather"
    size = "1 GiB"                   # M, the full buffer as nccl-tests counts it
    chunks_per_rank = 1              # or "free" (1, 2, 4, 8) or a list [1, 2, 4]: the tool picks C
    root = 0                         # rooted collectives only
    ranks = [0, 1, 2, 3]             # optional sub-communicator (default: every NPU)

    [model]                          # optional, docs/model.md §5
    kind = "timed"                   # or "step"
    occupancy = "link"               # or "serialization"
    send_ports = 1                   # optional port limits
    recv_ports = 1
    reduce_cost = "0.01 ns/B"        # γ, time per reduced byte
    combining = "copy-or-reduce"     # or "reduce-only": SCCL's combining rules (docs/model.md §5.4)

    [budget]                         # optional
    time_limit = "60 s"
    threads = 2
    seed = 0
    work_limit = 30                  # optional: CP-SAT deterministic time, the same on any machine

    [custom]                         # collective = "custom" only
    pre = [[0], [1], [2]]            # holders of each chunk at t = 0
    post = [[1], [2], [3]]           # who must hold each chunk at the end
    chunk_size = "1 MiB"
    combining = false

    [alltoallv]                      # collective = "alltoallv" only: a matrix file or a generator
    matrix = "traffic.csv"           # N x N, row = sender (CSV or TOML `sizes = [[...]]`), no size
    unit = "MiB"                     # unit of the matrix entries (default bytes)
    generator = "moe"                # or: seeded MoE-like traffic; size = mean bytes a rank sends
    skew = 1.0                       # Zipf exponent of expert popularity (0: uniform)
    top_k = 2                        # experts per token
    tokens = 4096                    # tokens per rank
    seed = 0

    [results]                        # written by optcoll (recorded ground truth); never hand-edited
"""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from optcoll.collectives.collective import Collective
from optcoll.collectives.builtins import KINDS, canonical_kind, make_alltoallv, make_collective, make_custom
from optcoll.collectives.traffic import GENERATORS, moe_traffic, read_matrix
from optcoll.errors import InputError
from optcoll.inputfiles import known_keys, read_toml
from optcoll.instances.budget import MAX_SEED, MAX_THREADS, Budget, parse_seconds
from optcoll.instances.chunks import parse_chunks
from optcoll.instances.instance import Instance, TimeModel, check_chunk_copies
from optcoll.machines.catalog import load_machine
from optcoll.machines.machine import Machine
from optcoll.units import parse_size, parse_time

_SECTIONS = {"instance", "model", "budget", "custom", "alltoallv", "results"}
_INSTANCE_KEYS = {"name", "machine", "collective", "size", "chunks_per_rank", "root", "ranks"}
_MODEL_KEYS = {"kind", "occupancy", "send_ports", "recv_ports", "reduce_cost", "combining"}
_BUDGET_KEYS = {"time_limit", "threads", "seed", "work_limit"}
_CUSTOM_KEYS = {"pre", "post", "chunk_size", "combining"}
_ALLTOALLV_KEYS = {"matrix", "unit", "generator", "skew", "top_k", "tokens", "seed"}


def _table(data: dict, key: str, allowed: set[str], source: str) -> dict[str, Any]:
    """An optional section; ``[results]`` is optcoll's own record, its keys are not checked here."""
    table = data.get(key, {})
    if key == "results":
        if not isinstance(table, dict):
            raise InputError("must be a table", source=source, field=key)
        return table
    return known_keys(table, key, sorted(allowed), source)


def _int(table: dict, key: str, section: str, source: str, default: int | None = None,
         minimum: int | None = None, maximum: int | None = None) -> int | None:
    value = table.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"must be an integer, got {value!r}", source=source, field=f"{section}.{key}")
    if minimum is not None and value < minimum:
        raise InputError(f"must be at least {minimum}, got {value}", source=source,
                         field=f"{section}.{key}")
    if maximum is not None and value > maximum:
        raise InputError(f"must be at most {maximum}, got {value}", source=source,
                         field=f"{section}.{key}")
    return value


def _located(source: str, field: str, *, nested: bool = False):
    """Context manager: re-raise an InputError with the file and field filled in; ``nested``: the
    callee names a field inside ``field`` (``pre[0]`` of ``custom``), so prefix it."""
    class _Ctx:
        def __enter__(self):
            return self

        def __exit__(self, kind, exc, tb):
            if not isinstance(exc, InputError):
                return False
            if nested and exc.source is None and exc.field:
                raise InputError(exc.detail, source=source, field=f"{field}.{exc.field}") from None
            raise exc.located(source, field) from None
    return _Ctx()


def _reduce_cost(value: Any, source: str) -> float:
    if value is None:
        return 0.0
    if not isinstance(value, str) or not value.strip().endswith("/B"):
        raise InputError(f"must be a time per byte such as '0.01 ns/B', got {value!r}",
                         source=source, field="model.reduce_cost")
    with _located(source, "model.reduce_cost"):
        return parse_time(value.strip()[:-2])


def _work_limit(value: Any, source: str) -> float | None:
    """CP-SAT deterministic time (a plain number): unlike the time limit it stops a solve at the
    same point under any load, so a recorded result can be reproduced exactly."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise InputError(f"must be a positive number (CP-SAT deterministic time), got {value!r}",
                         source=source, field="budget.work_limit")
    return float(value)


def _node_lists(value: Any, source: str, field: str) -> list[list[int]]:
    if not isinstance(value, list) or not all(
            isinstance(item, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in item)
            for item in value):
        raise InputError("must be a list of lists of NPU ids", source=source, field=field)
    return value


def instance_from_dict(data: dict[str, Any], source: str, base_dir: Path,
                       default_name: str = "instance") -> Instance:
    """An instance from a parsed instance file; every problem is an ``InputError`` naming the
    file and field. Read in the file's order: machine, collective, time model, budget."""
    known_keys(data, "", sorted(_SECTIONS), source, sections=True)
    if "instance" not in data:
        raise InputError("missing [instance] table", source=source, field="instance")
    inst = _table(data, "instance", _INSTANCE_KEYS, source)
    for key in ("machine", "collective"):
        if not isinstance(inst.get(key), str):
            raise InputError("missing or not a string", source=source, field=f"instance.{key}")
    machine_ref = inst["machine"]
    machine = _machine(machine_ref, base_dir, source)
    with _located(source, "instance.collective"):
        kind = canonical_kind(inst["collective"])
    ranks = _ranks(inst.get("ranks"), machine, source)
    allowed = parse_chunks(inst.get("chunks_per_rank", 1), "instance.chunks_per_rank", source)
    collective = _collective(data, inst, kind, ranks, allowed, base_dir, source)
    model = _model(data, source)
    if model.kind == "step" and not collective.equal_chunks:
        raise InputError("the step model counts equal chunks; alltoallv's differ (use the timed model)",
                         source=source, field="model.kind")
    name = inst.get("name", default_name)
    if not isinstance(name, str) or not name:
        raise InputError("must be a non-empty string", source=source, field="instance.name")
    instance = Instance(name, machine, collective, model, _budget(data, source), source, machine_ref,
                        dict(_table(data, "results", set(), source)),
                        allowed if isinstance(allowed, tuple) and len(allowed) > 1 else ())
    with _located(source, "instance"):
        require_reachable(instance)
    return instance


def _machine(machine_ref: str, base_dir: Path, source: str) -> Machine:
    """A model file next to the instance file (or in the working directory), or a built-in name."""
    candidate = base_dir / machine_ref
    ref = str(candidate) if machine_ref.endswith(".toml") and candidate.exists() else machine_ref
    if machine_ref.endswith(".toml") and not Path(ref).exists():
        raise InputError(f"no machine model file {machine_ref!r} (looked in {base_dir} and the "
                         "working directory)", source=source, field="instance.machine")
    with _located(source, "instance.machine"):
        return load_machine(ref)


def _ranks(value: Any, machine: Machine, source: str) -> list[int]:
    """The communicator: every NPU when not given, else distinct NPUs of the machine."""
    if value is None:
        return list(range(machine.num_npus))
    if not isinstance(value, list) or not all(isinstance(r, int) and not isinstance(r, bool) for r in value):
        raise InputError("must be a list of NPU ids", source=source, field="instance.ranks")
    bad = [r for r in value if not 0 <= r < machine.num_npus]
    if bad:
        raise InputError(f"NPU {bad[0]} does not exist in machine {machine.name!r} "
                         f"(NPUs 0..{machine.num_npus - 1})", source=source, field="instance.ranks")
    if not value:
        raise InputError("lists no NPU", source=source, field="instance.ranks")
    seen: set[int] = set()
    for r in value:
        if r in seen:
            raise InputError(f"NPU {r} is listed twice", source=source, field="instance.ranks")
        seen.add(r)
    return list(value)


def _collective(data: dict[str, Any], inst: dict[str, Any], kind: str, ranks: list[int],
                allowed: int | tuple[int, ...], base_dir: Path, source: str) -> Collective:
    """The collective of ``kind`` over ``ranks``; ``[custom]`` and ``[alltoallv]`` only with
    their own kind."""
    if isinstance(allowed, tuple) and kind in ("custom", "alltoallv"):
        raise InputError(f"{kind} fixes its chunks; give one chunks_per_rank", source=source,
                         field="instance.chunks_per_rank")
    chunks = allowed if isinstance(allowed, int) else max(allowed)
    try:  # N²·C, the most (chunk, rank) pairs a built-in collective lists
        check_chunk_copies(len(ranks), chunks)
    except InputError as exc:
        raise exc.located(source, "instance.chunks_per_rank") from None
    for section in ("custom", "alltoallv"):
        if section in data and kind != section:
            raise InputError(f"[{section}] only applies to collective = \"{section}\", not {kind!r}",
                             source=source, field=section)
    root = _int(inst, "root", "instance", source)
    if kind == "custom":
        return _custom(data, ranks, source)
    if kind == "alltoallv":
        return _alltoallv(data, inst, ranks, chunks, base_dir, source)
    if "size" not in inst:
        raise InputError("missing (e.g. size = \"1 GiB\")", source=source, field="instance.size")
    with _located(source, "instance.size"):
        size = parse_size(inst["size"])
    if root is None and KINDS[kind][1]:
        raise InputError(f"{kind} needs a root NPU", source=source, field="instance.root")
    with _located(source, "instance.root" if root is not None else "instance"):
        return make_collective(kind, ranks, size, allowed if isinstance(allowed, int) else allowed[0], root)


def _custom(data: dict[str, Any], ranks: list[int], source: str) -> Collective:
    """A collective of the ``[custom]`` table's pre- and postconditions."""
    custom = _table(data, "custom", _CUSTOM_KEYS, source)
    pre = _node_lists(custom.get("pre"), source, "custom.pre")
    post = _node_lists(custom.get("post"), source, "custom.post")
    if "chunk_size" not in custom:
        raise InputError("missing", source=source, field="custom.chunk_size")
    with _located(source, "custom.chunk_size"):
        chunk_bytes = parse_size(custom["chunk_size"])
    combining = custom.get("combining", False)
    if not isinstance(combining, bool):
        raise InputError("must be true or false", source=source, field="custom.combining")
    with _located(source, "custom", nested=True):
        return make_custom(ranks, pre, post, chunk_bytes, combining=combining)


def _model(data: dict[str, Any], source: str) -> TimeModel:
    table = _table(data, "model", _MODEL_KEYS, source)
    with _located(source, "model"):
        return TimeModel(kind=table.get("kind", "timed"), occupancy=table.get("occupancy", "link"),
                         send_ports=_int(table, "send_ports", "model", source),
                         recv_ports=_int(table, "recv_ports", "model", source),
                         reduce_cost=_reduce_cost(table.get("reduce_cost"), source),
                         combining=table.get("combining", "copy-or-reduce"))


def _budget(data: dict[str, Any], source: str) -> Budget:
    table = _table(data, "budget", _BUDGET_KEYS, source)
    with _located(source, "budget.time_limit"):
        limit = parse_seconds(table.get("time_limit", "60 s"), "budget.time_limit", bare=False)
    return Budget(limit, _int(table, "threads", "budget", source, 2, 1, MAX_THREADS),
                  _int(table, "seed", "budget", source, 0, 0, MAX_SEED),
                  work_limit=_work_limit(table.get("work_limit"), source))


def _alltoallv(data: dict[str, Any], inst: dict[str, Any], ranks: list[int], chunks: int,
               base_dir: Path, source: str):
    """The AlltoAllv collective from a matrix file or a generator ([alltoallv] table)."""
    table = _table(data, "alltoallv", _ALLTOALLV_KEYS, source)
    if "root" in inst:
        raise InputError("alltoallv takes no root", source=source, field="instance.root")
    matrix, generator = table.get("matrix"), table.get("generator")
    if (matrix is None) == (generator is None):
        raise InputError("give either matrix = \"file.csv\" or generator = \"moe\"", source=source,
                         field="alltoallv")
    if matrix is not None:
        if not isinstance(matrix, str):
            raise InputError("must be a file name", source=source, field="alltoallv.matrix")
        if "size" in inst:
            raise InputError("the matrix gives every size; leave size out", source=source,
                             field="instance.size")
        unit = table.get("unit", "1 B")
        with _located(source, "alltoallv.unit"):
            scale = parse_size(unit if any(ch.isdigit() for ch in str(unit)) else f"1 {unit}")
        path = base_dir / matrix
        if not path.exists():
            raise InputError(f"no traffic matrix file {matrix!r} (looked in {base_dir})", source=source,
                             field="alltoallv.matrix")
        sizes = read_matrix(path, len(ranks), scale)
    else:
        if generator not in GENERATORS:
            raise InputError(f"unknown generator {generator!r}; known: {', '.join(GENERATORS)}",
                             source=source, field="alltoallv.generator")
        for key in ("unit",):
            if key in table:
                raise InputError("applies to a matrix file only", source=source, field=f"alltoallv.{key}")
        if "size" not in inst:
            raise InputError("missing: the mean bytes a rank sends (e.g. size = \"64 MiB\")",
                             source=source, field="instance.size")
        with _located(source, "instance.size"):
            mean = parse_size(inst["size"])
        skew = table.get("skew", 1.0)
        if isinstance(skew, bool) or not isinstance(skew, (int, float)):
            raise InputError(f"must be a number, got {skew!r}", source=source, field="alltoallv.skew")
        seed = _int(table, "seed", "alltoallv", source, 0, 0)
        with _located(source, "alltoallv"):  # moe_traffic names its fields in full (alltoallv.skew)
            sizes = moe_traffic(len(ranks), mean, skew=float(skew), top_k=table.get("top_k", 2),
                                tokens=table.get("tokens", 4096), seed=seed)
    with _located(source, "alltoallv"):
        return make_alltoallv(ranks, sizes, chunks)


def _strongly_connected(src: np.ndarray, dst: np.ndarray, n: int) -> bool:
    """Whether node 0 reaches every node and every node reaches node 0 (two searches; no scipy
    import on the path of every command)."""
    for tail, head in ((src, dst), (dst, src)):
        order = np.argsort(tail, kind="stable")
        heads = head[order].tolist()
        start = np.searchsorted(tail[order], np.arange(n + 1)).tolist()
        seen = [False] * n
        seen[0], stack = True, [0]
        while stack:
            u = stack.pop()
            for v in heads[start[u]:start[u + 1]]:
                if not seen[v]:
                    seen[v] = True
                    stack.append(v)
        if not all(seen):
            return False
    return True


def require_reachable(instance: Instance) -> None:
    """Every needed (chunk, destination) must be reachable from the chunk's holders.

    A disconnected network for a collective that needs connectivity is bad input, reported
    before any producer runs (otherwise solvers would search forever). For combining collectives
    every contributor must reach every destination; otherwise one holder suffices.
    """
    collective, machine = instance.collective, instance.machine
    if _strongly_connected(machine.link_src, machine.link_dst, machine.num_nodes):
        return
    reach = np.isfinite(machine.hop_counts())
    need_c, need_v = collective.needs
    for c, v in zip(need_c.tolist(), need_v.tolist()):
        holders = collective.pre.of(c)
        ok = reach[holders, v].all() if collective.combining else reach[holders, v].any()
        if not ok:
            missing = holders[~reach[holders, v]]
            raise InputError(f"disconnected network: {machine.label(v)} cannot receive chunk {c} "
                             f"from {', '.join(machine.label(int(u)) for u in missing)}")


def load_instance(path: str | os.PathLike) -> Instance:
    path = Path(path)
    data = read_toml(path)
    return instance_from_dict(data, str(path), path.parent, default_name=path.stem)
