"""KahaDB and mKahaDB stores: fault sites biased to structure, the delivered and the rebuilt state, the truth.

Sites (:class:`KahaSites`) come from the pristine store's own structure, read once per store directory: the
batches of every ``db-N.log`` (the 28-byte control record: length, type, ``WRITE BATCH``, size, Adler-32),
each user record's 5-byte header, its command's entry type and length varint, the message id and the
destination name inside the protobuf command, message bodies, the end marker; ``db.data``'s header
properties, page 0 (the metadata) and the page headers and payloads of the pages in use; ``db.redo``; then
random flips, zeroed ranges and truncations, and deleted, emptied and swapped files.

Two states, both from amqtool's own loaders, which the fixtures prove equal to the 5.17 broker
(tests/engines/kahadb: the index's order indexes and subscription cursors, and the journal replay, both
give every manifest's live messages and pending subscriptions):

* :func:`delivered`: what the broker with its index delivers (``KahaDBStore.recoverNextMessages`` and
  ``recoverSubscription``): the order index of every destination and the pending messages of every durable
  subscription, each message read at the index's Location and size as ``MessageDatabase.load`` reads it
  (the digest is the SHA-256 of the marshalled OpenWire message, body included; a read that fails is the
  message the broker stops at). An index that does not read whole is rebuilt from the journal, as
  ``MessageDatabase.open`` does ("Index corrupted. Recovering the index through journal replay"; a damaged
  page deeper in a B-tree may instead stop the broker at start: not modelled). A journal file the index
  still needs that is gone stops the broker at start ("Detected missing journal files").
* :func:`rebuilt`: what a rebuild of the index from the journal gives: the replay alone
  (``load_store(reconcile=False)``), digests read the same way.

Truth (:func:`classify`), the rule of issue 25 for KahaDB:

* ``same``: delivered and rebuilt state both unchanged: never CRITICAL;
* ``latent``: delivered unchanged, rebuilt changed: WARNING (what a rebuild would lose or bring back);
* ``undetectable``: delivered changed in content only (the same message ids everywhere) while every batch
  still checks out (written without checksums): any verdict, counted;
* ``torn``: a loss confined to the tail of the newest file after the index checkpoint (what a crash
  leaves; zeros from inside a batch there through the end marker leave the store a crash tearing that batch's
  write leaves), or the newest file deleted or emptied when the checkpoint and every index reference lie in older
  files (a kill before the file was created or first written): WARNING. A newest file cut short of the
  length the journal preallocates all its files to is no crash's (``KahaSites.torn``);
* ``loss``: anything else delivered differently (lost, changed, brought back, or the broker refuses to
  start): CRITICAL;
* ``loss-unproven``: a torn case that leaves the store a crash leaves whole (the newest file gone when the
  checkpoint's record ends the file before it: ``KahaSites.traceless``): any verdict, counted apart.

When the producer-audit or ack-map record page 0 names does not load, the broker replays the whole journal
on top of its index: the truth walks that replay as ``Journal.getNextLocation`` does and the broker does not
start when a record it loads does not load (:func:`_full_replay_fails`); else what the replay keeps live
comes back.

Records after the index checkpoint (a store the broker did not close, or the ack compaction's records
after a clean stop; every record when the index has no checkpoint yet) are replayed onto the index as
``MessageDatabase.recover`` walks them, an older file's damaged batches included (tests/faults/kahadb_after.py);
a record that walk cannot load stops the broker.

A durable subscription is handed the pending messages its selector matches (the broker keeps a topic message
for every subscription and applies the selector when it recovers them: :func:`_select`, with the selectors of
the index's subscription records, or the journal's for a rebuild); a topic's own list of messages is no one's,
and is not compared.

Not modelled: a recovery that starts before ``lastUpdate`` at the first in-progress transaction, what the full replay's ``process`` does beyond what the journal replay keeps
live, a rebuild (no index) that stops at a record it cannot load, and the redo log's re-application after an
unclean shutdown.
"""
from __future__ import annotations

import hashlib
import os
import random
import struct
from dataclasses import dataclass, field
from pathlib import Path

from tests.faults.model import Fault

SAME, UNDETECTABLE, LATENT, TORN, LOSS = "same", "undetectable", "latent", "torn", "loss"
UNPROVEN = "loss-unproven"
TRUTHS = (SAME, UNDETECTABLE, LATENT, TORN, LOSS, UNPROVEN)
VERDICTS = ("OK", "WARNING", "CRITICAL", "UNKNOWN")
_PAGE_HEADER = 21


@dataclass
class LogInfo:
    rel: str
    id: int
    size: int
    end: int  # logical end (the end marker's offset)
    marked: bool = False  # ends with the end marker sparse preallocation writes into a file's last five bytes
    quiet: bool = False  # the end marker at ``end``, then zeros only (but that last marker): nothing written after
    batches: list = field(default_factory=list)  # (offset, size)
    records: list = field(default_factory=list)  # (offset, length, entry type, id span, dest span, body span)


@dataclass
class DirInfo:
    rel: str  # relative to the store root ("" for a single store)
    logs: list = field(default_factory=list)
    data_size: int = 0
    page_size: int = 4096
    pages: list = field(default_factory=list)  # (page id, type, data end) of pages in use
    redo_size: int = 0
    checkpoint_end: tuple | None = None  # (file id, offset) just past the record lastUpdate names
    no_checkpoint: bool = False  # page 0 reads and has no lastUpdate: the broker replays the whole journal
    needed: set = field(default_factory=set)  # journal file ids the index needs (recoverIndex, page 0)


def _rel(root: Path, p: Path) -> str:
    return str(p.relative_to(root)) if p != root else ""


def _join(*parts: str) -> str:
    return "/".join(x for x in parts if x)


