"""Chakra ET messages (schema ``et_def.proto``, package ChakraProtoMsg) as plain Python.

Only what simulators read is decoded into fields; unknown fields are skipped, so newer
schemas still load.  :class:`Attr` keeps the protobuf value type it came with, so a trace
written back is the same trace.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from enum import IntEnum

from ...workload.ops import CollectiveKind
from . import wire


class NodeType(IntEnum):
    """Chakra NodeType."""

    INVALID_NODE = 0
    METADATA_NODE = 1
    MEM_LOAD_NODE = 2
    MEM_STORE_NODE = 3
    COMP_NODE = 4
    COMM_SEND_NODE = 5
    COMM_RECV_NODE = 6
    COMM_COLL_NODE = 7
    STORAGE_NODE = 8
    BATCH_NODE = 9
    CHECKPOINT_NODE = 10


# Chakra's CollectiveCommType has the same names and values as the IR's CollectiveKind.
CommType = CollectiveKind


# AttributeProto oneof: field number -> (type name, is list)
ATTR_TYPES: dict[int, str] = {
    3: "double",
    4: "double_list",
    5: "float",
    6: "float_list",
    7: "int32",
    8: "int32_list",
    9: "int64",
    10: "int64_list",
    11: "uint32",
    12: "uint32_list",
    13: "uint64",
    14: "uint64_list",
    15: "sint32",
    16: "sint32_list",
    17: "sint64",
    18: "sint64_list",
    19: "fixed32",
    20: "fixed32_list",
    21: "fixed64",
    22: "fixed64_list",
    23: "sfixed32",
    24: "sfixed32_list",
    25: "sfixed64",
    26: "sfixed64_list",
    27: "bool",
    28: "bool_list",
    29: "string",
    30: "string_list",
    31: "bytes",
    32: "bytes_list",
}
ATTR_FIELDS = {name: num for num, name in ATTR_TYPES.items()}
INTEGER_TYPES = frozenset(
    {"int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32", "fixed64", "sfixed32", "sfixed64"}
)


@dataclass
class Attr:
    """One attribute: a name, a value and the protobuf type of the value."""

    name: str
    value: object
    type: str


@dataclass
class Node:
    """One Chakra node.  ``attrs`` maps attribute name to :class:`Attr`."""

    id: int = 0
    name: str = ""
    type: int = 0
    ctrl_deps: list[int] = field(default_factory=list)
    data_deps: list[int] = field(default_factory=list)
    start_time_micros: int = 0
    duration_micros: int = 0
    inputs: dict[str, str] | None = None
    outputs: dict[str, str] | None = None
    attrs: dict[str, Attr] = field(default_factory=dict)

    def attr(self, name: str, default: object = None) -> object:
        """The value of attribute ``name``, or ``default``."""
        a = self.attrs.get(name)
        return default if a is None else a.value

    def set_attr(self, name: str, value: object, type: str) -> None:
        """Set attribute ``name`` with an explicit protobuf type, e.g. ``"int64"``."""
        if type not in ATTR_FIELDS:
            raise ValueError(f"unknown attribute type {type!r}")
        self.attrs[name] = Attr(name, value, type)


@dataclass
class GlobalMetadata:
    """The first message of every ET file."""

    version: str = ""
    attrs: dict[str, Attr] = field(default_factory=dict)


# ----------------------------------------------------------------------------- decoding


def _expect(wt: int, length_delimited: bool, what: str) -> None:
    """Refuse a field whose wire type is not the schema's (a garbled or foreign message)."""
    if (wt == wire.LEN) != length_delimited:
        kind = "length-delimited" if length_delimited else "a number"
        raise wire.WireError(f"{what} has wire type {wt}; the schema makes it {kind}")


