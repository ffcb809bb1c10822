"""Artemis file stores: fault sites biased to structure, and the delivered state.

Sites (:class:`ArtemisSites`) come from the pristine store's own structure, read once: every journal file's
header and records (type, tag, compactCount, ids, sizes, user record type, body, checkSize, as
``JournalImpl.readJournalFile`` reads them), the page files' framing (``{``, length, ``}``) and bodies,
large-message files, ``address.txt``; then random flips, zeroed ranges and truncations inside the written
region of a file, and whole-file and directory faults.

The delivered state (:func:`delivered`) is what ``artemis data exp`` gives (the export's local engine, whose
liveness is ``JournalImpl.load`` and whose rows are the broker's refs and acks, paged messages included:
proven against the broker-written fixtures by tests/engines/test_export_*.py), read without verify's
judgement, so that the truth never moves with the verdict it judges. A message whose record does not decode
gives no rows: the broker cannot load it either. :class:`DeliveredReader` gives the same for a campaign's
damaged copies, at less cost. With the rows come the entries of the duplicate-detection caches the broker
loads from the DUPLICATE_ID records (:func:`duplicate_ids`): losing one makes the broker deliver a duplicate.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from amqtool.engines.artemis.load_walk import as_walked
from amqtool.engines.export.local import LocalArtemisExport
from amqtool.engines.export.schema import MESSAGE_COLUMNS
from tests.faults.model import Delivered, Fault

HEADER = 16
# field name -> (offset in the record, size), format version 2 (records.py's _candidate order)
_TX_TYPES = (13, 14, 15, 17, 18, 19)
_NO_ID = (17, 18, 19)
_WITH_BODY = (10, 11, 12, 13, 14, 15)


def _fields(t: int, total: int, body_len: int) -> list[tuple[str, int, int]]:
    """(name, offset, size) of a v2 record's fields, as the scanner reads them."""
    out = [("type", 0, 1), ("tag", 1, 4), ("cc", 5, 1)]
    p = 6
    if t in _TX_TYPES:
        out.append(("txid", p, 8))
        p += 8
    if t not in _NO_ID:
        out.append(("id", p, 8))
        p += 8
    if t in _WITH_BODY:
        out.append(("bodysize", p, 4))
        p += 4
        if t != 15:
            out.append(("usertype", p, 1))
            p += 1
        if body_len:
            out.append(("body", p, body_len))
            p += body_len
    if t in (17, 18):
        out.append(("nrec", p, 4))
        p += 4
    if t == 17:
        out.append(("extra", p, max(total - 4 - p, 0)))
    out.append(("checksize", total - 4, 4))
    return out


@dataclass
class JournalFileInfo:
    rel: str
    size: int
    records: list  # scanner tuples (type, pos, total, cc, tx, id, utype, body_len, nrec, extra)
    data_end: int
    current: bool = False
    data: bytes = b""  # the pristine bytes of the current file (what a crash's model is checked against)


@dataclass
class PageInfo:
    rel: str
    size: int
    records: list[tuple[int, int]]  # (offset, total length)
    current: bool = False
    data: bytes = b""  # the pristine bytes of the current page
    synced: int = 0  # where the current page's records known synced end (ArtemisSites.torn)


