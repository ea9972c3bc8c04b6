"""MSCCL-IR XML as plain data: parse it leniently (collecting findings), write it strictly.

The format (FIELD-NOTES.md section 5)::

    <algo name proto nchannels nchunksperloop ngpus coll inplace outofplace minBytes maxBytes [redop]>
      <gpu id i_chunks o_chunks s_chunks>
        <tb id send recv chan>
          <step s type srcbuf srcoff dstbuf dstoff cnt depid deps hasdep/>

Parsing never stops at the first problem: the structural validator wants every finding, so a
missing or malformed attribute becomes an ``IrFinding`` and a harmless default. ``fatal`` findings
make the file impossible to execute (the importer refuses it); the others are what a runtime
would reject or mis-run but a simulation can still interpret.

``parse_algo(..., like_runtime=True)`` reads the text with the runtimes' own reader
(``reader.py``) and their integer rule (``strtol``), noting every value it reads differently from
what it says. The writer emits exactly what that reader accepts: no XML declaration,
double-quoted attributes, spaces (not tabs) for indentation, self-closing ``step`` elements.
"""
from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from xml.sax.saxutils import escape

from optcoll.errors import InputError
from optcoll.inputfiles import read_text
from optcoll.interop.msccl.reader import read_like_runtime, strtol

STEP_TYPES = ("s", "r", "rcs", "rrs", "rrc", "rrcs", "cpy", "re", "nop")
#: Step types with a send part (need the tb's send peer) and with a receive part (its recv peer).
SENDS = frozenset({"s", "rcs", "rrs", "rrcs"})
RECVS = frozenset({"r", "rcs", "rrs", "rrc", "rrcs"})
#: Which of a step's buffer references name local buffers (the others name the peer's, by the
#: msccl-tools convention, and are informative only).
LOCAL_SRC = frozenset({"s", "rrs", "rrc", "rrcs", "cpy", "re"})
LOCAL_DST = frozenset({"r", "rcs", "rrc", "rrcs", "cpy", "re"})
BUFFERS = ("i", "o", "s")
PROTOCOLS = ("Simple", "LL", "LL128")
ALGO_ATTRS = ("name", "proto", "nchannels", "nchunksperloop", "ngpus", "coll", "inplace",
              "outofplace", "minBytes", "maxBytes")
STEP_ATTRS = ("s", "type", "srcbuf", "srcoff", "dstbuf", "dstoff", "cnt", "depid", "deps", "hasdep")

Ref = tuple[str, int]  # (buffer, chunk offset)


@dataclass(frozen=True)
class IrFinding:
    message: str
    fatal: bool
    refused: bool = False  # a runtime's loader refuses the file


@dataclass(frozen=True)
class Step:
    s: int
    type: str
    srcbuf: str
    srcoff: int
    dstbuf: str
    dstoff: int
    cnt: int = 1
    depid: int = -1
    deps: int = -1
    hasdep: int = 0

    @property
    def src(self) -> Ref:
        return self.srcbuf, self.srcoff

    @property
    def dst(self) -> Ref:
        return self.dstbuf, self.dstoff


@dataclass(frozen=True)
class ThreadBlock:
    id: int
    send: int
    recv: int
    chan: int
    steps: tuple[Step, ...] = ()


@dataclass(frozen=True)
class Gpu:
    id: int
    i_chunks: int
    o_chunks: int
    s_chunks: int
    tbs: tuple[ThreadBlock, ...] = ()

    def chunks(self, buf: str) -> int:
        return {"i": self.i_chunks, "o": self.o_chunks, "s": self.s_chunks}.get(buf, 0)


@dataclass(frozen=True)
class Algo:
    name: str
    proto: str
    nchannels: int
    nchunksperloop: int
    ngpus: int
    coll: str
    inplace: int
    outofplace: int
    min_bytes: int = 0
    max_bytes: int = 0
    redop: str | None = None
    gpus: tuple[Gpu, ...] = ()
    #: Attributes of <algo> as written (to tell "missing" from "default" when validating).
    present: frozenset[str] = field(default_factory=frozenset)


