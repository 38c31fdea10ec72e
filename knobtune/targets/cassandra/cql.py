"""The little of CQL's native protocol (v4) knobtune needs to read a node's counters: one query, its rows.

The node's own tables (``system_views.thread_pools``, ``system_views.caches``,
``system.compaction_history``) are read in milliseconds this way; the Java
client (native/cassandra/) spends seconds starting a JVM and a driver for the
same answer. No authentication, no compression, no paging (the tables asked
are small): a frame STARTUP, then QUERY frames on one connection over
loopback. Frames as in the protocol's spec (native_protocol_v4.spec, sections
2, 4.1.1, 4.1.4, 4.2.5.2 and 6).
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable

from knobtune.errors import KnobtuneError

_VERSION, _STARTUP, _READY, _QUERY, _RESULT, _ERROR = 0x04, 0x01, 0x02, 0x07, 0x08, 0x00
_ONE = 0x0001  # consistency
_ROWS = 0x0002  # RESULT kind
_FLAG_TRACING, _FLAG_PAYLOAD, _FLAG_WARNING = 0x02, 0x04, 0x08


class CqlError(KnobtuneError):
    """The node did not answer a query as the protocol says (refused, closed, or a reply we cannot read)."""


class _Reader:
    """Reads the protocol's notations ([int], [short], [string], [bytes], ...) from one frame's body."""

    def __init__(self, body: bytes) -> None:
        self.body, self.at = body, 0

    def take(self, count: int) -> bytes:
        if self.at + count > len(self.body):
            raise CqlError("a reply from the node ended early. Fix: check that the port is the node's native port")
        part = self.body[self.at:self.at + count]
        self.at += count
        return part

    def int(self) -> int:
        return struct.unpack(">i", self.take(4))[0]

    def short(self) -> int:
        return struct.unpack(">H", self.take(2))[0]

    def string(self) -> str:
        return self.take(self.short()).decode()

    def bytes(self) -> bytes | None:
        length = self.int()
        return None if length < 0 else self.take(length)

    def type_option(self) -> int:
        """A column's type id, its sub-types skipped (collections, tuples, UDTs, custom)."""
        kind = self.short()
        if kind == 0x0000:
            self.string()
        elif kind in (0x0020, 0x0022):  # list, set
            self.type_option()
        elif kind == 0x0021:  # map
            self.type_option()
            self.type_option()
        elif kind == 0x0030:  # UDT
            self.string()
            self.string()
            for _ in range(self.short()):
                self.string()
                self.type_option()
        elif kind == 0x0031:  # tuple
            for _ in range(self.short()):
                self.type_option()
        return kind


_DECODERS: dict[int, Callable[[bytes], object]] = {
    0x0001: bytes.decode, 0x000D: bytes.decode,  # ascii, varchar
    0x0002: lambda b: struct.unpack(">q", b)[0], 0x0005: lambda b: struct.unpack(">q", b)[0],  # bigint, counter
    0x000B: lambda b: struct.unpack(">q", b)[0],  # timestamp (ms since the epoch)
    0x0009: lambda b: struct.unpack(">i", b)[0], 0x0013: lambda b: struct.unpack(">h", b)[0],  # int, smallint
    0x0014: lambda b: struct.unpack(">b", b)[0], 0x0004: lambda b: b != b"\x00",  # tinyint, boolean
    0x0007: lambda b: struct.unpack(">d", b)[0], 0x0008: lambda b: struct.unpack(">f", b)[0],  # double, float
    0x000E: lambda b: int.from_bytes(b, "big", signed=True),  # varint
}


class CqlConnection:
    """One connection to a node's native port on loopback; a context manager.

    Raises (from the constructor and ``rows``):
        CqlError: the node is not there, refused the connection or a query, or answered something unreadable.
    """

    def __init__(self, port: int, timeout_s: float = 10.0) -> None:
        try:
            self._sock = socket.create_connection(("127.0.0.1", port), timeout=timeout_s)
        except OSError as exc:
            raise CqlError(f"no Cassandra node answers on 127.0.0.1:{port} ({exc}). "
                           "Fix: check that the node runs") from None
        try:
            opcode, _ = self._ask(_STARTUP, _string_map({"CQL_VERSION": "3.0.0"}))
        except BaseException:
            self._sock.close()
            raise
        if opcode != _READY:
            self._sock.close()
            raise CqlError(f"the node on port {port} asks for a login (opcode {opcode:#x}). "
                           "Fix: knobtune's scratch node runs without authentication; check the port")

    def __enter__(self) -> CqlConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self._sock.close()

    def rows(self, query: str) -> list[dict[str, object]]:
        """The rows of ``query`` (consistency ONE), each a dict by column name (types we do not decode: bytes)."""
        encoded = query.encode()
        _, body = self._ask(_QUERY, struct.pack(">i", len(encoded)) + encoded + struct.pack(">HB", _ONE, 0))
        reader = _Reader(body)
        if reader.int() != _ROWS:
            return []
        flags, count = reader.int(), reader.int()
        if flags & 0x0002:  # has more pages: we read the first only
            reader.bytes()
        if flags & 0x0001:  # global table spec
            reader.string()
            reader.string()
        columns = []
        for _ in range(count):
            if not flags & 0x0001:
                reader.string()
                reader.string()
            columns.append((reader.string(), reader.type_option()))
        rows = []
        for _ in range(reader.int()):
            row: dict[str, object] = {}
            for name, kind in columns:
                value = reader.bytes()
                row[name] = value if value is None or kind not in _DECODERS else _DECODERS[kind](value)
            rows.append(row)
        return rows

    def _ask(self, opcode: int, body: bytes) -> tuple[int, bytes]:
        """Send one request frame (stream 0) and read the reply's opcode and body (tracing, payload, warnings
        skipped). Raises CqlError on an ERROR reply or a broken connection."""
        try:
            self._sock.sendall(struct.pack(">BBhBi", _VERSION, 0, 0, opcode, len(body)) + body)
            header = self._read(9)
            _, flags, _, reply, length = struct.unpack(">BBhBi", header)
            reader = _Reader(self._read(length))
        except OSError as exc:
            raise CqlError(f"the connection to the node failed: {exc}. Fix: check that the node still runs") from None
        if flags & _FLAG_TRACING:
            reader.take(16)
        if flags & _FLAG_WARNING:
            for _ in range(reader.short()):
                reader.string()
        if flags & _FLAG_PAYLOAD:
            for _ in range(reader.short()):
                reader.string()
                reader.bytes()
        if reply == _ERROR:
            code = reader.int()
            raise CqlError(f"the node refused a query (error {code:#06x}): {reader.string()}. "
                           "Fix: check the query against Cassandra's version")
        return reply, reader.body[reader.at:]

    def _read(self, count: int) -> bytes:
        data = b""
        while len(data) < count:
            part = self._sock.recv(count - len(data))
            if not part:
                raise OSError("the node closed the connection")
            data += part
        return data


def _string_map(values: dict[str, str]) -> bytes:
    out = struct.pack(">H", len(values))
    for key, value in values.items():
        for text in (key, value):
            out += struct.pack(">H", len(text.encode())) + text.encode()
    return out
