"""The streaming source's reader (:mod:`amqtool.engines.export.stream`), driven as Spark drives it
(initialOffset, latestOffset, partitions, read) but in process, against stores appended by amqtool's own
JournalWriter between batches: exact references per batch, nothing twice, nothing missed; a compaction
(``amqtool compact``'s engine), a reused file, a torn tail; the store never written. The same source under a
real Spark streaming query: tests/engines/test_stream_spark.py."""
from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pyarrow as pa
import pytest

from amqtool.engines.export.stream import AmqtoolStreamReader, Offset, stream_settings
from amqtool.formats.artemis.userrecords import AckRefRecord, AddRefRecord
from amqtool.store.journal_writer import JournalWriter
from amqtool.store.layout import MESSAGES
from tests.engines.artemis.compact_helpers import compact
from tests.engines.export_store import EV_A, EV_B, ORDERS, build_store, core
from tests.support import tree_hashes

FILE_SIZE = 64 * 1024
FIRST = ([(101, "orders"), (102, "events.a"), (102, "events.b"), (103, "orders"), (104, "orders"),
          (108, "UndefinedQueue_99"), (109, "orders"), (110, "orders"), (150, "orders")]
         + [(200 + i, q) for i in range(40) for q in ("events.a", "events.b")])


class Stream:
    """A stream over ``data`` as Spark runs one: each :meth:`batch` is latestOffset, partitions, read; the
    offsets go through JSON as Spark's offset log keeps them."""

    def __init__(self, data: Path, **options):
        self.reader = AmqtoolStreamReader(stream_settings({"path": str(data), **options}))
        self.offset = json.loads(json.dumps(self.reader.initialOffset()))
        self.seen: list[tuple[int, str]] = []

    def batch(self) -> list[tuple[int, str]]:
        end = json.loads(json.dumps(self.reader.latestOffset(self.offset, None)))
        rows = []
        for part in self.reader.partitions(self.offset, end):
            for b in self.reader.read(part):
                t = pa.Table.from_batches([b])
                rows += list(zip(t.column("message_id").to_pylist(), t.column("queue").to_pylist()))
        self.offset = end
        self.seen += rows
        return rows


def _ref(q: int) -> bytes:
    return AddRefRecord(queue_id=q).encode()


def _send(w: JournalWriter, mid: int, *queues: int, tx: int | None = None) -> None:
    body = core(mid, "orders", b"m%d" % mid)
    if tx is None:
        w.append_add(mid, 45, body)
        for q in queues:
            w.append_update(mid, 32, _ref(q))
    else:
        w.append_add_tx(tx, mid, 45, body)
        for q in queues:
            w.append_update_tx(tx, mid, 32, _ref(q))


def _writer(data: Path) -> JournalWriter:
    return JournalWriter.open(data / "journal", MESSAGES, file_size=FILE_SIZE, sync="none")


@pytest.fixture
def store(tmp_path) -> Path:
    return build_store(tmp_path)


def test_batches_hold_the_references_committed_since_the_offset(store):
    s = Stream(store)
    assert s.batch() == FIRST  # journal (commit) order; the undecodable type-31 message gives no row
    assert s.offset["highMessageId"] == 239 and s.offset["highQueues"] == [EV_A, EV_B]
    # the prepared and the incomplete transaction, carried in the offset for the next batch
    assert Offset.from_json(s.offset).pending == [(106, EV_A), (107, ORDERS)]
    assert [t[0] for t in s.offset["open"]] == [502, 503]
    assert s.batch() == []  # nothing new: no batch
    with _writer(store) as w:  # opening rolls the incomplete transaction 503 back, as the broker's load does
        _send(w, 300, ORDERS)
        _send(w, 301, EV_A, EV_B, tx=900)
        _send(w, 302, ORDERS)
        w.append_update(101, 33, AckRefRecord(queue_id=ORDERS).encode())  # acks are not emitted
    assert s.batch() == [(300, "orders"), (302, "orders")]  # tx 900 is not committed yet
    with _writer(store) as w:  # (tx 900 was rolled back at this open: incomplete, as a broker restart does)
        _send(w, 303, EV_A, tx=901)
        w.append_commit(901)
        w.append_commit(502)  # the prepared (XA) transaction commits: 106 on events.a, at its COMMIT
    assert s.batch() == [(303, "events.a"), (106, "events.a")]
    assert s.batch() == []
    assert len(s.seen) == len(set(s.seen))