def read_dir(root: Path, directory: Path) -> DirInfo:
    from amqtool.engines.kahadb.scan import journal_files
    from amqtool.formats.kahadb import journal as jr
    from amqtool.formats.kahadb import pagefile as pf
    from amqtool.formats.kahadb.commands import EntryType, decode_command

    info = DirInfo(_rel(root, directory))
    for jf in journal_files(directory):
        data = jf.path.read_bytes()
        log = LogInfo(_join(info.rel, jf.path.name), jf.id, len(data), len(data), data.endswith(jr.EOF_RECORD))
        for ev in jr.scan_file(data):
            if isinstance(ev, jr.Batch):
                log.batches.append((ev.offset, ev.size))
                for rec in jr.iter_batch_records(data, ev):
                    payload = bytes(rec.payload)
                    spans = [None, None, None]
                    t = payload[0]
                    try:
                        cmd = decode_command(payload)
                        mid = getattr(cmd, "message_id", None)
                        dest = getattr(cmd, "destination", None)
                        if mid:
                            i = payload.find(mid.encode())
                            spans[0] = (i, len(mid.encode())) if i > 0 else None
                        if dest is not None and dest.name:
                            i = payload.find(dest.name.encode())
                            spans[1] = (i, len(dest.name.encode())) if i > 0 else None
                        if cmd.type is EntryType.ADD_MESSAGE and len(payload) > 64:
                            spans[2] = (len(payload) * 3 // 4, len(payload) - len(payload) * 3 // 4)
                    except Exception:  # noqa: BLE001 - a site is only a hint
                        pass
                    log.records.append((rec.offset, rec.length, t, *spans))
            elif isinstance(ev, jr.End):
                log.end = ev.offset
        tail = data[log.end + len(jr.EOF_RECORD):len(data) - len(jr.EOF_RECORD) if log.marked else len(data)]
        log.quiet = data[log.end:log.end + len(jr.EOF_RECORD)] == jr.EOF_RECORD and not tail.strip(b"\0")
        info.logs.append(log)
    db = directory / "db.data"
    if db.exists():
        buf = db.read_bytes()
        info.data_size = len(buf)
        try:
            header = pf.decode_header(buf)
            info.page_size = header.page_size
            meta = pf.decode_metadata(pf.read_chain(buf, header.page_size, 0))
            info.no_checkpoint = meta.last_update is None
            if meta.last_update is not None:
                lu = meta.last_update
                log = next((x for x in info.logs if x.id == lu.log_id), None)
                rec = next((r for r in (log.records if log else ()) if r[0] == lu.offset), None)
                info.checkpoint_end = (lu.log_id, lu.offset + (rec[1] if rec else 0))
        except Exception:  # noqa: BLE001
            pass
        for pid in range(pf.page_count(buf, info.page_size)):
            off = pf.HEADER_SIZE + pid * info.page_size
            ptype, _tx, nxt, _ck = struct.unpack_from(">Bqqi", buf, off)
            if ptype in (pf.PAGE_PART, pf.PAGE_END):
                end = nxt if ptype == pf.PAGE_END and _PAGE_HEADER <= nxt <= info.page_size else info.page_size
                info.pages.append((pid, ptype, end))
        info.needed = _needed_files(directory, lambda fid: (directory / f"db-{fid}.log").read_bytes()
                                    if (directory / f"db-{fid}.log").exists() else None)[0]
    redo = directory / "db.redo"
    if redo.exists():
        info.redo_size = redo.stat().st_size
    return info


class KahaSites:
    """Fault sites of one KahaDB or mKahaDB store, read once from the pristine copy."""

    def __init__(self, root: Path, dirs: list[DirInfo]):
        self.root = root
        self.dirs = dirs

    @classmethod
    def read(cls, root: Path) -> "KahaSites":
        from amqtool.store.layout import detect

        store = detect(root)
        return cls(root, [read_dir(root, Path(d)) for d in store.directories])

    # -- drawing -------------------------------------------------------------------------------------------
    def draw(self, rng: random.Random) -> Fault:
        """One fault: record and batch structure most often, then message fields and bodies, the index,
        random bytes, ranges and truncations, and now and then a whole file."""
        r = rng.random()
        if r < 0.22:
            return self._batch_field(rng)
        if r < 0.40:
            return self._record_field(rng)
        if r < 0.52:
            return self._message_field(rng)
        if r < 0.64:
            return self._index_fault(rng)
        if r < 0.74:
            return self._random_flip(rng)
        if r < 0.86:
            return self._range(rng)
        return self._file_fault(rng)

    def _log(self, rng, with_records: bool = True) -> tuple[DirInfo, LogInfo]:
        choices = [(d, x) for d in self.dirs for x in d.logs if x.records or not with_records]
        return rng.choice(choices)

    def _batch_field(self, rng) -> Fault:
        d, log = self._log(rng)
        off, _size = rng.choice(log.batches)
        name, lo, n = rng.choice([("length", 0, 4), ("type", 4, 1), ("magic", 5, 11), ("size", 16, 4),
                                  ("checksum", 20, 8)])
        return Fault("flip", log.rel, off + lo + rng.randrange(n), 1 << rng.randrange(8), label=f"batch {name}")

    def _record_field(self, rng) -> Fault:
        d, log = self._log(rng)
        rec = rng.choice(log.records)
        name, lo, n = rng.choice([("length", 0, 4), ("type", 4, 1), ("entry type", 5, 1), ("varint", 6, 1)])
        return Fault("flip", log.rel, rec[0] + lo + rng.randrange(n), 1 << rng.randrange(8),
                     label=f"record {rec[2]} {name}")

    def _message_field(self, rng) -> Fault:
        d, log = self._log(rng)
        recs = [r for r in log.records if any(r[3:])] or log.records
        rec = rng.choice(recs)
        spans = [(name, s) for name, s in zip(("message id", "destination", "body"), rec[3:]) if s]
        if not spans:
            return Fault("flip", log.rel, rec[0] + 5 + rng.randrange(max(rec[1] - 5, 1)), rng.randrange(1, 256),
                         label=f"record {rec[2]} payload")
        name, (lo, n) = rng.choice(spans)
        return Fault("flip", log.rel, rec[0] + 5 + lo + rng.randrange(n), rng.randrange(1, 256),
                     label=f"record {rec[2]} {name}")

    def _index_fault(self, rng) -> Fault:
        ds = [d for d in self.dirs if d.data_size]
        if not ds:
            return self._random_flip(rng)
        d = rng.choice(ds)
        data = _join(d.rel, "db.data")
        r = rng.random()
        if r < 0.15:
            return Fault("flip", data, rng.randrange(4096), rng.randrange(1, 256), label="db.data header")
        if r < 0.35:
            return Fault("flip", data, 4096 + rng.randrange(_PAGE_HEADER + 48), 1 << rng.randrange(8),
                         label="db.data page 0")
        if r < 0.75 and d.pages:
            pid, _t, end = rng.choice(d.pages)
            off = 4096 + pid * d.page_size
            where = rng.randrange(end)
            return Fault("flip", data, off + where, 1 << rng.randrange(8),
                         label="db.data page header" if where < _PAGE_HEADER else "db.data page payload")
        if r < 0.85 and d.redo_size:
            return Fault("flip", _join(d.rel, "db.redo"), rng.randrange(d.redo_size), rng.randrange(1, 256),
                         label="db.redo byte")
        kind = rng.choice(["delete", "empty"])
        target = rng.choice(["db.data", "db.redo"] if d.redo_size else ["db.data"])
        return Fault(kind, _join(d.rel, target), label=f"{kind} {target}")

    def _random_flip(self, rng) -> Fault:
        d, log = self._log(rng, with_records=False)
        if rng.random() < 0.8 or log.end >= log.size:
            return Fault("flip", log.rel, rng.randrange(max(log.end, 1)), rng.randrange(1, 256), label="random data byte")
        return Fault("flip", log.rel, log.end + rng.randrange(log.size - log.end), rng.randrange(1, 256),
                     label="random byte past the end")

    def _range(self, rng) -> Fault:
        d, log = self._log(rng, with_records=False)
        if rng.random() < 0.5:
            start = rng.randrange(max(log.end, 1))
            return Fault("zero", log.rel, start, min(rng.randrange(1, 512), log.size - start), label="zeroed range")
        newest = log is d.logs[-1]
        return Fault("truncate", log.rel, rng.randrange(max(log.end, 1) + 1),
                     label="truncated newest file" if newest else "truncated file")

    def _file_fault(self, rng) -> Fault:
        d, log = self._log(rng, with_records=False)
        r = rng.random()
        if r < 0.4:
            return Fault("delete", log.rel, label="deleted journal file")
        if r < 0.7:
            return Fault("empty", log.rel, label="emptied journal file")
        others = [x for x in d.logs if x is not log]
        if others:
            return Fault("swap", log.rel, other=rng.choice(others).rel, label="swapped journal files")
        return Fault("delete", log.rel, label="deleted journal file")

    def torn(self, fault: Fault) -> bool:
        """The fault only touches the newest file after the index checkpoint: what a crash can leave.

        That includes the newest file deleted or emptied when the checkpoint lies in an older file: the store
        then looks exactly like one whose broker was killed before that file held anything. The journal
        rotates by creating the next ``db-N.log`` (``Journal.rotateWriteFile``; DataFileAppender creates and
        preallocates the file on its first write): a kill before then leaves no file, one during it a
        zero-length file (``Journal.start``: "ignoring zero length, partially initialised journal data file").
        With the checkpoint older and nothing else in db.data naming that file (the ack map does name an ack
        compaction's file: recoverIndex then refuses to start), no reader of the store can tell the loss from
        such a crash (the KahaDB counterpart of Artemis' loss-unproven). So does an index with no checkpoint yet
        (page 0 without lastUpdate: every file was written after it).

        A zeroed range is judged from its first byte that was not zero already: the damaged store is byte for
        byte the one a range starting there leaves, and its truth cannot depend on which of the two it was."""
        fault = self._first_change(fault)
        for d in self.dirs:
            older = d.no_checkpoint or (d.checkpoint_end is not None and d.checkpoint_end[0] < d.logs[-1].id) \
                if d.logs else False
            if d.logs and fault.path == d.logs[-1].rel and fault.kind in ("delete", "empty") and older \
                    and d.logs[-1].id not in d.needed:
                return True
            if d.logs and fault.path == d.logs[-1].rel and fault.kind == "truncate" and _preallocated(d):
                # Journal.rotateWriteFile preallocates a file to its full length before its first write: a
                # crash leaves it absent, empty or full-length (a torn batch inside), never cut short
                return False
            if d.logs and fault.path == d.logs[-1].rel and fault.kind in ("flip", "zero", "truncate") \
                    and (d.no_checkpoint or d.checkpoint_end is not None and d.checkpoint_end[0] <= d.logs[-1].id):
                # a crash tears only the last write: the newest file's last batch, after the checkpoint (with the
                # checkpoint in an older file, as a broker killed a file or more after its last checkpoint
                # leaves it, the whole newest file was written after it); a fault with an intact batch after
                # it is not a torn write, unless it zeroed everything after it (_torn_write)
                newest, marker = d.logs[-1], 5  # (len(jr.EOF_RECORD))
                if fault.kind == "zero" and newest.marked and fault.offset + fault.length > newest.size - marker:
                    # the preallocation's end marker in the file's last five bytes is no write a crash tears
                    # (Journal.doPreallocationSparseFile wrote it before the file's first batch): zeros over it
                    # were put there after the fact, as _torn_write says of zeros through it
                    return False
                last = d.logs[-1].batches[-1][0] if d.logs[-1].batches else 0
                after = 0 if d.no_checkpoint or d.checkpoint_end[0] < d.logs[-1].id else d.checkpoint_end[1]
                return fault.offset >= max(after, last) or _torn_write(d.logs[-1], fault, after)
        return False

    def _first_change(self, fault: Fault) -> Fault:
        """``fault`` (a zeroed range) from its first byte that is not zero in the pristine store (the store at
        ``root`` when the campaign judges: the fault undone)."""
        import dataclasses

        if fault.kind != "zero" or not fault.length:
            return fault
        with open(self.root / fault.path, "rb") as fh:
            fh.seek(fault.offset)
            before = fh.read(fault.length)
        skip = len(before) - len(before.lstrip(b"\0"))
        if not skip or skip == len(before):
            return fault  # (all zero already: the store is unchanged, whatever the class)
        return dataclasses.replace(fault, offset=fault.offset + skip, length=fault.length - skip)

    def traceless(self, fault: Fault) -> bool:
        """The newest file deleted or emptied (:meth:`torn`) leaves nothing after the index checkpoint: the
        record lastUpdate names ends the data of the file before it. That is, byte for byte, the store of a
        broker killed right after that checkpoint and before it created (``Journal.rotateWriteFile``) or
        first wrote its next file (``Journal.start`` ignores a zero-length one): no reader can tell the loss
        from it, and verify rightly calls such a store OK. Artemis' ``loss-unproven`` (tests/faults/model.py):
        any verdict, counted apart."""
        if fault.kind not in ("delete", "empty"):
            return False
        for d in self.dirs:
            if len(d.logs) >= 2 and fault.path == d.logs[-1].rel and d.checkpoint_end is not None:
                before = d.logs[-2]
                return d.checkpoint_end == (before.id, before.end)
        return False


def _torn_write(log: LogInfo, fault: Fault, after: int) -> bool:
    """Zeros from inside a batch of the newest file ``log`` that starts at or after ``after`` (the checkpoint's
    end there) through the end marker leave the file byte for byte as a crash tearing that batch's write leaves
    it, the batches after it never written: ``DataFileAppender`` writes each batch and the end marker after it
    in one write over the preallocated zeros, over the previous write's end marker (its first five bytes), so a
    write cut short leaves the batch's first bytes, then the zeros that were there. No reader of the store can
    tell the two apart (a campaign seed 9612 fault, f8-mkahadb-kill 96131000191)."""
    from amqtool.formats.kahadb import journal as jr

    if fault.kind != "zero" or not log.quiet:
        return False
    marker, end = len(jr.EOF_RECORD), fault.offset + fault.length
    if end < log.end + marker or log.marked and end > log.size - marker:
        return False
    return any(off >= after and off + marker <= fault.offset < off + jr.BATCH_CONTROL_RECORD_SIZE + size
               for off, size in log.batches)


def _preallocated(d: DirInfo) -> bool:
    """The journal of ``d`` preallocates its files: the newest ends with the end marker the default sparse
    preallocation writes into a file's last five bytes (``Journal.doPreallocationSparseFile``), or every file
    but the ack compaction's (not preallocated: ``reserveDataFile``) has one and the same length, the newest
    included, over two files at least. (Lengths alone miss a ``journalMaxFileLength`` lowered between runs.)"""
    from amqtool.formats.kahadb.commands import EntryType

    logs = [x for x in d.logs if x.size and not (x.records and x.records[0][2] == int(EntryType.REWRITTEN_DATA_FILE))]
    if logs and logs[-1] is d.logs[-1] and logs[-1].marked:
        return True
    return len(logs) >= 2 and len({x.size for x in logs}) == 1 and logs[-1] is d.logs[-1]


def sites(store: Path, rng: random.Random, count: int = 64) -> list[Fault]:
    """``count`` faults drawn from the structure of the KahaDB or mKahaDB store at ``store``."""
    s = KahaSites.read(Path(store))
    return [s.draw(rng) for _ in range(count)]


# -- the delivered and the rebuilt state ----------------------------------------------------------------------

def _digest(files: "_Files", fid: int, offset: int, size: int) -> str:
    """What ``MessageDatabase.load`` + ``loadMessage`` read at a Location: the OpenWire bytes' SHA-256, or
    why the read fails (the broker stops there)."""
    from amqtool.engines.kahadb.indexed import IndexedMessage, read_at
    from amqtool.errors import FormatError

    key = (fid, offset, size)
    got = files.digests.get(key)
    if got is not None:
        return got
    buf = files(fid)
    if buf is None:
        got = f"ERROR:db-{fid}.log_missing"
    else:
        # read_at's answer is a function of the location and, when it lies inside the file, of the record's
        # bytes alone: what the campaign's earlier faults read at the same place with the same bytes is kept
        inside = 6 <= size and 0 <= offset and offset + size <= len(buf)
        seen = (fid, offset, size, bytes(buf[offset + 5:offset + size])) if inside else None
        got = _READ.get(seen) if inside else None
        if got is None:
            try:
                add = read_at(buf, IndexedMessage(0, "", fid, offset, size))
                got = hashlib.sha256(bytes(add.message)).hexdigest()[:32]
            except FormatError as err:
                got = "ERROR:" + err.message[:60].replace(" ", "_")
            if inside:
                if len(_READ) >= 200_000:  # (bounded: each damaged record adds one)
                    _READ.clear()
                _READ[seen] = got
    files.digests[key] = got
    return got


# (file id, offset, size, the record's bytes after its 5-byte header) -> _digest's answer, for the process
_READ: dict = {}


class _Files:
    """The journal files of one directory, read once, and the digests read from them."""

    _all: dict = {}

    def __new__(cls, directory: Path):
        # one per directory for the duration of one fault (reset by _Files.reset)
        got = cls._all.get(directory)
        if got is None:
            got = cls._all[directory] = super().__new__(cls)
            got.directory = directory
            got.cache = {}
            got.digests = {}
        return got

    def __init__(self, directory: Path):
        pass

    @classmethod
    def reset(cls) -> None:
        cls._all = {}

    def __call__(self, fid: int):
        if fid not in self.cache:
            p = self.directory / f"db-{fid}.log"
            try:
                self.cache[fid] = p.read_bytes()
            except OSError:
                self.cache[fid] = None
        return self.cache[fid]


def _rebuilt_of(results) -> dict:
    out = {}
    for d in results:
        if d.is_tx_store:
            continue
        files = _Files(d.directory)
        dests, subs = {}, {}
        for key, st in d.replay.destinations.items():
            msgs = tuple(f"{mid} {_digest(files, m.file_id, m.offset, m.length)}" for mid, m in st.messages.items())
            if msgs:
                dests[key] = msgs
            for sk in st.subscriptions:
                subs[(key, sk)] = tuple(sorted(f"{mid} {_digest(files, m.file_id, m.offset, m.length)}"
                                               for mid, m in st.messages.items() if m.waiting and sk in m.waiting))
        out[d.directory.name] = _with_selectors({"dests": dests, "subs": subs}, d, files)
    return out


def _with_selectors(state: dict, d, files) -> dict:
    """``state`` with ``selectors`` ((destination key, subscription key) -> the durable subscription's JMS
    selector, from its journal record) and ``where`` (message id -> (file id, offset, size) of the topic
    messages those subscriptions may be handed), and each such subscription's pending messages filtered by
    its selector (:func:`_select`)."""
    from amqtool.engines.kahadb.document import _openwire_version
    from amqtool.errors import FormatError
    from amqtool.formats.kahadb.openwire import decode_subscription_info

    selectors, where = {}, {}
    for key, st in d.replay.destinations.items():
        for sk, sub in st.subscriptions.items():
            try:
                sel = decode_subscription_info(sub.info, _openwire_version(d)).selector if sub.info else None
            except FormatError:
                continue
            if sel:
                selectors[(key, sk)] = sel
        if any(k == key for k, _sk in selectors):
            where.update({mid: (m.file_id, m.offset, m.length) for mid, m in st.messages.items()})
    if selectors:
        state = {**state, "selectors": selectors, "where": where}
        state["subs"] = _select(state["subs"], selectors, where, files, _openwire_version(d))
    return state


def _select(subs: dict, selectors: dict, where: dict, files, version: int) -> dict:
    """Each durable subscription's pending entries that its selector matches: the broker keeps a topic
    message for every subscription, but hands an offline subscription's stored messages out only when its
    selector matches them (``TopicStorePrefetch.recoverMessage``: ``subscription.matches``; shown on the real
    broker with /work/kahadb-fresh/f12-subs-kill: a subscription with selector color='purple' holds 52
    pending messages in the store and is handed none). A message that cannot be read, or whose place is not
    known, is kept (what the broker does with it is the digest's business); a selector amqtool does not read
    keeps everything."""
    from amqtool.engines.kahadb.indexed import IndexedMessage, read_at
    from amqtool.errors import FormatError
    from amqtool.formats.kahadb.openwire import decode_message
    from amqtool.formats.kahadb.selector import SelectorError, compile_selector, message_values

    out = dict(subs)
    for k, sel in selectors.items():
        if k not in subs:
            continue
        try:
            pred = compile_selector(sel)
        except SelectorError:
            continue
        kept = []
        for x in subs[k]:
            loc = where.get(_id_of(x))
            data = files(loc[0]) if loc else None
            if data is None:
                kept.append(x)
                continue
            try:
                raw = read_at(data, IndexedMessage(0, _id_of(x), *loc)).message
                try:
                    msg = decode_message(raw, version)
                except FormatError:
                    # the broker hands the message out whatever page 0's openwireVersion says (f12-subs-kill
                    # with it flipped from 11 to 9, restarted: the same delivered): read it as written
                    msg = decode_message(raw, 11)
                if not pred(message_values(msg)):
                    continue
            except FormatError:
                pass
            kept.append(x)
        out[k] = tuple(kept)
    return out


def rebuilt(store: Path) -> dict:
    """What a rebuild of the index from the journal delivers: per store directory, each destination's
    messages (``"<message id> <digest>"`` in journal order; the digest is the marshalled OpenWire message's
    SHA-256 or ``ERROR:why``) and each durable subscription's pending ids."""
    from amqtool.engines.kahadb.load import load_store
    from amqtool.store.layout import detect

    return _rebuilt_of(load_store(detect(Path(store)), reconcile=False))


def delivered(store: Path, rebuilt_state: dict | None = None, indexed: dict | None = None) -> dict:
    """What the broker with this store's index delivers (see the module docstring), in the form of
    :func:`rebuilt`; a directory whose index needs a missing journal file is ``{"refused": ...}``.
    ``indexed``: directory -> what :func:`read_indexed` gave, when the caller read it already."""
    from amqtool.engines.kahadb.indexed import acked_names, read_indexed
    from amqtool.engines.kahadb.unhanded import index_selector_texts
    from amqtool.formats.kahadb import journal as jr
    from amqtool.formats.kahadb import pagefile as pf
    from amqtool.store.layout import detect
    from tests.faults.kahadb_after import after_checkpoint, handed_from_last_ack, replayed, unsubscribed

    store_obj = detect(Path(store))
    out = {}
    for directory in store_obj.directories:
        directory = Path(directory)
        if directory.name == "txStore":
            continue
        dests, _err = indexed[directory] if indexed and directory in indexed else read_indexed(directory)
        if dests is None:
            if rebuilt_state is None:
                rebuilt_state = rebuilt(store)
            out[directory.name] = rebuilt_state.get(directory.name, {"dests": {}, "subs": {}})
            continue
        files = _Files(directory)
        needed, last_update = _needed_files(directory, files)
        missing = sorted(fid for fid in needed if files(fid) is None)
        if missing:
            out[directory.name] = {"refused": f"missing journal files {missing}"}
            continue
        # Journal.recoveryCheck of the newest file sets where it appends; recoverIndex rolls back every index
        # entry at or past it ("Rolled back N messages from the index").
        newest = max((int(p.name[3:-4]) for p in directory.glob("db-*.log") if p.name[3:-4].isdigit()
                      and p.stat().st_size), default=None)
        append_at = None
        if newest is not None:
            append_at = (newest, [e for e in jr.scan_file(files(newest)) if isinstance(e, jr.End)][0].offset)
        rolled_back = _rolled_back(directory, append_at)
        names = acked_names(directory)
        dd, subs, where, order, positions, held = {}, {}, {}, {}, {}, {}
        for key, dest in dests.items():
            rolled = rolled_back.get(key, set())
            kept = [m for m in dest.messages if m.seq not in rolled]
            # each entry under the id the broker's acks find it by (the messageIdIndex's: updateIndex(
            # KahaRemoveMessageCommand) looks the sequence up there), its own MessageKeys id when none names it
            name = {m.seq: names.get(key, {}).get(m.seq, m.message_id) for m in dest.messages}
            order[key] = [name[m.seq] for m in dest.messages]  # (by sequence, kept or rolled back)
            for sk, (_last, ranges) in dest.cursors.items():  # (ranges None: the sub has no ackPositions entry)
                positions[(key, sk)] = {name[m.seq] for m in dest.messages
                                        if any(a <= m.seq <= b for a, b in ranges or ())}
            by_seq = [f"{name[m.seq]} {_digest(files, m.file_id, m.offset, m.size)}" for m in kept]
            if by_seq:
                dd[key] = tuple(by_seq)
            kept_seqs = {m.seq for m in kept}
            for sk in dest.subscriptions:
                subs[(key, sk)] = tuple(sorted(f"{name[m.seq]} {_digest(files, m.file_id, m.offset, m.size)}"
                                               for m in dest.pending(sk) if m.seq in kept_seqs))
            where.update({name[m.seq]: (m.file_id, m.offset, m.size) for m in dest.messages})
            # (the Locations its locationIndex keeps: a send the walk replays at one of them is a redo)
            held[key] = {(m.file_id, m.offset): name[m.seq] for m in kept}
        state = {"dests": dd, "subs": subs}
        # MessageDatabase.recover replays the records after lastUpdate (all of them without one) onto the index,
        # as its walk reads them (kahadb_after.py); one walk, from the minimum of that and the positions
        # recoverProducerAudit / recoverAckMessageFileMap return: the journal's start when either record does not
        # load (journal.getNextLocation(null)), and then getNextInitializedLocation(lastUpdate) skips nothing
        loads = _checkpoint_loads(directory, files)
        after = after_checkpoint(directory, files, last_update if loads else None, held)
        if after.refused:
            out[directory.name] = {"refused": after.refused}
            continue
        if after:
            if rebuilt_state is None:
                rebuilt_state = rebuilt(store)
            state = replayed(state, rebuilt_state.get(directory.name, {"dests": {}, "subs": {}}), after, _id_of,
                             lambda mid, loc: f"{mid} {_digest(files, *loc)}")
            # (a subscription's LastAck the walk moved: every stored message after it is handed again)
            state = handed_from_last_ack(state, after, order, positions, _id_of)
            # (where the walk found what it added: a message the selectors judge, under the id the walk read)
            where.update({mid: loc for adds in after.adds.values() for mid, loc in adds.items()})
        if not loads:
            # MessageDatabase.recover: without its producer audit or ack map the broker replays the whole
            # journal on top of the index: what the replay keeps live comes back, unless a record the replay
            # loads does not load, which stops the start
            why = _full_replay_fails(directory, files)
            if why:
                out[directory.name] = {"refused": why}
                continue
            if rebuilt_state is None:
                rebuilt_state = rebuilt(store)
            state = _merge(state, rebuilt_state.get(directory.name, {"dests": {}, "subs": {}}))
        state = _recovered_only(state, directory, dests, after)
        if after:
            state = unsubscribed(state, after, _id_of)
        if any(dest.subscriptions for dest in dests.values()):
            if rebuilt_state is None:
                rebuilt_state = rebuilt(store)
            # (the selectors the index's subscription records hold: what the broker with it recovers)
            rs = rebuilt_state.get(directory.name, {})
            sels = index_selector_texts(directory, _version(directory))
            if sels is None:
                sels = rs.get("selectors", {})
            if sels:
                state = {**state, "subs": _select(state["subs"], sels, {**rs.get("where", {}), **where}, files,
                                                  _version(directory))}
        out[directory.name] = state
    return out


def _recovered_only(state: dict, directory: Path, dests: dict, after) -> dict:
    """``state`` with the durable subscriptions the broker hands messages to: those of the index's subscriptions
    B-trees, keyed as their SubscriptionInfo names them (``getAllSubscriptions`` recovers each from it, and
    ``recoverNextMessages`` looks its cursor up by ``clientId:subscriptionName``). A subscriptionAcks entry under
    another key (its key damaged) is no one's; a recovered subscription with no LastAck under its key is handed
    nothing from the store (``recoverNextMessages``: "sub deleted" when ``getLastAck`` finds none), unless an
    ack replayed after the checkpoint puts one back (``updateIndex(KahaRemoveMessageCommand)`` writes its
    subscriptionAcks entry: not modelled, the state is kept). ``dests``: read_indexed's (their ``subscriptions``
    keyed by subscriptionAcks); ``after``: kahadb_after.after_checkpoint's. Unchanged when the subscriptions
    B-trees or their infos do not read."""
    from amqtool.errors import FormatError
    from amqtool.formats.kahadb import pagefile as pf
    from amqtool.formats.kahadb.openwire import decode_subscription_info

    try:
        buf = (directory / "db.data").read_bytes()
        ps = pf.decode_header(buf).page_size
        meta = pf.decode_metadata(pf.read_chain(buf, ps, 0))
        recovered = {}
        for key, sd in pf._iter_destinations(buf, ps, meta.destinations_page, meta.version):
            if sd.is_topic:
                infos = pf.subscription_infos(buf, ps, sd).values()
                recovered[key] = {f"{i.client_id}:{i.subscription_name}" for i in
                                  (decode_subscription_info(x, meta.openwire_version) for x in infos if x)}
    except (FormatError, OSError, AttributeError, ValueError):
        return state
    subs = dict(state["subs"])
    for key, dest in dests.items():
        if key not in recovered:
            continue
        acked_after = {sub for _mid, sub in after.removes.get(key, ())} if after else set()
        # (one only the journal holds, its removal lost, is no one's: the broker recovers the index's, and
        # those a SUBSCRIPTION record after the checkpoint writes into it)
        written = {sk for k, sk in after.subscribed if k == key} if after else set()
        for sk in (set(dest.subscriptions) | {sk for k, sk in subs if k == key}) - recovered[key] - written:
            subs.pop((key, sk), None)
        for sk in recovered[key] - set(dest.subscriptions) - acked_after:
            subs[(key, sk)] = ()
    return {**state, "subs": subs}


def _version(directory: Path) -> int:
    """The OpenWire version the index records (page 0's openwireVersion)."""
    from amqtool.formats.kahadb import pagefile as pf

    try:
        buf = (directory / "db.data").read_bytes()
        return pf.decode_metadata(pf.read_chain(buf, pf.decode_header(buf).page_size, 0)).openwire_version
    except Exception:  # noqa: BLE001 - the index read already: the default
        return 11


def _rolled_back(directory: Path, append_at) -> dict:
    """recoverIndex: per destination, the sequence ids whose locationIndex key is at or past where the
    newest file appends (``GTEVisitor(lastAppendLocation)``): the broker removes them from its order index."""
    from amqtool.formats.kahadb import pagefile as pf

    if append_at is None:
        return {}
    buf = (directory / "db.data").read_bytes()
    header = pf.decode_header(buf)
    ps = header.page_size
    meta = pf.decode_metadata(pf.read_chain(buf, ps, 0))
    size = 12 if meta.version >= 6 else 8

    def key(r):
        loc = (r.i32(), r.i32())
        if size == 12:
            r.i32()
        return loc

    out = {}
    for dkey, sd in pf._iter_destinations(buf, ps, meta.destinations_page, meta.version):
        out[dkey] = {seq for loc, seq in pf.iter_btree(buf, ps, sd.location_index, key, lambda r: r.i64())
                     if loc >= append_at}
    return out


def _needed_files(directory: Path, files) -> tuple[set, tuple | None]:
    """(the journal file ids the index of ``directory`` needs, its lastUpdate as (file id, offset) or None):
    what recoverIndex checks -- the locationIndex, the ack map -- and page 0's locations."""
    from amqtool.formats.kahadb import pagefile as pf

    needed: set = set()
    last_update = None
    try:
        buf = (directory / "db.data").read_bytes()
        meta = pf.decode_metadata(pf.read_chain(buf, pf.decode_header(buf).page_size, 0))
        if meta.last_update is not None:
            last_update = (meta.last_update.log_id, meta.last_update.offset)
        # recoverIndex's missing-file check walks every locationIndex key
        needed |= {fid for files_ in pf.decode_index(buf).location_files.values() for fid in files_}
        needed |= _ack_map_files(meta.ack_map, files)
        # Journal.getDataFile throws for the file of lastUpdate (the replay start) as for any other
        needed |= {loc.log_id for loc in (meta.ack_map, meta.producer_audit, meta.last_update,
                                          meta.first_in_progress_tx) if loc is not None}
    except Exception:  # noqa: BLE001 - read_indexed read it already
        pass
    return needed, last_update


def _ack_map_files(loc, files) -> set:
    """Keys and values of the ack map page 0 names, when it loads (else the broker rebuilds it by replay, and
    a rebuilt map names only files that exist)."""
    from amqtool.errors import FormatError
    from amqtool.formats.kahadb.commands import decode_command
    from amqtool.formats.kahadb.javaser import decode_ack_file_map

    data = files(loc.log_id) if loc is not None else None
    if not data:
        return set()
    try:
        size = struct.unpack_from(">i", data, loc.offset)[0]
        amap = decode_ack_file_map(decode_command(data[loc.offset + 5:loc.offset + size]).blob)
    except (FormatError, struct.error, AttributeError, ValueError):
        return set()
    return set(amap) | {v for vs in amap.values() for v in vs}


def _checkpoint_loads(directory: Path, files) -> bool:
    """recoverProducerAudit and recoverAckMessageFileMap: both records page 0 names load (header read at
    the Location, the command decoded, the blob deserialized; the audit's stream only by its header)."""
    from amqtool.errors import FormatError
    from amqtool.formats.kahadb import pagefile as pf
    from amqtool.formats.kahadb.commands import EntryType, decode_command
    from amqtool.formats.kahadb.javaser import decode_ack_file_map

    try:
        buf = (directory / "db.data").read_bytes()
        meta = pf.decode_metadata(pf.read_chain(buf, pf.decode_header(buf).page_size, 0))
    except (FormatError, OSError):
        return True  # no index: nothing to replay onto
    for loc, want in ((meta.producer_audit, EntryType.PRODUCER_AUDIT), (meta.ack_map, EntryType.ACK_MESSAGE_FILE_MAP)):
        if loc is None:
            continue
        data = files(loc.log_id)
        try:
            if not data or loc.offset < 0 or loc.offset + 5 > len(data):
                return False  # (a negative offset: the broker's seek fails, caught as any unreadable record)
            size = struct.unpack_from(">i", data, loc.offset)[0]
            if size < 6 or loc.offset + size > len(data):
                return False
            cmd = decode_command(data[loc.offset + 5:loc.offset + size])
            if cmd.type is not want:
                return False
            if want is EntryType.ACK_MESSAGE_FILE_MAP:
                decode_ack_file_map(cmd.blob)
            elif bytes(cmd.blob[:4]) != b"\xac\xed\x00\x05":
                return False
        except FormatError:
            return False
    return True


def _full_replay_fails(directory: Path, files) -> str:
    """Why the broker's replay of the whole journal from its start fails, or '' (``MessageDatabase.recover``:
    a record its walk loads that does not load stops the start; the walk is
    amqtool/engines/kahadb/replay_walk.py's, which follows ``Journal.getNextLocation`` and ``load``)."""
    from amqtool.engines.kahadb.replay_walk import full_replay_failure
    from amqtool.engines.kahadb.scan import journal_files

    return full_replay_failure([jf.id for jf in journal_files(directory)], lambda fid: files(fid) or b"")


def _id_of(entry: str) -> str:
    """The message id of a state entry ``"<message id> <digest>"``: all but the last word, as a damaged id
    may hold a space (a flipped bit turns '0' into ' '); a digest never does."""
    return entry.rsplit(" ", 1)[0]


def _digest_of(entry: str) -> str:
    return entry.rsplit(" ", 1)[1]


def _merge(index_state: dict, replay_state: dict) -> dict:
    """The index with what a replay of the whole journal adds back to it (messages it does not hold)."""
    dests = {}
    for key in set(index_state["dests"]) | set(replay_state["dests"]):
        have = list(index_state["dests"].get(key, ()))
        ids = {_id_of(x) for x in have}
        have += [x for x in replay_state["dests"].get(key, ()) if _id_of(x) not in ids]
        dests[key] = tuple(have)
    subs = {}
    for k in set(index_state["subs"]) | set(replay_state["subs"]):
        have = list(index_state["subs"].get(k, ()))
        ids = {_id_of(x) for x in have}
        subs[k] = tuple(sorted(have + [x for x in replay_state["subs"].get(k, ()) if _id_of(x) not in ids]))
    return {"dests": dests, "subs": subs}


def _consumed(state: dict) -> dict:
    """What consumers get: the marshalled messages (their digests) of each queue, and each durable
    subscription's pending ones (a topic's own list is not compared: :func:`_topic`). The id the index gives an
    entry is not delivered (the OpenWire message carries its own)."""
    out = {}
    for name, st in state.items():
        if "refused" in st or "dests" not in st:
            out[name] = st
            continue
        # as a multiset: a damaged sequence key reorders delivery, it loses nothing
        out[name] = {"dests": {k: tuple(sorted(_digest_of(x) for x in v)) for k, v in st["dests"].items()
                               if not _topic(k)},
                     "subs": {k: tuple(sorted(_digest_of(x) for x in v)) for k, v in st["subs"].items()}}
    return out


def _topic(key: str) -> bool:
    """A topic's destination key (KahaDestination types 1 TOPIC, 3 TEMP_TOPIC): what it delivers is its durable
    subscriptions' pending messages, compared as such; its stored messages are no one's until a subscription
    is handed them (one that no selector matches is never delivered: :func:`_select`)."""
    return key.split(":", 1)[0] in ("1", "3")


def _ids(state: dict) -> dict:
    """The state with message ids only (no digests)."""
    out = {}
    for name, st in state.items():
        if "refused" in st:
            out[name] = st
            continue
        out[name] = {"dests": {k: tuple(_id_of(x) for x in v) for k, v in st["dests"].items() if not _topic(k)},
                     "subs": {k: tuple(_id_of(x) for x in v) for k, v in st["subs"].items()}}
    return out


def classify(pristine_delivered: dict, pristine_rebuilt: dict, damaged_store: Path, *, torn: bool = False,
             damaged: tuple | None = None, traceless: bool = False) -> str:
    """The truth class of ``damaged_store`` (see the module docstring). ``damaged``: its ``(delivered,
    rebuilt, checks_out)`` when the caller has them already; ``torn``: the fault lies where a crash tears;
    ``traceless``: and leaves a store such a crash leaves whole (``KahaSites.traceless``)."""
    if damaged is None:
        rb = rebuilt(damaged_store)
        damaged = (delivered(damaged_store, rb), rb, _checks_out(damaged_store))
    dd, dr, checks_out = damaged
    if _consumed(dd) == _consumed(pristine_delivered):
        return SAME if dr == pristine_rebuilt else LATENT
    if torn:
        return UNPROVEN if traceless else TORN
    if checks_out and _ids(dd) == _ids(pristine_delivered):
        return UNDETECTABLE
    return LOSS


def _checks_out(store: Path) -> bool:
    from amqtool.engines.kahadb.load import load_store
    from amqtool.store.layout import detect

    return all(not d.damage() for d in load_store(detect(Path(store)), reconcile=False))


# -- one campaign ------------------------------------------------------------------------------------------------

@dataclass
class KahaOutcome:
    store: str
    seed: int
    fault: Fault
    truth: str
    verdict: str
    codes: tuple = ()
    # the pristine store is already CRITICAL: the broker loses messages on it as it is (a restart after an ack
    # compaction: replay_walk's jump), so damage that changes nothing, or only what a crash would, leaves it
    # CRITICAL, rightly
    already: bool = False

    @property
    def ok(self) -> bool:
        if self.already and self.truth in (SAME, LATENT, TORN) and self.verdict == "CRITICAL":
            return True
        return expected(self.truth, self.verdict)


def expected(truth: str, verdict: str) -> bool:
    """The rule: loss CRITICAL, torn and latent WARNING, same not CRITICAL (nor UNKNOWN), undetectable any."""
    if truth == LOSS:
        return verdict == "CRITICAL"
    if truth in (TORN, LATENT):
        return verdict == "WARNING"
    if truth == UNPROVEN:
        return verdict in ("OK", "WARNING", "CRITICAL")
    if truth == SAME:
        return verdict in ("OK", "WARNING")
    return True


def judge(root: Path) -> tuple[str, tuple, dict, bool, dict]:
    """verify's verdict and codes for the store at ``root`` (its engine: load, reconcile, judge_results, as
    ``verify_store``), with the rebuilt state and whether every batch checks out, from the same load."""
    from amqtool.engines.kahadb.load import load_store, reconcile_results
    from amqtool.engines.kahadb.verify import judge_results
    from amqtool.errors import AmqtoolError, overall_verdict
    from amqtool.store.layout import detect

    try:
        store = detect(root)
        results = load_store(store, reconcile=False)
    except AmqtoolError as err:
        return "UNKNOWN", (type(err).__name__,), {}, False, {}
    rb = _rebuilt_of(results)
    checks_out = all(not d.damage() for d in results)
    reconcile_results(store, results)
    findings = judge_results(store, results)
    codes = tuple(sorted({f.code for f in findings if f.severity.value != "info"}))
    indexed = {d.directory: (d.indexed, d.indexed_error) for d in results if d.index and d.index.present}
    return overall_verdict(findings).name, codes, rb, checks_out, indexed


class KahaCampaign:
    """One pristine store copied once into a scratch directory, then damaged and restored fault by fault."""

    def __init__(self, name: str, source: Path, scratch: Path):
        import shutil

        self.name = name
        self.root = Path(scratch) / name
        shutil.copytree(source, self.root)
        for p in self.root.rglob("*"):
            os.chmod(p, 0o755 if p.is_dir() else 0o644)
        for lock in self.root.rglob("lock"):
            lock.unlink()
        self.sites = KahaSites.read(self.root)
        self._seen: dict = {}
        _Files.reset()
        self.pristine_rebuilt = rebuilt(self.root)
        self.pristine_delivered = delivered(self.root, self.pristine_rebuilt)
        _Files.reset()
        self.already = judge(self.root)[0] == "CRITICAL"
        _Files.reset()

    def run_one(self, seed: int) -> KahaOutcome:
        return self.run_fault(self.sites.draw(random.Random(seed)), seed)

    def run_fault(self, fault: Fault, seed: int = -1) -> KahaOutcome:
        """The outcome of one given fault (``seed``: the one that drew it, -1 for a fault built by hand)."""
        known = self._seen.get(fault)  # a fault drawn again damages the store to the same bytes (runner.py)
        if known is not None:
            return KahaOutcome(self.name, seed, fault, *known, already=self.already)
        undo = fault.apply(self.root)
        _Files.reset()
        try:
            verdict, codes, rb, checks_out, indexed = judge(self.root)
            try:
                dd = delivered(self.root, rb, indexed)
            except Exception as err:  # noqa: BLE001 - nothing recognisable as a store: the broker has nothing
                dd = {"unreadable": str(err)}
        finally:
            undo()
            _Files.reset()
        # the index has no checksum, but what it changes is evidence against the journal: only journal bytes
        # inside batches that still check out can change a message unnoticed
        checks_out = checks_out and fault.kind in ("flip", "zero") and fault.path.rsplit("/", 1)[-1].startswith("db-")
        truth = classify(self.pristine_delivered, self.pristine_rebuilt, self.root,
                         torn=self.sites.torn(fault), damaged=(dd, rb, checks_out),
                         traceless=self.sites.traceless(fault))
        self._seen[fault] = (truth, verdict, codes)
        return KahaOutcome(self.name, seed, fault, truth, verdict, codes, already=self.already)


def confusion(outcomes: list) -> str:
    """Truth by verdict, then every miss with its reproducing seed (:func:`tests.faults.model.confusion`)."""
    from tests.faults.model import confusion as table

    return table(outcomes, TRUTHS, UNDETECTABLE)
