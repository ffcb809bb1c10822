"""``verify`` for LevelDB stores: every log record's framing and CRC-32, the chain of units of work, the index
snapshot's LevelDB files, the recovery replay, and the recovered index against the log.

Finding codes (man/amqtool-verify.1):

================================  ========  ===============================================================
code                              severity  meaning
================================  ========  ===============================================================
leveldb-checksum-mismatch         CRITICAL  a record's CRC-32 does not match its data (WARNING inside the
                                            cut unit of work at the end of the last file, before the
                                            replay's start, or one bit from the data's outside the last file,
                                            or a UOW_END's outside the last file: the replay ignores its data,
                                            or an entry record's there whose one flipped bit leaves what the
                                            broker delivers as it was)
leveldb-not-a-record              CRITICAL  bytes where a record should start, before a file's end
                                            (WARNING where the last file's last complete unit ends: the
                                            broker truncates there; leveldb-units-dropped judges the loss;
                                            or a file starting inside the previous one's records before
                                            the replay's start, which only checked entries read)
leveldb-truncated-record          CRITICAL  a record running past the end of a file that is not the last
leveldb-uow-broken                WARNING   a UOW_END naming another start than its own unit's, in a file
                                            that is not the last (the replay does not check the chain)
leveldb-units-dropped             CRITICAL  complete units of work after the break of the last file's chain:
                                            the broker truncates the file at the break and drops them
                                            (WARNING when, the damaged record mended for certain, their
                                            replay changes nothing the broker delivers: mended_tail)
leveldb-uow-cut                   WARNING   the last unit of work is incomplete (a crash mid-write), or the
                                            file's end cuts the record after the last complete unit: the
                                            broker drops those records on start
leveldb-log-cut                   WARNING   dirty.index holds entries past the last log file's end: the
                                            file was cut after whole units (a torn tail); they are lost
leveldb-replay-stopped            CRITICAL  the broker's replay of the log stops before the end: what follows
                                            is not in its index
leveldb-missing-log               CRITICAL  an entry points at a log position no file holds (lost message),
                                            or dirty.index's write-ahead log proves complete units past
                                            the last log file (a later unit's batch follows them)
leveldb-entry-bad-data            CRITICAL  an entry points at a record that is not its DATA record, or one
                                            whose checksum fails
leveldb-entry-past-end            CRITICAL  an entry points past the end of the last complete unit of work
                                            (the broker truncates the last log file there: the message is lost)
leveldb-unknown-kind              CRITICAL  a record kind the store never writes, where the broker replays
                                            (WARNING: an entry record with a damaged kind byte whose
                                            skipping changes nothing the replay recovers); or a TRACE
                                            whose data is an entry record that skipping loses
leveldb-orphan-entries            CRITICAL  entries of collections the index does not hold (lost record);
                                            WARNING when the log or counters prove none was delivered
leveldb-bad-collection            CRITICAL  a collection record the broker cannot load, or of a type the
                                            store never writes (ignored at start); WARNING when the
                                            evidence holds no such live collection
leveldb-index-damaged             CRITICAL  the index snapshot's tables, logs or MANIFEST fail their checks,
                                            or a write-ahead log is gone (removed or emptied)
                                            (WARNING when the record log, replayed from its start, proves
                                            nothing the broker delivers is lost: see leveldb-index-lost,
                                            unless a snapshot table block does not decompress or parse;
                                            or for a log gone when the GC deleted the record log's start:
                                            what it held cannot be told)
leveldb-index-lost                CRITICAL  a damaged index snapshot lost (or changed, or brought back) an
                                            entry or collection the broker delivers, proven by the record
                                            log replayed from its start or, after the log GC, the counters;
                                            or a collection record read from a damaged block that
                                            dirty.index's intact copy holds otherwise
leveldb-index-unreadable          CRITICAL  the index snapshot cannot be read at all
leveldb-no-snapshot               WARNING   no index snapshot: the broker rebuilds the index from the first log
leveldb-dirty-index               WARNING   dirty.index says dirty: the broker did not stop cleanly (or runs)
leveldb-snapshot-cut              WARNING   temp.index: an index snapshot cut mid-copy (the broker was killed
                                            while snapshotting, or runs); the broker deletes it on start
leveldb-snapshot-left             WARNING   an older index snapshot beside the last (killed between a
                                            snapshot and the previous one's deletion); deleted on start
leveldb-queue-count-short         CRITICAL  a queue's message count (its collection size counter) below the
                                            entries it holds: the broker's cursor never hands out the rest
leveldb-subscription-count-short  CRITICAL  a durable subscription's count (the topic's last sequence less its
                                            ack position) below its pending messages because a damaged index
                                            snapshot changed the topic's counter (dirty.index's differs)
leveldb-prepared-transaction      WARNING   an XA transaction left prepared (its messages are held)
leveldb-dropped-subscription      INFO      a durable subscription whose topic is gone (dropped at start)
leveldb-dropped-topic             INFO      a topic without durable subscriptions (dropped at start)
leveldb-gc-gap                    INFO      log positions between files: logs the broker's GC deleted
leveldb-replicas-disagree         CRITICAL  replicated: two nodes' logs differ within their common range
leveldb-replica-behind            INFO      replicated: a node's log ends before the latest node's
================================  ========  ===============================================================
"""
from __future__ import annotations

import errno
import mmap
import os
import struct
from array import array
from bisect import bisect_right
from concurrent.futures import ThreadPoolExecutor
from operator import attrgetter
from pathlib import Path

from amqtool import native
from amqtool.errors import Finding, FormatError, Severity
from amqtool.gcpause import gc_paused
from amqtool.formats.leveldb import records as R
from amqtool.formats.leveldb import recordlog as L
from amqtool.formats.leveldb.codecs import crc32 as _crc32
from amqtool.engines.leveldb import indexlog, invented, mended_tail, walunits
from amqtool.engines.leveldb.document import cut_tail, dirty_flag
from amqtool.engines.leveldb.skipped_kind import retyped_traces
from amqtool.engines.leveldb.load import LevelDBState, _replay, load
from amqtool.engines.leveldb.queue_cursor import stranded, stranded_pending
from amqtool.engines.leveldb.logfiles import data_at, log_files, match_data, scan as scan_log

C, W, I = Severity.CRITICAL, Severity.WARNING, Severity.INFO
_location = attrgetter("location")
_length = attrgetter("length")
_HEAD = L.HEADER
_UOW = struct.Struct(">q")


