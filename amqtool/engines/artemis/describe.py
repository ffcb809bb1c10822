"""``print --style artemis``: the lines ``artemis data print`` writes (PrintData + DescribeJournal, §6.1).

Support runbooks grep these lines, so they are reproduced exactly: per file ``#JournalFileImpl: (...)``
and one ``operation@...`` line per record in scan order, page-counter lines, then the surviving records of a
full load, prepared and failed transactions, and the message counts, with Java's HashMap iteration order
where the Java tool iterates a HashMap. The only text that cannot match is Java's identity hash code in
``XidImpl (<hash> ...`` and ``CoreMessage[...]@<hash>``; a fixed placeholder stands there.

Differences from the Java tool, on purpose: it never writes to the store (the Java tool's load may create a
journal file and rewrites ``server.lock`` when it is short), and no ASCII-art banner is printed.
"""
from __future__ import annotations

import itertools
from pathlib import Path
from typing import Callable, Iterator

from amqtool.engines.artemis.load import LiveList, LiveRecord, LoadResult, load_journal
from amqtool.errors import FormatError
from amqtool.formats.artemis.primitives import Reader, Xid, b64url, long_key_order
from amqtool.formats.artemis.userrecords import describe_user_record
from amqtool.formats.artemis.records import (
    ADD,
    ADD_TX,
    COMMIT,
    DELETE,
    DELETE_TX,
    EVENT,
    PREPARE,
    ROLLBACK,
    UPDATE,
    UPDATE_TX,
    fixed_size,
    scan_records_py,
)
from amqtool.store.journal_files import BodyWindows, open_journal
from amqtool.store.layout import ArtemisStore, JournalDir
from amqtool import native

_describe_body = native.describe_body
_describe_lines = native.describe_lines
_describe_live = native.describe_live

IDENTITY_HASH = "0"  # stands for System.identityHashCode, which no two JVM runs share

# JournalRecordIds used by the layout itself
ADD_LARGE_MESSAGE = 30
ADD_MESSAGE = 31
ADD_REF = 32
ACKNOWLEDGE_REF = 33
PAGE_CURSOR_COUNTER_VALUE = 40
PAGE_CURSOR_COUNTER_INC = 41
ADD_MESSAGE_PROTOCOL = 45


def object_text(rec_id: int, user_record_type: int, body: bytes, is_update: bool, safe: bool) -> str:
    """DescribeJournal.toString(newObjectEncoding(info), safe): the decoded body, ``** null **`` for the
    types the broker does not decode. Written in C (native.describe_body) for the records it covers; the
    Python decoders below are the reference and write the rest."""
    if _describe_body is not None:
        text = _describe_body(user_record_type, body, rec_id, is_update, safe)
        if text is not None:
            return text
    return object_text_py(rec_id, user_record_type, body, is_update, safe)


def object_text_py(rec_id: int, user_record_type: int, body: bytes, is_update: bool, safe: bool) -> str:
    """:func:`object_text` through the Python decoders only (the reference the C path is tested against)."""
    try:
        return describe_user_record(user_record_type, body, record_id=rec_id, is_update=is_update, safe=safe,
                                    hash_text=IDENTITY_HASH)
    except FormatError as err:
        # The Java tool would die on this record; say what is wrong and go on with the next.
        return f"** undecodable: {err.message} **"


def record_text(rec_id: int, user_record_type: int, is_update: bool, compact_count: int, body: bytes,
                safe: bool) -> str:
    """DescribeJournal.describeRecord: ``recordID=..;userRecordType=..;isUpdate=..;compactCount=..;<obj>``."""
    return (f"recordID={rec_id};userRecordType={user_record_type};isUpdate={'true' if is_update else 'false'};"
            f"compactCount={compact_count};{object_text(rec_id, user_record_type, body, is_update, safe)}")


def delete_text(rec_id: int, compact_count: int) -> str:
    # DeleteRecordTX bodies are not decoded; RecordInfo(id, 0, data, isUpdate=true, ...).
    return f"recordID={rec_id};userRecordType=0;isUpdate=true;compactCount={compact_count};** null **"


def describe_live_record(result: LoadResult, rec: LiveRecord, kind: str, safe: bool) -> str:
    """The decoded body of one live record, for ``print``'s text style."""
    return object_text(rec.id, rec.user_record_type, result.body(rec), rec.is_update, safe)


def _xid_text(extra: bytes) -> str:
    """DescribeJournal.toXid(...).toString(): ``null`` when the extra data is no Xid."""
    try:
        return Xid.decode(extra).describe(IDENTITY_HASH)
    except FormatError:
        return "null"