def test_reads_never_write(store):
    s = Stream(store)
    before = tree_hashes(store)
    s.batch()
    s.batch()
    Stream(store, startingOffsets="latest").batch()
    assert tree_hashes(store) == before


def test_latest_starts_at_the_tail(store):
    s = Stream(store, startingOffsets="latest")
    assert s.batch() == []
    with _writer(store) as w:
        _send(w, 300, EV_B)
    assert s.batch() == [(300, "events.b")]


def test_a_batch_read_again_gives_the_same_rows(store):
    """A replayed batch (Spark re-running a failed one from its offset log) reads the same references."""
    r = AmqtoolStreamReader(stream_settings({"path": str(store)}))
    start = r.initialOffset()
    end = r.latestOffset(start, None)
    with _writer(store) as w:  # the broker goes on writing after the batch was planned
        _send(w, 300, ORDERS)

    def rows():
        return [(m, q) for p in r.partitions(start, end) for b in r.read(p)
                for m, q in zip(b.column(0).to_pylist(), b.column(1).to_pylist())]

    assert rows() == FIRST
    assert rows() == FIRST


def test_torn_tail_is_not_consumed_until_whole(store):
    s = Stream(store)
    s.batch()
    journal = store / "journal"
    with _writer(store) as w:
        _send(w, 300, ORDERS)
        name, end = w.position
    path = journal / name
    whole = path.read_bytes()
    # the broker is still writing: the last record (300's ADD_REF, 26+8 bytes) is half on disk
    torn = bytearray(whole)
    torn[end - 17:end] = bytes(17)
    path.write_bytes(bytes(torn))
    assert s.batch() == []  # 300's message record is whole, its reference is not: nothing committed yet
    assert s.offset["position"] < end
    path.write_bytes(whole)
    assert s.batch() == [(300, "orders")]


def test_compaction_between_batches_emits_nothing_twice_and_misses_nothing(store):
    s = Stream(store)
    assert s.batch() == FIRST
    files_before = {f[1]: f[0] for f in s.offset["files"]}
    with _writer(store) as w:
        _send(w, 300, ORDERS)
        _send(w, 301, EV_A, EV_B)
        w.append_commit(502)  # 106 on events.a
        w.append_update(102, 33, AckRefRecord(queue_id=EV_B).encode())
    compact(store / "journal")
    with _writer(store) as w:
        _send(w, 302, ORDERS)
    old = Offset.from_json(s.offset)
    assert sorted(s.batch()) == sorted([(300, "orders"), (301, "events.a"), (301, "events.b"),
                                        (106, "events.a"), (302, "orders")])
    # the compacted files took the lowest fileIDs again under other names: the old coordinates are gone
    assert old.moved(_files(store))
    assert {n: i for i, n, _ in Offset.from_json(s.offset).files} != files_before
    assert s.batch() == []
    with _writer(store) as w:  # after the restart the stream is positional again
        _send(w, 304, EV_B)
    assert s.batch() == [(304, "events.b")]
    assert len(s.seen) == len(set(s.seen))


def test_compaction_after_a_batch_was_planned(store):
    """The batch's end offset was taken before a compaction and the batch is read after it (or read again
    after a failure): both offsets' coordinates are gone, and the batch is the references between them by
    message id; the next batch takes the rest, nothing twice."""
    s = Stream(store)
    s.batch()
    with _writer(store) as w:
        _send(w, 300, ORDERS)
        _send(w, 301, EV_A, EV_B)
    r = s.reader
    end = json.loads(json.dumps(r.latestOffset(s.offset, None)))
    assert end["highMessageId"] == 301
    with _writer(store) as w:
        _send(w, 302, ORDERS)
    compact(store / "journal")
    parts = r.partitions(s.offset, end)
    rows = [(m, q) for p in parts for b in r.read(p) for m, q in zip(b.column(0).to_pylist(), b.column(1).to_pylist())]
    assert rows == [(300, "orders"), (301, "events.a"), (301, "events.b")]
    s.offset = end
    assert s.batch() == [(302, "orders")]


