"""Chakra execution traces (ET): the messages ASTRA-sim replays, and their file form.

A ``.et`` file is a stream of protobuf messages, each preceded by its varint length: first a
``GlobalMetadata`` (version "0.0.4"), then ``Node`` messages. Field numbers follow Chakra's
``et_def.proto`` (package ChakraProtoMsg):

- AttributeProto: name 1, doc_string 2, oneof value {double_val 3, int32_val 7, int64_val 9,
  uint64_val 13, bool_val 27, string_val 29, ...}
- GlobalMetadata: version 1, attr 2
- Node: id 1, name 2, type 3, ctrl_deps 4, data_deps 5, start_time_micros 6, duration_micros 7,
  inputs 8, outputs 9, attr 10

Node types: COMP 4, COMM_SEND 5, COMM_RECV 6, COMM_COLL 7.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

from optcoll.errors import InputError
from optcoll.inputfiles import read_bytes
from optcoll.interop.astra import protowire as pw

VERSION = "0.0.4"
COMP, COMM_SEND, COMM_RECV, COMM_COLL = 4, 5, 6, 7
NODE_TYPES = {COMP: "COMP", COMM_SEND: "COMM_SEND", COMM_RECV: "COMM_RECV", COMM_COLL: "COMM_COLL"}

#: value kind → AttributeProto oneof field number
ATTR_FIELDS = {"double": 3, "int32": 7, "int64": 9, "uint64": 13, "bool": 27, "string": 29}
_KIND_OF = {number: kind for kind, number in ATTR_FIELDS.items()}


@dataclass(frozen=True)
class Attr:
    """One AttributeProto: a name and a typed value (kind is a key of ``ATTR_FIELDS``)."""

    name: str
    kind: str
    value: int | float | bool | str

    def encode(self) -> bytes:
        number = ATTR_FIELDS[self.kind]
        out = pw.field_string(1, self.name)
        if self.kind == "double":
            return out + pw.field_double(number, float(self.value))
        if self.kind == "string":
            return out + pw.field_string(number, str(self.value))
        return out + pw.field_varint(number, int(self.value))

    @staticmethod
    def decode(data: bytes, source: str = "") -> "Attr":
        name, kind, value = "", None, None
        for number, _wire, raw in pw.fields(data, source):
            if number == 1:
                name = bytes(raw).decode("utf-8")
            elif number in _KIND_OF:
                kind = _KIND_OF[number]
                if kind == "double":
                    value = struct.unpack("<d", int(raw).to_bytes(8, "little"))[0]
                elif kind == "string":
                    value = bytes(raw).decode("utf-8")
                elif kind == "bool":
                    value = bool(raw)
                elif kind == "int32":
                    value = pw.signed(int(raw), 32)
                elif kind == "int64":
                    value = pw.signed(int(raw), 64)
                else:
                    value = int(raw)
        if kind is None:
            raise InputError(f"attribute {name!r} has no value of a supported type", source=source or None)
        return Attr(name, kind, value)


@dataclass(frozen=True)
class Node:
    id: int
    name: str
    type: int
    data_deps: tuple[int, ...] = ()
    ctrl_deps: tuple[int, ...] = ()
    duration_micros: int = 0
    attrs: tuple[Attr, ...] = field(default=())

    def attr(self, name: str) -> int | float | bool | str:
        for a in self.attrs:
            if a.name == name:
                return a.value
        raise KeyError(name)

    def encode(self) -> bytes:
        out = b""
        if self.id:
            out += pw.field_varint(1, self.id)
        if self.name:
            out += pw.field_string(2, self.name)
        if self.type:
            out += pw.field_varint(3, self.type)
        out += pw.field_packed(4, list(self.ctrl_deps)) + pw.field_packed(5, list(self.data_deps))
        if self.duration_micros:
            out += pw.field_varint(7, self.duration_micros)
        return out + b"".join(pw.field_bytes(10, a.encode()) for a in self.attrs)

    @staticmethod
    def decode(data: bytes, source: str = "") -> "Node":
        values: dict[str, object] = {"id": 0, "name": "", "type": 0, "duration_micros": 0}
        deps: dict[int, list[int]] = {4: [], 5: []}
        attrs = []
        for number, wire, raw in pw.fields(data, source):
            if number == 1:
                values["id"] = int(raw)
            elif number == 2:
                values["name"] = bytes(raw).decode("utf-8")
            elif number == 3:
                values["type"] = int(raw)
            elif number in deps:  # packed (proto3 default) or one varint per element
                deps[number] += pw.unpack_varints(raw, source) if wire == pw.LENGTH else [int(raw)]
            elif number == 7:
                values["duration_micros"] = int(raw)
            elif number == 10:
                attrs.append(Attr.decode(raw, source))
        return Node(int(values["id"]), str(values["name"]), int(values["type"]), tuple(deps[5]),
                    tuple(deps[4]), int(values["duration_micros"]), tuple(attrs))


@dataclass(frozen=True)
class Trace:
    """One NPU's ET: the metadata version and attributes, then the nodes in file order."""

    nodes: tuple[Node, ...]
    version: str = VERSION
    metadata: tuple[Attr, ...] = ()

    def encode(self) -> bytes:
        meta = pw.field_string(1, self.version) + b"".join(pw.field_bytes(2, a.encode())
                                                            for a in self.metadata)
        return pw.delimited([meta] + [n.encode() for n in self.nodes])

    @staticmethod
    def decode(data: bytes, source: str = "") -> "Trace":
        messages = pw.split_delimited(data, source)
        if not messages:
            raise InputError("empty trace: no GlobalMetadata", source=source or None)
        version, meta = "", []
        for number, _wire, raw in pw.fields(messages[0], source):
            if number == 1:
                version = bytes(raw).decode("utf-8")
            elif number == 2:
                meta.append(Attr.decode(raw, source))
        return Trace(tuple(Node.decode(m, source) for m in messages[1:]), version, tuple(meta))


def read_trace(path: str | Path) -> Trace:
    return Trace.decode(read_bytes(path), str(path))