def where_step(gpu: int, tb: int, index: int) -> str:
    return f"gpu {gpu} tb {tb} step {index}"


# -- parsing ---------------------------------------------------------------------------------------


class _Attrs:
    """Typed attribute reads that record a finding instead of raising. ``runtime``: read integers
    as the runtimes do (``strtol``), noting where that differs from the written number."""

    def __init__(self, element: ET.Element, where: str, findings: list[IrFinding], runtime: bool = False):
        self.a, self.where, self.findings, self.runtime = element.attrib, where, findings, runtime
        if runtime and self.a.get(""):
            findings.append(IrFinding(f"{where}: a value {self.a['']!r} without a name: the runtimes' reader "
                                    "splits `key =value` into an empty key and a nameless value", False, True))

    def text(self, name: str, default: str = "", fatal: bool = True) -> str:
        if name not in self.a:
            self.findings.append(IrFinding(f"{self.where}: missing attribute {name!r}", fatal, self.runtime))
            return default
        return self.a[name]

    def int(self, name: str, default: int = -1, fatal: bool = True) -> int:
        raw = self.text(name, None, fatal)  # type: ignore[arg-type]
        if raw is None:
            return default
        try:
            written = int(raw.strip())
        except ValueError:
            written = None
        if self.runtime:
            value = strtol(raw)
            if written is None:
                self.findings.append(IrFinding(f"{self.where}: attribute {name}={raw!r} is not an integer (the "
                                             f"runtimes read it as {value})", False, True))
            elif written != value:
                self.findings.append(IrFinding(f"{self.where}: attribute {name}={raw!r} is read as {value} by "
                                             "the runtimes (C strtol, base 0)", False))
            return value
        if written is None:
            self.findings.append(IrFinding(f"{self.where}: attribute {name}={raw!r} is not an integer", fatal))
            return default
        return written


def _read_text(source: str | os.PathLike) -> tuple[str, str]:
    """(text, name for messages): a path to a file, or the XML text itself."""
    if isinstance(source, os.PathLike) or not str(source).lstrip().startswith("<"):
        return read_text(source), str(source)
    return str(source), "<msccl-xml>"


def parse_algo(source: str | os.PathLike, *, like_runtime: bool = False) -> tuple[Algo, list[IrFinding], str]:
    """The algorithm in ``source`` (path or XML text), every parse finding, and the source name.

    Raises ``InputError`` only when the text is not XML or its root is not ``<algo>``;
    ``like_runtime``: read it as the MSCCL runtimes do (raises ``reader.ReaderError`` where their
    reader stops).
    """
    text, name = _read_text(source)
    if like_runtime:
        root = read_like_runtime(text)
    else:
        try:
            root = ET.fromstring(text)
        except ET.ParseError as exc:
            raise InputError(f"not well-formed XML: {exc}", source=name) from None
    if root.tag != "algo":
        raise InputError(f"the root element is <{root.tag}>, expected <algo>", source=name)
    findings: list[IrFinding] = []
    at = _Attrs(root, "algo", findings, like_runtime)
    # Only what execution needs is reported missing here; which of the rest a runtime requires
    # is the validator's call (it depends on the runtime).
    values: dict[str, object] = {}
    for a in ALGO_ATTRS:
        needed = a in ("ngpus", "nchunksperloop", "coll")
        if not needed and a not in root.attrib:
            values[a] = {"name": "", "proto": ""}.get(a, 0)
        elif a in ("name", "proto", "coll"):
            values[a] = at.text(a, "")
        else:
            values[a] = at.int(a, 0, needed)
    gpus = []
    for k, g in enumerate(root):
        if g.tag != "gpu":
            findings.append(IrFinding(f"algo: unexpected element <{g.tag}> (only <gpu> belongs here)", False))
            continue
        gpus.append(_parse_gpu(g, k, findings, like_runtime))
    algo = Algo(values["name"], values["proto"], values["nchannels"], values["nchunksperloop"],
                values["ngpus"], values["coll"], values["inplace"], values["outofplace"],
                values["minBytes"], values["maxBytes"], root.attrib.get("redop"), tuple(gpus),
                frozenset(root.attrib))
    return algo, findings, name