@dataclass
class ArtemisSites:
    """The pristine store's structure, and the faults drawn from it."""

    root: Path
    journals: dict[str, list[JournalFileInfo]] = field(default_factory=dict)  # kind -> files in load order
    pages: list[PageInfo] = field(default_factory=list)
    page_dirs: list[str] = field(default_factory=list)
    large: list[str] = field(default_factory=list)
    dirs: list[str] = field(default_factory=list)

    @classmethod
    def read(cls, root: Path) -> "ArtemisSites":
        from amqtool.engines.artemis.load import load_journal
        from amqtool.engines.artemis.paging import find_page_stores
        from amqtool.formats.artemis.records import scan_records_py
        from amqtool.store.journal_files import open_journal
        from amqtool.store.layout import detect

        store = detect(root)
        self = cls(root)
        for jd in store.journals():
            files = []
            with open_journal(jd) as opened:
                result = load_journal(opened)
                cur = result.current_file
                for jf in opened.files:
                    data = Path(jf.path).read_bytes()
                    recs, _ = scan_records_py(data, jf.tag, jf.version)
                    end = recs[-1][1] + recs[-1][2] if recs else HEADER
                    current = cur is not None and jf.path == cur.path
                    files.append(JournalFileInfo(os.path.relpath(jf.path, root), len(data), recs, end, current,
                                                 data if current else b""))
            self.journals[jd.kind] = files
            self.dirs.append(os.path.relpath(jd.directory, root))
        # transactions with a COMMIT or PREPARE record in the message journal: their paged messages were synced
        # to their page before that record was written (ArtemisSites.torn)
        ended = {r[4] for jf in self.journals.get("messages", []) for r in jf.records if r[0] in (17, 18)}
        stores, _ = find_page_stores(store.paging_dir)
        for ps in stores:
            self.page_dirs.append(os.path.relpath(ps.folder, root))
            for pid in sorted(ps.pages):
                path = ps.page_path(pid)
                data = path.read_bytes()
                recs, pos = [], 0
                while pos + 6 <= len(data) and data[pos] == 0x7B:
                    n = int.from_bytes(data[pos + 1:pos + 5], "big", signed=True)
                    if n < 0 or pos + 6 + n > len(data) or data[pos + 5 + n] != 0x7D:
                        break
                    recs.append((pos, n + 6))
                    pos += n + 6
                current = pid == ps.current_page
                synced = max((o + n for o, n in recs if current and n >= 14
                              and int.from_bytes(data[o + 5:o + 13], "big", signed=True) in ended), default=0)
                self.pages.append(PageInfo(os.path.relpath(path, root), len(data), recs, current,
                                           data if current else b"", synced))
        if store.paging_dir is not None and store.paging_dir.is_dir():
            self.dirs.append(os.path.relpath(store.paging_dir, root))
        lm = store.large_messages_dir
        if lm is not None and lm.is_dir():
            self.large = sorted(os.path.relpath(lm / n, root) for n in os.listdir(lm) if n.endswith(".msg"))
            self.dirs.append(os.path.relpath(lm, root))
        return self

    # -- faults ------------------------------------------------------------------------------------------

    def draw(self, rng: random.Random) -> Fault:
        """One fault, biased to structure: record fields most often, then page framing, random bytes,
        ranges and truncations, and now and then a whole file or directory."""
        r = rng.random()
        if r < 0.40:
            return self._record_field(rng)
        if r < 0.55 and self.pages:
            return self._page_fault(rng)
        if r < 0.70:
            return self._random_flip(rng)
        if r < 0.82:
            return self._range(rng)
        if r < 0.88:
            return self._header(rng)
        return self._file_fault(rng)

    def _journal_file(self, rng: random.Random, with_records: bool = True) -> JournalFileInfo:
        files = [f for fs in self.journals.values() for f in fs if f.records or not with_records]
        return rng.choice(files)

    def _record_field(self, rng: random.Random) -> Fault:
        jf = self._journal_file(rng)
        rec = rng.choice(jf.records)
        t, pos, total, body_len = rec[0], rec[1], rec[2], rec[7]
        name, off, size = rng.choice(_fields(t, total, body_len))
        byte = pos + off + (rng.randrange(size) if size else 0)
        return Fault("flip", jf.rel, byte, 1 << rng.randrange(8), label=f"record {t} {name}")

    def _header(self, rng: random.Random) -> Fault:
        jf = self._journal_file(rng, with_records=False)
        return Fault("flip", jf.rel, rng.randrange(HEADER), 1 << rng.randrange(8), label="file header")

    def _random_flip(self, rng: random.Random) -> Fault:
        jf = self._journal_file(rng, with_records=False)
        end = min(jf.size, jf.data_end + 64)
        return Fault("flip", jf.rel, rng.randrange(end), rng.randrange(1, 256), label="random byte")

    def _range(self, rng: random.Random) -> Fault:
        jf = self._journal_file(rng, with_records=False)
        start = rng.randrange(HEADER, max(jf.data_end, HEADER + 1))
        if rng.random() < 0.5:
            return Fault("zero", jf.rel, start, rng.choice((1, 4, 16, 64, 512, 4096, jf.data_end - start + 1)),
                         label="zeroed range")
        return Fault("truncate", jf.rel, start, label="truncation")

    def _page_fault(self, rng: random.Random) -> Fault:
        pg = rng.choice(self.pages)
        r = rng.random()
        if not pg.records or r < 0.1:
            return Fault(rng.choice(("empty", "delete")), pg.rel, label="page file")
        off, total = rng.choice(pg.records)
        if r < 0.5:
            name, byte = rng.choice((("start", off), ("length", off + 1 + rng.randrange(4)),
                                     ("end", off + total - 1)))
            return Fault("flip", pg.rel, byte, 1 << rng.randrange(8), label=f"page {name}")
        if r < 0.75:
            return Fault("flip", pg.rel, off + 5 + rng.randrange(total - 6), 1 << rng.randrange(8),
                         label="page message")
        if r < 0.9:
            return Fault("truncate", pg.rel, off + rng.randrange(total), label="page truncation")
        return Fault("zero", pg.rel, off, rng.randrange(1, total + 1), label="page zeroed range")

    def _file_fault(self, rng: random.Random) -> Fault:
        choices = []
        jfs = [f for fs in self.journals.values() for f in fs]
        choices += [("delete", f.rel) for f in jfs] + [("empty", f.rel) for f in jfs]
        choices += [("delete", d) for d in self.dirs + self.page_dirs]
        choices += [("delete", os.path.join(d, "address.txt")) for d in self.page_dirs]
        choices += [("empty", os.path.join(d, "address.txt")) for d in self.page_dirs]
        choices += [("delete", m) for m in self.large] + [("empty", m) for m in self.large]
        kind, rel = rng.choice(choices)
        if jfs and rng.random() < 0.15:
            a = rng.choice(jfs)
            same = [f for f in self.journals_of(a) if f.rel != a.rel]
            if same and rng.random() < 0.5:
                return Fault("swap", a.rel, other=rng.choice(same).rel, label="swapped journal files")
            stem, ext = a.rel.rsplit("-", 1)[0], a.rel.rsplit(".", 1)[1]
            # a name no file of the journal has (99 unless a real journal's names have reached it)
            top = max(int(f.rel.rsplit("-", 1)[1].split(".")[0]) for f in self.journals_of(a))
            return Fault("duplicate", a.rel, other=f"{stem}-{max(99, top + 1)}.{ext}",
                         label="duplicated journal file")
        return Fault(kind, rel, label="file")

    def journals_of(self, jf: JournalFileInfo) -> list[JournalFileInfo]:
        return next(fs for fs in self.journals.values() if jf in fs)

    # -- what a crash could have left --------------------------------------------------------------------

    def torn(self, fault: Fault) -> bool:
        """Whether ``fault`` leaves what a crash leaves of the current file or current page: a change confined
        to the records written since the last sync (the last one, or the records from some point on) that the
        crash model of ``amqtool/formats/artemis/torn_write.py`` allows, the file cut anywhere in them or whole
        4 KiB blocks of them zeroed. A flipped bit, or a zeroed run that ends inside a block before bytes that
        were written, is no crash's: the broker's loss from it is proven damage (loss), not a torn tail.
        (Verify reads the damaged store with the same model: paging/crash_tail.py, the journal's torn-tail.)

        On the current page, the last sync is no earlier than the end of the last record of a transaction whose
        COMMIT (or PREPARE) is in the message journal: the broker syncs the page before it writes that record
        (``PageTimedWriter.addTask`` delays the transaction, ``processMessages`` writes the page, ``performSync``
        -> ``PagingStoreImpl.ioSync`` -> ``Page.sync``, then ``tx.delayDone`` lets the COMMIT or PREPARE be
        written; Artemis 2.40 on, which the fixtures' broker is). So a change before that end is no crash's: its
        loss is proven damage. (Before 2.40, ``FinishPageMessageOperation.beforeCommit`` queued the sync on the
        ``PageSyncTimer`` and wrote the COMMIT without waiting for it.)"""
        for fs in self.journals.values():
            for jf in fs:
                if jf.rel == fault.path and jf.current and jf.records:
                    # the write ends with the last record: after it is the fill (or an earlier use's records),
                    # which the broker does not read and a crash does not touch
                    return _tail_only(fault, [(r[1], r[2]) for r in jf.records], jf.data, journal=True)
        for pg in self.pages:
            if pg.rel == fault.path and pg.current and pg.records:
                return _tail_only(fault, pg.records, pg.data, synced=pg.synced)
        return False


