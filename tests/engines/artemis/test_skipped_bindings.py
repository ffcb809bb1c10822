"""Bindings records whose user record type the broker's load skips (skipped_bindings.py): a queue binding whose
type byte was damaged is a lost queue (CRITICAL), anything else skipped is named (a warning); the harness no
longer takes such a store for one the broker could have written (issue 25, make fuzz seed 4242: 7 bindings
usertype flips judged "loss-unproven" and OK while the broker lost a queue binding)."""
from __future__ import annotations

import pytest

from amqtool.engines.artemis.load import load_journal
from amqtool.store.journal_files import open_journal
from amqtool.store.layout import detect
from tests.faults.artemis import broker_could_write, delivered
from tests.support import MESSAGES, copy_tree, flip_byte

MIXED = MESSAGES / "02_broker_mixed_compacted"
pytestmark = pytest.mark.skipif(not MIXED.is_dir(), reason="the broker-written fixture is not here")


def _first(store, user_type):
    """(path, offset of the user record type byte, id) of the first live bindings record of ``user_type``."""
    with open_journal(detect(store).bindings) as opened:
        result = load_journal(opened)
        r = next(r for r in result.live if r.user_record_type == user_type and not r.is_update)
        # an ADD record's user record type is the byte before its body (JournalAddRecord)
        return result.files[r.file_index].path, r.body_offset - 1, r.id


def _codes(doc, severity):
    return {f["code"] for f in doc["findings"] if f["severity"] == severity}


def test_a_queue_binding_whose_type_reads_23_is_a_lost_queue(run_json, tmp_path):
    store = copy_tree(MIXED, tmp_path / "s")
    before = delivered(store)
    path, at, rid = _first(store, 21)
    flip_byte(path, at, 0x02)  # 21 QUEUE_BINDING_RECORD -> 23, a type no Artemis writes
    assert before.diff(delivered(store))["bindings"] == 1  # the broker's load skips it: the binding is gone
    assert "of user type 23" in broker_could_write(store)
    code, doc, _ = run_json("verify", store)
    assert code == 2 and "binding-type-damaged" in _codes(doc, "critical")
    f = next(f for f in doc["findings"] if f["code"] == "binding-type-damaged")
    assert f["details"]["recordId"] == rid and f["details"]["bindingType"] == 21


def test_an_id_counter_whose_type_is_unknown_is_named_not_critical(run_json, tmp_path):
    store = copy_tree(MIXED, tmp_path / "s")
    before = delivered(store)
    path, at, rid = _first(store, 24)
    flip_byte(path, at, 0x08)  # 24 ID_COUNTER_RECORD -> 16: skipped, and its 8 bytes are no binding
    assert before.diff(delivered(store)) == {"lost": 0, "back": 0, "bindings": 0, "content": 0}
    code, doc, _ = run_json("verify", store)
    assert not _codes(doc, "critical")
    assert "bindings-record-skipped" in _codes(doc, "warning")
    assert code == 1