def _parse_gpu(g: ET.Element, k: int, findings: list[IrFinding], runtime: bool) -> Gpu:
    gid = _Attrs(g, f"gpu element #{k}", findings, runtime).int("id")
    where = f"gpu {gid}"
    at = _Attrs(g, where, findings, runtime)
    sizes = [at.int(a, 0) for a in ("i_chunks", "o_chunks", "s_chunks")]
    tbs = []
    for j, t in enumerate(g):
        if t.tag != "tb":
            findings.append(IrFinding(f"{where}: unexpected element <{t.tag}> (only <tb> belongs here)", False))
            continue
        tid = _Attrs(t, f"{where} tb element #{j}", findings, runtime).int("id")
        tat = _Attrs(t, f"{where} tb {tid}", findings, runtime)
        send, recv, chan = tat.int("send"), tat.int("recv"), tat.int("chan", 0)
        steps = []
        for i, s in enumerate(t):
            if s.tag != "step":
                findings.append(IrFinding(f"{where} tb {tid}: unexpected element <{s.tag}>", False))
                continue
            sat = _Attrs(s, where_step(gid, tid, i), findings, runtime)
            steps.append(Step(sat.int("s", i, False), sat.text("type", "nop"), sat.text("srcbuf", "i"),
                              sat.int("srcoff"), sat.text("dstbuf", "o"), sat.int("dstoff"),
                              sat.int("cnt", 1), sat.int("depid"), sat.int("deps"),
                              sat.int("hasdep", 0, False)))
        tbs.append(ThreadBlock(tid, send, recv, chan, tuple(steps)))
    return Gpu(gid, *sizes, tuple(tbs))


# -- writing ---------------------------------------------------------------------------------------


def _attrs(pairs: list[tuple[str, object]]) -> str:
    return " ".join(f'{k}="{escape(str(v), {chr(34): "&quot;"})}"' for k, v in pairs)


def to_xml(algo: Algo, comment: str | None = None) -> str:
    """The XML text of ``algo`` (with an optional leading comment, which the runtimes skip)."""
    lines = []
    if comment:
        lines.append(f"<!-- {comment.replace('--', '- -')} -->")
    head = [("name", algo.name), ("proto", algo.proto), ("nchannels", algo.nchannels),
            ("nchunksperloop", algo.nchunksperloop), ("ngpus", algo.ngpus), ("coll", algo.coll),
            ("inplace", algo.inplace), ("outofplace", algo.outofplace),
            ("minBytes", algo.min_bytes), ("maxBytes", algo.max_bytes)]
    if algo.redop is not None:
        head.append(("redop", algo.redop))
    lines.append(f"<algo {_attrs(head)}>")
    for g in algo.gpus:
        lines.append(f"  <gpu {_attrs([('id', g.id), ('i_chunks', g.i_chunks), ('o_chunks', g.o_chunks), ('s_chunks', g.s_chunks)])}>")
        for t in g.tbs:
            lines.append(f"    <tb {_attrs([('id', t.id), ('send', t.send), ('recv', t.recv), ('chan', t.chan)])}>")
            for s in t.steps:
                lines.append("      <step " + _attrs([(a, getattr(s, a)) for a in STEP_ATTRS]) + "/>")
            lines.append("    </tb>")
        lines.append("  </gpu>")
    lines.append("</algo>")
    return "\n".join(lines) + "\n"