def _scan_file(f, buf, is_last: bool, complete_end: int | None, runs: list,
               add, counts: dict, progress, replay_start: int = 0, fs: L.FileScan | None = None) -> None:
    """One file: framing, CRC-32 of every record, the UOW chain; DATA records that entries point at. The
    pass over the bytes is :func:`amqtool.engines.leveldb.logfiles.scan` (C when built; ``fs`` when the load
    made it already); here its events become findings.

    Damage the broker will never read again is a WARNING, not proven loss: records before the replay's start
    (the snapshot's position) are not replayed (the messages the index still holds there are checked one by
    one, :func:`verify_state`), and records past the last complete unit of work of the last file are cut."""
    mv = memoryview(buf)
    if fs is None:
        fs = scan_log(mv, f.position)
    base = f.position

    def old(p: int) -> bool:
        return base + p < replay_start

    def tail(p: int) -> bool:
        return is_last and complete_end is not None and p >= complete_end

    n = len(mv)
    path = str(f.path)
    mismatched = set()
    for off, code, kind, length, a, b in fs.events:
        if code == L.EV_CRC:
            t = tail(off)
            # a stored CRC-32 one bit from the data's: the checksum field took the damage, the data the replay
            # applies is intact (a damaged data byte changes the CRC in about half its bits). Not in the last
            # file, whose CRCs the broker checks on start (verifyAndGetEndOffset truncates it there)
            d = (a ^ b) & 0xFFFFFFFF
            field_only = d & (d - 1) == 0 and not is_last
            # a UOW_END's data (the position its unit began) is read by the last file's check alone: the replay
            # writes the unit's batch at any UOW_END (replay_from: ``case RecordLog.UOW_END_RECORD``)
            unused = kind == L.UOW_END and not is_last
            add(Finding(W if t or old(off) or field_only or unused else C, "leveldb-checksum-mismatch",
                        f"{L.kind_name(kind)} record of {length} bytes: stored CRC-32 {a:#010x}, "
                        f"computed {b:#010x}" + (" (in the cut unit of work)" if t else "") +
                        ("; one bit apart: the checksum field is damaged, the data intact (the broker's replay "
                         "does not check it)" if field_only and not t else "") +
                        ("; the replay does not read a unit's end outside the last file" if unused and not t
                         and not field_only else ""), path, off))
        elif code == L.EV_UOW:
            if not is_last:
                # only the last file's chain is checked by the broker (verifyAndGetEndOffset); its replay
                # applies each unit at its UOW_END whatever start it names
                add(Finding(W, "leveldb-uow-broken", f"UOW_END names a unit starting at {a:#x}, but its unit "
                            f"starts at {b:#x}", path, off))
        elif code == L.EV_SHAPE and not tail(off) and not old(off):
            why = _kind_mismatch(kind, mv[off + L.HEADER_SIZE:off + L.HEADER_SIZE + length])
            if why is not None:
                # the kind byte is outside the checksum: a record read as another kind changes the replay
                add(Finding(C, "leveldb-unknown-kind", f"{L.kind_name(kind)} record whose data {why} (a damaged "
                            "kind byte?): the replay applies it as that kind", path, off))
                mismatched.add(off)
    if fs.stop is not None:
        pos, reason, byte, length = fs.stop
        if reason == L.STOP_TRUNCATED_HEADER:
            _stop(add, path, pos, "truncated", "a record header runs past the end of the file", is_last,
                  complete_end, old(pos))
        elif reason == L.STOP_ZERO:
            if pos + L.HEADER_SIZE <= n and not is_last:
                if bytes(mv[pos:n]).count(0) != n - pos:
                    add(Finding(W if old(pos) else C, "leveldb-not-a-record", "zero bytes, then more data, where "
                                "records should continue", path, pos))
                else:
                    add(Finding(W, "leveldb-not-a-record", f"the records end at offset {pos}, {n - pos} zero "
                                "bytes before the end of a file that is not the last", path, pos))
        elif reason == L.STOP_NOT_A_RECORD:
            # a crash leaves complete records, a torn one and the zero fill: a non-zero byte where a record
            # should start is damage even at the end of the last file. There the broker's start truncates the
            # file (verifyAndGetEndOffset): what that loses is the complete units after it, judged once for the
            # file (leveldb-units-dropped); inside the cut unit of work nothing more is lost (leveldb-uow-cut)
            if is_last and complete_end is not None and pos == complete_end and not old(pos) and \
                    (fs.records > 0 or pos > 0 or _whole_but_magic(mv, pos)):
                add(Finding(W, "leveldb-not-a-record", f"byte 0x{byte:02x} where a record ('*') should start in the "
                            "last log file, where its last complete unit of work ends: the broker truncates the "
                            "file there (a complete unit after it would be named by leveldb-units-dropped)",
                            path, pos))
            else:  # (a last file without a single record, nor one under a damaged magic byte, is no log at all)
                _stop(add, path, pos, "not-a-record", f"byte 0x{byte:02x} where a record ('*') should start",
                      is_last and (fs.records > 0 or pos > 0), complete_end, old(pos))
        else:
            over = pos + L.HEADER_SIZE + length - n
            _stop(add, path, pos, "truncated", f"a {length}-byte record runs {over} byte(s) past the end of "
                  "the file", is_last, complete_end, old(pos))
    offs, lens, oks = fs.data_offsets, fs.data_lengths, fs.data_ok
    counts["data"] += len(offs) - len(mismatched)
    if mismatched:  # a record whose data is not a message, reported above, is no DATA record for the entries
        keep = [i for i, o in enumerate(offs) if o not in mismatched]
        offs, lens = array("q", [offs[i] for i in keep]), array("I", [lens[i] for i in keep])
        oks = bytes(oks[i] for i in keep)
    # the file's DATA records (offsets, lengths, checksum ok), which the entries are matched against
    # (logfiles.match_data: packed arrays, no object per record)
    runs.append((base, offs, lens, oks))
    counts["records"] += fs.records
    mv.release()
    if progress is not None:
        progress(f.size)


def _whole_but_magic(mv, pos: int) -> bool:
    """Whether a whole record with a good checksum starts at ``pos`` but for its magic byte (which no checksum
    covers): a log whose first byte took the damage, not bytes that were never a log."""
    if pos + L.HEADER_SIZE > len(mv):
        return False
    _m, _k, cs, length = _HEAD.unpack_from(mv, pos)
    end = pos + L.HEADER_SIZE + length
    return end <= len(mv) and _crc32(mv[pos + L.HEADER_SIZE:end]) == (cs & 0xFFFFFFFF)


def _kind_mismatch(kind: int, data) -> str | None:
    """Why a replayed record's data cannot be what its kind says (None when it can): DATA is a size-prefixed
    OpenWire command (or snappy), entries are EntryRecords with their keys, ADD_COLLECTION a CollectionRecord,
    REMOVE_COLLECTION a bare varint, UOW_END 8 bytes."""
    try:
        if kind == L.DATA:
            n = len(data)
            if n >= 5 and struct.unpack_from(">i", data, 0)[0] == n - 4:
                return None
            from amqtool.engines.leveldb.load import decode_data

            decode_data(bytes(data))
            return None
        if kind in (L.ADD_ENTRY, L.UPDATE_ENTRY, L.REMOVE_ENTRY):
            e = R.decode_entry(data)
            return None if e.collection_key is not None and e.entry_key is not None else "has no entry keys"
        if kind == L.ADD_COLLECTION:
            c = R.decode_collection(data)
            return None if c.type in R.COLLECTION_TYPES else f"is a collection of type {c.type}"
        if kind == L.REMOVE_COLLECTION:
            return None if 0 < len(data) <= 10 and data[-1] < 0x80 else "is not a bare varint collection key"
        if kind == L.UOW_END:
            return None if len(data) == 8 else "is not an 8-byte position"
        if kind == L.TRACE:
            return None
        n = len(data)
        if n >= 5 and struct.unpack_from(">i", data, 0)[0] == n - 4:
            return None  # a message: a DATA record whose kind byte changed; the replay skips it, as it may
        if _is_message(data):
            return None  # the same, snappy-compressed (logCompression=snappy)
        return f"is of kind {kind & 0xFF}, which the store never writes"
    except FormatError as err:
        return f"does not decode as one ({err.message})"


