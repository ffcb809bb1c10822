"""Issue 25: the damaged end of an Artemis journal file that is not the newest (``damaged-tail``), judged by what
the surviving records say of the ids the lost records carried (amqtool/engines/artemis/tails.py). Each test
damages a copy of the campaign's demo store, checks its premise against the truth of the broker-equal loaders
(tests/faults/artemis.py) and asserts verify's exit code, finding, offset and details."""
from __future__ import annotations

import shutil

import pytest

from amqtool.formats.artemis.records import scan_records_py
from tests.faults.artemis import delivered
from tests.faults.stores import campaign_demo, messages_files


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    root = campaign_demo(tmp_path_factory.mktemp("pristine") / "store")
    return root, delivered(root)


@pytest.fixture
def store(pristine, tmp_path):
    return shutil.copytree(pristine[0], tmp_path / "store")


def _journal(store):
    """Per messages file in load order: (path, records); and over all files: the ids with an ADD, with a DELETE
    and with an update."""
    files = []
    adds, deletes, updates = set(), set(), set()
    for path, tag, version in messages_files(store):
        recs, _ = scan_records_py(path.read_bytes(), tag, version)
        files.append((path, recs))
        for r in recs:
            (adds if r[0] in (11, 13) else deletes if r[0] in (15, 16) else updates if r[0] in (12, 14)
             else set()).add(r[5])
    return files, adds, deletes, updates


def _ids(recs):
    return {x for r in recs for x in ((r[5],) if r[0] not in (17, 18, 19) else ()) + ((r[4],) if r[4] >= 0 else ())}


def test_a_cut_whose_lost_records_were_all_deleted_since_is_a_warning(run_json, store, pristine):
    # The campaign's seed 25 misses (same/CRITICAL): a file that is not the newest cut inside a record, where
    # every record after the cut belonged to messages deleted since. verify said CRITICAL ("the records after
    # the cut are lost"), while the broker delivers exactly what it delivered. The DELETEs in later files of
    # ids whose ADD is nowhere, covering every id issued between the last record before the cut and the first
    # new record of the next file, show that nothing live was lost.
    files, adds, deletes, updates = _journal(store)
    found = None
    for i, (path, recs) in enumerate(files[:-1]):
        later = [r for _, rs in files[i + 1:] for r in rs]
        for k in range(len(recs) - 1, 0, -1):
            lost, kept = recs[k:], recs[:k]
            if any(r[0] not in (13, 14, 18) for r in lost):
                break  # only a transaction's records, committed in the next file
            txs = {r[4] for r in lost}
            new = {r[5] for r in lost if r[0] == 13}
            if len(txs) != 1 or not new or not any(r[0] == 18 and r[4] in txs for r in files[i + 1][1]):
                continue
            after = max(_ids(kept + [r for _, rs in files[:i] for r in rs]))
            before = min(r[5] for r in later if r[0] in (11, 13) and r[5] > after)
            window = set(range(after + 1, before))
            # the premise: the lost records carried every id of the window but the transaction's, and each of
            # them was deleted since (its DELETE survives in a later file)
            if window == new | txs and all(m in deletes and m not in {r[5] for r in later if r[0] in (11, 13)}
                                           for m in new):
                found = (path, recs[k][1], new)
                break
        if found:
            break
    assert found, "no transaction committed across a file boundary whose messages were all deleted since"
    path, first, lost_ids = found
    with open(path, "r+b") as f:
        f.truncate(first + 7)  # inside the first lost record
    assert pristine[1].diff(delivered(store)) == {"lost": 0, "back": 0, "bindings": 0, "content": 0}
    code, doc, _ = run_json("verify", store)
    (f,) = [f for f in doc["findings"] if f["code"] == "damaged-tail"]
    assert (code, doc["verdict"], f["severity"], f["path"], f["offset"]) == (1, "WARNING", "warning", str(path), first)
    lost = f["details"]["lostIds"]
    assert set(lost["deletedIds"]) == lost_ids and lost["liveIds"] == [] and lost["unaccountedCount"] == 0


