"""Damage makers and state readers for the recover tests: every damage is applied to a copy, and the test
knows exactly which records (by offset and id) it touched."""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from amqtool import native
from amqtool.engines.artemis.load import load_journal
from amqtool.store.journal_files import open_journal
from amqtool.store.layout import BINDINGS, MESSAGES, JournalDir
from tests.support import ORACLE, copy_tree


def journal(directory: Path) -> JournalDir:
    directory = Path(directory)
    spec = BINDINGS if any(p.suffix == ".bindings" for p in directory.iterdir()) else MESSAGES
    return JournalDir(spec, directory)


def live_state(directory: Path) -> list[tuple]:
    """(id, user record type, is update, body sha256) of every live entry, in load order."""
    with open_journal(journal(directory)) as opened:
        assert not opened.skipped, opened.skipped
        res = load_journal(opened)
        return [(r.id, r.user_record_type, bool(r.is_update), hashlib.sha256(res.body(r)).hexdigest())
                for r in res.live]


def live_ids(directory: Path) -> set[int]:
    return {e[0] for e in live_state(directory)}


def manifest_live(scenario: str) -> list[tuple]:
    m = json.loads((ORACLE / scenario / "manifest.json").read_text())
    return [(e["id"], e["type"], e["isUpdate"], e["sha256"]) for e in m["expectedAfterLoad"]["live"]]


def oracle_copy(scenario: str, dst: Path) -> Path:
    return copy_tree(ORACLE / scenario / "journal", dst)


def records(directory: Path) -> list[tuple[Path, tuple]]:
    """Every record the broker's scan accepts, as (file, scanner tuple), files in load order."""
    out = []
    with open_journal(journal(directory)) as opened:
        for jf in opened.files:
            data = jf.path.read_bytes()
            recs, _ = native.scan_records(data, jf.tag, jf.version, True, 16)
            out.extend((jf.path, r) for r in recs)
    return out


def flip(path: Path, offset: int, mask: int = 0xFF) -> None:
    with open(path, "r+b") as fh:
        fh.seek(offset)
        b = fh.read(1)[0]
        fh.seek(offset)
        fh.write(bytes([b ^ mask]))


def break_record(path: Path, rec: tuple, how: int) -> None:
    """Damage one record's framing the way the broker notices: 0 checkSize, 1 type byte, 2 tag, 3 body size."""
    off, size = rec[1], rec[2]
    if how == 0:
        flip(path, off + size - 2)
    elif how == 1:
        flip(path, off, 0x40)
    elif how == 2:
        flip(path, off + 2, 0x10)
    else:
        # the body size of a record with a body sits right after the id (non-tx: offset 14 in version 2)
        flip(path, off + 16, 0x01)


def zero(path: Path, start: int, end: int) -> None:
    with open(path, "r+b") as fh:
        fh.seek(start)
        fh.write(b"\0" * (end - start))


def copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def purge(root: Path, manifest: dict, queue: str) -> list[int]:
    """Purge ``queue`` of a demo store as the broker's ``QueueImpl.deleteMatchingReferences`` writes it:
    in transactions of at most 500 references (DEFAULT_FLUSH_LIMIT), an ACKNOWLEDGE_REF update per reference
    and a DELETE of every message no other queue holds, then a COMMIT. Returns the purged message ids."""
    from amqtool.formats.artemis.userrecords import AckRefRecord
    from amqtool.store.journal_writer import JournalWriter

    qid = [q["id"] for q in manifest["queues"] if q["name"] == queue][0]
    by_queue = manifest["expected"]["liveByQueue"]
    others = {m["messageId"] for name, msgs in by_queue.items() if name != queue for m in msgs}
    ids = [m["messageId"] for m in by_queue[queue]]
    assert ids and not (set(ids) & others), "pick a queue whose messages no other queue holds"
    jm = manifest["expected"]["journals"]["messages"]
    w = JournalWriter.open(root / jm["directory"], MESSAGES, file_size=jm["fileSize"])
    tx = manifest["idGenerator"]["lastValue"] + 1000
    try:
        for start in range(0, len(ids), 500):
            tx += 1
            for mid in ids[start:start + 500]:
                w.append_update_tx(tx, mid, 33, AckRefRecord(queue_id=qid).encode())
                w.append_delete_tx(tx, mid)
            w.append_commit(tx)
    finally:
        w.close()
    return ids