def _tail_only(fault: Fault, records: list[tuple[int, int]], data: bytes, journal: bool = False,
               synced: int = 0) -> bool:
    """Whether ``fault`` on a file whose pristine bytes are ``data`` (records ``(offset, length)``) is one the
    crash model allows (:func:`~amqtool.formats.artemis.torn_write.crash_leaves`): the write starts at the
    record holding the first changed byte, and runs to the end of the last record; nothing before ``synced``
    (known synced) changes."""
    from amqtool.formats.artemis.torn_write import crash_leaves

    end = records[-1][0] + records[-1][1]
    if fault.kind == "truncate":
        return synced <= fault.offset < end
    if fault.kind not in ("flip", "zero"):
        return False
    damaged = bytearray(data)
    if fault.kind == "flip":
        damaged[fault.offset] ^= fault.length
        changed = [fault.offset]
    else:
        stop = min(fault.offset + fault.length, len(damaged))
        damaged[fault.offset:stop] = bytes(stop - fault.offset)
        changed = [i for i in range(fault.offset, stop) if data[i]]
    if journal:
        changed = [i for i in changed if i < end]  # the fill or an earlier use's bytes: outside the write
    if not changed or changed[0] < synced:
        return False  # nothing the broker wrote changed (no loss to call torn), or what was synced did
    start = next((o for o, n in records if o <= changed[0] < o + n), None)
    if start is None:
        return False
    return crash_leaves(damaged, start, end, changed)


# -- the truth -----------------------------------------------------------------------------------------

# A row is keyed by its queue's id, not its name: a damaged byte in a queue binding's name renames the queue
# (the broker cannot notice: there is no checksum), which is a content change, not a loss.
_KEY = ("queue_id", "message_id", "transaction_state")


def delivered(root: Path) -> Delivered:
    """What the broker delivers from the store at ``root`` (``data exp``'s view: bindings, then one row per
    live message per queue, paged messages included).

    The export engine reads the journals' loads without verify's judgement (:class:`_Unjudged`): the truth
    must not depend on the verdict under test, and a CRITICAL store still delivers what it delivers."""
    return _delivered(root)


class DeliveredReader:
    """:func:`delivered` of one store's damaged copies, against its pristine state: a campaign's truth.

    Decoding a message into its rows' columns and digesting them is most of a truth's cost, and most messages
    of a damaged copy are a pristine message unchanged. So the pristine store's rows are kept per message
    (:class:`MessageMemo`), and a damaged copy's message whose input to the decoder is a pristine message's
    exactly takes that message's rows; the others are decoded as :func:`delivered` decodes them. The answer
    is :func:`delivered`'s exactly (tests/faults/test_truth.py checks it on a sample of faults)."""

    moved = True  # rows that only moved to another message id are content (model.classify)

    def __init__(self, root: Path):
        self.memo = MessageMemo()
        self.pristine = _delivered(root, self.memo.learn)

    def damaged(self, root: Path, loaded: tuple | None = None) -> Delivered:
        """The truth of the damaged copy at ``root``; ``loaded``: ``(store, loads)``, verify's detection of
        it and its journal loads, still open (:func:`tests.faults.runner.judged`), read instead of loading
        the journals again."""
        return _delivered(root, self.memo.rows, loaded)


class MessageMemo:
    """The (key, digest) of each row of every message of a pristine store, by the message's whole input to
    the export's decoder: ``(user record type, body, message id, rows, where)``.

    Sound because a message's rows are a function of that input alone: the decoder (native/export_columns.c,
    and the Python reference for what C leaves) decodes each message of a batch on its own, and its rows'
    own values come from the input's ``rows``. The exception is a large message, whose body is read from
    its file (which a fault may damage): messages of type 30 and any message whose rows say ``large`` are
    never memoised, nor one that does not decode; those are always decoded anew."""

    def __init__(self):
        self._rows: dict[tuple, tuple] = {}

    def __len__(self) -> int:
        return len(self._rows)

    @staticmethod
    def key(message: tuple) -> tuple:
        utype, body, mid, rows, where = message
        return utype, bytes(body), mid, tuple(rows), where

    def learn(self, ex) -> Iterator[tuple]:
        """The rows of ``ex`` (an export over the pristine store) as :func:`_decoded_rows` gives them,
        remembering each message's."""
        messages = list(ex.messages())
        out = list(_decoded_rows(ex, iter(messages)))
        # every message decoded (the pristine store's do): its rows are the next len(rows) rows, in order
        aligned = len(out) == sum(len(m[3]) for m in messages)
        if aligned:
            at = 0
            for m in messages:
                n = len(m[3])
                self._remember(m, out[at:at + n])
                at += n
        else:  # one by one: what does not decode has no rows
            for m in messages:
                self._remember(m, list(_decoded_rows(ex, iter([m]))))
        return iter(out)

    def _remember(self, message: tuple, rows: list) -> None:
        if rows and message[0] != 30 and all(not large and k[1] == message[2] for k, _, large in rows):
            self._rows[self.key(message)] = tuple((k, d, False) for k, d, _ in rows)

    def rows(self, ex) -> Iterator[tuple]:
        """The rows of ``ex`` (an export over a damaged copy): the remembered ones of every message met
        unchanged, the others decoded."""
        known: list = []

        def unknown():
            for m in ex.messages():
                got = self._rows.get(self.key(m))
                if got is None:
                    yield m
                else:
                    known.extend(got)

        for r in _decoded_rows(ex, unknown()):
            yield r
            if known:
                yield from known
                known.clear()
        yield from known


