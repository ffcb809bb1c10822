"""A zeroed run from the last bytes of one record to the end of a journal file that is not the newest: the
damaged bytes read as one record (its trailing size zeroed), and the zeros after it as the file's fill. verify
judged that one record alone ("its loss changes nothing") and said WARNING, while the zeros had taken every
record written after it (real-JournalImpl store small-s61, seed 4003043009093017: loss/WARNING, 5 messages
back). When the room left would have held the next file's first record, the broker wrote more there
(``JournalImpl.switchFileIfNecessary`` moves on only for a record that does not fit): the tail is judged as a
damaged end where records were lost (tails.py), not as one record."""
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


@pytest.mark.parametrize("name", ["activemq-data-4.amq", "activemq-data-6.amq"])
def test_a_damaged_last_record_with_room_after_it_loses_the_records_zeroed_after_it(run_json, pristine, tmp_path,
                                                                                    name):
    store = shutil.copytree(pristine[0], tmp_path / "store")
    files = [(p, scan_records_py(p.read_bytes(), t, v)[0]) for p, t, v in messages_files(store)]
    data = [(p, rs) for p, rs in files if rs]
    i = next(k for k, (p, _) in enumerate(data) if p.name == name)
    path, recs = data[i]
    next_first = data[i + 1][1][0][2]
    # the first DELETE of the file after which the room left (aligned as a restart aligns) holds that record
    delete = next(r for r in recs if r[0] == 16 and path.stat().st_size - -(-r[1] // 4096) * 4096 >= next_first)
    end = delete[1] + delete[2]
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.seek(end - 2)  # the low bytes of its trailing size, then every record after it
        f.write(bytes(size - (end - 2)))
    diff = pristine[1].diff(delivered(store))
    assert diff["lost"] + diff["back"] > 0  # the truth: records zeroed after it held live ones
    code, doc, _ = run_json("verify", store)
    (f,) = [f for f in doc["findings"] if f["code"] == "damaged-tail"]
    assert (code, f["severity"], f["offset"]) == (2, "critical", delete[1])
    assert f["details"]["recordsLost"] is True and f["details"]["nextRecordSize"] == next_first