def _scalar(tname: str, wt: int, raw: object) -> object:
    _expect(wt, tname in ("string", "bytes"), f"a {tname} value")
    if tname in ("string",):
        return bytes(raw).decode("utf-8", errors="replace")  # type: ignore[arg-type]
    if tname == "bytes":
        return bytes(raw)  # type: ignore[arg-type]
    if tname == "double":
        return wire.fixed_to_double(raw) if wt == wire.FIXED64 else float(raw)  # type: ignore[arg-type]
    if tname == "float":
        return wire.fixed_to_float(raw) if wt == wire.FIXED32 else float(raw)  # type: ignore[arg-type]
    v = int(raw)  # type: ignore[arg-type]
    if tname == "bool":
        return bool(v)
    if tname in ("int64", "sfixed64"):
        return wire.to_signed64(v)
    if tname in ("int32", "sfixed32"):
        return wire.to_signed32(v)
    if tname in ("sint32", "sint64"):
        return wire.zigzag_decode(v)
    return v  # uint32, uint64, fixed32, fixed64


def _list(tname: str, data: bytes) -> list[object]:
    base = tname[:-5]
    out: list[object] = []
    for f, wt, raw in wire.iter_fields(data):
        if f != 1:
            continue
        if wt == wire.LEN and base not in ("string", "bytes"):
            # packed encoding
            if base in ("double", "fixed64", "sfixed64", "float", "fixed32", "sfixed32"):
                fmt = {
                    "double": "<d",
                    "fixed64": "<Q",
                    "sfixed64": "<q",
                    "float": "<f",
                    "fixed32": "<I",
                    "sfixed32": "<i",
                }[base]
                if len(raw) % struct.calcsize(fmt):  # type: ignore[arg-type]
                    raise wire.WireError(f"a packed {base} list of {len(raw)} bytes")  # type: ignore[arg-type]
                out.extend(x[0] for x in struct.iter_unpack(fmt, bytes(raw)))  # type: ignore[arg-type]
            else:
                out.extend(_scalar(base, wire.VARINT, v) for v in wire.packed_varints(raw))  # type: ignore[arg-type]
        else:
            out.append(_scalar(base, wt, raw))
    return out


def decode_attr(data: bytes) -> Attr:
    """Decode an AttributeProto."""
    name = ""
    value: object = None
    tname = ""
    for f, wt, raw in wire.iter_fields(data):
        if f == 1:
            _expect(wt, True, "an attribute name")
            name = bytes(raw).decode("utf-8", errors="replace")  # type: ignore[arg-type]
        elif f in ATTR_TYPES:
            tname = ATTR_TYPES[f]
            if tname.endswith("_list"):
                _expect(wt, True, f"a {tname}")
                value = _list(tname, raw)  # type: ignore[arg-type]
            else:
                value = _scalar(tname, wt, raw)
    return Attr(name, value, tname or "none")


def _io(data: bytes) -> dict[str, str]:
    out = {}
    for f, wt, raw in wire.iter_fields(data):
        key = {1: "values", 2: "shapes", 3: "types"}.get(f)
        if key:
            _expect(wt, True, f"the tensor {key}")
            out[key] = bytes(raw).decode("utf-8", errors="replace")  # type: ignore[arg-type]
    return out


def _deps(wt: int, raw: object) -> list[int]:
    if wt == wire.LEN:
        return wire.packed_varints(raw)  # type: ignore[arg-type]
    return [int(raw)]  # type: ignore[arg-type]


#: Node fields with one wire type (dependencies may be packed or not)
_NODE_FIELDS = {
    1: "id",
    2: "name",
    3: "type",
    6: "start_time_micros",
    7: "duration_micros",
    8: "inputs",
    9: "outputs",
    10: "attr",
}


def decode_node(data: bytes) -> Node:
    """Decode a Node message."""
    node = Node()
    for f, wt, raw in wire.iter_fields(data):
        if f in _NODE_FIELDS:
            _expect(wt, f in (2, 8, 9, 10), f"node field {_NODE_FIELDS[f]}")
        if f == 1:
            node.id = int(raw)  # type: ignore[arg-type]
        elif f == 2:
            node.name = bytes(raw).decode("utf-8", errors="replace")  # type: ignore[arg-type]
        elif f == 3:
            node.type = int(raw)  # type: ignore[arg-type]
        elif f == 4:
            node.ctrl_deps.extend(_deps(wt, raw))
        elif f == 5:
            node.data_deps.extend(_deps(wt, raw))
        elif f == 6:
            node.start_time_micros = int(raw)  # type: ignore[arg-type]
        elif f == 7:
            node.duration_micros = int(raw)  # type: ignore[arg-type]
        elif f == 8:
            node.inputs = _io(raw)  # type: ignore[arg-type]
        elif f == 9:
            node.outputs = _io(raw)  # type: ignore[arg-type]
        elif f == 10:
            a = decode_attr(raw)  # type: ignore[arg-type]
            node.attrs[a.name] = a
    return node


