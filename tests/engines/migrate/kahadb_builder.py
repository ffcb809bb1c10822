"""Test-side KahaDB stores: journal records written with amqtool's KahaDB journal writer (the broker's batch
layout and checksums) holding OpenWire messages from :mod:`openwire_builder`."""
from __future__ import annotations

from amqtool.engines.kahadb.compact.write import JournalWriter
from amqtool.formats.kahadb.commands import EntryType
from amqtool.formats.kahadb.protobuf import encode_field, encode_varint
from tests.engines.migrate import openwire_builder as B

XA = encode_field(2, encode_field(1, 4711) + encode_field(2, b"branch-1") + encode_field(3, b"gtx-1"))
LOCAL = encode_field(1, encode_field(1, "ID:conn-1") + encode_field(1, 9))


def frame(t: int, body: bytes) -> bytes:
    return bytes([t]) + encode_varint(len(body)) + body


def kaha_destination(kind: int, name: str) -> bytes:
    """KahaDestination: 1 type (0 queue, 1 topic, 2 temp queue, 3 temp topic), 2 name."""
    return encode_field(1, kind) + encode_field(2, name)


class Store:
    def __init__(self, root):
        root.mkdir(parents=True)
        self.root = root
        self.w = JournalWriter(root, 1 << 20, True)

    def add(self, seq: int, *, dest=(0, "it.q"), tx: bytes | None = None, **kw) -> None:
        ow_kind = {0: 100, 1: 101, 2: 102, 3: 103}[dest[0]]
        ow = B.message(28, B.text_content(f"m-{seq}"), props=[("seq", 5, seq)], dest=(ow_kind, dest[1]), seq=seq,
                       **kw)
        body = (encode_field(1, tx) if tx is not None else b"") + encode_field(2, kaha_destination(*dest))
        body += encode_field(3, f"ID:test-1:1:1:{seq}") + encode_field(4, ow)
        self.w.append(frame(EntryType.ADD_MESSAGE, body))

    def prepare(self, tx: bytes) -> None:
        self.w.append(frame(EntryType.PREPARE, encode_field(1, tx)))

    def close(self):
        self.w.close()
        return self.root