def test_a_commit_failing_the_count_check_is_never_emitted(store):
    """JournalImpl.load discards a transaction whose COMMIT's numberOfRecords does not match its records in
    the COMMIT's file ("tx missing elements"): its references are not committed."""
    from amqtool.formats.artemis.records import COMMIT, Record, file_tag
    from amqtool.store.journal_files import open_journal
    from amqtool.store.layout import JournalDir

    s = Stream(store)
    s.batch()
    with _writer(store) as w:
        _send(w, 300, ORDERS, tx=910)  # two records in this file
        name, pos = w.position
    jd = JournalDir(MESSAGES, store / "journal")
    with open_journal(jd) as o:
        fid = next(f.file_id for f in o.files if f.name == name)
    bad = Record(type=COMMIT, tag=file_tag(fid), tx_id=910, number_of_records=3).encode()
    with open(store / "journal" / name, "r+b") as fh:
        fh.seek(pos)
        fh.write(bad)
    with _writer(store) as w:
        _send(w, 301, ORDERS)
    assert s.batch() == [(301, "orders")]


def test_compaction_misses_an_out_of_order_id_below_the_high_water(store, tmp_path):
    """The documented limit of the restart after a compaction: a reference appended after the offset whose
    message id is below the offset's high-water id (another producer's message, stored late) is taken for
    one emitted before. Without the compaction the stream has it."""
    import shutil

    twin = tmp_path / "twin"
    shutil.copytree(store, twin)
    for data, compacted in ((store, True), (twin, False)):
        s = Stream(data)
        s.batch()
        with _writer(data) as w:
            _send(w, 230, ORDERS)  # id 230 < 239, the high water
            _send(w, 300, ORDERS)
        if compacted:
            compact(data / "journal")
        assert s.batch() == ([(300, "orders")] if compacted else [(230, "orders"), (300, "orders")])


def test_compaction_under_way_offers_no_batch(store):
    s = Stream(store)
    s.batch()
    with _writer(store) as w:
        _send(w, 300, ORDERS)
    cmp = store / "journal" / "activemq-data-9.amq.cmp"
    cmp.write_bytes(bytes(16))
    assert s.batch() == []
    cmp.unlink()
    tmp = store / "journal" / "activemq-data-9.amq.tmp"  # a new file being created changes no other
    tmp.write_bytes(bytes(16))
    assert s.batch() == [(300, "orders")]


def test_reused_file_is_not_read_twice(tmp_path):
    """A file the broker frees and reinitialises (a new, higher fileID in its header, the old records left
    behind, JournalFilesRepository.reinitializeFile) is a new file after the offset: its old records are not
    read again, its new ones are read once."""
    data = build_store(tmp_path)
    s = Stream(data)
    s.batch()
    journal = data / "journal"
    # the first file's records all dead: ack and delete what it holds (its messages 101..111, 150, 200..)
    from amqtool.store.journal_files import open_journal
    from amqtool.store.layout import JournalDir

    with open_journal(JournalDir(MESSAGES, journal)) as o:
        first = o.files[0]
    with _writer(data) as w:
        for mid in (101, 102, 103, 104, 108, 109, 110, 111, 150) + tuple(range(200, 240)) + (106,):
            w.append_delete(mid)
        w.append_rollback(502)
    # the reclaimer frees it: new header fileID above every other (the body stays)
    ids = [f[0] for f in Offset.from_json(s.reader.latestOffset(s.offset, None)).files]
    new_id = max(ids + [int(p.name.split("-")[-1].split(".")[0]) for p in journal.glob("*.amq")]) + 1
    with open(first.path, "r+b") as fh:
        fh.write(struct.pack(">iiq", 2, 0, new_id))
    assert s.batch() == []
    # the writer rolls over into free files as the broker does; fill until the reused file is written to
    with _writer(data) as w:
        mid = 400
        while True:
            _send(w, mid, ORDERS)
            mid += 1
            assert mid < 2000, "the writer never reused the freed file"
            if w.position[0] == first.path.name:
                break
    got = s.batch()
    assert got == [(m, "orders") for m in range(400, mid)]
    assert s.batch() == []
    assert len(s.seen) == len(set(s.seen))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("alignment", [1, 512])