def _judge_skipped(st: LevelDBState, findings: list) -> None:
    """Lower ``leveldb-unknown-kind`` to a warning where the record is an entry record whose kind byte took the
    damage and the replay's skipping it changes nothing the index recovers (:mod:`.skipped_kind`)."""
    from amqtool.engines.leveldb.skipped_kind import intended_kind, skipping_changes

    by_path = {str(f.path): f for f in st.logs}
    for i, g in enumerate(findings):
        if g.code != "leveldb-unknown-kind" or g.severity is not C or g.path not in by_path or g.offset is None:
            continue
        pos = by_path[g.path].position + g.offset
        head = st.reader.read(pos, L.HEADER_SIZE)
        try:
            kind, _cs, length = L.parse_header(head, 0)
        except (FormatError, TypeError):
            continue
        data = st.reader.read(pos + L.HEADER_SIZE, length)
        was = intended_kind(kind, data) if data is not None else None
        if was is None or skipping_changes(st, pos, was):
            continue
        findings[i] = Finding(W, g.code, f"a record of kind {kind & 0xFF}, which the store never writes: the "
                              f"replay skips it; it was written as {L.kind_name(was)} (its kind byte is damaged), "
                              "and the index the replay recovers reads the same without it", g.path, g.offset,
                              {"kind": kind & 0xFF, "writtenAs": L.kind_name(was)})


def _judge_damaged_entries(st: LevelDBState, findings: list) -> None:
    """Lower ``leveldb-checksum-mismatch`` to a warning for an entry record replayed from a file that is not the
    last (the last one's CRCs are checked on start) whose one flipped bit is known and whose applying as read
    delivers what the record as written would (:mod:`.damaged_entry`)."""
    from amqtool.engines.leveldb.damaged_entry import applying_changes

    by_path = {str(f.path): f for f in st.logs[:-1]}
    for i, g in enumerate(findings):
        if g.code != "leveldb-checksum-mismatch" or g.severity is not C or g.path not in by_path or \
                g.offset is None:
            continue
        if applying_changes(st, by_path[g.path].position + g.offset) is False:
            findings[i] = Finding(W, g.code, g.message + "; one bit of its data is damaged, and the replay, which "
                                  "checks no CRC there, delivers from it what it would from the record as written "
                                  "(each queue's entries in the same order)", g.path, g.offset, g.details)


def _entries_dirty_index_holds(st: LevelDBState, add, findings: list) -> None:
    """CRITICAL ``leveldb-index-lost`` for the entries of a destination the recovered index lacks but dirty.index,
    read from intact blocks of its own files, holds, in the key range of a damaged block of the snapshot, whose
    DATA record the broker still reads (in a log file, before the end of the last complete unit) and that a
    consumer would receive (not a topic entry every subscription acknowledged). dirty.index is the live index
    when the broker stopped: an entry added after the snapshot is in the log the broker replays, one deleted
    after it is gone from dirty.index too, so such an entry is one the damaged block lost. A destination the
    record log or the counters already name (``leveldb-index-lost``) is not named twice."""
    db, ddb = st.snapshot_db, st.dirty_db
    if db is None or db.error or ddb is None or ddb is db or ddb.error:
        return
    ranges = list(db.unread_ranges.values()) + list(db.suspect_ranges.values())
    if not ranges:
        return
    doubtful = set(ddb.suspect_keys) | set(ddb.invented)
    for keys in ddb.dropped_keys.values():
        if keys is None:
            return  # a dropped record of dirty.index whose keys cannot be told: nothing of it is evidence
        doubtful |= keys
    theirs = list(ddb.unread_ranges.values()) + list(ddb.suspect_ranges.values()) + list(ddb.unread_tables.values())
    lost: dict = {}
    for k, v in ddb.data.items():
        if k[:1] != R.ENTRY_PREFIX or len(k) != 17 or k in st.index or k in doubtful:
            continue
        d = st.destinations.get(R._Q.unpack_from(k, 1)[0])
        if d is None or _acked_topic_entry(st, k) or \
                not any((lo is None or k > lo) and (hi is None or k <= hi) for lo, hi in ranges) or \
                any((lo is None or k >= lo) and (hi is None or k <= hi) for lo, hi in theirs):
            continue
        try:
            loc, length, _meta = R.decode_index_entry(v)
        except FormatError:
            continue
        if not length or st.past_end(loc, length) or st.reader.read(loc, L.HEADER_SIZE + length) is None:
            continue
        lost.setdefault(d.qualified, []).append(R.seq_of(k[9:]))
    named = {f.message.split(": ", 1)[0] for f in findings if f.code == "leveldb-index-lost"}
    for name, seqs in sorted(lost.items()):
        if name in named:
            continue
        seqs.sort()
        shown = ", ".join(map(str, seqs[:10])) + (f" and {len(seqs) - 10} more" if len(seqs) > 10 else "")
        add(Finding(C, "leveldb-index-lost", f"{name}: {len(seqs)} entr(ies) (seq {shown}) in the key range of a "
                    "damaged block of the index snapshot are missing from the index the broker recovers, while "
                    "dirty.index (the live index when it stopped), read from intact blocks, holds them with their "
                    "messages in the log: the damage lost them", str(st.snapshot[1]), None,
                    {"destination": name, "entries": len(seqs)}))


def _deletion_unread(st: LevelDBState, m) -> bool:
    """Whether the entry of message ``m`` points before the first log file and lies in the key range of a damaged
    block of the snapshot, unread or read under a failing checksum (the replay did not write it again). The
    broker's GC deletes a log file once no entry refers to it (``gc``: the log refs), so the entry had been
    deleted: the deletion was in that block, unread or under another key, and an older version shows through."""
    db = st.snapshot_db
    ranges = list(db.unread_ranges.values()) + list(db.suspect_ranges.values()) if db is not None else []
    if not ranges or not st.logs or m.location >= st.logs[0].position:
        return False
    key = R.entry_index_key(m.collection, R._Q.pack(m.seq))
    if st.index.get(key) != db.data.get(key) or key in db.suspect_keys:
        return False  # written again by the replay, or read from the damaged block itself (its location may be)
    return any((lo is None or key > lo) and (hi is None or key <= hi) for lo, hi in ranges)


def _collections_changed(st: LevelDBState, add) -> None:
    """CRITICAL ``leveldb-index-lost`` for a collection record the broker loads from a damaged block of the
    snapshot (a suspect key) that dirty.index, read from intact blocks of its own files, holds otherwise. A
    collection record is written once (``createCollection``, under a key no other collection ever takes) and
    only ever deleted, so the live index's copy is the record as written: the broker loads the damaged one (a
    durable subscription under another client id, a destination renamed). Snapshot tables are hard links of
    dirty.index's (``copyIndex``); a copy of the store that broke the links keeps that evidence."""
    db, ddb = st.snapshot_db, st.dirty_db
    if db is None or db.error or not db.suspect_keys or ddb is None or ddb is db or ddb.error:
        return
    for k in sorted(db.suspect_keys):
        if k[:1] != R.COLLECTION_PREFIX or len(k) != 9 or k in ddb.suspect_keys or k not in ddb.data or \
                k not in st.index or indexlog.loaded_as(st.index[k]) == indexlog.loaded_as(ddb.data[k]):
            continue
        ck = R._Q.unpack_from(k, 1)[0]
        add(Finding(C, "leveldb-index-lost", f"collection {ck}: its record, read from a damaged block of the index "
                    "snapshot, differs from dirty.index's intact copy (a collection record is never rewritten): "
                    "the broker loads the damaged one", str(st.snapshot[1]), None,
                    {"collection": ck}))