class _Counter:
    __slots__ = ("value", "persistent_size")

    def __init__(self):
        self.value = 0
        self.persistent_size = 0


def _counter_fields(user_record_type: int, body: bytes) -> tuple[int, int, int]:
    """(queueID, value, persistentSize) of a page counter record (types 40 and 41)."""
    r = Reader(body)
    queue_id = r.i64("queueID")
    value = r.i64("value") if user_record_type == PAGE_CURSOR_COUNTER_VALUE else r.i32("value")
    size = r.i64("persistentSize") if r.remaining >= 8 else 0
    return queue_id, value, size


def _counter_lines(counters: dict[int, _Counter], user_record_type: int, body: bytes) -> list[str]:
    try:
        queue_id, value, size = _counter_fields(user_record_type, body)
    except Exception:  # noqa: BLE001
        return []
    c = counters.get(queue_id)
    if c is None:
        c = counters[queue_id] = _Counter()
    lines = []
    if user_record_type == PAGE_CURSOR_COUNTER_VALUE:
        if c.value != 0 and c.value != value:
            lines.append(f"####### Counter replace wrongly on queue {queue_id} oldValue={c.value} newValue={value}")
        c.value, c.persistent_size = value, size
        line = f"#Counter queue {queue_id} value={c.value} persistentSize={c.persistent_size}, result={c.value}"
    else:
        # An increment is only queued by the tool, never applied (no storage manager): value unchanged.
        line = f"#Counter queue {queue_id} value={c.value} persistentSize={c.persistent_size} increased by {value}"
    if c.value < 0:
        line += " #NegativeCounter!!!!"
    lines += [line, ""]
    return lines


def _file_lines(opened, index: int, reclaimed: bool, safe: bool, counters: dict[int, _Counter]) -> Iterator[str]:
    f = opened.files[index]
    windows = opened.scan_windows(index, check_tag=not reclaimed)
    first = next(windows)
    # the size as read: known when the scan ends, or at once when one window held the whole file
    yield f"#JournalFileImpl: ({f.name} id = {f.file_id}, recordID = {f.tag}) (size={f.size})"
    version = f.version
    for _base, data, records, _marked in itertools.chain((first,), windows):
        yield from _window_lines(data, version, records, safe, counters)


def _window_lines(data, version: int, records: list, safe: bool, counters: dict[int, _Counter]) -> Iterator[str]:
    if _describe_lines is None:
        yield from _record_lines(data, version, records, safe, counters)
        return
    # C writes runs of lines; an int is a record it leaves to the Python loop (same text, in place).
    for item in _describe_lines(data, version, records, safe):
        if item.__class__ is str:
            yield item
        else:
            yield from _record_lines(data, version, records[item:item + 1], safe, counters)


def _record_lines(data, version: int, records: list, safe: bool, counters: dict[int, _Counter]) -> Iterator[str]:
    """The ``operation@...`` lines of scanned records, in Python (the reference for native.describe_lines)."""
    for t, off, size, cc, tx_id, rid, utype, body_len, nrec, extra_len in records:
        start = off + fixed_size(t, version) - 4
        if t == ADD:
            yield "operation@AddRecord;" + record_text(rid, utype, False, cc, data[start:start + body_len], safe)
        elif t == UPDATE:
            body = data[start:start + body_len]
            yield "operation@Update;" + record_text(rid, utype, True, cc, body, safe)
            if utype in (PAGE_CURSOR_COUNTER_VALUE, PAGE_CURSOR_COUNTER_INC):
                yield from _counter_lines(counters, utype, body)
        elif t == EVENT:
            yield "operation@Event;" + record_text(rid, utype, False, cc, data[start:start + body_len], safe)
        elif t == ADD_TX:
            yield (f"operation@AddRecordTX;txID={tx_id},"
                   + record_text(rid, utype, False, cc, data[start:start + body_len], safe))
        elif t == UPDATE_TX:
            body = data[start:start + body_len]
            yield f"operation@UpdateTX;txID={tx_id}," + record_text(rid, utype, True, cc, body, safe)
            if utype in (PAGE_CURSOR_COUNTER_VALUE, PAGE_CURSOR_COUNTER_INC):
                yield from _counter_lines(counters, utype, body)
        elif t == DELETE_TX:
            yield f"operation@DeleteRecordTX;txID={tx_id}," + delete_text(rid, cc)
        elif t == DELETE:
            yield f"operation@DeleteRecord;recordID={rid}"
        elif t == PREPARE:
            extra = bytes(data[start:start + extra_len])
            yield (f"operation@Prepare,txID={tx_id},numberOfRecords={nrec},extraData={b64url(extra)}, "
                   f"xid={_xid_text(extra)}")
        elif t == COMMIT:
            yield f"operation@Commit;txID={tx_id},numberOfRecords={nrec}"
        elif t == ROLLBACK:
            yield f"operation@Rollback;txID={tx_id}"


