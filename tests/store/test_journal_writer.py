"""JournalWriter: byte-identical to real Artemis on the oracle scenarios, loads back to what was written,
numberOfRecords semantics across files, naming and sizes, reopening where Artemis would append."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from amqtool import native
from amqtool.engines.artemis.load import load_journal
from amqtool.errors import UsageError
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
    Record,
    decode_header,
    record_from_tuple,
)
from amqtool.store import atomic
from amqtool.store.journal_files import open_journal
from amqtool.store.journal_writer import JournalWriter, fix_file_size, name_number
from amqtool.store.layout import BINDINGS, MESSAGES, JournalDir

ORACLE = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "artemis" / "oracle"
needs_oracle = pytest.mark.skipif(not ORACLE.is_dir(), reason="oracle fixtures not present")


def _records(directory: Path, spec) -> list[tuple[str, Record]]:
    """(file name, record) for every accepted record, files in header-fileID order."""
    out = []
    with open_journal(JournalDir(spec, directory)) as oj:
        for i, f in enumerate(oj.files):
            data = oj.read_file(i)
            recs, _ = native.scan_records(data, f.tag, f.version, True, 16)
            out += [(f.name, record_from_tuple(data, r, f.version)) for r in recs]
    return out


def _load(directory: Path, spec=MESSAGES):
    oj = open_journal(JournalDir(spec, directory))
    return load_journal(oj)


def _live(result) -> list[tuple]:
    return [(r.id, r.user_record_type, r.is_update, r.compact_count, result.body(r)) for r in result.live]


def _replay(scenario: str, out: Path) -> dict:
    """Perform a scenario's recorded operations with the writer; bodies come from the fixture's records
    (the manifest keeps only hashes of long payloads)."""
    m = json.loads((ORACLE / scenario / "manifest.json").read_text())
    spec = BINDINGS if m["settings"]["filePrefix"] == BINDINGS.prefix else MESSAGES
    bodies = iter(r for _, r in _records(ORACLE / scenario / "journal", spec))
    w = JournalWriter.create(out, spec, file_size=m["settings"]["fileSize"], min_files=m["settings"]["minFiles"])
    with w:
        for op in m["operations"]:
            o = op["op"]
            if o in ("start+load", "stop", "corrupt"):
                continue
            r = next(bodies)
            if "sha256" in op:
                assert hashlib.sha256(r.body).hexdigest() == op["sha256"]
            if o == "add":
                w.append_add(op["id"], op["type"], r.body)
            elif o == "update":
                w.append_update(op["id"], op["type"], r.body)
            elif o == "addEvent":
                w.append_event(op["id"], op["type"], r.body)
            elif o == "delete":
                w.append_delete(op["id"])
            elif o == "addTx":
                w.append_add_tx(op["txId"], op["id"], op["type"], r.body)
            elif o == "updateTx":
                w.append_update_tx(op["txId"], op["id"], op["type"], r.body)
            elif o == "deleteTx":
                w.append_delete_tx(op["txId"], op["id"], r.body)
            elif o == "prepare":
                w.append_prepare(op["txId"], bytes.fromhex(op["extraDataHex"]))
            elif o == "commit":
                w.append_commit(op["txId"])
            elif o == "rollback":
                w.append_rollback(op["txId"])
            else:  # pragma: no cover
                raise AssertionError(o)
    return m


@needs_oracle
@pytest.mark.parametrize("scenario", ["01_simple_adds", "02_add_update_delete", "03_transactions", "06_bindings"])
def test_replay_is_byte_identical_to_artemis(tmp_path, scenario):
    out = tmp_path / "journal"
    m = _replay(scenario, out)
    expected = {f["name"]: f["sha256"] for f in m["filesOnDisk"]}
    assert sorted(os.listdir(out)) == sorted(expected)  # same files, no .tmp left behind
    for name, digest in expected.items():
        assert hashlib.sha256((out / name).read_bytes()).hexdigest() == digest, name


@needs_oracle
def test_replay_loads_to_the_oracle_live_state(tmp_path):
    out = tmp_path / "journal"
    m = _replay("03_transactions", out)
    res = _load(out)
    exp = m["expectedAfterLoad"]
    got = [{"id": r.id, "type": r.user_record_type, "isUpdate": r.is_update, "compactCount": r.compact_count,
            "len": r.body_len, "sha256": res.body_sha256(r)} for r in res.live]
    assert got == exp["live"]
    assert [t.tx_id for t in res.prepared] == [p["txId"] for p in exp["prepared"]]
    assert [t.tx_id for t in res.failed] == [p["txId"] for p in exp["failedTransactions"]]
    assert res.max_id == exp["loadInfo"]["maxID"]


def test_empty_journal_is_created_as_artemis_first_start(tmp_path):
    d = tmp_path / "bindings"
    JournalWriter.create(d, BINDINGS).close()
    assert sorted(os.listdir(d)) == ["activemq-bindings-1.bindings", "activemq-bindings-2.bindings"]
    for i in (1, 2):
        data = (d / f"activemq-bindings-{i}.bindings").read_bytes()
        assert len(data) == 1048576
        h = decode_header(data)
        assert (h.version, h.user_version, h.file_id) == (2, 0, i)
        assert data[16:].count(0) == len(data) - 16


def test_min_files_one_still_preopens_a_second_file(tmp_path):
    JournalWriter.create(tmp_path / "j", MESSAGES, file_size=4096, min_files=1).close()
    assert sorted(os.listdir(tmp_path / "j")) == ["activemq-data-1.amq", "activemq-data-2.amq"]


def test_min_files_five(tmp_path):
    JournalWriter.create(tmp_path / "j", MESSAGES, file_size=4096, min_files=5).close()
    assert len(os.listdir(tmp_path / "j")) == 5


def test_framing_equals_the_record_codec(tmp_path):
    d = tmp_path / "j"
    with JournalWriter.create(d, MESSAGES, file_size=65536) as w:
        w.append_add(1, 45, b"abc")
        w.append_update(1, 32, b"\x00" * 8, compact_count=3)
        w.append_event(2, 49, b"ev")
        w.append_add_tx(7, 3, 45, b"tx-body")
        w.append_update_tx(7, 1, 33, b"q" * 8)
        w.append_delete_tx(7, 2, b"why")
        w.append_prepare(7, b"xid-bytes")
        w.append_commit(7)
        w.append_add_tx(8, 4, 45, b"")
        w.append_rollback(8)
        w.append_delete(1)
    data = (d / "activemq-data-1.amq").read_bytes()
    expected = [
        Record(ADD, 1, record_id=1, user_record_type=45, body=b"abc"),
        Record(UPDATE, 1, compact_count=3, record_id=1, user_record_type=32, body=b"\x00" * 8),
        Record(EVENT, 1, record_id=2, user_record_type=49, body=b"ev"),
        Record(ADD_TX, 1, tx_id=7, record_id=3, user_record_type=45, body=b"tx-body"),
        Record(UPDATE_TX, 1, tx_id=7, record_id=1, user_record_type=33, body=b"q" * 8),
        Record(DELETE_TX, 1, tx_id=7, record_id=2, body=b"why"),
        Record(PREPARE, 1, tx_id=7, number_of_records=3, extra=b"xid-bytes"),
        Record(COMMIT, 1, tx_id=7, number_of_records=3),
        Record(ADD_TX, 1, tx_id=8, record_id=4, user_record_type=45),
        Record(ROLLBACK, 1, tx_id=8),
        Record(DELETE, 1, record_id=1),
    ]
    blob = b"".join(r.encode() for r in expected)
    assert data[16:16 + len(blob)] == blob
    assert data[16 + len(blob):].count(0) == len(data) - 16 - len(blob)
    assert [r for _, r in _records(d, MESSAGES)] == expected


def test_rollover_never_splits_a_record(tmp_path):
    d = tmp_path / "j"
    size = 4096
    with JournalWriter.create(d, MESSAGES, file_size=size) as w:
        for i in range(1, 41):
            w.append_add(i, 45, bytes([i]) * 300)
    recs = _records(d, MESSAGES)
    assert [r.record_id for _, r in recs] == list(range(1, 41))
    # 323-byte records, 16-byte header: 12 per file
    per_file = {}
    for name, _ in recs:
        per_file[name] = per_file.get(name, 0) + 1
    assert per_file == {"activemq-data-1.amq": 12, "activemq-data-2.amq": 12, "activemq-data-3.amq": 12,
                        "activemq-data-4.amq": 4}
    # file 5 is the pre-opened next file; every file is full-size, no .tmp left
    assert sorted(os.listdir(d)) == [f"activemq-data-{i}.amq" for i in range(1, 6)]
    assert all(os.path.getsize(d / n) == size for n in os.listdir(d))
    for name, r in recs:
        assert r.tag == name_number(name, MESSAGES.prefix)


def test_record_exactly_filling_the_file_and_too_large(tmp_path):
    d = tmp_path / "j"
    with JournalWriter.create(d, MESSAGES, file_size=1024) as w:
        w.append_add(1, 45, b"x" * (1024 - 16 - 23))  # exactly the room after the header
        assert w.position == ("activemq-data-1.amq", 1024)
        w.append_add(2, 45, b"y")
        assert w.position == ("activemq-data-2.amq", 16 + 24)
        with pytest.raises(UsageError):
            w.append_add(3, 45, b"z" * (1024 - 16 - 23 + 1))
    assert [r.record_id for _, r in _records(d, MESSAGES)] == [1, 2]


def test_number_of_records_counts_only_the_commit_file(tmp_path):
    d = tmp_path / "j"
    with JournalWriter.create(d, MESSAGES, file_size=1024) as w:
        for i in range(10):  # 131-byte ADD_TX records: 7 fit in file 1
            w.append_add_tx(50, 100 + i, 45, b"b" * 100)
        w.append_commit(50)  # lands in file 2, after 3 records of tx 50 there
        w.append_add_tx(60, 200, 45, b"c" * 100)
        w.append_add_tx(61, 300, 45, b"d" * 100)
        while w.position[0] == "activemq-data-2.amq":
            w.append_add(999 + w.stats.records, 45, b"f" * 100)
        w.append_commit(60)  # tx 60's only record is in file 2: numberOfRecords 0
        w.append_prepare(61)  # same rule for PREPARE
        w.append_commit(61)  # after a PREPARE in the same file: same counter
    recs = {(r.type, r.tx_id): r for _, r in _records(d, MESSAGES)}
    assert recs[(COMMIT, 50)].number_of_records == 3
    assert recs[(COMMIT, 60)].number_of_records == 0
    assert recs[(PREPARE, 61)].number_of_records == 0
    assert recs[(COMMIT, 61)].number_of_records == 0
    res = _load(d)
    live_ids = {r.id for r in res.live}
    assert {100 + i for i in range(10)} <= live_ids and 200 in live_ids and 300 in live_ids
    assert res.failed == [] and res.prepared == []
    assert res.anomaly_counts == {}


def test_prepare_then_commit_in_one_file_counts_records_before_the_prepare(tmp_path):
    d = tmp_path / "j"
    with JournalWriter.create(d, MESSAGES, file_size=65536) as w:
        w.append_add_tx(5, 1, 45, b"a")
        w.append_delete_tx(5, 1)
        w.append_prepare(5, b"x")
        w.append_commit(5)
    recs = [r for _, r in _records(d, MESSAGES)]
    assert [r.number_of_records for r in recs if r.type in (PREPARE, COMMIT)] == [2, 2]


def test_commit_of_unknown_transaction_is_refused(tmp_path):
    with JournalWriter.create(tmp_path / "j", MESSAGES, file_size=4096) as w:
        with pytest.raises(UsageError):
            w.append_commit(123)
        with pytest.raises(UsageError):
            w.append_rollback(123)


def test_written_state_loads_back(tmp_path):
    d = tmp_path / "j"
    with JournalWriter.create(d, MESSAGES, file_size=8192, buffer_size=1000) as w:
        for i in range(1, 101):
            w.append_add(i, 45, os.urandom(i * 3))
            w.append_update(i, 32, i.to_bytes(8, "big"))
        for i in range(1, 101, 2):
            w.append_delete(i)
        w.append_add_tx(1000, 500, 45, b"committed")
        w.append_commit(1000)
        w.append_add_tx(1001, 501, 45, b"rolled back")
        w.append_rollback(1001)
        w.append_add_tx(1002, 502, 45, b"prepared")
        w.append_prepare(1002, b"XID")
        w.append_add_tx(1003, 503, 45, b"never completed")
    res = _load(d)
    exp_ids = [i for i in range(2, 101, 2) for _ in (0, 1)] + [500]
    assert [r.id for r in res.live] == exp_ids
    assert [t.tx_id for t in res.prepared] == [1002]
    assert res.prepared[0].extra == b"XID"
    assert [t.tx_id for t in res.failed] == [1003]
    assert res.max_id == 503


def test_sync_append_fsyncs_every_record(tmp_path):
    with atomic.record_checkpoints() as points:
        with JournalWriter.create(tmp_path / "j", MESSAGES, file_size=4096, sync="append") as w:
            before = sum(1 for p, _ in points if p == "fsync")
            for i in range(5):
                w.append_add(i, 45, b"x")
            after = sum(1 for p, _ in points if p == "fsync")
    assert after - before == 5


def test_reopen_appends_where_artemis_would(tmp_path):
    d = tmp_path / "j"
    with JournalWriter.create(d, MESSAGES, file_size=2048) as w:
        for i in range(1, 21):
            w.append_add(i, 45, b"a" * 100)  # 123 bytes: 16 per file
        w.append_add_tx(77, 100, 45, b"prep")
        w.append_prepare(77, b"X")
        w.append_add_tx(78, 101, 45, b"incomplete")
        last_name, last_pos = w.position
    assert sorted(os.listdir(d)) == ["activemq-data-1.amq", "activemq-data-2.amq", "activemq-data-3.amq"]

    w = JournalWriter.open(d, MESSAGES, file_size=2048)
    # current = last data file at its last data position, plus the incomplete tx's ROLLBACK
    assert w.position == (last_name, last_pos + 18)
    # the empty pre-opened file 3 was re-initialised with the next fileID (max(ids, names) + 1 = 4)
    assert w.opened_file.name == "activemq-data-3.amq" and w.opened_file.file_id == 4
    assert w.open_transactions == {77: True}
    with w:
        w.append_commit(77)
        w.append_add(21, 45, b"after reopen")
    recs = [r for _, r in _records(d, MESSAGES)]
    assert [(r.type, r.tx_id) for r in recs[-3:]] == [(ROLLBACK, 78), (COMMIT, 77), (ADD, None)]
    assert recs[-2].number_of_records == 1  # tx 77's record is in the commit's file
    with open(d / "activemq-data-3.amq", "rb") as fh:
        assert decode_header(fh.read(16)).file_id == 4
    res = _load(d)
    assert [r.id for r in res.live] == list(range(1, 21)) + [100, 21]
    assert res.prepared == [] and res.failed == []


@needs_oracle
def test_reopen_a_compacted_journal_then_append(tmp_path):
    d = tmp_path / "journal"
    shutil.copytree(ORACLE / "04b_after_compact" / "journal", d)
    m = json.loads((ORACLE / "04b_after_compact" / "manifest.json").read_text())
    before = _load(d)
    before_live = _live(before)
    prepared = [t.tx_id for t in before.prepared]
    with JournalWriter.open(d, MESSAGES, file_size=m["settings"]["fileSize"]) as w:
        assert w.position[0] == m["expectedAfterLoad"]["currentFileAfterLoad"]
        # nextFileID = max(header ids, name numbers) = 10; empty files re-initialised in fileID order
        assert sorted(f.file_id for f in w.files()) == [1] + list(range(11, 17))
        w.append_add(10_000, 101, b"new record")
        for tx in prepared:
            w.append_rollback(tx)
    after = _load(d)
    assert _live(after) == before_live + [(10_000, 101, False, 0, b"new record")]
    assert after.prepared == []
    assert not [n for n in os.listdir(d) if n.endswith(".tmp")]


def test_create_refuses_an_existing_journal(tmp_path):
    d = tmp_path / "j"
    JournalWriter.create(d, MESSAGES, file_size=4096).close()
    before = {n: (d / n).read_bytes() for n in os.listdir(d)}
    with pytest.raises(UsageError):
        JournalWriter.create(d, MESSAGES, file_size=4096)
    assert {n: (d / n).read_bytes() for n in os.listdir(d)} == before


def test_crash_while_creating_a_file_leaves_only_a_tmp_the_loader_ignores(tmp_path):
    d = tmp_path / "j"
    w = JournalWriter.create(d, MESSAGES, file_size=1024, sync="close")
    w.append_add(1, 45, b"x" * 500)
    with atomic.fault("rename", 1):  # the rename of the next pre-opened file
        with pytest.raises(atomic.InjectedFault):
            w.append_add(2, 45, b"y" * 600)
    w.abort()
    names = sorted(os.listdir(d))
    assert "activemq-data-3.amq.tmp" in names and "activemq-data-3.amq" not in names
    res = _load(d)
    assert [r.id for r in res.live] == [1]


def test_alignment_reproduces_aio_block_start_and_padding(tmp_path):
    assert fix_file_size(10 * 1024 * 1024 + 100, 4096) == 10 * 1024 * 1024
    assert fix_file_size(10 * 1024 * 1024 + 3000, 4096) == 10 * 1024 * 1024 + 4096
    assert fix_file_size(100, 4096) == 4096
    d = tmp_path / "j"
    with JournalWriter.create(d, MESSAGES, file_size=65536, alignment=512) as w:
        w.append_add(1, 45, b"a")
        w.flush()
        w.append_add(2, 45, b"b")
    recs = _records(d, MESSAGES)
    data = (d / "activemq-data-1.amq").read_bytes()
    assert data.index(bytes([ADD])) == 512
    assert [r.record_id for _, r in recs] == [1, 2]
    assert data[1024] == ADD  # the second record starts at the next block after the flush


def test_name_number():
    assert name_number("activemq-data-12.amq", "activemq-data") == 12
    assert name_number("activemq-data-12.amq.cmp", "activemq-data") == 12
    assert name_number("odd-name-7.amq", "activemq-data") == 7
    assert name_number("garbage.amq", "activemq-data") is None


@pytest.mark.parametrize("sync", ["none", "append"])
def test_append_records_writes_what_append_add_and_append_update_write(tmp_path, sync):
    """The bulk path gives the same files (records, rollovers into new files, buffer flushes) and stats as the
    one-by-one calls; a record too large for a file is refused the same way."""
    import random

    rng = random.Random(5)
    recs = [(ADD if i % 3 == 0 else UPDATE, 1000 + i // 3, 45 if i % 3 == 0 else 32, rng.randbytes(rng.randint(0, 900)))
            for i in range(600)]
    out = {}
    for mode in ("one", "bulk"):
        d = tmp_path / mode
        w = JournalWriter.create(d, MESSAGES, file_size=64 * 1024, min_files=2, sync=sync, buffer_size=3000)
        if mode == "one":
            for rtype, rid, ut, body in recs:
                (w.append_add if rtype == ADD else w.append_update)(rid, ut, body)
        else:
            w.append_records(recs[:250])
            w.append_records(recs[250:])
        with pytest.raises(UsageError, match="too large"):
            (w.append_add if mode == "one" else lambda *a: w.append_records([(ADD, *a)]))(9, 45, bytes(70 * 1024))
        stats = (w.stats.records, w.stats.bytes, dict(w.stats.by_type), w.stats.rollovers)
        w.close()
        out[mode] = ({p.name: p.read_bytes() for p in sorted(d.iterdir())}, stats)
    assert out["one"] == out["bulk"]
    assert len(out["bulk"][0]) > 4 and out["bulk"][1][3] >= 3  # several rollovers happened


def test_allocated_files_hold_the_bytes_of_zero_filled_ones(tmp_path):
    """write_fill=False (posix_fallocate, create --from's aside tree) and writeback give the files the
    default writer gives: same names, sizes and bytes, the unwritten tails zeros."""
    out = {}
    for fill in (True, False):
        d = tmp_path / str(fill)
        w = JournalWriter.create(d, MESSAGES, file_size=64 * 1024, min_files=3, sync="none", write_fill=fill,
                                 writeback=not fill)
        w.append_records([(ADD, i, 45, bytes([i % 251]) * 5000) for i in range(40)])
        w.close()
        out[fill] = {p.name: p.read_bytes() for p in sorted(d.iterdir())}
    assert out[True] == out[False] and len(out[False]) >= 4
    assert all(len(b) == 64 * 1024 for b in out[False].values())
