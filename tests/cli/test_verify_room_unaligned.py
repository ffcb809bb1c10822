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


def test_a_zeroed_run_over_the_end_of_a_record_of_the_current_file_is_critical(run_json, tmp_path):
    # make fuzz seed 4304 (loss/WARNING, demo-s1, seed 4304012914000248): activemq-data-16.amq, the current file,
    # zeroed from the sixth byte of its DELETE of message 292 (offset 1166) over its end and the 11,349 bytes
    # after it, to the end of its data. No crash leaves zeros that start inside a block before written bytes, and
    # verify judged the damaged record alone (a DELETE: harmless) while the zeros, read as the fill, had wiped the
    # 200 records after it: 106 acknowledged messages come back.
    from amqtool.formats.artemis.records import scan_records_py

    store = campaign_demo(tmp_path / "store", 1)
    path, tag, version = next(f for f in messages_files(store) if f[0].name == "activemq-data-16.amq")
    recs, _ = scan_records_py(path.read_bytes(), tag, version)
    (r,) = [r for r in recs if r[1] == 1166]
    assert (r[0], r[5]) == (16, 292) and len(recs) - recs.index(r) > 100  # a DELETE, then the records after it
    before = delivered(store)
    Fault("zero", "data/journal/activemq-data-16.amq", 1171, 11349).apply(store)
    assert before.diff(delivered(store))["back"] == 106
    code, doc, _ = run_json("verify", store)
    (f,) = [f for f in doc["findings"] if f["code"] == "damaged-tail"]
    assert (code, doc["verdict"], f["severity"], f["offset"]) == (2, "CRITICAL", "critical", 1166)
    assert f["details"]["crash"] is False