def describe_journal(journal: JournalDir, *, safe: bool = False, reclaimed: bool = False,
                     path_text: str | None = None, progress: Callable[[int], None] | None = None,
                     on_result: Callable[[LoadResult], None] | None = None) -> Iterator[str]:
    """DescribeJournal.describeJournal for one journal directory: records, then surviving records."""
    with open_journal(journal) as opened:
        yield f"Journal path: {path_text if path_text is not None else journal.directory}"
        counters: dict[int, _Counter] = {}
        for i in range(len(opened.files)):
            yield from _file_lines(opened, i, reclaimed, safe, counters)
        yield ""
        if counters:
            yield "#Counters during initial load:"
            for q in long_key_order(list(counters)):
                yield f"Queue {q} value={counters[q].value}"
        result = load_journal(opened, progress=progress)
        yield from _surviving_lines(result, safe)
        if on_result is not None:
            on_result(result)


class _Tally:
    """What the surviving-records pass counts (DescribeJournal's message and reference counts)."""

    __slots__ = ("counters", "messages", "large", "refs")

    def __init__(self):
        self.counters: dict[int, _Counter] = {}
        self.messages = 0
        self.large = 0
        self.refs: dict[int, int] = {}  # first-put order: the Java HashMap<Long, ...> order is taken from it


def _surviving_record(result: LoadResult, rec: LiveRecord, safe: bool, tally: _Tally) -> Iterator[str]:
    """One surviving record's line(s) and tallies, in Python (the reference for native.describe_live)."""
    body = result.body(rec)
    utype = rec.user_record_type
    if utype in (ADD_MESSAGE, ADD_MESSAGE_PROTOCOL):
        tally.messages += 1
    elif utype == ADD_LARGE_MESSAGE:
        tally.large += 1
    elif utype in (ADD_REF, ACKNOWLEDGE_REF) and len(body) >= 8:
        q = int.from_bytes(body[:8], "big", signed=True)
        ref_counts = tally.refs
        if utype == ADD_REF:
            ref_counts[q] = ref_counts.get(q, 0) + 1
        elif q not in ref_counts:
            ref_counts[q] = 0  # an ack for an unseen queue creates 0 without decrementing
        else:
            ref_counts[q] -= 1
    yield record_text(rec.id, utype, rec.is_update, rec.compact_count, body, safe)
    if utype in (PAGE_CURSOR_COUNTER_VALUE, PAGE_CURSOR_COUNTER_INC):
        try:
            queue_id, value, size = _counter_fields(utype, body)
        except Exception:  # noqa: BLE001
            return
        c = tally.counters.get(queue_id)
        if c is None:
            c = tally.counters[queue_id] = _Counter()
        if utype == PAGE_CURSOR_COUNTER_VALUE:
            c.value, c.persistent_size = value, size
        yield f"##SubsCounter for queue={queue_id}, value={c.value}"
        yield ""


def _surviving_native(result: LoadResult, safe: bool, tally: _Tally) -> Iterator[str]:
    """The surviving records through native.describe_live: runs of lines from windows of the journal files
    (:class:`BodyWindows`); the entries C leaves (page counters, bodies it does not cover) go through
    :func:`_surviving_record`. C stops at an entry whose body is not in the window; the next run starts with
    a window that holds it."""
    live = result.live
    buf = live.buffer
    n = len(live)
    windows = BodyWindows(result.opened)
    i = 0
    while i < n:
        rec = live[i]
        fi = rec.file_index
        base, data = windows.holding(fi, rec.body_offset, rec.body_len)
        text, j, messages, large = _describe_live(buf, i, n, data, fi, safe, tally.refs, base,
                                                  result.files[fi].size)
        tally.messages += messages
        tally.large += large
        if text:
            yield text
        if j == i:  # left to Python (the window holds entry i's body: C stops short only where it must)
            yield from _surviving_record(result, live[i], safe, tally)
            j += 1
        i = j