def _subscription_counts(st: LevelDBState, add, directory: str) -> None:
    """CRITICAL ``leveldb-subscription-count-short`` for a durable subscription whose store cursor, sized by
    ``getMessageCount(clientId, sub)`` (the topic's last sequence from the counters less its ack position:
    queue_cursor.stranded_pending), never hands out pending messages it would with the topic's counter as
    dirty.index's intact copy holds it, when the index snapshot is damaged. A broker's own store can count a
    subscription below its pending messages (lane lv51's m8-bigwal: -3 with 2 pending), so only a counter the
    damage changed proves the loss (mix-killed seed 5266009: a damaged snapshot block left topic MT211.0 without
    its last key; the real broker on the copy counts s0, s1, s5 at -6, -4, -7, so s1's 3 pending and s0's one
    are never delivered)."""
    db, ddb = st.snapshot_db, st.dirty_db
    if db is None or not db.problems or ddb is None or ddb is db or ddb.error:
        return
    raw = ddb.data.get(b":collection-meta")
    try:
        intact = R.decode_collection_meta(raw) if raw is not None else {}
    except FormatError:
        return
    for d in st.destinations.values():
        cm, was = st.meta.get(d.key), intact.get(d.key)
        if d.kind != "topic" or was is None or (cm.last_seq if cm is not None else 0) == was.last_seq:
            continue
        for s in d.subscriptions:
            short = stranded_pending(s)
            if short > max(0, len(s.pending) - (was.last_seq - s.ack_position)):
                add(Finding(C, "leveldb-subscription-count-short", f"{d.qualified}: durable subscription "
                            f"{s.client_id}:{s.name} counts {s.pending_count} message(s) (the topic's last sequence "
                            f"{s.last_seq}, dirty.index's counters {was.last_seq}, less its ack position "
                            f"{s.ack_position}) for {len(s.pending)} pending: the broker's cursor, which reads the "
                            f"store only while that count is above 0, never hands out {short} of them (the index "
                            "snapshot is damaged)", directory, None,
                            {"pendingCount": s.pending_count, "stranded": short}))


def _is_message(data) -> bool:
    """Whether a record's data decodes as a DATA record's (a message, snappy-compressed or not)."""
    from amqtool.engines.leveldb.load import decode_data

    try:
        decode_data(bytes(data))
    except FormatError:
        return False
    return True


def _stop(add, path, pos, reason, detail, is_last, complete_end, old: bool = False) -> None:
    if is_last and complete_end is not None and pos >= complete_end:
        return  # inside the cut unit of work: reported once as leveldb-uow-cut
    code = "leveldb-truncated-record" if reason == "truncated" else "leveldb-not-a-record"
    add(Finding(W if old else C, code, detail + "; the records after it cannot be read in order" +
                (" (before the replay's start: the broker no longer replays them)" if old else ""), path, pos))


def _acked_topic_entry(st, key: bytes) -> bool:
    """Whether index key ``key`` is an entry of a topic at or below every durable subscription's ack position:
    the broker's topic cursors start after the ack position (``LevelDBStore``'s durable subscription recovery),
    so such an entry, whether kept, lost or brought back, is delivered to no one. So is every entry of a topic
    with no durable subscription, which the broker drops at start (``st.dropped_topics``)."""
    if len(key) != 17 or key[:1] != R.ENTRY_PREFIX:
        return False
    ck = int.from_bytes(key[1:9], "big", signed=True)
    d = st.destinations.get(ck)
    if d is None:
        d = next((t for t in st.dropped_topics if t.key == ck), None)
    if d is None or d.kind != "topic":
        return False
    seq = int.from_bytes(key[9:17], "big", signed=True)
    return all(s.ack_position >= seq for s in d.subscriptions)


def _bad_entry(st: LevelDBState, add, holder, m, f, why: str) -> bool:
    """An entry whose DATA record is damaged. The broker reads the entry's length of bytes after the header
    without looking at it (checksums off by default): if they still decode as a message it delivers that
    (WARNING: its bytes may have changed); if not, the message is lost (CRITICAL). True when it cannot read it."""
    msg, err = st.decode(m)
    if msg is not None:
        try:  # what a consumer (and the export) reads of it
            msg.body()
            msg.properties()
        except FormatError as e:
            msg, err = None, e.message
    intact = msg is not None and _crc_field_damaged(st, m)
    if msg is None:
        tail = f"; the broker cannot read the message ({err})"
    elif intact:
        tail = "; its checksum field is one bit from the data's CRC-32: the data is intact"
    else:
        tail = "; the message's bytes changed (it still decodes: the broker delivers the changed message)"
    add(Finding(W if intact else C, "leveldb-entry-bad-data",
                f"{holder} seq {m.seq}: the DATA record at log position {m.location:#x}: {why}{tail}",
                str(f.path), m.location - f.position))
    return msg is None


def _crc_field_damaged(st: LevelDBState, m) -> bool:
    """The record's stored CRC-32 differs from its data's in one bit (or the header's kind byte, which no
    checksum covers, is what differs): the data the broker reads is intact."""
    head = st.reader.read(m.location, L.HEADER_SIZE)
    data = st.reader.read(m.location + L.HEADER_SIZE, m.length)
    if head is None or data is None:
        return False
    _magic, _kind, cs, _length = _HEAD.unpack_from(head, 0)
    diff = (cs & 0xFFFFFFFF) ^ _crc32(data)  # over the entry's length of data, which is what the broker reads
    return diff & (diff - 1) == 0


def _units_after(st: LevelDBState) -> int:
    """Complete units of work after the end of the last complete unit of the last file, which a crash never
    leaves: UOW_END records with good checksums anywhere there (searched byte by byte, past any broken
    framing), and the unit whose own UOW_END stopped the scan when that record is whole (it names the unit's
    start) and a record with a good checksum follows it (the writer went on past it: damage, not a cut)."""
    buf = st.reader.buffer(st.logs[-1])
    n = 1 if _damaged_unit_end(buf, st.last_file_end, st.last_file_scan_end, st.logs[-1].position) or \
        _kind_damaged_unit_end(st, buf) or walunits.later_unit_on_disk(st, _read_data) else 0
    pos = st.last_file_end
    end = len(buf)
    if native.leveldb_count_uow_ends is not None:
        # the file is preallocated (a byte written at its last offset): its tail is mostly a hole, which holds
        # no record; only the extents holding data are searched (a record may run 17 bytes into a hole)
        return n + sum(native.leveldb_count_uow_ends(buf, lo, min(hi + 17, end))
                       for lo, hi in _data_extents(st.logs[-1].path, pos, end))
    return n + mended_tail.good_unit_ends(buf, pos, end)


def _kind_damaged_unit_end(st: LevelDBState, buf) -> bool:
    """Whether the unit that starts at the last complete end of the last file has its end under a damaged
    kind byte (which no checksum covers): a whole 8-byte record of another kind, with a good checksum, whose
    data is that unit's start, followed by a record with a good checksum, or the file's last record with a
    kind byte that is not zero. The broker's scan finds no UOW_END and drops the unit; a crash cannot leave it
    (searched in the file's data extents only)."""
    at = st.last_file_end
    want = _UOW.pack(st.logs[-1].position + at)
    end = len(buf)
    for lo, hi in _data_extents(st.logs[-1].path, at, end):
        i = buf.find(want, max(lo, at + L.HEADER_SIZE), min(hi + 8, end))
        while i >= 0:
            h = i - L.HEADER_SIZE
            magic, kind, cs, length = _HEAD.unpack_from(buf, h)
            if magic == 0x2A and kind != L.UOW_END and length == 8 and _crc32(want) == (cs & 0xFFFFFFFF):
                nxt = i + 8
                if nxt == st.last_file_scan_end and kind:
                    return True  # the file's last record, its kind byte neither as written nor zero (_not_torn)
                if nxt + L.HEADER_SIZE <= end:
                    m2, _k2, cs2, len2 = _HEAD.unpack_from(buf, nxt)
                    stop = nxt + L.HEADER_SIZE + len2
                    if m2 == 0x2A and stop <= end and _crc32(buf[nxt + L.HEADER_SIZE:stop]) == (cs2 & 0xFFFFFFFF):
                        return True
            i = buf.find(want, i + 1, min(hi + 8, end))
    return False


