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