def test_a_zeroed_end_with_room_that_held_a_live_message_is_critical(run_json, store, pristine):
    # The campaign's seed 25 misses (loss/WARNING): the end of a file that is not the newest zeroed, with room
    # left for the next file's first record, was a WARNING "what they held cannot be told". Among the records
    # lost there was the ADD of a message that later records still acknowledge on one of its queues, and that
    # was never deleted: the broker drops what is left of it ("cannot find message"). The window of ids issued
    # while the lost records were written names it.
    files, adds, deletes, updates = _journal(store)
    found = None
    for i, (path, recs) in enumerate(files[:-1]):
        later_updates = {r[5] for _, rs in files[i + 1:] for r in rs if r[0] in (12, 14)}
        for k in range(len(recs) // 2, len(recs) - 2):
            lost = recs[k:]
            live = sorted({r[5] for r in lost if r[0] in (11, 13) and r[6] in (31, 45)}
                          & later_updates - deletes)
            # the whole message (its ADD and its references) in the zeroed bytes, never deleted, acknowledged
            # later on one of its queues
            if live and recs[k][0] in (11, 13) and not any(r[5] == live[0] for r in recs[:k]):
                found = (path, recs, k, live[0])
                break
        if found:
            break
    assert found, "no message added near the end of a file and acknowledged in a later one"
    path, recs, k, mid = found
    data = bytearray(path.read_bytes())
    start, end = recs[k][1] + 3, recs[-1][1] + recs[-1][2]
    data[start:end - 4] = bytes(end - 4 - start)  # the record's first bytes and the last 4 stay: damaged bytes
    path.write_bytes(bytes(data))
    assert pristine[1].diff(delivered(store))["lost"] > 0  # the premise: the broker loses it
    code, doc, _ = run_json("verify", store)
    (f,) = [f for f in doc["findings"] if f["code"] == "damaged-tail"]
    assert (code, doc["verdict"], f["severity"], f["path"], f["offset"]) == (2, "CRITICAL", "critical", str(path),
                                                                              recs[k][1])
    assert f["details"]["recordsLost"] and mid in f["details"]["lostIds"]["liveIds"]


def _zeroed(store, rel, offset, length):
    from tests.faults.model import Fault

    Fault("zero", rel, offset, length).apply(store)
    return store / rel


@pytest.mark.parametrize("rel, offset, length, tx, proof, head", [
    # campaign seed 25 (demo-s1, seed 25000075000237): the damaged record's own header is an ADD_TX of
    # transaction 163 whose message 165 is deleted in a later file
    ("data/journal/activemq-data-5.amq", 50317, 13225, 163, 165, True),
    # campaign seed 4242 (demo-s1, seed 4242012728000054): message 86, added by transaction 85 in a record that
    # survives before the damage, is deleted in a later file
    ("data/journal/activemq-data-1.amq", 63573, 1189, 85, 86, False),
])
def test_a_lost_commit_of_a_transaction_delivered_since_is_critical(run_json, store, pristine, rel, offset, length,
                                                                    tx, proof, head):
    # The campaign's loss/WARNING misses: the zeroed end of a file that is not the newest held the COMMIT of a
    # transaction whose first records survive before the damage. The broker, finding no COMMIT, discards the
    # transaction and the live messages it sent; verify said WARNING ("a commit lost there rolls them back, a
    # rollback lost there changes nothing"). But a message the transaction added was deleted by a later record:
    # the broker delivers a transaction's messages only once it committed, so the lost record was its COMMIT.
    files, adds, deletes, updates = _journal(store)
    recs = dict(files)[store / rel]
    first = max(r[1] for r in recs if r[1] <= offset)
    kept = [r for r in recs if r[1] + r[2] <= first]
    sent = {r[5] for r in recs if r[0] == 13 and r[4] == tx and r[6] == 45}
    # the premise: the transaction's COMMIT is among the records lost, its message ``proof`` among those the
    # damage leaves readable (a whole record, or the damaged record's header) and deleted later; another of
    # its messages is never deleted
    assert any(r[0] == 18 and r[4] == tx and r[1] >= first for r in recs)
    assert proof in sent and proof in deletes and (sent - deletes)
    assert any(r[5] == proof for r in kept) != head and (recs[[r[1] for r in recs].index(first)][5] == proof) == head
    path = _zeroed(store, rel, offset, length)
    assert pristine[1].diff(delivered(store))["lost"] > 0
    code, doc, _ = run_json("verify", store)
    (f,) = [f for f in doc["findings"] if f["code"] == "damaged-tail"]
    assert (code, doc["verdict"], f["severity"], f["path"], f["offset"]) == (2, "CRITICAL", "critical", str(path),
                                                                              first)
    lost = f["details"]["lostIds"]
    assert lost["committedTransactions"] == {str(tx): proof} and lost["liveIds"] == []


def test_a_lost_rollback_stays_a_warning(run_json, store, pristine):
    # The same shape with nothing delivered since: transaction 167 (demo-s1) sent messages 168 and 169, then
    # rolled back; its ROLLBACK is in the zeroed end. The broker discards it as it would have rolled it back:
    # nothing changes, and no message of it was ever delivered, so nothing proves a commit.
    rel, offset, length = "data/journal/activemq-data-5.amq", 60081, 3461
    files, adds, deletes, updates = _journal(store)
    recs = dict(files)[store / rel]
    assert any(r[0] == 19 and r[4] == 167 and r[1] > offset for r in recs)
    path = _zeroed(store, rel, offset, length)
    assert pristine[1].diff(delivered(store)) == {"lost": 0, "back": 0, "bindings": 0, "content": 0}
    code, doc, _ = run_json("verify", store)
    (f,) = [f for f in doc["findings"] if f["code"] == "damaged-tail"]
    assert (code, doc["verdict"], f["severity"], f["path"]) == (1, "WARNING", "warning", str(path))
    assert f["details"]["lostIds"]["openTransactions"] == [167]
    assert f["details"]["lostIds"]["committedTransactions"] == {}


def test_a_lost_page_transaction_whose_messages_were_partly_acknowledged_is_critical(run_json, store, pristine):
    # A zeroed end of a file that is not the newest (demo-s1) held the PAGE_TRANSACTION record of transaction
    # 303 and its COMMIT. Its paged messages stay in the pages, which the broker now skips ("Could not locate
    # page transaction"); verify said WARNING, as a transaction rolled back stores no page transaction either.
    # But queues acknowledged some of those messages (cursor acknowledgements survive), and a cursor delivers a
    # message only once its transaction committed: the four still to consume are lost.
    rel = "data/journal/activemq-data-9.amq"
    files, adds, deletes, updates = _journal(store)
    recs = dict(files)[store / rel]
    (rec,) = [r for r in recs if r[0] == 13 and r[6] == 35 and r[4] == 303]
    assert 303 not in adds | deletes | updates and not any(r[4] == 303 for _, rs in files for r in rs if r is not rec
                                                           and r[0] != 18)
    end = recs[-1][1] + recs[-1][2]
    path = _zeroed(store, rel, rec[1] + 3, end - rec[1] - 3)
    # four paged messages still to consume, and the duplicate-id cache entry of a message whose record was lost
    # there too
    d = pristine[1].diff(delivered(store))
    assert (d["lost"], d["caches"]) == (5, 1)
    code, doc, _ = run_json("verify", store)
    (f,) = [f for f in doc["findings"] if f["code"] == "damaged-tail"]
    assert (code, doc["verdict"], f["severity"], f["path"], f["offset"]) == (2, "CRITICAL", "critical", str(path),
                                                                              rec[1])
    lost = f["details"]["lostIds"]
    assert lost["pageTransactionsLost"] == {"303": 4} and lost["liveIds"] == [] and lost["committedTransactions"] == {}


def test_a_lost_queue_binding_whose_page_counter_lives_on_is_critical(run_json, tmp_path):
    # Campaign seed 90210 (02_broker_mixed_compacted, seed 90210272632006187): 512 zeroed bytes at the end of the
    # bindings file held the COMMIT of the "paged" address's binding and the "paged" queue's binding (id 26):
    # the broker loses both, and verify said WARNING ("cannot be told"). The messages journal still holds the
    # page counter of queue 26, which the broker deletes before a queue's binding when it deletes a queue: the
    # queue was live, and its binding was lost.
    from tests.support import ARTEMIS

    store = shutil.copytree(ARTEMIS / "messages" / "02_broker_mixed_compacted", tmp_path / "store")
    before = delivered(store)
    path = _zeroed(store, "bindings/activemq-bindings-3.bindings", 1284, 512)
    assert before.diff(delivered(store))["bindings"] == 2
    code, doc, _ = run_json("verify", store)
    (f,) = [f for f in doc["findings"] if f["code"] == "damaged-tail"]
    assert (code, doc["verdict"], f["severity"], f["path"]) == (2, "CRITICAL", "critical", str(path))
    assert f["details"]["lostIds"]["liveIds"] == [26]


def test_a_zeroed_end_whose_window_holds_ids_no_record_carries_is_critical(run_json, store, pristine):
    # Campaign seed 1126's loss/WARNING misses (37 of 40, e.g. demo-s1 seed=1126003378000158): the end of a file
    # that is not the newest zeroed, with room left for the next file's first record, held the ADD and every
    # reference of a message never acknowledged or deleted since. Nothing that survives names its id, so verify
    # said WARNING ("what they held cannot be told"), while the broker loses it. Ids of the window that no
    # surviving record carries are now CRITICAL: over every such zeroing of the demo stores and of stores written
    # by Artemis' JournalImpl, they were lost messages 805 times in 830 (tails.py, reweigh).
    files, adds, deletes, updates = _journal(store)
    found = None
    for i, (path, recs) in enumerate(files[:-1]):
        later = {x for _, rs in files[i + 1:] for r in rs for x in (r[5], r[4])}
        for k in range(len(recs) // 2, len(recs) - 2):
            lost, kept = recs[k:], recs[:k]
            if {r[4] for r in kept if r[0] in (13, 14, 15)} - {r[4] for r in kept if r[0] in (17, 18, 19)}:
                continue  # no transaction left open by the damage: a lost COMMIT or ROLLBACK is another judgement
            if any(r[0] in (11, 13) and r[5] in later - deletes or r[6] in (30, 35) for r in lost):
                continue  # a lost record a later one names (liveIds), a large message or a page transaction
            # a message whose ADD and references are all in the lost records, never named again
            live = sorted(r[5] for r in lost if r[0] == 11 and r[6] in (31, 45) and r[5] not in later | deletes)
            if live and recs[k][0] == 11 and not any(r[5] in live for r in kept):
                found = (path, recs, k, live[0])
                break
        if found:
            break
    assert found, "no message added near the end of a file, outside transactions, never named again"
    path, recs, k, mid = found
    end = recs[-1][1] + recs[-1][2]
    _zeroed(store, str(path.relative_to(store)), recs[k][1] + 3, end - recs[k][1] - 3)
    assert pristine[1].diff(delivered(store))["lost"] > 0  # the premise: the broker loses it
    code, doc, _ = run_json("verify", store)
    (f,) = [f for f in doc["findings"] if f["code"] == "damaged-tail"]
    assert (code, doc["verdict"], f["severity"], f["path"], f["offset"]) == (2, "CRITICAL", "critical", str(path),
                                                                              recs[k][1])
    lost = f["details"]["lostIds"]
    assert f["details"]["recordsLost"] and lost["liveIds"] == [] and lost["committedTransactions"] == {}
    assert mid in lost["unaccountedIds"] and lost["unownedCount"] == lost["unaccountedCount"] > 0


def test_a_damaged_record_of_this_use_at_the_end_with_ids_running_on_lost_records(run_json, tmp_path):
    # Campaign seed 25's last loss/WARNING (demo-s2, seed 25001077003153): the end of activemq-data-1.amq zeroed
    # from inside a record, leaving too little room for the next file's first record to prove records were lost
    # that way. But the damaged bytes begin with a record header carrying the file's own tag, and the ids run on
    # into the next file: a crash tears the record being written, yet the broker restarts with ids a checkpoint
    # further on (BatchingIDGenerator), so this record was written whole and damaged since. Its window holds ids
    # no surviving record carries, one of them a message the broker loses: CRITICAL, as with room left.
    store = campaign_demo(tmp_path / "store", 2)
    before = delivered(store)
    path = _zeroed(store, "data/journal/activemq-data-1.amq", 59694, 5406)
    # the message, and a duplicate-id cache entry lost with it
    assert before.diff(delivered(store)) == {"lost": 2, "back": 0, "bindings": 0, "content": 2, "caches": 1}
    head = path.read_bytes()[59601:59606]
    assert 11 <= head[0] <= 19 and int.from_bytes(head[1:5], "big") == 1  # this use's tag: fileID 1
    code, doc, _ = run_json("verify", store)
    (f,) = [f for f in doc["findings"] if f["code"] == "damaged-tail"]
    assert (code, doc["verdict"], f["severity"], f["path"], f["offset"]) == (2, "CRITICAL", "critical", str(path),
                                                                              59601)
    lost = f["details"]["lostIds"]
    assert f["details"]["recordsLost"] and "freeBytes" not in f["details"]
    # 97: the duplicate-id record of message 96, written before it (tails.REORDER); 89 and 90: transaction 89,
    # whose paged messages every queue acknowledged, and its PAGE_TRANSACTION record (settled_page_txs)
    window = (lost["idsAfter"], lost["idsBefore"], lost["unaccountedIds"], lost["unownedCount"])
    assert window == (87, 96, [94, 97], 2) and lost["settledPageTransactionIds"] == [89, 90]


def test_a_flipped_filler_byte_after_the_last_record_of_a_bindings_file_stays_a_warning(run_json, tmp_path):
    # Campaign seed 25 (02_broker_mixed_compacted, seed 25002076006182): one byte of the zero filler after the last
    # record of a bindings file that is not the newest flipped. Nothing was lost, and the window of ids it might
    # have held spans ids the broker issued and never stored, or compacted away: that trace proves nothing here.
    from tests.support import ARTEMIS

    store = shutil.copytree(ARTEMIS / "messages" / "02_broker_mixed_compacted", tmp_path / "store")
    before = delivered(store)
    rel = "bindings/activemq-bindings-3.bindings"
    from tests.faults.model import Fault

    Fault("flip", rel, 1537, 0x27).apply(store)
    assert before.diff(delivered(store)) == {"lost": 0, "back": 0, "bindings": 0, "content": 0}
    code, doc, _ = run_json("verify", store)
    (f,) = [f for f in doc["findings"] if f["code"] == "damaged-tail"]
    assert (code, doc["verdict"], f["severity"], f["offset"]) == (1, "WARNING", "warning", 1537)
    assert f["details"]["lostIds"]["unaccountedCount"] > 0 and not f["details"].get("recordsLost")


@pytest.fixture(scope="module")
def demo4(tmp_path_factory):
    root = campaign_demo(tmp_path_factory.mktemp("demo4") / "demo-s4", 4)
    return root, delivered(root)


def test_a_cut_inside_a_transaction_committed_in_the_next_file_is_critical(run_json, demo4, tmp_path):
    # Campaign seed 2027, demo-s4 2027009092009137 (loss/WARNING): file 14 cut after the second reference of
    # message 522 (transaction 519, whose COMMIT is file 15's): the cut took its third, an UPDATE_TX, which carries
    # no new id, so the window was empty and verify said "none of them was a live message". The COMMIT counts
    # only file 15's records; the room file 14 had after the last record left would have held it, so the broker
    # wrote more here before moving on.
    store = shutil.copytree(demo4[0], tmp_path / "store")
    path = store / "data/journal/activemq-data-14.amq"
    recs, _ = scan_records_py(path.read_bytes(), *[(t, v) for p, t, v in messages_files(store) if p == path][0])
    last = recs[-1]
    assert (last[0], last[4], last[5]) == (14, 519, 522)  # UPDATE_TX of message 522 in transaction 519
    with open(path, "r+b") as f:
        f.truncate(last[1] + 30)  # inside that last record
    assert demo4[1].diff(delivered(store))["lost"] == 1
    code, doc, _ = run_json("verify", store)
    (f,) = [f for f in doc["findings"] if f["code"] == "damaged-tail"]
    assert (code, f["severity"], f["offset"]) == (2, "critical", last[1])
    assert "transaction 519, whose COMMIT lies in a later file" in f["message"]
    assert f["details"]["lostIds"]["unaccountedCount"] == 0


def test_a_cut_inside_a_transaction_whose_messages_were_deleted_since_stays_a_warning(run_json, demo4, tmp_path):
    # The counterpart: file 6 cut inside its last record, an UPDATE_TX of transaction 229 (COMMIT in file 7),
    # whose one message, 230, was deleted since: what it may have written after the cut changes nothing the
    # broker delivers, and the finding stays the warning the empty window gives
    store = shutil.copytree(demo4[0], tmp_path / "store")
    path = store / "data/journal/activemq-data-6.amq"
    recs, _ = scan_records_py(path.read_bytes(), *[(t, v) for p, t, v in messages_files(store) if p == path][0])
    last = recs[-1]
    assert (last[0], last[4], last[5]) == (14, 229, 230)
    with open(path, "r+b") as f:
        f.truncate(last[1] + 30)
    assert demo4[1].diff(delivered(store)) == {"lost": 0, "back": 0, "bindings": 0, "content": 0}
    code, doc, _ = run_json("verify", store)
    (f,) = [f for f in doc["findings"] if f["code"] == "damaged-tail"]
    assert (code, f["severity"], f["offset"]) == (1, "warning", last[1])


def test_a_zeroed_end_past_a_transaction_committed_since_counts_the_ids_after_it(run_json, demo4, tmp_path):
    # Campaign seed 2027, demo-s4 2027009084009214 (loss/WARNING): file 5 zeroed from inside transaction 170's
    # message 174 to the end, taking its COMMIT and the records after it (ids 175..182). The ids after the
    # transaction's own were set apart as ones it may have added (sharing its fate: nothing lost if it rolled
    # back), but message 173, which it added, was deleted since: it committed, so those ids are lost like any.
    store = shutil.copytree(demo4[0], tmp_path / "store")
    path = store / "data/journal/activemq-data-5.amq"
    with open(path, "r+b") as f:
        f.seek(38665)
        f.write(bytes(24261))
    diff = demo4[1].diff(delivered(store))
    assert diff["lost"] == 5 and diff["back"] == 6
    code, doc, _ = run_json("verify", store)
    (f,) = [f for f in doc["findings"] if f["code"] == "damaged-tail"]
    assert (code, f["severity"]) == (2, "critical")
    lost = f["details"]["lostIds"]
    assert lost["openTransactions"] == [170] and lost["unownedCount"] == lost["unaccountedCount"] == 9
