"""Artemis `print --pins` and `--drain QUEUE` (issue 19), held against reality: a store written with the
journal writer, drained with it as a broker drains a queue (an ACKNOWLEDGE_REF update per reference, then a
DELETE of the message, then traffic until the file rolls over), then reclaimed by `compact --reclaim-only`:
the files that go are the ones `--drain` named."""
from __future__ import annotations

import hashlib

import pytest

from amqtool.formats.artemis.message import CoreMessage
from amqtool.formats.artemis.userrecords import AckRefRecord, AddRefRecord, JournalRecordIds as R, QueueBindingRecord
from amqtool.store.journal_writer import JournalWriter
from amqtool.store.layout import BINDINGS, MESSAGES
from tests.support import ORACLE, ORACLE_SCENARIOS

QUEUES = {1: "alpha", 2: "beta"}


def _message(mid: int, address: str) -> bytes:
    return CoreMessage.build(message_id=mid, address=address, body=b"m" * 900).encode()


def build(root):
    """alpha: 120 messages, then beta: 200, then alpha: 60, in 64 KiB files; nothing acknowledged yet."""
    data = root / "data"
    with JournalWriter.create(data / "bindings", BINDINGS) as bw:
        for qid, name in QUEUES.items():
            bw.append_add(qid, R.QUEUE_BINDING_RECORD,
                          QueueBindingRecord.build(record_id=qid, name=name, address=name, routing_type=1).encode())
    sent: dict[int, list[int]] = {1: [], 2: []}
    with JournalWriter.create(data / "journal", MESSAGES, file_size=64 * 1024) as mw:
        mid = 100
        for qid, n in ((1, 120), (2, 200), (1, 60)):
            for _ in range(n):
                mid += 1
                mw.append_add(mid, R.ADD_MESSAGE_PROTOCOL, _message(mid, QUEUES[qid]))
                mw.append_update(mid, R.ADD_REF, AddRefRecord(queue_id=qid).encode())
                sent[qid].append(mid)
    return data, sent


def drain_like_a_broker(data, mids: list[int], queue_id: int) -> None:
    """QueueImpl.acknowledge -> storeAcknowledge (update ACKNOWLEDGE_REF), then deleteMessage (DELETE); then
    more traffic (messages sent and consumed) until the current file rolls over."""
    with JournalWriter.open(data / "journal", MESSAGES, file_size=64 * 1024) as w:
        for mid in mids:
            w.append_update(mid, R.ACKNOWLEDGE_REF, AckRefRecord(queue_id=queue_id).encode())
            w.append_delete(mid)
        start, mid = w.position[0], 10_000
        while w.position[0] == start:
            mid += 1
            w.append_add(mid, R.ADD_MESSAGE_PROTOCOL, _message(mid, "traffic"))
            w.append_delete(mid)


def _journal(doc, kind="messages"):
    return next(j for j in doc["journals"] if j["journal"] == kind)


def test_pins_name_the_queues_and_drain_matches_reality(tmp_path, run_json, run_cli):
    data, sent = build(tmp_path)
    before = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(data.rglob("*")) if p.is_file()}
    code, doc, _ = run_json("print", data, "--pins", "--drain", "beta")
    assert code == 0 and doc["kind"] == "artemis"
    assert before == {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(data.rglob("*")) if p.is_file()}
    j = _journal(doc)
    files = {f["file"]: f for f in j["files"]}
    by_queue: dict[str, int] = {}
    for f in j["files"]:
        for r in f["reasons"]:
            if r["reason"] == "live-messages":
                by_queue[r["queue"]] = by_queue.get(r["queue"], 0) + r["messages"]
    # every live message is named once per file it has records in; all of them are somewhere
    assert by_queue["beta"] >= len(sent[2]) and by_queue["alpha"] >= len(sent[1])
    only_beta = [name for name, f in files.items()
                 if f["pinned"] and {r.get("queue") for r in f["reasons"] if r["reason"] == "live-messages"} == {"beta"}]
    assert only_beta and j["collectableNow"] == []
    drain = j["drain"]
    assert drain["matched"] == ["beta"] and drain["messages"] == 200
    assert set(drain["filesFreed"]) == set(only_beta)  # the files holding beta alone
    assert drain["bytesFreed"] == sum(files[n]["size"] for n in drain["filesFreed"])

    drain_like_a_broker(data, sent[2], 2)
    _, after, _ = run_json("print", data, "--pins")
    assert set(_journal(after)["collectableNow"]) == set(drain["filesFreed"])
    code, out, _ = run_json("compact", data, "--reclaim-only")
    assert code == 0
    gone = {f["name"] for j2 in out["journals"] if j2["journal"] == "messages" for f in j2["oldFiles"]}
    assert gone == set(drain["filesFreed"])
    code, text, _ = run_cli("print", data, "--pins", "--drain", "alpha")
    assert code == 0 and "draining alpha" in text


def test_drain_errors(tmp_path, run_cli):
    data, _ = build(tmp_path)
    code, _, err = run_cli("print", data, "--pins", "--drain", "gamma")
    assert code == 3 and "no such queue" in err
    code, _, err = run_cli("print", data / "bindings", "--pins", "--drain", "alpha")
    assert code == 3


@pytest.mark.parametrize("scenario", ORACLE_SCENARIOS)
def test_oracle_fixtures_collectable_equals_reclaim_only(scenario, run_json):
    path = ORACLE / scenario / "journal"
    code, doc, _ = run_json("print", path, "--pins")
    if code == 2:  # Artemis refuses a file here: reclaim-only refuses too
        return
    j = doc["journals"][0]
    for f in j["files"]:
        assert f["reasons"] and f["firstReason"] == f["reasons"][0]["reason"]
        assert f["pinned"] == (f["firstReason"] not in ("collectable", "free"))
    _, dry, _ = run_json("compact", path, "--reclaim-only", "--dry-run")
    gone = {f["name"] for x in dry["journals"] for f in x["oldFiles"]}
    assert set(j["collectableNow"]) == gone