def _damaged_unit_end(buf, unit_at: int, stop: int | None, file_position: int) -> bool:
    """Whether the record at ``stop`` (where the last file's scan stopped) is the UOW_END of the unit that
    starts at ``unit_at``, failing only its checksum (or its magic byte), and damaged, not torn: a whole record
    with a good checksum follows it, or it holds a byte no crash leaves (:func:`_not_torn`). Its data names that
    start, or its stored CRC-32 is the one of that start (the damage hit the data)."""
    if stop is None or stop + L.HEADER_SIZE + 8 > len(buf):
        return False
    magic, kind, cs, length = _HEAD.unpack_from(buf, stop)
    expected = _UOW.pack(file_position + unit_at)
    data = bytes(buf[stop + L.HEADER_SIZE:stop + L.HEADER_SIZE + 8])
    if (kind, length) != (L.UOW_END, 8) or (data != expected and _crc32(expected) != (cs & 0xFFFFFFFF)):
        return False
    if magic != 0x2A and (data != expected or _crc32(data) != (cs & 0xFFFFFFFF)):
        return False  # a damaged magic byte: only a record otherwise whole is that unit's end
    written = _HEAD.pack(0x2A, L.UOW_END, struct.unpack(">i", struct.pack(">I", _crc32(expected)))[0], 8) + expected
    if _not_torn(bytes(buf[stop:stop + L.HEADER_SIZE + 8]), written):
        return True
    nxt = stop + L.HEADER_SIZE + 8
    if nxt + L.HEADER_SIZE > len(buf):
        return False
    magic, _kind, cs, length = _HEAD.unpack_from(buf, nxt)
    end = nxt + L.HEADER_SIZE + length
    return magic == 0x2A and end <= len(buf) and _crc32(buf[nxt + L.HEADER_SIZE:end]) == (cs & 0xFFFFFFFF)


def _not_torn(got: bytes, written: bytes) -> bool:
    """Whether ``got``, read where ``written`` was written, holds a byte no crash leaves. RecordLog preallocates
    each log file (it writes one byte at ``logSize - 1``: the rest reads as zeros), so a write a crash tears
    leaves each byte as written or as that zero fill, in whatever sectors reached the disk; a byte that is
    neither is damage."""
    return any(g != w and g for g, w in zip(got, written))


def _data_extents(path, start: int, end: int) -> list[tuple[int, int]]:
    """The ranges of [start, end) of a file that hold data (``SEEK_DATA``/``SEEK_HOLE``); the whole range where
    the file system cannot tell."""
    if start >= end:
        return []
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return [(start, end)]
    out = []
    try:
        pos = start
        while pos < end:
            try:
                lo = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError as err:
                if err.errno == errno.ENXIO:  # no data after pos
                    break
                raise
            if lo >= end:
                break
            hi = min(os.lseek(fd, lo, os.SEEK_HOLE), end)
            out.append((lo, hi))
            pos = hi
    except OSError:
        return [(start, end)]
    finally:
        os.close(fd)
    return out


def _read_data(st: LevelDBState, loc: int) -> tuple | None:
    """(length, checksum ok) of a DATA record read at ``loc`` directly, or None when none starts there."""
    head = st.reader.read(loc, L.HEADER_SIZE)
    if head is None:
        return None
    magic, kind, cs, length = _HEAD.unpack_from(head, 0)
    if magic != 0x2A or kind != L.DATA:
        return None
    data = st.reader.read(loc + L.HEADER_SIZE, length)
    if data is None:
        return None
    return length, _crc32(data) == (cs & 0xFFFFFFFF)


def _untyped_collections(st: LevelDBState) -> list[tuple[int, int]]:
    """(collection key, type) of the index's collection records whose type is none the store writes."""
    out = []
    for ck in sorted(st.collection_keys):
        v = st.index.get(R.collection_index_key(ck))
        if v is None:
            continue
        try:
            t = R.decode_collection(v).type
        except FormatError:
            continue  # a load problem already
        if t not in R.COLLECTION_TYPES:
            out.append((ck, t))
    return out


def _index_evidence(st: LevelDBState, findings: list, orphans: dict):
    """When the index snapshot is damaged (or holds entries of no collection): what the record log, or
    without its start the counters, prove it lost of what the broker delivers (:mod:`.indexlog`), each a
    CRITICAL ``leveldb-index-lost``; None when there is no such evidence (or nothing to judge)."""
    db = st.snapshot_db
    if db is None or db.error or not (db.problems or orphans):
        return None
    ev = indexlog.from_log(st, _replay) or indexlog.from_counters(st)
    for what, detail in [] if ev is None else ev.lost:
        findings.append(Finding(C, "leveldb-index-lost", f"{what}: {detail} (the index snapshot is damaged; "
                                f"proven by the {'record log' if ev.source == 'log' else 'counters'})",
                                str(st.snapshot[1]), None))
    return ev


