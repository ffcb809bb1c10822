"""A damaged end of a journal file that is not the newest, with room left for the next file's first record once the
journal's own alignment is taken: NIO and MAPPED files (their first record follows the 16-byte header) are written
and reopened unaligned (``getAlignment()`` is 1), so the room is what the last valid record leaves, not what a 4 KiB
block start (AIO) would leave."""
from __future__ import annotations

from tests.faults.artemis import delivered
from tests.faults.model import Fault
from tests.faults.stores import campaign_demo, messages_files


def test_a_zeroed_end_leaving_room_for_the_next_files_first_record_in_an_unaligned_journal_is_critical(run_json,
                                                                                                       tmp_path):
    # make fuzz seed 5151 (loss/WARNING, demo-s1, seed 5151015456000087): activemq-data-15.amq zeroed from the
    # second byte of its 60th record (offset 62180) to its end, taking 9 committed transactions' acknowledgements
    # and deletes: 49 acknowledged messages come back. 3,357 bytes were left after the last valid record and the
    # next file starts with a 39-byte record, so the broker wrote there (switchFileIfNecessary moves on only for a
    # record that does not fit); verify rounded the room down to a 4 KiB block start (AIO) and found none.
    from amqtool.formats.artemis.records import scan_records_py

    store = campaign_demo(tmp_path / "store", 1)
    before = delivered(store)
    files = {p.name: (p, t, v) for p, t, v in messages_files(store)}
    first16 = [scan_records_py(p.read_bytes(), t, v)[0][0][1] for p, t, v in files.values()
               if scan_records_py(p.read_bytes(), t, v)[0]]
    assert set(first16) == {16}  # unaligned: every file's first record follows its header
    Fault("zero", "data/journal/activemq-data-15.amq", 62180, 3331).apply(store)
    assert before.diff(delivered(store))["back"] == 49
    code, doc, _ = run_json("verify", store)
    (f,) = [f for f in doc["findings"] if f["code"] == "damaged-tail"]
    assert (code, doc["verdict"], f["severity"], f["offset"]) == (2, "CRITICAL", "critical", 62179)
    assert f["details"]["recordsLost"] is True
    assert (f["details"]["freeBytes"], f["details"]["nextRecordSize"]) == (65536 - 62179, 39)