def _decoded_rows(ex, messages) -> Iterator[tuple]:
    """``(key, digest, large)`` of each row that ``messages`` (as ``ex.messages()`` gives them) decode to in
    the export's record batches (the C column decoder, twin-tested against Python), in row order."""
    from amqtool.engines.export.local import message_batches

    for batch in message_batches(messages, safe=ex.options.safe, large=ex.large, summary=ex.summary):
        keys = list(zip(*(batch.column(k).to_pylist() for k in _KEY)))
        yield from zip(keys, _digest_rows(batch), batch.column("large").to_pylist())


def _delivered(root: Path, message_rows=None, loaded: tuple | None = None) -> Delivered:
    """:func:`delivered`; ``message_rows(export)``: the rows of the messages as :func:`_decoded_rows` gives
    them (:class:`MessageMemo`'s), instead of decoding them all; ``loaded``: ``(store, loads)`` of the store
    at ``root`` as ``verify_store`` detected and loaded it (``VerifyReport.loads``: ``load_journal``'s
    results, which this function would compute again), used when every journal of the store has one."""
    import contextlib

    from amqtool.engines.artemis.load import load_journal
    from amqtool.errors import AmqtoolError
    from amqtool.store.layout import detect

    nothing = Delivered(frozenset(), Counter(), frozenset(), refused=True)
    if loaded is not None:
        store, loads = loaded[0], loaded[1]
        if store.kind == "artemis" and all(jd.kind in loads for jd in store.journals()) and not _negative_ids(
                loads.values()):
            return _delivered_of(store, dict(loads), message_rows)
    try:
        store = detect(root)
        if store.kind != "artemis":
            return Delivered(frozenset(), Counter(), frozenset(), detected=False)
    except AmqtoolError:
        return Delivered(frozenset(), Counter(), frozenset(), detected=False)
    try:
        with contextlib.ExitStack() as stack:
            loads = {}
            for jd in store.journals():  # one open and load of each journal, as the export reads it
                opened = broker_opened(stack, jd)
                if any(s.code in _REFUSING for s in opened.skipped):
                    return nothing
                if opened.files:
                    loads[jd.kind] = load_journal(opened)
            return _delivered_of(store, loads, message_rows)
    except (AmqtoolError, OSError):
        # what the loader refuses, the broker refuses too (it does not start): nothing is delivered
        return nothing


def _delivered_of(store, loads: dict, message_rows=None) -> Delivered:
    """What the broker delivers from ``store`` whose journals loaded to ``loads`` (kind -> open load)."""
    from amqtool.engines.export.model import ExportOptions
    from amqtool.errors import AmqtoolError

    nothing = Delivered(frozenset(), Counter(), frozenset(), refused=True)
    rows: Counter = Counter()
    content = set()
    try:
        if any(s.code in _REFUSING for r in loads.values() for s in r.opened.skipped):
            return nothing
        caches = duplicate_ids(loads.get("messages"))
        if caches is None or _refused(store, loads):
            # a whole record the load's decode throws on: no crash leaves that (a torn record ends the
            # scan), so the broker's refusal is never a torn tail's loss (model.classify)
            return Delivered(frozenset(), Counter(), frozenset(), undecodable=True)
        cached, cache_content = caches
        content.update(cache_content)
        if loads.get("messages") is not None:
            loads = dict(loads, messages=as_walked(loads["messages"]))
        with _Unjudged(store, ExportOptions(safe=True), loads) as ex:
            rows_b = ex.binding_rows()
            bindings = frozenset((r[0], r[1]) for r in rows_b)  # (kind, id): what the broker has
            content.update(("binding",) + tuple(r) for r in rows_b)
            if ex.messages_result is not None:  # (the export's batches: none without a message journal)
                elsewhere = _paged_elsewhere(store, rows_b)
                for k, d, _ in (message_rows or _decoded_rows_of)(ex):
                    if elsewhere and (k[0], k[1]) in elsewhere:
                        continue
                    rows[k] += 1
                    content.add(k + (d,))
    except (AmqtoolError, OSError):
        # what the loader refuses, the broker refuses too (it does not start): nothing is delivered
        return nothing
    return Delivered(bindings, rows, frozenset(content), caches=cached)


def _paged_elsewhere(store, binding_rows) -> frozenset:
    """(queue id, message id) of each paged message a queue is routed in a page store of another address than
    the queue's: the broker never delivers it. It names the page store of a folder by the first line of its
    address.txt (``PagingStoreFactoryNIO.reloadStores``), and subscribes a queue on the page store of the
    queue's own address (``QueueFactoryImpl.getPageSubscription`` -> ``PagingManager.getPageStore(address)``,
    a new empty store when none was reloaded); the cursor acknowledgements and counters it reloads are those
    of that subscription (``AbstractJournalStorageManager.locateSubscription``). So a folder whose address.txt
    was changed to another name holds messages no queue reads, and a paged message whose queue id was damaged
    to another address's queue (35 -> 3, one bit from telemetry's queue to DLQ's) is read by no cursor of that
    queue. Empty in a store a broker wrote: a page store holds only messages routed to its address's queues.
    Read at every judgement (the fast page summaries: a few ms for a 32 MiB demo's pages)."""
    from amqtool.engines.artemis.paging.stores import PageFile, find_page_stores
    from amqtool.formats.artemis.paging import PageSummaries

    stores, _ = find_page_stores(store.paging_dir)
    address_of = {r[1]: r[3] for r in binding_rows if r[0] == "queue"}
    out = set()
    for ps in stores:
        for pid in sorted(ps.pages):
            try:
                with PageFile(ps.page_path(pid)) as pf:
                    for _, _, _, _, _, mid, qids, _ in PageSummaries(pf.buf, pf.size):
                        out.update((q, mid) for q in qids if q in address_of and address_of[q] != ps.address)
            except OSError:
                continue  # the export skips an unreadable page too
    return frozenset(out)


# -- the duplicate-detection caches ----------------------------------------------------------------------

DUPLICATE_IDS = "duplicate-id"  # the cache kind of Delivered.caches' keys
ID_CACHE_SIZE = 20000  # id-cache-size: ActiveMQDefaultConfiguration.DEFAULT_ID_CACHE_SIZE
_DUPLICATE_ID = 37  # JournalRecordIds.DUPLICATE_ID


