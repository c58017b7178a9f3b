"""Protocol-buffers wire format, just enough for Chakra execution traces.

Pure Python, no protobuf runtime: Chakra users lose days to protobuf version clashes, and the
format is small.  Decoding errors raise :class:`WireError` with the byte offset.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

VARINT, FIXED64, LEN, FIXED32 = 0, 1, 2, 5
_MASK64 = (1 << 64) - 1


class WireError(ValueError):
    """Malformed protobuf bytes (truncated or garbled)."""


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """Decode an unsigned varint at ``pos``; return (value, new position)."""
    result = 0
    shift = 0
    n = len(buf)
    while True:
        if pos >= n:
            raise WireError(f"truncated varint at byte {pos}")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise WireError(f"varint longer than 10 bytes at byte {pos}")


def iter_fields(buf: bytes, start: int = 0, end: int | None = None) -> Iterator[tuple[int, int, object]]:
    """Yield ``(field_number, wire_type, value)`` of a message.

    ``value`` is an int for VARINT/FIXED32/FIXED64 (raw unsigned bits) and a ``bytes`` slice
    for LEN fields.
    """
    pos = start
    end = len(buf) if end is None else end
    while pos < end:
        key, pos = read_varint(buf, pos)
        field, wt = key >> 3, key & 7
        if field == 0:
            raise WireError(f"field number 0 at byte {pos}")
        if wt == VARINT:
            val, pos = read_varint(buf, pos)
        elif wt == LEN:
            ln, pos = read_varint(buf, pos)
            if pos + ln > end:
                raise WireError(f"field {field} declares {ln} bytes at byte {pos} but only {end - pos} remain")
            val = buf[pos : pos + ln]
            pos += ln
        elif wt == FIXED64:
            if pos + 8 > end:
                raise WireError(f"truncated fixed64 at byte {pos}")
            val = int.from_bytes(buf[pos : pos + 8], "little")
            pos += 8
        elif wt == FIXED32:
            if pos + 4 > end:
                raise WireError(f"truncated fixed32 at byte {pos}")
            val = int.from_bytes(buf[pos : pos + 4], "little")
            pos += 4
        else:
            raise WireError(f"unsupported wire type {wt} for field {field} at byte {pos}")
        yield field, wt, val


def packed_varints(data: bytes) -> list[int]:
    """Decode a packed repeated varint field."""
    out = []
    pos = 0
    n = len(data)
    append = out.append
    while pos < n:
        b = data[pos]
        if b < 0x80:  # fast path: one-byte varint
            append(b)
            pos += 1
            continue
        val, pos = read_varint(data, pos)
        append(val)
    return out


def to_signed64(v: int) -> int:
    """Reinterpret raw 64-bit bits as a signed int64."""
    v &= _MASK64
    return v - (1 << 64) if v >= 1 << 63 else v


def to_signed32(v: int) -> int:
    """Reinterpret raw bits as a signed int32 (protobuf sign-extends negatives to 64 bits)."""
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


def zigzag_decode(v: int) -> int:
    """sint32/sint64 decoding."""
    return (v >> 1) ^ -(v & 1)


def zigzag_encode(v: int) -> int:
    """sint32/sint64 encoding (64-bit)."""
    return ((v << 1) ^ (v >> 63)) & _MASK64


def fixed_to_double(v: int) -> float:
    return struct.unpack("<d", v.to_bytes(8, "little"))[0]


def fixed_to_float(v: int) -> float:
    return struct.unpack("<f", v.to_bytes(4, "little"))[0]


# ----------------------------------------------------------------------------- encoding


def encode_varint(n: int) -> bytes:
    """Encode an integer as a varint (negatives as 64-bit two's complement)."""
    n &= _MASK64
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def key(field: int, wire_type: int) -> bytes:
    return encode_varint((field << 3) | wire_type)


def field_varint(field: int, value: int) -> bytes:
    return key(field, VARINT) + encode_varint(value)


def field_bytes(field: int, data: bytes) -> bytes:
    return key(field, LEN) + encode_varint(len(data)) + data


def field_fixed64(field: int, raw: bytes) -> bytes:
    return key(field, FIXED64) + raw


def field_fixed32(field: int, raw: bytes) -> bytes:
    return key(field, FIXED32) + raw


def packed(field: int, values: list[int]) -> bytes:
    if not values:
        return b""
    return field_bytes(field, b"".join(encode_varint(v) for v in values))
