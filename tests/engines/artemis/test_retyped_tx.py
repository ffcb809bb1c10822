"""An update whose type byte was damaged into a transactional type (retyped_tx.py): the broker rolls the
one-record "transaction" back, and its id, a live record's, says what it was (issue 25, make fuzz seeds 4242 and
5151: 12 flips of a reference's type byte judged "loss-unproven" and OK while the broker lost the reference)."""
from __future__ import annotations

import pytest

from amqtool.engines.artemis.evidence import Evidence
from amqtool.engines.artemis.load import load_journal
from amqtool.formats.artemis.records import fixed_size
from amqtool.store.journal_files import open_journal
from amqtool.store.layout import detect
from tests.faults.artemis import broker_could_write, delivered
from tests.support import copy_tree, flip_byte

UPDATE, ADD_REF = 12, 32


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    from tests.faults.stores import campaign_demo

    return campaign_demo(tmp_path_factory.mktemp("demo") / "demo-s1", 1)


def _reference(store, acked: bool):
    """(journal file, record offset, message id, queue) of the first live 8-byte ADD_REF update whose
    (message, queue) is acknowledged (``acked``) or still pending."""
    st = detect(store)
    with open_journal(st.bindings) as ob, open_journal(st.messages) as om:
        result = load_journal(om)
        ev = Evidence.build(load_journal(ob), result)
        for r in result.live:
            if r.is_update and r.user_record_type == ADD_REF and r.body_len == 8:
                q = int.from_bytes(result.body(r), "big")
                if ((r.id, q) in ev.acked) == acked and q < 256:
                    jf = result.files[r.file_index]
                    return jf.path, r.body_offset - (fixed_size(UPDATE, jf.version) - 4), r.id, q
    raise AssertionError("no such reference")


def _verify(run_json, store):
    code, doc, _ = run_json("verify", store)
    return code, [f for f in doc["findings"] if f["code"] == "record-retyped"]


def test_a_pending_reference_read_as_a_transactional_add_is_a_lost_reference(run_json, demo, tmp_path):
    store = copy_tree(demo, tmp_path / "s")
    before = delivered(store)
    path, at, mid, q = _reference(store, acked=False)
    flip_byte(path, at, 0x01)  # UPDATE 12 -> ADD_TX 13: a transaction "mid" of one record, never committed
    assert before.diff(delivered(store))["lost"] == 1
    assert f"transaction {mid} has the id of a live record" == broker_could_write(store)
    code, found = _verify(run_json, store)
    assert code == 2 and len(found) == 1 and found[0]["severity"] == "critical"
    assert found[0]["details"] == {"txId": mid, "recordId": mid, "userRecordType": ADD_REF, "effect": "loss"}
    assert f"message {mid} on queue {q}" in found[0]["message"]


def test_an_acknowledged_reference_read_as_a_transactional_update_is_named_not_critical(run_json, demo, tmp_path):
    store = copy_tree(demo, tmp_path / "s")
    before = delivered(store)
    path, at, mid, _ = _reference(store, acked=True)
    flip_byte(path, at, 0x02)  # UPDATE 12 -> UPDATE_TX 14: its message was acknowledged there since
    assert before.diff(delivered(store)) == {"lost": 0, "back": 0, "bindings": 0, "content": 0}
    code, found = _verify(run_json, store)
    assert len(found) == 1 and found[0]["severity"] == "warning" and found[0]["details"]["effect"] == "harmless"
    assert code == 1