def duplicate_ids(messages) -> tuple[Counter, set] | None:
    """The entries of the duplicate-detection caches the broker loads from the message journal's load
    ``messages`` (None: no message journal): ``(counts, content)``, the counts keyed ``(DUPLICATE_IDS, record
    id, state)`` and the content ``key + ((address, duplicate id),)``. None when the broker does not start.

    What the broker loads (AbstractJournalStorageManager.loadMessageJournal, case DUPLICATE_ID): every live record
    of user type 37 (an add or an update: each is one entry of the committed list), decoded as
    ``body_reads.duplicate_id_value`` (a decode that throws is rethrown: the broker does not start), gathered per
    address into ``duplicateIDMap`` in the list's order. ``PostOfficeJournalLoader.handleDuplicateIds`` hands
    each address's list to its cache (``PersistentDuplicateIDCache.load``), which keeps the last
    ``id-cache-size`` entries and deletes the older ones; this assumes the broker's defaults (id-cache-size 20000,
    persist-id-cache true: a store does not hold its broker's configuration). A DUPLICATE_ID record of a
    prepared transaction enters the cache when the transaction commits (loadSinglePreparedTransaction:
    ``DuplicateIDCache.load(tx, id)``): its entry's state is ``prepared``, as a prepared message's rows are.

    Why the cache is part of what the broker delivers: an entry lost makes the broker accept a message it would
    have rejected as a duplicate (a resend after a failover, a bridge's retry: delivered twice); an entry brought
    back rejects one it would have accepted. The record id only names the record the broker deletes when the
    entry leaves the cache: an entry moved to another record id holds the same value (model.classify: moved).
    A record loaded twice (a journal file duplicated under another name) is one entry: the cache is keyed by the
    duplicate id, and holding it twice rejects nothing more."""
    from amqtool.formats.artemis.body_reads import duplicate_id_value

    counts: Counter = Counter()
    content: set = set()
    if messages is None:
        return counts, content
    live = messages.live
    find = getattr(live, "indexes_of_types", None)
    where = (find((_DUPLICATE_ID,)) if find is not None
             else [i for i, r in enumerate(live) if r.user_record_type == _DUPLICATE_ID])
    per_address: dict[bytes, list] = {}
    for i in where:
        r = live[i]
        value = duplicate_id_value(messages.body(r))
        if value is None:
            return None
        per_address.setdefault(value[0], []).append((r.id, value))
    for entries in per_address.values():
        for rid, value in entries[-ID_CACHE_SIZE:]:
            key = (DUPLICATE_IDS, rid, "committed")
            counts[key] = 1
            content.add(key + (value,))
    for tx in messages.prepared:
        for r in tx.records:
            if r.user_record_type == _DUPLICATE_ID:
                value = duplicate_id_value(messages.body(r))
                if value is not None:  # (what throws there fails the transaction's load, logged: not a refusal)
                    key = (DUPLICATE_IDS, r.id, "prepared")
                    counts[key] = 1
                    content.add(key + (value,))
    return counts, content


def _decoded_rows_of(ex) -> Iterator[tuple]:
    return _decoded_rows(ex, ex.messages())


_CONTENT = tuple(c[0] for c in MESSAGE_COLUMNS if c[0] not in _KEY)


def _digest_rows(batch) -> list:
    cols = batch.to_pydict()
    return [hash(repr(r)) for r in zip(*(cols[c] for c in _CONTENT))]


class _Unjudged(LocalArtemisExport):
    """The local export engine over journal loads made without verify: no findings, nothing refused."""

    def __init__(self, store, options, loads: dict):
        self._loads = loads
        super().__init__(store, options)

    def _judge(self, progress):
        return [], self._loads


def broker_opened(stack, jd):
    """``open_journal(jd)`` with the files of a negative header fileID where JournalImpl loads them (first:
    ``with_negative_ids``), not skipped as verify's load skips them. Both are entered on ``stack``."""
    from amqtool.store.journal_files import open_journal, with_negative_ids

    opened = stack.enter_context(open_journal(jd))
    return stack.enter_context(with_negative_ids(opened)) if _negative_ids([opened]) else opened


def _negative_ids(loads_or_opened) -> bool:
    """Whether any of these journal loads (or opened journals) skipped a file for a negative fileID."""
    return any(s.code == "bad-file-id" for x in loads_or_opened for s in getattr(x, "opened", x).skipped)


# JournalImpl refuses to load (the broker does not start) when a file named like a journal file has no
# readable header, a format version it does not know, or another userVersion (JournalImpl.readFileHeader,
# orderFiles); a short file is skipped, not refused (open_journal already drops it), and a negative fileID is
# no refusal either: the file is loaded first (broker_opened).
# A journal file it cannot read stops it too (the open throws).
_REFUSING = ("not-a-regular-file", "file-too-large", "bad-header-version", "user-version-mismatch", "unreadable")


# AbstractJournalStorageManager.loadMessageJournal: the user record types its switch knows (its default throws
# IllegalStateException "Invalid record type"), and the bodies whose decode throws when they are short: the
# references and their updates, and the paging records too (page transactions, cursor acknowledgements and
# completions, page counters: amqtool/formats/artemis/body_reads.py cites each decoder; a PAGE_TRANSACTION
# whose type byte reads ACKNOWLEDGE_CURSOR, 35 -> 39, throws in CursorAckRecordEncoding.decode).
_MESSAGE_TYPES_KNOWN = frozenset({29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 45, 49, 53})
_FIXED_BODY = {32: 8, 33: 8, 34: 12, 36: 16}


# AbstractJournalStorageManager.loadBindingJournal decodes every record of the types its switch knows (bindings,
# statuses, the ID counter, settings, diverts, bridges, users, roles, ...: bindings_load.LOAD_TYPES) and
# rethrows what a decode throws (RuntimeException): the broker does not start. A record of another type is
# logged and skipped. decode_user_record(journal="bindings") decodes as that load does.


def _refused(store, loads: dict) -> bool:
    """Whether the broker refuses to start on the journals' loads ``loads`` (kind -> load; no key: no file)."""
    from amqtool.errors import FormatError
    from amqtool.formats.artemis.body_reads import reads_past_body
    from amqtool.formats.artemis.userrecords import decode_user_record

    bindings = loads.get("bindings")
    if bindings is not None:
        for r in bindings.live:
            try:
                decode_user_record(r.user_record_type, bindings.body(r), journal="bindings", record_id=r.id)
            except FormatError:
                return True
    messages = loads.get("messages")
    if messages is None or store.bindings is None:
        return False
    for r in messages.live:
        t = r.user_record_type
        if t not in _MESSAGE_TYPES_KNOWN or reads_past_body(t, r.body_len):
            return True
    return False


