"""A message's DUPLICATE_ID record takes its id after the message's (the message id is issued at send, the
cache entry's as the post office routes it) but is written before the message. So when a non-newest file is
cut right after such a record, the message written next is lost with an id *below* the highest id that
survives before the cut: the window of ids the lost records carried (tails.py) must look below its bound too.

Fault campaign miss (demos, seed 7474, fault 7474022424000129: demo-s1's activemq-data-2.amq truncated 5 bytes
into message 121's ADD, right after its duplicate-id record 122): the broker lost message 121 and verify said
WARNING, "every new id issued while they were written (ids 123..126) is accounted for"."""
from __future__ import annotations

import pytest

from tests.support import copy_tree


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    from tests.faults.stores import campaign_demo

    return campaign_demo(tmp_path_factory.mktemp("demo") / "demo-s1", 1)


def _last_message_after_its_dupid(store):
    """(path, body offset, message id) of the ADD of a live message that is the last message of a data file that
    is not the newest, written right after a DUPLICATE_ID record with a higher id."""
    from amqtool.engines.artemis.load import load_journal
    from amqtool.store.journal_files import open_journal
    from amqtool.store.layout import detect

    with open_journal(detect(store).messages) as opened:
        result = load_journal(opened)
        newest = max(r.file_index for r in result.live)
        by_file: dict = {}
        for r in sorted(result.live, key=lambda r: (r.file_index, r.body_offset)):
            by_file.setdefault(r.file_index, []).append(r)
        for fi, recs in sorted(by_file.items()):
            adds = [i for i, r in enumerate(recs) if not r.is_update and r.user_record_type in (45, 31)]
            if fi == newest or not adds:
                continue
            i = adds[-1]
            prev = recs[i - 1] if i else None
            if prev is not None and prev.user_record_type == 37 and prev.id > recs[i].id \
                    and all(r.id == recs[i].id for r in recs[i + 1:]):
                return result.files[fi].path, recs[i].body_offset, recs[i].id
    return None


def test_cut_after_a_duplicate_id_record_loses_the_message_written_next(run_json, tmp_path, demo):
    from tests.faults import artemis

    store = copy_tree(demo, tmp_path / "s")
    found = _last_message_after_its_dupid(store)
    assert found is not None
    path, offset, mid = found
    with open(path, "r+b") as fh:
        fh.truncate(offset)  # inside the record: its header survives, its body does not
    # the truth: the broker-equal loader loses that message
    before = artemis.DeliveredReader(demo).pristine.held()
    after = artemis.DeliveredReader(store).pristine.held()
    assert {k[1] for k in before - after} == {mid} and not after - before
    code, doc, _ = run_json("verify", store)
    (tail,) = [f for f in doc["findings"] if f["code"] == "damaged-tail"]
    assert (code, tail["severity"]) == (2, "critical")
    assert mid in tail["details"]["lostIds"]["unaccountedIds"]
