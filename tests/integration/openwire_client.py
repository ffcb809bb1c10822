"""A tiny OpenWire producer for integration tests: the loose-encoded handshake (WireFormatInfo, then
ConnectionInfo, SessionInfo, ProducerInfo) and message sends that wait for the broker's Response, so a test
can hand a real ActiveMQ broker every message kind (map, stream, object, compressed bodies, typed
properties, groups) that STOMP cannot produce. Messages are built by tests/engines/migrate/openwire_builder.
Field layouts from the v12 marshallers of activemq-client (looseMarshal)."""
from __future__ import annotations

import socket
import struct

from tests.engines.migrate import openwire_builder as B

WIRE_FORMAT_INFO, CONNECTION_INFO, SESSION_INFO, PRODUCER_INFO, SHUTDOWN_INFO = 1, 3, 4, 6, 11
RESPONSE, EXCEPTION_RESPONSE = 30, 31


class OpenWireProducer:
    def __init__(self, port: int, conn: str = "ID:it-openwire-1", client_id: str = "it-openwire"):
        self.conn = conn
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=20)
        self.buf = b""
        self.cid = 0
        props = B.prim_map([("TightEncodingEnabled", 1, False), ("CacheEnabled", 1, False),
                            ("SizePrefixDisabled", 1, False), ("StackTraceEnabled", 1, False),
                            ("TcpNoDelayEnabled", 1, True), ("MaxInactivityDuration", 6, 0),
                            ("MaxInactivityDurationInitalDelay", 6, 10000), ("CacheSize", 5, 0)])
        self._frame(WIRE_FORMAT_INFO, b"ActiveMQ" + struct.pack(">i", 12) + b"\x01"
                    + struct.pack(">i", len(props)) + props)
        while self._read()[0] != WIRE_FORMAT_INFO:
            pass
        conn_id = b"\x01\x78" + B._str(conn)
        self._request(CONNECTION_INFO, conn_id + B._str(client_id) + B._str(None) + B._str(None) + b"\x00"
                      + b"\x00" * 5 + B._str(None))
        self._request(SESSION_INFO, b"\x01\x79" + B._str(conn) + struct.pack(">q", 1))
        self._request(PRODUCER_INFO, B.producer_id(conn, 1, 1) + b"\x00" + b"\x00" + b"\x00" + struct.pack(">i", 0))

    def _frame(self, t: int, body: bytes) -> None:
        self.sock.sendall(struct.pack(">iB", len(body) + 1, t) + body)

    def _read(self) -> tuple[int, bytes]:
        while True:
            if len(self.buf) >= 4:
                (n,) = struct.unpack_from(">i", self.buf)
                if len(self.buf) >= 4 + n:
                    frame = self.buf[4:4 + n]
                    self.buf = self.buf[4 + n:]
                    return frame[0], frame[1:]
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("broker closed the OpenWire connection")
            self.buf += chunk

    def _wait(self, cid: int) -> None:
        while True:
            t, body = self._read()
            if t in (RESPONSE, EXCEPTION_RESPONSE) and struct.unpack_from(">i", body, 5)[0] == cid:
                if t == EXCEPTION_RESPONSE:
                    raise AssertionError(f"broker refused command {cid}: {body[9:300]!r}")
                return

    def _request(self, t: int, fields: bytes) -> None:
        self.cid += 1
        self._frame(t, struct.pack(">i", self.cid) + b"\x01" + fields)
        self._wait(self.cid)

    def send(self, type_code: int, content: bytes | None, **kw) -> None:
        """Send one message (``openwire_builder.message`` arguments) and wait for the broker's Response."""
        self.cid += 1
        raw = B.message(type_code, content, command_id=self.cid, response_required=True, conn=self.conn,
                        version=12, **kw)
        self.sock.sendall(raw)  # the builder's size prefix is the frame's
        self._wait(self.cid)

    def close(self) -> None:
        try:
            self.cid += 1
            self._frame(SHUTDOWN_INFO, struct.pack(">i", self.cid) + b"\x00")
        finally:
            self.sock.close()