def test_random_traffic_batch_by_batch(tmp_path, seed, alignment):
    """A writer left open between batches (transactions span them, files roll over, AIO-style padding with
    ``alignment``), random sends, transactions committed, prepared or rolled back, acks and deletes: every
    batch holds exactly the references the traffic committed since the previous one, in commit order."""
    import random

    rng = random.Random(seed)
    data = build_store(tmp_path)
    s = Stream(data)
    assert s.batch() == FIRST
    names = {ORDERS: "orders", EV_A: "events.a", EV_B: "events.b"}
    w = JournalWriter.open(data / "journal", MESSAGES, file_size=FILE_SIZE, sync="none", alignment=alignment)
    committed: list[tuple[int, str]] = []
    open_tx: dict[int, list] = {}
    sent: list[int] = []
    mid, tx_id = 1000, 5000
    try:
        for _step in range(rng.randrange(40, 80)):
            op = rng.random()
            if op < 0.35 or not open_tx and op < 0.6:
                queues = rng.sample(sorted(names), rng.randrange(1, 4))
                if rng.random() < 0.3:
                    tx_id += 1
                    open_tx[tx_id] = []
                    t = tx_id
                else:
                    t = rng.choice(sorted(open_tx)) if open_tx and rng.random() < 0.3 else None
                w_body = core(mid, "orders", rng.randbytes(rng.randrange(10, 4000)))
                if t is None:
                    w.append_add(mid, 45, w_body)
                    if rng.random() < 0.2:  # a batch between a message record and its references
                        w.flush()
                        assert s.batch() == committed
                        committed = []
                    for q in queues:
                        w.append_update(mid, 32, _ref(q))
                        committed.append((mid, names[q]))
                else:
                    w.append_add_tx(t, mid, 45, w_body)
                    for q in queues:
                        w.append_update_tx(t, mid, 32, _ref(q))
                        open_tx[t].append((mid, names[q]))
                sent.append(mid)
                mid += 1
            elif op < 0.6:
                t = rng.choice(sorted(open_tx))
                r = rng.random()
                if r < 0.6:
                    w.append_commit(t)
                    committed += open_tx.pop(t)
                elif r < 0.8:
                    w.append_rollback(t)
                    open_tx.pop(t)
                elif t not in w.open_transactions or not w.open_transactions[t]:
                    w.append_prepare(t, b"xid")
            elif op < 0.75 and sent:
                m = rng.choice(sent)
                w.append_update(m, 33, AckRefRecord(queue_id=ORDERS).encode())
            elif op < 0.8 and sent:
                w.append_delete(sent.pop(rng.randrange(len(sent))))
            else:
                w.flush()
                got = s.batch()
                assert got == committed, f"step {_step}"
                committed = []
        w.flush()
        assert s.batch() == committed
    finally:
        w.close()
    assert len(s.seen) == len(set(s.seen))


def test_options_are_checked(store):
    from amqtool.errors import UsageError

    with pytest.raises(UsageError):
        stream_settings({"path": str(store), "startingOffsets": "middle"})
    with pytest.raises(UsageError):
        stream_settings({"path": str(store), "table": "bindings"})
    with pytest.raises(UsageError):
        stream_settings({})
    with pytest.raises(UsageError):
        Offset.from_json({"position": 3})


def test_only_an_artemis_messages_journal_streams(tmp_path):
    from amqtool.errors import AmqtoolError, UsageError
    from tests.support import KAHADB

    kaha = next(d for d in sorted(KAHADB.iterdir()) if (d / "manifest.json").is_file())
    with pytest.raises(UsageError, match="kahadb"):
        AmqtoolStreamReader(stream_settings({"path": str(kaha)})).latestOffset(Offset().to_json())
    with pytest.raises(AmqtoolError, match="gone"):
        AmqtoolStreamReader(stream_settings({"path": str(tmp_path / "nothing")})).latestOffset(Offset().to_json())


def test_queue_and_safe_options(store):
    s = Stream(store, queue="events.*", safe="true")
    rows = s.batch()
    assert rows == [r for r in FIRST if r[1].startswith("events.")]


def _files(store: Path):
    from amqtool.store.journal_files import open_journal
    from amqtool.store.layout import JournalDir

    with open_journal(JournalDir(MESSAGES, store / "journal")) as o:
        return list(o.files)


