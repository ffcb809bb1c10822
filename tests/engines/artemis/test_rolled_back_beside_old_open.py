"""A cut through a rolled-back transaction's message, beside a transaction a client left open long before
(issue 25, amqtool/engines/artemis/tails.py: lost_window).

The ids a transaction rolled back after a damaged end was sending are dead with it (rolled_back.py), unless a
transaction the damage may have left open was sending too: two transactions sending at once interleave their
ids, and whose run an id was cannot be told (tests/cli/test_verify_rolled_back_window.py, pair-tx). A
transaction left open hundreds of ids earlier, with nothing written since, was not sending then; yet it
blocked the rule, and a cut store written by the real JournalImpl (hold-out h22: transaction 2147484640's
message 2147484642 cut from activemq-data-56.amq, its ROLLBACK in 57; transactions 2147483919 and 2147484149
left open dozens of files before) read CRITICAL with nothing lost. Modelled here with the journal writer.
"""
from __future__ import annotations

from amqtool.formats.artemis.message import CoreMessage
from amqtool.formats.artemis.records import scan_records_py
from amqtool.formats.artemis.userrecords import AckRefRecord, AddRefRecord, JournalRecordIds as R, QueueBindingRecord
from amqtool.store.journal_writer import JournalWriter
from amqtool.store.layout import BINDINGS, MESSAGES

QUEUE = 4
FILE_SIZE = 16 * 1024


def _message(mid: int, size: int = 300) -> bytes:
    return CoreMessage.build(message_id=mid, address="orders", body=b"m" * size).encode()


def _send(w, mid: int, size: int = 300) -> None:
    w.append_add(mid, R.ADD_MESSAGE_PROTOCOL, _message(mid, size))
    w.append_update(mid, R.ADD_REF, AddRefRecord(queue_id=QUEUE).encode())


def _consume(w, mid: int) -> None:
    w.append_update(mid, R.ACKNOWLEDGE_REF, AckRefRecord(queue_id=QUEUE).encode())
    w.append_delete(mid)


def build(root, *, open_late: bool = False):
    """Messages on one queue; transaction 150 left open early (or, with ``open_late``, in the file the cut is
    in); transaction 600 sends 601 and 602 (cut) in one file and 603 in the next, then rolls back; then more
    traffic. Returns the damaged file's name and the offset of the cut (inside 602's record)."""
    with JournalWriter.create(root / "bindings", BINDINGS) as bw:
        bw.append_add(QUEUE, R.QUEUE_BINDING_RECORD,
                      QueueBindingRecord.build(record_id=QUEUE, name="orders", address="orders",
                                               routing_type=1).encode())
    mid = 100
    with JournalWriter.create(root / "journal", MESSAGES, file_size=FILE_SIZE) as w:
        live: list[int] = []

        def traffic(n: int) -> None:
            nonlocal mid
            for _ in range(n):
                mid += 1
                _send(w, mid)
                live.append(mid)
                if len(live) > 8:
                    _consume(w, live.pop(0))

        traffic(40)
        if not open_late:
            w.append_add_tx(150, 151, R.ADD_MESSAGE_PROTOCOL, _message(151))  # a client's, never ended
        mid = 160
        traffic(200)
        mid = 500
        traffic(20)
        if open_late:
            w.append_add_tx(150, 151, R.ADD_MESSAGE_PROTOCOL, _message(151))
        # fill the file up to room for 601 and (most of) 602: 603 then moves to the next file
        room = FILE_SIZE - w.position[1]
        while room > 2000:
            mid += 1
            _send(w, mid)
            live.append(mid)
            room = FILE_SIZE - w.position[1]
        assert mid < 600
        cut_file = w.position[0]
        w.append_add_tx(600, 601, R.ADD_MESSAGE_PROTOCOL, _message(601, 200))
        w.append_update_tx(600, 601, R.ADD_REF, AddRefRecord(queue_id=QUEUE).encode())
        w.append_add_tx(600, 602, R.ADD_MESSAGE_PROTOCOL, _message(602, room - 900))
        w.append_update_tx(600, 602, R.ADD_REF, AddRefRecord(queue_id=QUEUE).encode())
        assert w.position[0] == cut_file
        w.append_add_tx(600, 603, R.ADD_MESSAGE_PROTOCOL, _message(603, 2000))
        assert w.position[0] != cut_file
        w.append_rollback(600)
        mid = 603  # the ids run on: none left unaccounted past the window
        traffic(30)
    path = root / "journal" / cut_file
    data = path.read_bytes()
    header = int.from_bytes(data[8:16], "big")
    recs, _ = scan_records_py(data, header & 0xFFFFFFFF, 2)
    (at,) = [r[1] for r in recs if r[0] == 13 and r[5] == 602]
    return cut_file, at + 100


def test_an_old_open_transaction_does_not_hide_the_rolled_back_run(tmp_path):
    from tests.faults.model import SAME, Fault
    from tests.faults.runner import Campaign

    name, cut = build(tmp_path / "s")
    with Campaign("s", tmp_path / "s") as c:
        o = c.judge(Fault("truncate", f"journal/{name}", cut, 0))
    assert (o.truth, o.verdict, o.codes) == (SAME, "WARNING", ("damaged-tail",))


def test_an_open_transaction_sending_in_that_file_still_does(tmp_path, run_json):
    name, cut = build(tmp_path / "s", open_late=True)
    with open(tmp_path / "s" / "journal" / name, "r+b") as f:
        f.truncate(cut)
    code, doc, _ = run_json("verify", tmp_path / "s")
    (tail,) = [f for f in doc["findings"] if f["code"] == "damaged-tail"]
    assert (code, tail["severity"]) == (2, "critical")
    lost = tail["details"]["lostIds"]
    assert (lost["openTransactions"], lost["rolledBackIds"], lost["unaccountedIds"]) == ([150], [], [602])