def verify_state(st: LevelDBState, findings: list, progress=None, scans: dict | None = None) -> dict:
    """The findings of one loaded store (appended to ``findings``) and its summary. ``scans``: log position ->
    the file's :class:`FileScan` (or a future of it), made ahead (:func:`verify_store`)."""
    add = findings.append
    directory = str(st.directory)
    # entries -> the DATA records they need: the messages in one list, each holder's a run of it
    wanted: list = []
    holders: list[str] = []
    starts: list[int] = []

    def want(holder: str, msgs: list) -> None:
        if msgs:
            holders.append(holder)
            starts.append(len(wanted))
            wanted.extend(msgs)

    for d in st.destinations.values():
        # a topic message every subscription has acknowledged is delivered to no one (the broker's GC drops
        # its entry): only what a consumer would still receive is required
        # the entries the broker's cursor skips (their DATA record lies before the first log file) are judged
        # with the others: a lost message, or one the damage brought back
        low = min((sub.ack_position for sub in d.subscriptions), default=None) if d.kind == "topic" else None
        entries = d.messages + d.skipped if d.skipped else d.messages
        want(d.qualified, entries if low is None else [m for m in entries if m.seq > low])
    for t in st.transactions:
        want(f"prepared {t.xid}", [m for m, _dest in t.sends] + t.skipped)
    runs: list = []
    counts = {"records": 0, "data": 0}
    prev_end = None
    for i, f in enumerate(st.logs):
        if prev_end is not None and f.position > prev_end:
            add(Finding(I, "leveldb-gc-gap", f"log positions {prev_end:#x}..{f.position - 1:#x} are in no file "
                        "(logs the broker's GC deleted)", str(f.path), None))
        elif prev_end is not None and f.position < prev_end:
            # the broker reads a position from the file with the highest start at or below it (RecordLog's
            # log_infos.floorEntry): the previous file's records past this file's start are never read again.
            # Before the replay's start only the entries point there, each checked with the records the broker
            # reads (entry-bad-data judges a lost message): the overlap alone loses nothing (a log file swapped
            # with one of another size: killed-gc, 4029 and 8054, was CRITICAL with nothing lost)
            old = prev_end <= st.replay.start
            add(Finding(W if old else C, "leveldb-not-a-record", f"this file starts at {f.position:#x}, inside the "
                        f"previous file's records (which end at {prev_end:#x})" +
                        (", before the replay's start: only the index's entries read there, each checked"
                         if old else ""), str(f.path), 0))
        is_last = i == len(st.logs) - 1
        fs = st.last_scan if is_last else _ahead(scans, f)
        _scan_file(f, st.reader.buffer(f), is_last, st.last_file_end if is_last else None, runs, add,
                   counts, progress, st.replay.start, fs)
        prev_end = f.limit
    _judge_skipped(st, findings)
    for f, off, kinds in retyped_traces(st):
        add(Finding(C, "leveldb-unknown-kind", "a TRACE record whose data is an entry record: an entry record ("
                    + " or ".join(L.kind_name(k) for k in kinds) + ") whose kind byte took the damage; the replay "
                    "skips it, and the index it recovers differs from the one with the record as written",
                    str(f.path), off, {"kind": L.TRACE, "writtenAs": [L.kind_name(k) for k in kinds]}))
    _judge_damaged_entries(st, findings)
    cut = cut_tail(st)
    dropped = _units_after(st) if st.logs and st.last_file_end is not None else 0
    # the record at the break mended for certain (mended_tail): a damaged record, not a crash's cut, and the
    # units it ends are complete ones the broker drops (a UOW_END whose length took the damage, found by nothing
    # else); their replay tells whether dropping them changes what the broker delivers
    mended = mended_tail.mend_tail(st)
    if mended is not None and not dropped:
        dropped = mended.units
    if dropped and not cut:
        cut = {"file": st.logs[-1].name, "offset": st.last_file_end, "records": 0}
    # units before the snapshot's position are in the index already: dropping them loses nothing but the
    # DATA records entries point at, which the entries' check judges (leveldb-entry-past-end)
    replayed = cut and st.logs[-1].position + cut["offset"] >= st.replay.start
    moot = bool(dropped and replayed and mended) and mended_tail.dropped_units_change(st, mended) is False
    if dropped:
        add(Finding(C if replayed and not moot else W, "leveldb-units-dropped", f"{dropped} complete unit(s) of "
                    f"work follow the point where the last log file's chain of units breaks (offset {cut['offset']}): "
                    "the broker truncates the file there and drops them; a crash leaves only one unfinished unit"
                    + ("; replayed with the damaged record mended, they change nothing the broker delivers"
                       if moot else ""), str(st.logs[-1].path), cut["offset"]))
    elif cut:
        torn = (f", then a record the end of the file cuts at offset {cut['tornRecord']}"
                if "tornRecord" in cut else "")
        add(Finding(W, "leveldb-uow-cut", f"the last unit of work is incomplete: {cut['records']} record(s) after "
                    f"offset {cut['offset']}{torn} (a crash mid-write); the broker drops them on start",
                    str(st.logs[-1].path), cut["offset"], {"records": cut["records"]}))
    rep = st.replay
    if rep.stopped:
        f = st.reader.file_at(rep.stopped[0])
        add(Finding(C, "leveldb-replay-stopped", f"the broker's replay stops at log position {rep.stopped[0]:#x} "
                    f"({rep.stopped[1]}); {rep.limit - rep.stopped[0]} byte(s) of log up to {rep.limit:#x} are not "
                    "applied to its index", str(f.path) if f else directory,
                    rep.stopped[0] - f.position if f else None))
    lost = bad = 0
    last_pos = st.logs[-1].position if st.logs else None
    # the common case first: the DATA record is there, whole, with its checksum, before the end (matched in C:
    # one binary search per entry); only the entries that fail it are looked at here
    locs = array("q", map(_location, wanted))
    flagged = match_data(locs, array("q", map(_length, wanted)), runs, last_pos, rep.limit)
    groups: dict[int, list] = {}
    if flagged:
        # the entries at one location are judged by the first of them (their DATA record is one)
        at = {locs[i] for i in flagged}
        for i, loc in enumerate(locs):
            if loc in at:
                groups.setdefault(loc, []).append(i)
        first = set(flagged)
        groups = {loc: ids for loc, ids in groups.items() if ids[0] in first}
    gone: set[int] = set()  # DATA locations whose message the broker cannot deliver (not in the summary's count)
    for loc in sorted(groups):
        users = [(holders[bisect_right(starts, i) - 1], wanted[i]) for i in groups[loc]]
        got = data_at(runs, loc)
        holder, m = users[0]
        f = st.reader.file_at(loc)
        if st.past_end(loc, m.length):
            lost += len(users)
            gone.add(loc)
            add(Finding(C, "leveldb-entry-past-end", f"{holder} seq {m.seq}: its DATA record at log position "
                        f"{loc:#x} lies past {rep.limit:#x}, where the broker truncates the last log file (the end "
                        "of its last complete unit of work): the message is lost", str(f.path) if f else directory,
                        loc - f.position if f else None))
            continue
        if got is None:  # not reached by the in-order scan (its framing broke before it): read it where it is
            got = _read_data(st, loc)
        if got is None:
            if f is None or loc + L.HEADER_SIZE + m.length > f.limit:
                gone.add(loc)
                if all(invented.hides_a_deletion(st, u[1]) is not None for u in users):
                    add(Finding(W, "leveldb-index-damaged", f"{holder} seq {m.seq}" + (f" and {len(users) - 1} more"
                                if len(users) > 1 else "") + ": read from a damaged table block with a sequence no "
                                "writer issued, over the deletion of the same key; the DATA record at log position "
                                f"{loc:#x} is in no log file, so the broker delivers nothing for it (a consumed "
                                "message's entry the damage brought back)", str(st.snapshot[1]), None))
                    continue
                if all(_deletion_unread(st, u[1]) for u in users):
                    add(Finding(W, "leveldb-index-damaged", f"{holder} seq {m.seq}" + (f" and {len(users) - 1} more"
                                if len(users) > 1 else "") + ": its key lies in the range of a damaged block "
                                "of the index snapshot and its DATA record at log position "
                                f"{loc:#x} lies before the first log file, which the GC deletes only once no entry "
                                "refers to it: an older version showing through a deletion the block held (a "
                                "consumed message's entry brought back; the broker delivers nothing for it)",
                                str(st.snapshot[1]), None))
                    continue
                lost += len(users)
                add(Finding(C, "leveldb-missing-log", f"{holder} seq {m.seq}: its DATA record at log position "
                            f"{loc:#x} is in no log file (the message is lost)", directory, None,
                            {"position": loc, "destinations": [u[0] for u in users]}))
            else:
                bad += len(users)
                if _bad_entry(st, add, holder, m, f, "no DATA record starts there"):
                    gone.add(loc)
        else:
            length, ok = got
            if length != m.length or not ok:
                why = f"its length is {length}, the entry says {m.length}" if length != m.length else \
                    "its checksum does not match"
                if _bad_entry(st, add, holder, m, f, why):
                    gone.add(loc)
                bad += len(users)
    known = st.collection_keys
    orphans = {ck: len(es) for ck, es in st.entries.items() if ck not in known}
    evidence = _index_evidence(st, findings, orphans)
    for ck, n in sorted(orphans.items()):
        # the broker deletes a collection's entries with it: entries without their collection are messages
        # whose queue or topic record is gone (a damaged index), which no consumer will get; unless the log
        # (or the counters) proves no collection lost them: garbage keys of a damaged table block
        garbage = evidence is not None and ck not in evidence.collections
        add(Finding(W if garbage else C, "leveldb-orphan-entries", f"{n} index entr(ies) of collection "
                    f"{ck}, which the index does not hold: the broker never reads them " +
                    ("(their collection record is lost)" if not garbage else
                     ("(the record log proves" if evidence.source == "log" else "(the counters prove") +
                     " no such collection was live: garbage keys of a damaged index)"),
                    directory, None))
    for key, msg in st.load_problems:
        add(Finding(C, "leveldb-bad-collection", f"collection {key}: {msg}", directory, None))
    for ck, kind in _untyped_collections(st):
        # LevelDBStore's start matches each record's type and ignores the others: the collection is gone for
        # the broker (a subscription's topic is then dropped with its messages); unless the evidence says no
        # such collection was live (garbage keys of a damaged table block)
        garbage = evidence is not None and ck not in (evidence.collections if evidence.source == "log" else st.meta)
        add(Finding(W if garbage else C, "leveldb-bad-collection", f"collection {ck}: its record is of type {kind}, "
                    "which the store never writes (a damaged record): the broker ignores it" +
                    (" (the evidence holds no such live collection: garbage keys of a damaged index)" if garbage
                     else ", losing what it held"), directory, None))
    db = st.snapshot_db
    if st.snapshot is None:
        if st.logs:
            add(Finding(W, "leveldb-no-snapshot", "no index snapshot (NNN.index): the broker rebuilds the index "
                        f"by replaying the log from {st.logs[0].name}", directory, None))
    elif db.error:
        add(Finding(C, "leveldb-index-unreadable", f"index snapshot {st.snapshot[1].name}: {db.error}",
                    str(st.snapshot[1]), None))
    else:
        for path, off, msg, sev in db.problems:
            if (path, off) in db.unparsable and "checksum" not in msg or path in db.unread_tables:
                # no evidence lowers it: the broker never gets to use what the index holds (the real broker on
                # copies of the gc store with such a block, and of a new snappy store: iq80 throws in the open's
                # compaction, or in listCollections' scan at start, and the store stops and retries for ever)
                add(Finding(C, "leveldb-index-damaged", msg + "; iq80 LevelDB throws when it reads the "
                            + ("table" if path in db.unread_tables else "block") + ", and the broker reads the "
                            "snapshot's tables at its open's compactions and its start's scan of the collections: "
                            "the store stops", path, off))
                continue
            keys = db.dropped_keys.get((path, off))
            if sev != "warning" and keys and all(_acked_topic_entry(st, k) for k in keys):
                sev, msg = "warning", msg.split("; it held")[0] + \
                    "; it held only topic entries every durable subscription has acknowledged (none is delivered)"
            if sev != "warning" and evidence is not None and indexlog.judges(st, evidence, path, off):
                # a dropped write-ahead log record or a skipped table block whose keys the evidence covers (a
                # missing table, by contrast, makes LevelDB refuse to open the index)
                sev, msg = "warning", msg + ("; judged against the record log replayed from its start" if
                                             evidence.source == "log" else "; judged against the counters") + \
                    ": what the broker loses by it is named by leveldb-index-lost"
            elif sev != "warning" and (path, off) in db.lost_logs:
                # a write-ahead log gone, with no record log from position 0 to weigh it against (the GC deleted
                # the first logs; the counters the snapshot holds were written to the index, maybe to that
                # very log): what the broker loses cannot be told, so it is not proven (loss the counters
                # prove is named by leveldb-index-lost)
                sev, msg = "warning", msg + "; no record log from its start to judge it against"
            add(Finding(W if sev == "warning" else C, "leveldb-index-damaged", msg, path, off))
        _collections_changed(st, add)
        _entries_dirty_index_holds(st, add, findings)
    ddb = st.dirty_db
    beyond = 0  # entries of the live index past the last log file's end
    if ddb is not None and ddb is not st.snapshot_db and not ddb.error:
        missing = 0
        # (an entry read from a damaged table block of dirty.index, or in the key range of one LevelDB skips,
        # where an older version of a deleted key shows through, proves nothing: the broker never reads that
        # index, and the damage may have brought the entry back or made it up)
        doubtful = ddb.suspect_keys | set(ddb.invented) if ddb.suspect_keys or ddb.invented else set()
        # (and the keys of a write-ahead log record LevelDB drops for a bad checksum: each now reads as its
        # older version, which may point at a log the GC deleted long since; a dropped record whose keys
        # cannot be told leaves every entry in doubt)
        dropped = list(ddb.dropped_keys.values())
        unknown_drop = any(keys is None for keys in dropped)
        for keys in dropped:
            doubtful = doubtful | (keys or set())
        # (and a block read whose checksum fails: a deletion it held may read as something else, and the older
        # version it hid shows through, as for a block LevelDB skips)
        skipped = list(ddb.unread_ranges.values()) + list(ddb.suspect_ranges.values())
        # (likewise the key range of a table that cannot be read at all: its index block, say)
        tables = list(ddb.unread_tables.values())
        for k, v in ddb.data.items():
            if k[:1] == b"e" and len(k) == 17 and k not in doubtful and \
                    not any((lo is None or k > lo) and k <= hi for lo, hi in skipped) and \
                    not any((lo is None or k >= lo) and (hi is None or k <= hi) for lo, hi in tables):
                try:
                    loc, length, meta = R.decode_index_entry(v)
                except FormatError:
                    continue
                if st.logs and loc >= st.logs[-1].limit:
                    beyond += 1
                # (past the last file's end: a torn tail; a topic entry every subscription acknowledged is
                # delivered to no one, whatever log held its DATA record)
                if meta is None and length and st.reader.read(loc, L.HEADER_SIZE + length) is None \
                        and not (st.logs and loc >= st.logs[-1].position) and not _acked_topic_entry(st, k):
                    missing += 1
        if missing and not unknown_drop:
            add(Finding(C, "leveldb-missing-log", f"dirty.index (the live index when the broker stopped) holds "
                        f"{missing} entr(ies) whose DATA records are in no log file: log files were removed",
                        str(st.directory / "dirty.index"), None))
    # (dirty.index the same bytes as the snapshot: its entries were not looked at above)
    units, entries = walunits.complete_units_past_the_logs(st) if beyond or ddb is st.snapshot_db else (0, 0)
    if units:
        add(Finding(C, "leveldb-missing-log", f"dirty.index's write-ahead log holds {units} complete unit(s) of "
                    f"work ({entries} entries) written past the end of the last log file ({st.logs[-1].limit:#x}), "
                    "each followed by a later one: a log file holding them is missing (the messages are lost)",
                    str(st.directory / "dirty.index"), None))
    elif beyond and not any(f.code in ("leveldb-uow-cut", "leveldb-units-dropped", "leveldb-missing-log")
                            for f in findings):
        # the live index saw records the last log file no longer holds: its end was cut after they were
        # written (the broker writes a unit to the log before its index entries), a torn tail like a crash's
        add(Finding(W, "leveldb-log-cut", f"dirty.index (the live index when the broker stopped) holds {beyond} "
                    f"entr(ies) at log positions past the end of the last log file ({st.logs[-1].limit:#x}): the file "
                    "was cut after the broker wrote them; the broker loses the units of work that were there",
                    str(st.logs[-1].path), None, {"entries": beyond}))
    temp = st.directory / "temp.index"
    if temp.is_dir():
        # copyDirtyIndexToSnapshot copies dirty.index into temp.index, then renames it to the snapshot's name;
        # replay_init deletes a temp.index left behind and recovers from the last complete snapshot
        add(Finding(W, "leveldb-snapshot-cut", "temp.index is an index snapshot cut mid-copy: the broker was "
                    "killed while it snapshotted its index (or is running); it deletes it on start and recovers "
                    "from " + (st.snapshot[1].name if st.snapshot else "the log alone") + " and the log",
                    str(temp), None))
    for older in st.snapshots[:-1]:
        # replaceLatestSnapshotDirectory deletes the previous snapshot right after the rename of the new one;
        # replay_init keeps only the last one ("Only keep the last snapshot")
        add(Finding(W, "leveldb-snapshot-left", f"{older.name} is an older index snapshot than {st.snapshot[1].name}: "
                    "the broker was killed between taking a snapshot and deleting the previous one (or is "
                    "running); it deletes it on start and recovers from the last", str(older), None))
    if dirty_flag(st):
        add(Finding(W, "leveldb-dirty-index", "dirty.index is marked dirty: the broker did not stop cleanly (or "
                    "is running); it rebuilds the index from the snapshot and the log", str(st.directory /
                                                                                        "dirty.index"), None))
    for d in st.destinations.values():
        # the cursor reads the store only while the count is above 0 (queue_cursor): a broker's own replay never
        # leaves it below the entries (every REMOVE_ENTRY it counts deletes one), a damaged record or index does
        short = stranded(st, d)
        if short:
            add(Finding(C, "leveldb-queue-count-short", f"{d.qualified}: its message count is {d.entries}, below the "
                        f"{d.entries + short} messages it holds: the broker's cursor, which reads the "
                        f"store only while that count is above 0, never hands out {short} message(s)", directory,
                        None, {"messageCount": d.entries, "stranded": short}))
    _subscription_counts(st, add, directory)
    for t in st.transactions:
        add(Finding(W, "leveldb-prepared-transaction", f"XA transaction {t.xid} is prepared ({len(t.sends)} "
                    f"send(s), {len(t.acks)} ack(s)); held until a transaction manager decides it", directory, None))
    for s in st.dropped_subscriptions:
        add(Finding(I, "leveldb-dropped-subscription", f"durable subscription {s.client_id}:{s.name} names topic "
                    f"collection {s.topic_key}, which is gone; the broker drops it at start", directory, None))
    for d in st.dropped_topics:
        add(Finding(I, "leveldb-dropped-topic", f"{d.qualified} has no durable subscription; the broker drops it "
                    f"(and its {len(d.messages)} message(s)) at start", directory, None))
    return {"files": len(st.logs), "bytes": sum(f.size for f in st.logs), "records": counts["records"],
            "dataRecords": counts["data"], "unitsOfWorkReplayed": rep.units,
            "destinations": len(st.destinations),
            "messages": _deliverable(st, gone),
            "skippedEntries": sum(len(d.skipped) for d in st.destinations.values()),
            "subscriptions": sum(len(d.subscriptions) for d in st.destinations.values()),
            "preparedTransactions": len(st.transactions), "lostMessages": lost, "damagedMessages": bad,
            "logEnd": rep.limit, "snapshot": st.snapshot[0] if st.snapshot else None}