# -- could the broker have written it? ---------------------------------------------------------------------

_WRITTEN_AS_UPDATE = frozenset({32, 33, 34, 36})  # ADD_REF, ACKNOWLEDGE_REF, UPDATE_DELIVERY_COUNT, SCHEDULED
_ONE_WAY = _WRITTEN_AS_UPDATE | {30, 31, 45}  # and the message records, only ever adds

def _stale_tail(opened, i: int, g, jf) -> bool:
    """Whether the bytes after the last record of file ``i`` are an earlier use's records (reinitializeFile
    rewrites the header only), the first of them perhaps cut by this use's last record: JournalImpl skips what
    carries another tag."""
    from amqtool.engines.artemis.stale_tail import stale_fragment
    from amqtool.engines.artemis.verify import _first_foreign_record
    from amqtool.formats.artemis.records import scan_records_py

    head = opened.pread(i, g.tail_first, min(g.tail_end - g.tail_first, 1 << 20))
    recs, _ = scan_records_py(head[:1 << 16], jf.tag, jf.version, check_tag=False, start=0)
    this_use = recs and recs[0][1] == 0 and int.from_bytes(head[1:5], "big", signed=True) == jf.tag
    stale = (_first_foreign_record(head, g.tail_first, jf.tag, jf.version) is not None
             or stale_fragment(head, g.tail_first, g.tail_end, tag=jf.tag, last_end=g.end))
    return bool(stale and not this_use)


def _restart_left(result, ids: set[int]) -> set[int]:
    """The message ids of ``ids`` (acknowledged, with neither their record nor a reference in the load
    ``result``) that a broker leaves after a restart (see :func:`restart_orphans`): every live update of the id
    is an acknowledgement or a delivery count (acknowledged: the ids given are), and a fileID between the file of
    the last of them and the newest
    file is carried by no file (the file of its DELETE, freed since). Never-compacted JournalImpl stores with a
    bounded pool, restarted, hold such ids untouched in 7 of 17 (amqtool/engines/artemis/restart_orphans.py):
    a damaged copy left with only such ids is one a broker could have written."""
    if result is None or not ids:
        return set()
    limit = 1 << 31  # past it a damaged header's fileID: the issued id is its records' tag
    fids = [jf.file_id if 0 <= jf.file_id < limit else jf.tag for jf in result.files]
    present = {f for f in fids if f < limit}
    last: dict[int, int] = {}
    other: set[int] = set()
    for r in result.live:
        if r.id in ids and r.is_update:
            if r.user_record_type not in (33, 34):  # ACKNOWLEDGE_REF, UPDATE_DELIVERY_COUNT
                other.add(r.id)
            last[r.id] = max(last.get(r.id, -1), fids[r.file_index])
    high = max(present, default=0)
    return {m for m, f in last.items()
            if m not in other and any(t not in present for t in range(f + 1, min(high, f + 1 + (1 << 20))))}


def restart_orphans(root: Path) -> frozenset:
    """The message ids the pristine store at ``root`` holds references or acknowledgements of without their
    record and without a DELETE. A broker writes that: after a restart JournalImpl ties no update to a DELETE
    whose add it did not read (``onReadUpdateRecord``: "It's legal for this to be null"), so the reclaimer may
    free the DELETE's file while the update's stays (amqtool/engines/artemis/restart_orphans.py). The store is
    a broker's by definition: :func:`broker_could_write` excuses these ids in its damaged copies."""
    from amqtool.engines.artemis.broker_state import REF_TYPES, build_broker_state
    from amqtool.engines.artemis.evidence import deleted_ids
    from amqtool.engines.artemis.load import load_journal
    from amqtool.errors import AmqtoolError
    from amqtool.store.journal_files import open_journal
    from amqtool.store.layout import detect

    try:
        store = detect(root)
        with contextlib.ExitStack() as stack:
            results, deleted = {}, set()
            for jd in store.journals():
                opened = stack.enter_context(open_journal(jd))
                if opened.files:
                    results[jd.kind] = load_journal(opened)
                    if jd.kind == "messages":
                        deleted = deleted_ids(opened)
            if results.get("messages") is None:
                return frozenset()
            state = build_broker_state(results.get("bindings"), results["messages"], decode=REF_TYPES)
    except (AmqtoolError, OSError):
        return frozenset()
    messages = set(state.message_records)
    return frozenset(m for m in [*state.refs, *(m for m, _ in state.acked)] if m not in messages and m not in deleted)


def broker_could_write(root: Path, loaded: tuple | None = None, journal_only: bool = False,
                       orphans_ok: frozenset = frozenset(), known: frozenset = frozenset()) -> str:
    """'' when every record the store at ``root`` holds is consistent with a store a broker writes (with
    crashes), else the first inconsistency found (:func:`inconsistencies`) that is not in ``known``: what
    proves it damaged. The harness's own oracle (tests/faults/model.py, ``loss-unproven``), built from the
    loaders, never from verify's findings.

    ``known``: the inconsistencies the pristine store shows already (:func:`pristine_flaws`). The pristine
    stores are written by the real ``JournalImpl`` (tests/data/artemis/tools/gen.sh, /work/artemis-fresh), so
    what one of them shows is, by construction, something a broker writes, even where this oracle's model of
    the broker is stricter: a store SIGKILLed while its compactor ran (``JournalCompactor`` writes its outputs
    into reused files, ``JournalFilesRepository.openFileCMP``, whose earlier bytes stay past its records) has
    older files whose ends read as damaged here. A damaged copy showing the same is no proof of the fault;
    without ``known`` every fault on such a store read as proven, a deleted oldest file's lost prepared
    transactions (nothing left names them) as loss rather than loss-unproven."""
    found = inconsistencies(root, loaded, journal_only, orphans_ok)
    try:
        return next((why for why in found if why not in known), "")
    finally:
        found.close()