def test_a_read_that_the_files_change_under_is_read_again(store, monkeypatch):
    """A file reused (new header fileID) while a read runs: the read is made again on the new listing; files
    that never stop changing fail the read with one line."""
    from amqtool.engines.export import stream
    from amqtool.errors import AmqtoolError
    from amqtool.store.layout import JournalDir

    monkeypatch.setattr(stream, "RETRY_SECONDS", 0)
    jd = JournalDir(MESSAGES, store / "journal")
    calls = []

    def use(opened):
        calls.append([f.file_id for f in opened.files])
        if len(calls) == 1:  # the broker reinitialises the last file under the read
            last = opened.files[-1]
            with open(last.path, "r+b") as fh:
                fh.write(struct.pack(">iiq", 2, 0, 77))
        return len(calls)

    assert stream.consistent(jd, use) == 2
    assert calls[1][-1] == 77 and calls[0][-1] != 77

    def always(opened):
        last = opened.files[-1]
        with open(last.path, "r+b") as fh:
            fh.write(struct.pack(">iiq", 2, 0, last.file_id + 1))

    with pytest.raises(AmqtoolError, match="kept changing"):
        stream.consistent(jd, always)


def _broker_written() -> dict[str, Path]:
    from tests.support import BROKER_STORES, ORACLE, ORACLE_SCENARIOS

    out = {f"oracle/{s}": ORACLE / s / "journal" for s in ORACLE_SCENARIOS}
    out.update({f"messages/{p.name}": p for p in BROKER_STORES})
    return out


@pytest.mark.parametrize("name", sorted(_broker_written()) + ["demo"])
def test_first_batch_of_a_broker_written_store_holds_its_export(name, tmp_path):
    """On journals written by the real Artemis journal code (and on a demo store): the first batch (earliest)
    holds every journal row the export gives for a committed reference, with the same message columns (the
    stream also holds references acknowledged since, which the export leaves out); the store is not
    written."""
    from amqtool.engines.artemis.demo import create_demo
    from amqtool.engines.export.local import LocalArtemisExport
    from amqtool.engines.export.model import ExportOptions
    from amqtool.engines.export.schema import MESSAGE_COLUMN_NAMES
    from amqtool.store.layout import detect

    if name == "demo":
        path = tmp_path / "demo"
        create_demo(path, 4 * 1024 * 1024, file_size=1024 * 1024, seed=5)
    else:
        path = _broker_written()[name]
    store = detect(path)
    if store.kind != "artemis" or store.messages is None:
        pytest.skip("no messages journal")
    before = tree_hashes(path)
    try:
        with LocalArtemisExport(store, ExportOptions(salvage=True)) as ex:
            ex.binding_rows()
            exported = [dict(zip(MESSAGE_COLUMN_NAMES, r)) for r in ex.rows()]
    except Exception as err:  # noqa: BLE001 - a store export refuses is not this test's subject
        pytest.skip(f"export refuses it: {err}")
    r = AmqtoolStreamReader(stream_settings({"path": str(path)}))
    start = r.initialOffset()
    end = r.latestOffset(start, None)
    streamed = {}
    for p in r.partitions(start, end):
        for b in r.read(p):
            for row in b.to_pylist():
                key = (row["message_id"], row["queue"])
                assert key not in streamed
                streamed[key] = row
    assert tree_hashes(path) == before
    level = ("address", "protocol", "durable", "priority", "timestamp", "expiration", "user_id", "type",
             "typed_properties", "body", "body_size", "body_sha256", "large", "properties", "annotations", "text",
             "queue_id", "routing_type")
    wanted = [e for e in exported if not e["paged"] and e["transaction_state"] == "committed"]
    assert wanted or not exported
    for e in wanted:
        got = streamed.get((e["message_id"], e["queue"]))
        assert got is not None, (e["message_id"], e["queue"])
        assert {k: got[k] for k in level} == {k: e[k] for k in level}


def test_a_file_artemis_would_refuse_fails_the_trigger(store):
    """A journal file the broker's load refuses (a header version it does not know) is an error naming the
    file, not a stream that silently stops."""
    from amqtool.errors import AmqtoolError

    s = Stream(store)
    s.batch()
    bad = store / "journal" / "activemq-data-99.amq"
    bad.write_bytes(struct.pack(">iiq", 7, 0, 99) + bytes(100))
    with pytest.raises(AmqtoolError, match="activemq-data-99.amq"):
        s.batch()