def _deliverable(st: LevelDBState, gone: set) -> int:
    """print's live, stat's and export's count (one rule): the entries the broker's cursors read, less those
    whose message verify found it cannot read or decode (``gone``: judged for what a consumer would still
    receive) and the topic entries every subscription acknowledged whose message cannot be read or decoded
    (not judged: nobody receives them; the broker's topic GC deletes them, so they are few)."""
    n = 0
    for d in st.destinations.values():
        n += len(d.messages)
        if gone:  # a damaged store
            n -= sum(1 for m in d.messages if m.location in gone)
        if d.kind == "topic" and d.subscriptions:
            low = min(sub.ack_position for sub in d.subscriptions)
            for m in d.messages:  # in sequence order: the acknowledged ones first
                if m.seq > low:
                    break
                if m.location not in gone and st.decode(m)[0] is None:
                    n -= 1
    return n


def _scan_ahead(log_dir) -> tuple[dict, object]:
    """Start the C scans of every log file but the last (the load walks that one) in a worker thread, while
    the load reads the index and replays (the scan runs without the GIL): position -> (size, future)."""
    if native.leveldb_scan is None:
        return {}, None
    files = log_files(Path(log_dir))[:-1]
    if not files:
        return {}, None

    def one(f):
        if f.size == 0:
            return None
        with open(f.path, "rb") as fh:
            m = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            return scan_log(m, f.position)
        finally:
            m.close()

    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="leveldb-scan")
    futures = {f.position: (f.size, pool.submit(one, f)) for f in files}
    pool.shutdown(wait=False)
    return futures, pool