def pristine_flaws(root: Path, journal_only: bool = False, orphans_ok: frozenset = frozenset()) -> frozenset:
    """Every inconsistency (:func:`inconsistencies`) of the pristine store at ``root``: ``known`` to
    :func:`broker_could_write` for its damaged copies."""
    return frozenset(inconsistencies(root, None, journal_only, orphans_ok))


def inconsistencies(root: Path, loaded: tuple | None = None, journal_only: bool = False,
                    orphans_ok: frozenset = frozenset()):
    """Each inconsistency of the store at ``root`` with a store a broker writes (with crashes), in the order
    they are found (a journal the broker refuses, or a store not detected, ends the list).
    ``loaded``: :func:`tests.faults.runner.judged`'s ``(store, loads, gaps)`` of this store, still open: the
    loader's results and each file's gaps, read instead of loading every journal again.

    Inconsistent: a journal file the broker refuses or two with one fileID; damaged bytes between records; non-
    filler bytes after the last record of a file that is not the newest (other than an earlier use's records, the
    first perhaps cut by this use's: JournalImpl skips them); room left at the end of such a file for the first
    record of the next file when their fileIDs are consecutive (JournalImpl moves on for a record that does not fit,
    or as a compaction begins: not after the compactor's output, nor with .cmp files left by a compaction running at
    a crash; a freed file's id may lie between); a commit whose count does not match; a reference, acknowledgement
    or update of a message with no message record that was never deleted; an acknowledgement without its reference;
    a duplicate-id record that does not decode; an open transaction whose id is a live record's; a reference to a
    queue the bindings do not hold; a bindings record that does not decode, or of a type Artemis does not write
    there; a live large message without its file; a page whose framing ends in damage (but the current page's tail
    as a crash leaves it: torn_write.py) or whose message does not decode; a paged message naming a queue id past
    every id the journals issued; a cursor acknowledgement past its address's current page; a queue whose page
    counter exceeds the messages its pages still hold; a bindings journal without its message journal beside page
    files holding messages or large-message bodies (alone, it is what a bindings directory copied by itself
    gives). ``journal_only``: a bare JournalImpl journal (tests/faults/journal_truth.py), whose records are no
    broker's: only what JournalImpl itself writes is checked (the files, their ends, the commits).
    ``orphans_ok``: message ids whose references or acknowledgements without a record the pristine store holds
    already (:func:`restart_orphans`): no proof of damage."""
    from amqtool import native
    from amqtool.engines.artemis.broker_state import REF_TYPES, build_broker_state
    from amqtool.engines.artemis.evidence import deleted_ids
    from amqtool.engines.artemis.load import load_journal
    from amqtool.engines.artemis.paging import (
        PAGE_TX_COMMITTED, find_page_stores, iter_paged_entries, load_view, store_pages,
    )
    from amqtool.engines.artemis.journal_crash import crash_left
    from amqtool.engines.artemis.paging.crash_tail import last_framing
    from amqtool.engines.artemis.paging.moved_acks import past_current
    from amqtool.formats.artemis.paging import PageScanner
    from amqtool.errors import AmqtoolError
    from amqtool.store.journal_files import open_journal
    from amqtool.store.layout import detect

    try:
        store = detect(root) if loaded is None else loaded[0]
    except AmqtoolError as err:
        yield f"not a store: {err}"
        return
    # ``loaded``: judged()'s (store, loads, gaps) of this very store, still open: the same loads, not read again
    if loaded is not None and not (store.kind == "artemis" and all(
            jd.kind in loaded[1] and jd.kind in loaded[2] for jd in store.journals())):
        loaded = None
        store = detect(root)
    results, deleted = {}, set()
    with contextlib.ExitStack() as stack:
        for jd in store.journals():
            if loaded is not None:
                result = loaded[1][jd.kind]
                opened, gaps = result.opened, loaded[2][jd.kind]
            else:
                opened = stack.enter_context(open_journal(jd))
            refused = [s for s in opened.skipped if s.code in _REFUSING + ("duplicate-file-id", "bad-file-id")]
            if refused:
                yield f"{jd.kind}: {refused[0].code}"
                return
            if loaded is None:
                gaps = {}
                result = load_journal(opened, on_file=lambda scan, g: gaps.__setitem__(scan.index, (scan, g)))
            results[jd.kind] = result
            if any(a.code == "commit-count-mismatch" for a in result.anomalies):
                yield f"{jd.kind}: commit-count-mismatch"
            data = [i for i, (s, _) in sorted(gaps.items()) if s.has_data]
            # a compaction begins by moving on (JournalImpl.getDataListToCompact: moveNextFile), leaving room in
            # the file then current; .cmp files left behind show one that was running when the broker died
            compacting = any(p.code == "leftover-cmp" for p in opened.pending)
            for i, (scan, g) in sorted(gaps.items()):
                jf = scan.file
                if g.damaged_count:
                    yield f"{jf.path.name}: damaged bytes between records"
                    continue
                cur = result.current_file
                if (g.tail_first >= 0 and cur is not None and jf.path == cur.path
                        and not _stale_tail(opened, i, g, jf) and not crash_left(result, i, g.tail_first)):
                    # the crash model (amqtool/formats/artemis/torn_write.py): no crash leaves this end
                    yield f"{jf.path.name}: damaged end of the current file that no crash leaves"
                    continue
                if i in data and i != data[-1]:
                    if g.tail_first >= 0 and not _stale_tail(opened, i, g, jf):
                        yield f"{jf.path.name}: damaged end of a file that is not the newest"
                        continue
                    if g.end == jf.size < max(f.size for f in result.files):
                        # JournalFilesRepository.createFile fills every file to the journal's size before use
                        yield f"{jf.path.name}: shorter than the journal's files, ending where its last record ends"
                        continue
                    nxt = data[data.index(i) + 1]
                    own, _ = native.scan_records(opened.read_file(i), jf.tag, jf.version, True, 16)
                    nf = result.files[nxt]
                    first, _ = native.scan_records(opened.pread(nxt, 0, 1 << 20), nf.tag, nf.version, True, 16)
                    # only between consecutive fileIDs: with ids missing between (files the reclaimer freed), the
                    # record that did not fit was the first of a file since freed, not the first of ``nxt``
                    if (jf.version >= 2 and not compacting and nf.tag == jf.tag + 1 and own and own[-1][3] == 0
                            and first and first[0][1] == 16 and first[0][3] == 0 and first[0][2] <= jf.size - g.end):
                        yield f"{jf.path.name}: room left for the next file's first record"
            if jd.kind == "messages":
                deleted = deleted_ids(opened)
        if journal_only:
            return
        if results.get("bindings") is not None and results.get("messages") is None:
            # The broker creates both journals at its first start, but a bindings directory copied alone (the
            # public stores people commit; journal-directory configured apart from bindings-directory) reads the
            # same: what proves the message journal lost is what the broker writes only for messages outside
            # it, page files holding messages and large-message bodies (missing_journal.py's reading, from the
            # loaders here)
            from amqtool.engines.artemis.missing_journal import large_message_files

            if large_message_files(store.large_messages_dir):
                yield "a bindings journal without its message journal, beside large-message bodies"
                return
            if store.paging_dir is not None and next(iter_paged_entries(store), None) is not None:
                yield "a bindings journal without its message journal, beside page files holding messages"
                return
            return
        state = build_broker_state(results.get("bindings"), results.get("messages"), decode=REF_TYPES)
        if state.problems:
            yield f"record {state.problems[0].record_id} does not decode"
        if duplicate_ids(results.get("messages")) is None:
            yield "a duplicate-id record that does not decode (the broker's own load throws on it)"
        if results.get("bindings") is not None:
            from amqtool.formats.artemis.bindings_load import LOAD_TYPES

            # JournalRecordIds: Artemis writes to its bindings journal only the types its load decodes
            skipped = [r for r in results["bindings"].live if r.user_record_type not in LOAD_TYPES]
            if skipped:
                yield (f"bindings record {skipped[0].id} of user type {skipped[0].user_record_type}, which Artemis "
                        f"does not write there")
        msgs = results.get("messages")
        if msgs is not None and (msgs.failed or msgs.prepared):
            # transaction and record ids come from one BatchingIDGenerator: they never coincide
            live_ids = {r.id for r in msgs.live}
            clash = next((tx.tx_id for tx in list(msgs.failed) + list(msgs.prepared) if tx.tx_id in live_ids), None)
            if clash is not None:
                yield f"transaction {clash} has the id of a live record"
        for r in results["messages"].live if "messages" in results else ():
            # AbstractJournalStorageManager writes refs, acks, delivery counts and schedules only as updates,
            # messages only as adds
            if r.is_update != (r.user_record_type in _WRITTEN_AS_UPDATE) and r.user_record_type in _ONE_WAY:
                yield f"record {r.id}: user type {r.user_record_type} as {'an update' if r.is_update else 'an add'}"
        for mid, qs in state.refs.items():
            if any(n > 1 for n in qs.values()):
                yield f"message {mid} referenced twice by one queue (the broker routes a message to a queue once)"
        messages = set(state.message_records)
        for mid, qs in state.refs.items():
            if mid not in messages and mid not in deleted and mid not in orphans_ok:
                yield f"references of message {mid}, never deleted, without its record"
            if "bindings" in results and any(q not in state.queues for q in qs):
                yield f"message {mid} referenced by a queue the bindings do not hold"
        restarted = _restart_left(results.get("messages"), {m for m, _ in state.acked} - messages - set(state.refs))
        for mid, q in state.acked:
            if mid not in messages and mid not in deleted and mid not in orphans_ok and mid not in restarted:
                yield f"acknowledgement of message {mid}, never deleted, without its record"
            if mid in messages and q not in state.refs.get(mid, ()):
                yield f"acknowledgement of message {mid} on queue {q} without its reference"
        lm = store.large_messages_dir
        for mid in state.large_messages:
            if any((mid, q) not in state.acked for q in state.refs.get(mid, ())):
                if lm is None or not (Path(lm) / f"{mid}.msg").is_file():
                    yield f"large message {mid} without its file"
        if store.paging_dir is None or "messages" not in results:
            return
        max_id = max(r.max_id for r in results.values())
        view = load_view(store)
        errors: list = []
        pending: Counter = Counter()
        elsewhere = None
        for e in iter_paged_entries(store, view, errors, endings=True):
            if any(q not in view.queues and q > max_id for q in e.message.queue_ids):
                yield f"paged message {e.message.message_id} names a queue id never issued"
            # the broker pages a message in the page store of the address it was sent to, whose queues it names
            if elsewhere is None and any(view.queue_address.get(q, e.address) != e.address
                                         for q in e.message.queue_ids):
                elsewhere = e
                yield f"paged message {e.message.message_id} in the page store of {e.address!r}, routed to another " \
                      f"address's queue"
            if e.tx_state in (None, PAGE_TX_COMMITTED):
                pending.update(e.pending_queues)
        for ps, pid, number, off, err in errors:
            if not isinstance(err, str):  # a record that does not decode (a damaged ending is judged below)
                yield f"page {pid} of {ps.address}: {err}"
        # a queue acknowledges only messages its cursor read from a page file (PageSubscriptionImpl.ackTx)
        far = past_current(view, find_page_stores(store.paging_dir)[0])
        if far:
            q, acks = next(iter(far.items()))
            yield f"queue {q}: cursor acknowledgement of page {acks[0][0]}, past its address's current page"
        for ps, pid in store_pages(store):
            with ps.open_page(pid) as pf:
                scan = PageScanner(pf.buf, pf.size)
                for _ in scan:
                    pass
                if scan.end.clean:
                    continue
                if pid != ps.current_page:
                    yield f"page {pid} of {ps.address} (not the current page) ends in damage"
                # a crash leaves the current page's last record cut or with whole 4 KiB blocks unwritten
                # (amqtool/formats/artemis/torn_write.py), never a wrong marker or a zeroed run inside a block
                if not last_framing(pf.buf, scan.end):
                    yield f"page {pid} of {ps.address} (the current page) ends in damage no crash leaves"
        for q, n in view.counters().items():
            if q in view.queues and n > pending[q]:
                yield f"queue {q}: page counter {n} over the {pending[q]} messages its pages hold"
    return
