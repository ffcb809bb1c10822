"""LevelDB stores: fault sites biased to the store's structure, and the delivered state.

Sites (:class:`LevelDBSites`) come from the pristine store, read once: every log record's header fields
(magic, kind, CRC-32, length) and data, by record kind; truncations and zeroed ranges of log files; whole log
files deleted; bytes of the index snapshot's files (CURRENT, MANIFEST, write-ahead log, tables) and of
dirty.index (which the broker discards on start).

The delivered state (:func:`delivered`) is what the broker's recovery gives (the LevelDB engine's load,
proven against ``recovered.json`` of every broker-written store by tests/engines/leveldb): the export's rows
(queue, message id, state) and a digest of each row's content. A message the broker cannot read gives no
row; each row's content digest goes with its place in its queue's order (the broker's cursors hand a
collection's entries out in key order, ``LevelDBClient.queueCursor`` over ``collectionCursor``: an entry whose
key changed is delivered elsewhere in the order, a content change, not the same store). A queue's message
count is counted too, by the messages its store cursor never hands out
(:func:`amqtool.engines.leveldb.queue_cursor.stranded`: the broker's cursor reads the store only while that
count is above 0, so a count left one short strands a message): ``caches`` ``("stranded", queue)``, a change of
it a loss; a durable subscription's the same way, by its own count (``("stranded", "topic/client/name")``). A
snapshot index holding a table block that does not decompress or parse, or a table it cannot read, is a broker
that does not start. ``torn``: loss confined to the records after the snapshot's position in the
last log file (the log replay's region; what a crash can cut).
"""
from __future__ import annotations

import hashlib
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from tests.faults.model import Delivered, Fault

_FIELDS = (("magic", 0, 1), ("kind", 1, 1), ("crc", 2, 4), ("length", 6, 4))


@dataclass
class LevelDBSites:
    root: Path
    records: list = field(default_factory=list)  # (file name, offset, kind, length)
    logs: list = field(default_factory=list)  # (file name, size, end of records)
    index_files: list = field(default_factory=list)  # (relative path, size)
    snapshot_start: int = 0  # offset in the last log of the snapshot's position (the replay's start)

    @classmethod
    def read(cls, root: Path) -> "LevelDBSites":
        from amqtool.engines.leveldb.load import load
        from amqtool.formats.leveldb import recordlog as L
        from amqtool.store.layout import detect

        s = cls(root)
        with load(detect(root)) as st:
            for f in st.logs:
                end = 0
                for r in L.iter_records(st.reader.buffer(f)):
                    if isinstance(r, L.Stop):
                        break
                    s.records.append((f.name, r.offset, r.kind, r.length))
                    end = r.end
                s.logs.append((f.name, f.size, end))
            last = st.logs[-1]
            s.snapshot_start = max(0, st.replay.start - last.position)
        for d in sorted(root.glob("*.index")):
            if d.name == "plist.index":
                continue
            for p in sorted(d.iterdir()):
                if p.is_file() and p.stat().st_size and p.name != "LOCK":
                    s.index_files.append((str(p.relative_to(root)), p.stat().st_size))
        return s

    def draw(self, rng: random.Random) -> Fault:
        kind = rng.choices(["field", "data", "truncate", "zero", "delete", "index"], [30, 25, 15, 10, 5, 15])[0]
        if kind in ("field", "data"):
            name, off, rkind, length = rng.choice(self.records)
            if kind == "field" or length == 0:
                fname, foff, fsize = rng.choice(_FIELDS)
                return Fault("flip", name, off + foff + rng.randrange(fsize), 1 << rng.randrange(8),
                             label=f"record {rkind} {fname}")
            return Fault("flip", name, off + 10 + rng.randrange(length), 1 << rng.randrange(8),
                         label=f"record {rkind} data")
        if kind in ("truncate", "zero"):
            name, size, end = rng.choice(self.logs)
            at = rng.randrange(max(end, 1))
            if kind == "truncate":
                return Fault("truncate", name, at, label="log truncated")
            return Fault("zero", name, at, min(rng.randrange(1, 4096), size - at), label="log zeroed")
        if kind == "delete":
            name, _size, _end = rng.choice(self.logs)
            return Fault("delete", name, label="log deleted")
        path, size = rng.choice(self.index_files)
        return Fault("flip", path, rng.randrange(size), 1 << rng.randrange(8), label=f"index {Path(path).name}")

    def torn(self, fault: Fault) -> bool:
        """Loss confined to the log replay's region of the last file (after the snapshot's position)."""
        last, _size, end = self.logs[-1]
        if fault.path != last or fault.offset < self.snapshot_start:
            return False
        # a crash cuts the end: a truncation, or zeros reaching the end of the written records
        return fault.kind == "truncate" or (fault.kind == "zero" and fault.offset + fault.length >= end)


