"""Reading and writing ``.et`` files: a GlobalMetadata message then Node messages, each
preceded by its length as a varint.  Plain or gzip-compressed (detected by magic bytes)."""

from __future__ import annotations

import gzip
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ...errors import InputError
from ...fileio import atomic_write_bytes
from . import wire
from .schema import (
    GlobalMetadata,
    Node,
    decode_metadata,
    decode_node,
    encode_metadata,
    encode_node,
)

_MAX_MESSAGE = 1 << 31


@dataclass
class Trace:
    """One rank's ET file, decoded."""

    path: str
    metadata: GlobalMetadata
    nodes: list[Node]


def _load_bytes(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise InputError("file not found", path) from None
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror}", path) from None
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as e:
            raise InputError(f"corrupt gzip data: {e}", path) from None
    return data


def read_trace(path: str | os.PathLike[str]) -> Trace:
    """Decode one ``.et`` file.

    Raises:
        InputError: naming the file and the byte offset if it is empty, truncated or garbled.
    """
    path = str(path)
    buf = _load_bytes(path)
    if not buf:
        raise InputError("empty file: expected a Chakra GlobalMetadata message", path)
    pos = 0
    n = len(buf)
    messages: list[tuple[int, bytes]] = []
    while pos < n:
        start = pos
        try:
            size, pos = wire.read_varint(buf, pos)
        except wire.WireError:
            raise InputError(f"truncated length prefix at byte {start} (message #{len(messages)})", path) from None
        if size >= _MAX_MESSAGE:
            raise InputError(f"garbled length prefix at byte {start}: {size} bytes", path)
        if pos + size > n:
            raise InputError(
                f"truncated: message #{len(messages)} at byte {start} declares {size} bytes but only {n - pos} remain",
                path,
            )
        messages.append((start, buf[pos : pos + size]))
        pos += size
    try:
        metadata = decode_metadata(messages[0][1])
    except wire.WireError as e:
        raise InputError(f"garbled GlobalMetadata: {e}", path) from None
    nodes = []
    for k, (start, body) in enumerate(messages[1:], start=1):
        try:
            nodes.append(decode_node(body))
        except (wire.WireError, ValueError) as e:
            raise InputError(f"garbled node message #{k} at byte {start}: {e}", path) from None
    return Trace(path, metadata, nodes)


def encode_trace(metadata: GlobalMetadata, nodes: Sequence[Node]) -> bytes:
    """Encode metadata and nodes into the bytes of an ``.et`` file."""
    parts = []
    for body in [encode_metadata(metadata)] + [encode_node(nd) for nd in nodes]:
        parts.append(wire.encode_varint(len(body)))
        parts.append(body)
    return b"".join(parts)


def write_trace(
    path: str | os.PathLike[str], nodes: Sequence[Node], metadata: GlobalMetadata | None = None, compress: bool = False
) -> None:
    """Write one ``.et`` file atomically (temporary file, then rename)."""
    data = encode_trace(metadata or GlobalMetadata(version="0.0.4"), nodes)
    if compress:
        data = gzip.compress(data, mtime=0)
    atomic_write_bytes(Path(path), data)
