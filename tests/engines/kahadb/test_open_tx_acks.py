"""A damaged batch after the index checkpoint holding only acknowledgements of a local transaction the replay
leaves open (amqtool/engines/kahadb/superseded.py): MessageDatabase.recover rolls such a transaction back at
the end of recovery, so whether the replay reads its acks or skips them, nothing is acknowledged.

The shared fixture ``gc`` (a real 5.17.2 broker, clean stop, lastUpdate 8:39989) with one batch appended to
db-8.log, its newest file, after the checkpoint: two KAHA_REMOVE_MESSAGEs of live fx.gc.q messages, a batch each,
inside a local transaction that never ends (then a trace), what a broker killed while a consumer's transacted acks
were open leaves (the kl45 hold-out store h4-selectors-compaction-kill holds four of them, db-16.log)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from amqtool.engines.kahadb import verify_store
from amqtool.errors import overall_verdict
from amqtool.formats.kahadb import journal as jr
from amqtool.formats.kahadb.commands import EntryType
from amqtool.formats.kahadb.protobuf import encode_field, encode_varint
from amqtool.store.layout import detect
from tests.faults.kahadb import KahaCampaign
from tests.faults.model import Fault
from tests.support import KAHADB

GC = KAHADB / "gc" / "kahadb"
LIVE = ("ID:vm-41387-1795304891300-3:3:-1:1:61", "ID:vm-41387-1795304891300-3:3:-1:1:62")  # on fx.gc.q
END = 40208  # db-8.log: the end marker after its last batch

pytestmark = pytest.mark.skipif(not GC.is_dir(), reason="shared KahaDB fixtures not present")


def _open_ack(message_id: str) -> bytes:
    tx = encode_field(1, encode_field(1, "ID:kl45-test-conn-1") + encode_field(1, 7))  # (both field 1, as written)
    body = encode_field(1, tx) + encode_field(2, encode_field(1, 0) + encode_field(2, "fx.gc.q")) \
        + encode_field(3, message_id)
    return bytes([EntryType.REMOVE_MESSAGE]) + encode_varint(len(body)) + body


def _with_open_ack(tmp_path: Path) -> Path:
    root = tmp_path / "src" / "kahadb"
    shutil.copytree(GC, root)
    (root / "lock").unlink(missing_ok=True)
    p = root / "db-8.log"
    data = p.read_bytes()
    text = b"LOADED by a test"
    trace = bytes([0, len(text) + 2, 0x0A, len(text)]) + text  # KahaTraceCommand after it: not a torn tail
    batch = b"".join(jr.encode_batch([r])[:-len(jr.EOF_RECORD)] for r in (_open_ack(LIVE[0]), _open_ack(LIVE[1])))
    batch += jr.encode_batch([trace])
    p.write_bytes(data[:END] + batch + data[END + len(batch):])  # (the file keeps its preallocated length)
    return root


def test_the_open_transaction_is_a_warning(tmp_path):
    findings, _ = verify_store(detect(_with_open_ack(tmp_path)))
    codes = {f.code for f in findings if f.severity.value != "info"}
    assert overall_verdict(findings).name == "WARNING"
    assert codes == {"kahadb-open-transaction", "kahadb-journal-ahead-of-index"}


def test_a_corrupted_batch_of_open_transaction_acks_changes_nothing(tmp_path):
    # the first ack's batch, its checksum changed: the replay skips it (it was CRITICAL); read or skipped, the
    # transaction (open by the second) is rolled back at start and the message stays
    root = _with_open_ack(tmp_path)
    o = KahaCampaign("gc-open-ack", root, tmp_path / "scratch").run_fault(
        Fault("flip", "db-8.log", END + 20, 0x04, "", "batch checksum"))
    assert o.truth == "same"
    assert o.verdict == "WARNING" and "kahadb-checksum-mismatch" in o.codes