def _surviving_lines(result: LoadResult, safe: bool) -> Iterator[str]:
    yield "### Surviving Records Summary ###"
    tally = _Tally()
    if _describe_live is not None and isinstance(result.live, LiveList):
        yield from _surviving_native(result, safe, tally)
    else:
        for rec in result.live:
            yield from _surviving_record(result, rec, safe, tally)
    counters, message_count, large_count, ref_counts = tally.counters, tally.messages, tally.large, tally.refs
    if counters:
        yield "### Page Counters"
        for q in long_key_order(list(counters)):
            yield f"Queue {q} value={counters[q].value}"
    yield ""
    yield "### Prepared TX ###"
    prepared_messages = prepared_large = 0
    prepared_refs: dict[int, int] = {}
    for tx in result.prepared:
        yield str(tx.tx_id)
        for rec in tx.records:
            body = result.body(rec)
            utype = rec.user_record_type
            yield "- " + record_text(rec.id, utype, rec.is_update, rec.compact_count, body, safe)
            if utype in (ADD_MESSAGE, ADD_MESSAGE_PROTOCOL):
                prepared_messages += 1
            elif utype == ADD_LARGE_MESSAGE:
                prepared_large += 1
            elif utype == ADD_REF and len(body) >= 8:
                q = int.from_bytes(body[:8], "big", signed=True)
                prepared_refs[q] = prepared_refs.get(q, 0) + 1
        for rec in tx.records_to_delete:
            yield "- " + delete_text(rec.id, rec.compact_count) + " <marked to delete>"
    if result.failed:
        yield ""
        yield "### Failed Transactions (Missing commit/prepare/rollback record) ###"
        for tx in result.failed:
            yield f"Transaction {tx.tx_id} failed with these records:"
            for rec in tx.records:
                yield "- " + record_text(rec.id, rec.user_record_type, rec.is_update, rec.compact_count,
                                         result.body(rec), safe)
            for rec in tx.records_to_delete:
                yield "- " + delete_text(rec.id, rec.compact_count) + " <marked to delete>"
    # println(buffer): the buffer ends with a newline when non-empty, so one empty line either way.
    yield ""
    yield "### Message Counts ###"
    yield f"message count={message_count}"
    yield f"large message count={large_count}"
    yield "message reference count"
    for q in long_key_order(list(ref_counts)):
        yield f"queue id {q},count={ref_counts[q]}"
    yield f"prepared message count={prepared_messages}"
    yield f"prepared large message count={prepared_large}"
    yield "prepared message reference count"
    for q in long_key_order(list(prepared_refs)):
        yield f"queue id {q},count={prepared_refs[q]}"


BANNER = "********************************************"


def server_node_id(directory: Path | None) -> str | None:
    """The node id the broker keeps in ``<journal>/server.lock`` (``FileLockNodeManager``: 19 bytes, the
    state byte, two more, then the 16-byte UUID), as PrintData prints it; None when there is none."""
    if directory is None:
        return None
    try:
        with open(Path(directory) / "server.lock", "rb") as fh:
            data = fh.read(19)
    except OSError:
        return None
    if len(data) < 19:
        return None
    u = data[3:19].hex()
    return f"{u[:8]}-{u[8:12]}-{u[12:16]}-{u[16:20]}-{u[20:]}"


def _server_lock_lines(directory: Path | None) -> Iterator[str]:
    """PrintData prints the node id from ``<journal>/server.lock`` (:func:`server_node_id`)."""
    node = server_node_id(directory)
    if node is None:
        return
    yield ""
    yield BANNER
    yield f"Server's ID={node}"
    yield BANNER


def describe_store(store: ArtemisStore, *, safe: bool = False, reclaimed: bool = False, max_pages: int = -1,
                   progress: Callable[[int], None] | None = None) -> Iterator[str]:
    """The whole ``artemis data print`` text for ``store``. A single journal directory prints just that
    journal (as DescribeJournal does); a broker data directory prints the banners, both journals and the
    paging section."""
    journals = store.journals()
    if len(journals) == 1 and store.paging_dir is None and store.large_messages_dir is None:
        yield from describe_journal(journals[0], safe=safe, reclaimed=reclaimed, progress=progress)
        return
    from amqtool.engines.artemis.paging import PagingJournalView, describe_paging

    yield from _server_lock_lines(store.messages.directory if store.messages else None)
    view = PagingJournalView()  # the paging section's view of the journals, taken from their load here
    for title, journal in (("B I N D I N G S  J O U R N A L", store.bindings),
                           ("M E S S A G E S   J O U R N A L", store.messages)):
        yield ""
        yield BANNER
        yield title
        yield BANNER
        if journal is not None:
            yield from describe_journal(journal, safe=safe, reclaimed=reclaimed, progress=progress,
                                        on_result=lambda result, j=journal: view.add_journal(j, result))
    yield ""
    yield BANNER
    yield "P A G I N G"
    yield BANNER
    yield from describe_paging(store, safe=safe, max_pages=max_pages, view=view)