def delivered(root: Path) -> Delivered:
    from amqtool.engines.export.leveldb import LevelDBExport
    from amqtool.engines.export.model import ExportOptions
    from amqtool.engines.leveldb.queue_cursor import stranded, stranded_pending
    from amqtool.engines.export.schema import MESSAGE_COLUMN_NAMES
    from amqtool.errors import AmqtoolError
    from amqtool.store.layout import detect

    n = {c: i for i, c in enumerate(MESSAGE_COLUMN_NAMES)}
    try:
        # salvage: the rows the broker delivers whatever verify says (without it the export refuses a store
        # verify calls CRITICAL, and a false CRITICAL would read as the loss of every row)
        ex = LevelDBExport(detect(root), ExportOptions(salvage=True))
    except AmqtoolError:
        return Delivered(frozenset(), Counter(), frozenset(), detected=False)
    snap = ex.st.snapshot_db
    if snap is not None and (snap.unparsable or snap.unread_tables):
        # a table block of the snapshot index that does not decompress or parse, or a table it cannot read at all:
        # the broker's iq80 LevelDB throws whenever it reads it, at the open's compactions or listCollections' scan
        # at start, and the store stops and retries for ever (the real broker on such copies of gc and of new
        # stores: FAILED_TO_UNCOMPRESS, IndexOutOfBoundsException, "File is not a table (bad magic number)")
        ex.close()
        return Delivered(frozenset(), Counter(), frozenset(), refused=True)
    if _cursor_fails(ex.st):
        ex.close()
        return Delivered(frozenset(), Counter(), frozenset(), refused=True)
    try:
        bindings = frozenset(ex.binding_rows())
        # the message the broker hands out is the whole stored command, fields the rows leave out included
        raw = {}
        for d in ex.st.destinations.values():
            for m in d.messages:
                b = ex.st.data(m.location, m.length)
                raw[m.location] = hashlib.sha256(b).hexdigest() if b is not None else None
        rows: Counter = Counter()
        content = set()
        order: Counter = Counter()  # rows seen per queue: each row's place in the order the queue hands them out
        for r in ex.rows():
            key = (r[n["queue"]], r[n["store_message_id"]], r[n["transaction_state"]])
            rows[key] += 1
            h = hashlib.sha256(repr(tuple(r)).encode()).hexdigest()  # every column: headers, times, body
            content.add(key + (h, raw.get(r[n["message_id"]]), order[r[n["queue"]]]))
            order[r[n["queue"]]] += 1
        held = Counter({("stranded", d.name): stranded(ex.st, d) for d in ex.st.destinations.values()})
        held.update({("stranded", f"{d.name}/{s.client_id}/{s.name}"): stranded_pending(s)
                     for d in ex.st.destinations.values() for s in d.subscriptions})
    finally:
        ex.close()
    return Delivered(bindings, rows, frozenset(content), caches=+held)


def _cursor_fails(st) -> bool:
    """Whether a store cursor reads a message the broker cannot decode: a queue's (its cursor pages them in) or a
    durable subscription's pending one (read when it reconnects). ``queueCursor`` passes only a null message
    over (a position before the first log file: those are ``skipped``); a read past a file's end or data that
    does not unmarshal throws out of ``getMessage``, and ``might_fail`` stops the broker. The real broker on
    lane lv52's n5-kill-reopen seed 5233055 (a damaged snapshot block bringing back a queue entry that points at
    position 0): EOFException in OpenWireFormat.unmarshal, "Stopping BrokerService"."""
    for d in st.destinations.values():
        read = d.messages if d.kind == "queue" else {m.seq: m for s in d.subscriptions for m in s.pending}.values()
        if any(st.decode(m)[0] is None for m in read):
            return True
    return False


def verify_verdict(root: Path) -> tuple[str, tuple]:
    from amqtool.engines.leveldb.verify import verify_store
    from amqtool.errors import AmqtoolError, overall_verdict
    from amqtool.store.layout import detect

    try:
        findings, _ = verify_store(detect(root))
    except AmqtoolError as err:
        return "UNKNOWN", (type(err).__name__,)
    return overall_verdict(findings).name, tuple(sorted({f.code for f in findings if f.severity.value != "info"}))
