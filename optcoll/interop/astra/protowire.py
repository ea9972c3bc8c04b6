"""The protobuf wire format, just the part Chakra traces use, written out by hand.

Why by hand rather than google.protobuf descriptors built at run time: the wire format is a few
rules (varint keys ``field << 3 | type``, varints, length-delimited bytes, 64-bit doubles), the
output is byte-for-byte deterministic, it needs no runtime dependency, and it sidesteps the
message-factory API that changed across protobuf 3/4/5. The tests decode our bytes independently
with google.protobuf messages built from the same field numbers.

Rules kept: a negative int32/int64 is its 64-bit two's complement (10 bytes); proto3 packs repeated
numeric fields; a oneof member is written even when it equals its default (it has presence).
"""
from __future__ import annotations

import struct
from collections.abc import Iterator

from optcoll.errors import InputError

VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5


def varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def key(field: int, wire: int) -> bytes:
    return varint(field << 3 | wire)


def field_varint(field: int, value: int) -> bytes:
    return key(field, VARINT) + varint(int(value))


def field_bytes(field: int, payload: bytes) -> bytes:
    return key(field, LENGTH) + varint(len(payload)) + payload


def field_string(field: int, text: str) -> bytes:
    return field_bytes(field, text.encode("utf-8"))


def field_double(field: int, value: float) -> bytes:
    return key(field, FIXED64) + struct.pack("<d", value)


def field_packed(field: int, values: list[int]) -> bytes:
    return field_bytes(field, b"".join(varint(int(v)) for v in values)) if values else b""


def read_varint(data: bytes, pos: int, source: str = "") -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise InputError("truncated varint", source=source or None)
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise InputError("varint longer than 10 bytes", source=source or None)


def signed(value: int, bits: int = 64) -> int:
    """A varint read back as a signed intN."""
    value &= (1 << 64) - 1
    if value >= 1 << 63:
        value -= 1 << 64
    if bits == 32:
        value = (value + (1 << 31)) % (1 << 32) - (1 << 31)
    return value


def fields(data: bytes, source: str = "") -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) for every field; LENGTH values are bytes, the rest ints
    (FIXED64/FIXED32 as their raw little-endian integer)."""
    pos = 0
    while pos < len(data):
        tag, pos = read_varint(data, pos, source)
        field, wire = tag >> 3, tag & 7
        if wire == VARINT:
            value, pos = read_varint(data, pos, source)
        elif wire == FIXED64:
            value, pos = int.from_bytes(data[pos:pos + 8], "little"), pos + 8
        elif wire == FIXED32:
            value, pos = int.from_bytes(data[pos:pos + 4], "little"), pos + 4
        elif wire == LENGTH:
            size, pos = read_varint(data, pos, source)
            value, pos = data[pos:pos + size], pos + size
        else:
            raise InputError(f"unsupported protobuf wire type {wire} (field {field})", source=source or None)
        if pos > len(data):
            raise InputError(f"truncated field {field}", source=source or None)
        yield field, wire, value


def unpack_varints(payload: bytes, source: str = "") -> list[int]:
    values, pos = [], 0
    while pos < len(payload):
        value, pos = read_varint(payload, pos, source)
        values.append(value)
    return values


def delimited(messages: list[bytes]) -> bytes:
    """A stream of messages, each preceded by its varint length (protobuf's writeDelimitedTo)."""
    return b"".join(varint(len(m)) + m for m in messages)


def split_delimited(data: bytes, source: str = "") -> list[bytes]:
    out, pos = [], 0
    while pos < len(data):
        size, pos = read_varint(data, pos, source)
        if pos + size > len(data):
            raise InputError(f"message {len(out)} is truncated ({size} bytes announced)", source=source or None)
        out.append(data[pos:pos + size])
        pos += size
    return out
