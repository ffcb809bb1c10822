"""A damaged end that provably took one record (lone_record.py), and one whose lost message was sent in a
transaction rolled back since (tails.lost_window, rolled_back.only_rolled_back).

Found by damaging the last record of each file of 48 stores written by the real JournalImpl (seed 9411): of
1,263 such faults, 14 losses were called WARNING and 18 healthy outcomes CRITICAL. The window of ids issued while
the lost records were written held ids no surviving record carries, judged by the odds, though the damage took
one record, whose header names it. In ``tests/data/artemis/rolled-back-tail`` (README), ``activemq-data-23.amq``
ends with the ADD_TX of message 2147484278 in transaction 2147484275; its ADD_REF and the transaction's
ROLLBACK follow in the next file: verify counted 2147484278 a live message lost (a reference survives), while
``JournalImpl.load`` discards every record of a rolled-back transaction, the reference with it."""
from __future__ import annotations

import pytest

from tests.faults.model import Fault


@pytest.fixture(scope="module")
def campaign(rolled_back):
    return rolled_back  # conftest: the rolled-back-tail store


def _tail(campaign, fault):
    return campaign.judge_findings(fault, "damaged-tail")

ADD_TX = 15337  # ADD_TX of message 2147484278 in transaction 2147484275 (1026 bytes), the file's last record


def test_the_record_is_the_rolled_back_send(campaign):
    data = (campaign.root / "journal/activemq-data-23.amq").read_bytes()
    assert (data[ADD_TX], int.from_bytes(data[ADD_TX + 6:ADD_TX + 14], "big"),
            int.from_bytes(data[ADD_TX + 14:ADD_TX + 22], "big")) == (13, 2147484275, 2147484278)


def test_its_checksize_flipped_is_the_one_record_lost(campaign):
    outcome, (tail,) = _tail(campaign, Fault("flip", "journal/activemq-data-23.amq", ADD_TX + 1026 - 4, 0x82))
    assert outcome.truth == "same"
    assert outcome.verdict == tail.severity.name == "WARNING"
    assert tail.details["loneRecord"] == {"recordType": 13, "id": 2147484278, "txId": 2147484275,
                                          "userRecordType": 45, "queueIds": []}


def test_its_end_zeroed_is_weighed_by_the_window_without_the_rolled_back_send(campaign):
    # the zeros reach the record's last byte: they may have taken records after it, so the window is read;
    # the id it sent keeps only the rolled-back transaction's reference
    outcome, (tail,) = _tail(campaign, Fault("zero", "journal/activemq-data-23.amq", ADD_TX + 500, 526))
    assert outcome.truth == "same"
    assert outcome.verdict == tail.severity.name == "WARNING"
    ids = tail.details["lostIds"]
    assert ids["liveIds"] == [] and 2147484278 in ids["rolledBackIds"]


def test_every_last_record_with_its_checksize_one_byte_off(campaign):
    """Each file's last record, its checksize's high byte damaged: the verdict follows the harness's truth
    (a loss CRITICAL, nothing lost no CRITICAL) wherever the rule reads one lone record."""
    from amqtool.formats.artemis.records import scan_records_py
    from tests.faults.stores import messages_files

    files = [(p, scan_records_py(p.read_bytes(), t, v)[0]) for p, t, v in messages_files(campaign.root)]
    judged = lone = 0
    for path, recs in files[:-1]:
        if not recs:
            continue
        last = recs[-1]
        fault = Fault("flip", str(path.relative_to(campaign.root)), last[1] + last[2] - 4, 0x40)
        outcome, tails = _tail(campaign, fault)
        if not tails or "loneRecord" not in tails[0].details:
            continue
        lone += 1
        if outcome.truth == "loss":
            assert outcome.verdict == "CRITICAL", fault
        elif outcome.truth == "same":
            assert outcome.verdict != "CRITICAL", fault
        judged += 1
    assert lone >= 8 and judged == lone