def decode_metadata(data: bytes) -> GlobalMetadata:
    """Decode a GlobalMetadata message."""
    md = GlobalMetadata()
    for f, wt, raw in wire.iter_fields(data):
        if f in (1, 2):
            _expect(wt, True, "the version" if f == 1 else "a metadata attribute")
        if f == 1:
            md.version = bytes(raw).decode("utf-8", errors="replace")  # type: ignore[arg-type]
        elif f == 2:
            a = decode_attr(raw)  # type: ignore[arg-type]
            md.attrs[a.name] = a
    return md


# ----------------------------------------------------------------------------- encoding


def _enc_scalar(tname: str, field_no: int, v: object) -> bytes:
    if tname == "string":
        return wire.field_bytes(field_no, str(v).encode("utf-8"))
    if tname == "bytes":
        return wire.field_bytes(field_no, bytes(v))  # type: ignore[arg-type]
    if tname == "double":
        return wire.field_fixed64(field_no, struct.pack("<d", float(v)))  # type: ignore[arg-type]
    if tname == "float":
        return wire.field_fixed32(field_no, struct.pack("<f", float(v)))  # type: ignore[arg-type]
    if tname in ("fixed64", "sfixed64"):
        return wire.field_fixed64(field_no, struct.pack("<Q" if tname == "fixed64" else "<q", int(v)))  # type: ignore[arg-type]
    if tname in ("fixed32", "sfixed32"):
        return wire.field_fixed32(field_no, struct.pack("<I" if tname == "fixed32" else "<i", int(v)))  # type: ignore[arg-type]
    if tname in ("sint32", "sint64"):
        return wire.field_varint(field_no, wire.zigzag_encode(int(v)))  # type: ignore[arg-type]
    return wire.field_varint(field_no, int(v))  # type: ignore[arg-type]


def encode_attr(a: Attr) -> bytes:
    """Encode an AttributeProto (the oneof member is always written, even if default)."""
    out = wire.field_bytes(1, a.name.encode("utf-8"))
    fno = ATTR_FIELDS[a.type]
    if a.type.endswith("_list"):
        base = a.type[:-5]
        items = b"".join(_enc_scalar(base, 1, x) for x in a.value)  # type: ignore[union-attr]
        out += wire.field_bytes(fno, items)
    else:
        out += _enc_scalar(a.type, fno, a.value)
    return out


def encode_node(n: Node) -> bytes:
    """Encode a Node; proto3 default values are omitted, as protobuf does."""
    parts = []
    if n.id:
        parts.append(wire.field_varint(1, n.id))
    if n.name:
        parts.append(wire.field_bytes(2, n.name.encode("utf-8")))
    if n.type:
        parts.append(wire.field_varint(3, int(n.type)))
    parts.append(wire.packed(4, list(n.ctrl_deps)))
    parts.append(wire.packed(5, list(n.data_deps)))
    if n.start_time_micros:
        parts.append(wire.field_varint(6, n.start_time_micros))
    if n.duration_micros:
        parts.append(wire.field_varint(7, n.duration_micros))
    for fno, io in ((8, n.inputs), (9, n.outputs)):
        if io:
            body = b"".join(
                wire.field_bytes(k, io[name].encode("utf-8"))
                for k, name in ((1, "values"), (2, "shapes"), (3, "types"))
                if io.get(name)
            )
            parts.append(wire.field_bytes(fno, body))
    for a in n.attrs.values():
        parts.append(wire.field_bytes(10, encode_attr(a)))
    return b"".join(parts)


def encode_metadata(md: GlobalMetadata) -> bytes:
    """Encode GlobalMetadata."""
    out = wire.field_bytes(1, md.version.encode("utf-8")) if md.version else b""
    for a in md.attrs.values():
        out += wire.field_bytes(2, encode_attr(a))
    return out