def _ahead(scans: dict | None, f):
    """The scan made ahead of ``f``, if it is of the same file (same size); else None (scanned again)."""
    item = scans.pop(f.position, None) if scans else None
    if item is None:
        return None
    size, fut = item
    try:
        fs = fut.result()
    except (OSError, ValueError):
        return None
    return fs if fs is not None and size == f.size else None


def judged(st: LevelDBState) -> list[Finding]:
    """verify's findings on an already loaded store: what the export and ``create --from`` weigh (one load;
    amqtool.engines.verdicts)."""
    findings: list[Finding] = []
    verify_state(st, findings)
    return findings


def verify_store(store, *, progress=None, on_state=None) -> tuple[list[Finding], dict]:
    """(findings, summary) of a LevelDB store, every node of a replicated one. ``on_state(st)`` sees each
    loaded state before it is judged: print and stat build their documents from the very load verify judges
    (one load; their verdict is verify's: amqtool.engines.verdicts)."""
    with gc_paused():  # the load's objects are acyclic (amqtool.gcpause), and so are the findings
        return _verify_store(store, progress, on_state)


def _verify_store(store, progress, on_state) -> tuple[list[Finding], dict]:
    findings: list[Finding] = []
    if not store.replicated:
        scans, pool = _scan_ahead(store.log_dir())
        try:
            with load(store) as st:
                if on_state is not None:
                    on_state(st)
                return findings, verify_state(st, findings, progress, scans)
        finally:
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)
    nodes = []
    for n in store.nodes:
        sub: list[Finding] = []
        with load(store, node=n) as st:
            if on_state is not None:
                on_state(st)
            summary = verify_state(st, sub, progress)
            summary["directory"] = str(n.directory)
            nodes.append((n, summary, _ranges(st)))
        findings.extend(sub)
    return findings, _replicas(nodes, findings)


def _ranges(st: LevelDBState) -> list:
    """(position, bytes) of each file's bytes up to the node's log end (for comparing replicas)."""
    out = []
    for f in st.logs:
        stop = min(f.limit, st.replay.limit) if f is st.logs[-1] else f.limit
        if stop > f.position:
            out.append((f.position, f.path, stop - f.position))
    return out


def _replicas(nodes: list, findings: list) -> dict:
    """Which node holds the latest log position, and whether all nodes' logs agree up to the shortest."""
    latest = max(nodes, key=lambda x: x[1]["logEnd"])
    common_start = max((r[0][0] for _n, _s, r in nodes if r), default=0)
    common_end = min(s["logEnd"] for _n, s, _r in nodes)
    digests = {}
    for n, s, ranges in nodes:
        h = _crc32(b"")
        for pos, path, size in ranges:
            lo, hi = max(pos, common_start), min(pos + size, common_end)
            if hi <= lo:
                continue
            with open(path, "rb") as fh:
                fh.seek(lo - pos)
                left = hi - lo
                while left:
                    chunk = fh.read(min(left, 1 << 20))
                    if not chunk:
                        break
                    h = _crc32(chunk, h)
                    left -= len(chunk)
        digests[str(n.directory)] = h
        if s["logEnd"] < latest[1]["logEnd"]:
            findings.append(Finding(I, "leveldb-replica-behind", f"this node's log ends at {s['logEnd']:#x}, "
                                    f"{latest[1]['logEnd'] - s['logEnd']} byte(s) behind {latest[0].directory}",
                                    str(n.directory), None))
    agree = len(set(digests.values())) <= 1
    if not agree:
        findings.append(Finding(C, "leveldb-replicas-disagree", "the nodes' logs differ within their common range "
                                f"{common_start:#x}..{common_end:#x}", str(latest[0].directory), None,
                                {"crc32": {k: f"{v:#010x}" for k, v in digests.items()}}))
    return {"nodes": [s for _n, s, _r in nodes], "latestNode": str(latest[0].directory),
            "latestPosition": latest[1]["logEnd"], "commonRange": [common_start, common_end],
            "replicasAgree": agree, "files": sum(s["files"] for _n, s, _r in nodes),
            "bytes": sum(s["bytes"] for _n, s, _r in nodes)}
