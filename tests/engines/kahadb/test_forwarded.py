"""Records after the checkpoint that are only the ack compaction's forwarded acks
(amqtool/engines/kahadb/forwarded.py), on a store a real 5.17.2 broker stopped cleanly
(tests/data/kahadb/f4-gc: db-15.log is the compaction of db-4.log, a KAHA_REWRITTEN_DATA_FILE marker at 15:28
and 20 forwarded REMOVEs of fx.f4.q, all after lastUpdate 14:12754)."""
from __future__ import annotations

import shutil
import struct
import zlib
from pathlib import Path

from amqtool.engines.kahadb import verify_store
from amqtool.errors import overall_verdict
from amqtool.formats.kahadb import journal as jr
from amqtool.store.layout import detect

STORE = Path(__file__).resolve().parents[2] / "data" / "kahadb" / "f4-gc" / "kahadb"
MARKER_SOURCE = 28 + 5 + 3  # db-15.log: the marker's record at 28, its 5-byte header, type, length, tag 1


def _verdict(root: Path) -> tuple[str, set, set]:
    findings, _ = verify_store(detect(root))
    return (overall_verdict(findings).name, {f.code for f in findings if f.severity.value != "info"},
            {f.code for f in findings if f.severity.value == "info"})


def _edit_db15(root: Path, offset: int, new: bytes) -> None:
    """Overwrite bytes of db-15.log's only batch and store its Adler-32 again (the broker's own checksum)."""
    p = root / "db-15.log"
    data = bytearray(p.read_bytes())
    data[offset:offset + len(new)] = new
    (batch,) = [ev for ev in jr.scan_file(bytes(data), checksums=False) if isinstance(ev, jr.Batch)]
    start = batch.offset + jr.BATCH_CONTROL_RECORD_SIZE
    struct.pack_into(">q", data, batch.offset + 20, zlib.adler32(bytes(data[start:start + batch.size])))
    p.write_bytes(bytes(data))


def _copy(tmp_path: Path) -> Path:
    root = tmp_path / "kahadb"
    shutil.copytree(STORE, root)
    return root


def test_pristine_cleanly_stopped_store_with_forwarded_acks_is_ok(tmp_path):
    # the broker stopped cleanly; its restart replays from 15:28, the marker's source db-4.log is there, so
    # process(KahaRewrittenDataFileCommand) jumps past the forwarded acks: nothing changes, no WARNING
    root = _copy(tmp_path)
    verdict, codes, infos = _verdict(root)
    assert (verdict, codes) == ("OK", set())
    assert "kahadb-forwarded-acks-after-index" in infos


def test_forwarded_acks_replayed_when_the_source_is_gone_are_still_inert(tmp_path):
    # the marker names db-3.log (GC'd): the broker replays the 20 forwarded REMOVEs, each of a message the
    # index no longer holds (updateIndex finds no id in messageIdIndex): the index stays as it is
    root = _copy(tmp_path)
    assert (root / "db-15.log").read_bytes()[MARKER_SOURCE] == 4
    _edit_db15(root, MARKER_SOURCE, b"\x03")
    verdict, codes, infos = _verdict(root)
    assert (verdict, codes) == ("OK", set())
    assert "kahadb-forwarded-acks-after-index" in infos


def test_an_ack_of_a_message_the_index_holds_keeps_the_warning(tmp_path):
    # the first forwarded REMOVE (15:39, ...-3:1:-1:1:1) made to name ...-3:5:-1:1:1, live on fx.f4.q: not an
    # ack the compaction could have forwarded (its message was acknowledged before), so the records after the
    # checkpoint are not all inert
    root = _copy(tmp_path)
    data = (root / "db-15.log").read_bytes()
    old = b"\x1a$ID:vm-44611-1795705981148-3:1:-1:1:1\""
    at = data.index(old, 39)
    assert at < 318
    _edit_db15(root, at, b"\x1a$ID:vm-44611-1795705981148-3:5:-1:1:1\"")
    verdict, codes, infos = _verdict(root)
    assert (verdict, codes) == ("WARNING", {"kahadb-journal-ahead-of-index"})
    assert "kahadb-forwarded-acks-after-index" not in infos


def test_a_record_appended_after_the_forwarded_acks_keeps_the_warning(tmp_path):
    # a KAHA_TRACE_COMMAND batch after the compaction file's own (what a restarted broker appends there: the
    # newest file is its write file): a record after the checkpoint that is not a forwarded ack
    root = _copy(tmp_path)
    p = root / "db-15.log"
    data = p.read_bytes()
    end = [ev for ev in jr.scan_file(data) if isinstance(ev, jr.End)][0].offset
    text = b"LOADED by a test"
    trace = bytes([0, len(text) + 2, 0x0A, len(text)]) + text  # KahaTraceCommand: type 0, framed, field 1
    p.write_bytes(data[:end] + jr.encode_batch([trace]))
    verdict, codes, _infos = _verdict(root)
    assert (verdict, codes) == ("WARNING", {"kahadb-journal-ahead-of-index"})
