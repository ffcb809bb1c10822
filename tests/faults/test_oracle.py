"""The harness's oracle of proven loss (tests/faults/artemis.py ``broker_could_write``, the ``loss-unproven``
class of tests/faults/model.py): a pristine store is one the broker could have written; a store that lost a
file others refer to is not; a store whose damage left every record consistent is."""
from __future__ import annotations

import pytest

from amqtool.formats.artemis.records import scan_records_py
from tests.faults.artemis import broker_could_write
from tests.faults.campaign_fixtures import pristine, store  # noqa: F401 - fixtures
from tests.faults.stores import fixtures, messages_files


def test_the_campaign_stores_are_ones_a_broker_writes(pristine):
    assert broker_could_write(pristine) == ""
    for name, path in fixtures():
        assert broker_could_write(path) == "", name


def test_a_deleted_first_file_whose_messages_are_still_acknowledged_later_is_proven(store):
    messages_files(store)[0][0].unlink()
    assert "never deleted, without its record" in broker_could_write(store)


def test_an_ack_moved_to_another_message_of_the_same_queue_is_unproven(store, run_json):
    # (c) of the campaign's loss/OK misses: the acknowledgement's message id now names another message routed
    # to the same queue and not acknowledged there: one message comes back, the other is gone, and every
    # record of the store is consistent with every other -- verify cannot see it, and the oracle agrees.
    from amqtool.engines.artemis.broker_state import REF_TYPES, build_broker_state
    from amqtool.engines.artemis.load import load_journal
    from amqtool.store.journal_files import open_journal
    from amqtool.store.layout import detect
    from tests.faults.artemis import delivered
    from tests.faults.model import UNPROVEN, classify

    st = detect(store)
    with open_journal(st.bindings) as ob, open_journal(st.messages) as om:
        state = build_broker_state(load_journal(ob), load_journal(om), decode=REF_TYPES)
        acked, refs = set(state.acked), {m: set(q) for m, q in state.refs.items()}
    before = delivered(store)
    for path, tag, version in messages_files(store):
        data = bytearray(path.read_bytes())
        recs, _ = scan_records_py(bytes(data), tag, version)
        for r in recs:
            if r[0] != 12 or r[6] != 33:
                continue
            q = int.from_bytes(data[r[1] + 6 + 8 + 4 + 1:][:8], "big")
            other = next((m for m, qs in refs.items() if q in qs and (m, q) not in acked and m != r[5]
                          and len(m.to_bytes(8, "big").lstrip(b"\0")) == 1), None)
            if other is None or (r[5], q) not in acked:
                continue
            data[r[1] + 6:r[1] + 14] = other.to_bytes(8, "big")
            path.write_bytes(bytes(data))
            truth, diff = classify(before, delivered(store), lambda d: False,
                                   lambda: bool(broker_could_write(store)), moved=True)
            assert (truth, diff["lost"], diff["back"]) == (UNPROVEN, 1, 1)
            code, doc, _ = run_json("verify", store)
            assert code == 0  # what verify cannot see (man/amqtool-verify.1)
            return
    pytest.fail("no acknowledgement to move")


def test_an_address_binding_that_does_not_decode_is_a_store_the_broker_refuses(tmp_path):
    # campaign seed 25002077006006: an ADDRESS_STATUS_RECORD's user type flipped to ADDRESS_BINDING_RECORD;
    # loadBindingJournal rethrows its decode failure and the broker does not start: nothing is delivered
    from tests.faults.artemis import delivered
    from tests.support import MESSAGES, copy_tree

    src = MESSAGES / "02_broker_mixed_compacted"
    if not src.is_dir():
        pytest.skip("broker-written fixture absent")
    store = copy_tree(src, tmp_path / "s")
    assert delivered(store).rows
    with open(store / "bindings/activemq-bindings-3.bindings", "r+b") as fh:
        fh.seek(1508)
        b = fh.read(1)[0]
        fh.seek(1508)
        fh.write(bytes([b ^ 0x02]))
    d = delivered(store)
    assert not d.rows and not d.bindings


def test_a_bindings_journal_alone_is_unproven_unless_pages_or_large_bodies_prove_the_journal(store):
    # seed 8484 over the real JournalImpl stores: 7 deletions of the message journal of a store without pages
    # or large messages were "loss" (proven) while nothing in the store tells it from a bindings directory copied
    # alone (the public fixtures are such copies): verify's WARNING messages-journal-missing is what it can say
    import shutil

    from tests.faults.stores import ARTEMIS

    public = [p.parent for p in (ARTEMIS / "public").glob("*/data/bindings")]
    assert public, "the public fixtures hold bindings-only data directories"
    for root in public:
        assert broker_could_write(root) == "", root
    shutil.rmtree(store / "data/journal")
    assert "large-message bodies" in broker_could_write(store)
    shutil.rmtree(store / "data/large-messages")
    assert "page files holding messages" in broker_could_write(store)
    shutil.rmtree(store / "data/paging")
    assert broker_could_write(store) == ""


def test_what_the_pristine_store_shows_already_proves_no_damage():
    # tests/data/artemis/restart-orphan (a real JournalImpl store, restarted): two live updates of message
    # 2147484131 without its add or a DELETE, which JournalImpl leaves after a restart. The oracle took every
    # damaged copy for one no broker writes on that alone: deleting a file that leaves no evidence of its own
    # (activemq-data-14.amq: 9 acknowledged messages come back) was proven loss, and verify's OK a false OK
    from pathlib import Path

    from tests.faults.artemis import restart_orphans
    from tests.faults.model import LOSS, UNPROVEN, Fault
    from tests.faults.runner import Campaign

    src = Path(__file__).resolve().parents[1] / "data" / "artemis" / "restart-orphan"
    # acknowledged, with a freed fileID after them: the oracle's own model takes them for a restart's
    # (artemis._restart_left) as the pristine's excuse does
    assert broker_could_write(src) == ""
    assert restart_orphans(src) == {2147484131}
    assert broker_could_write(src, orphans_ok=restart_orphans(src)) == ""
    with Campaign("restart-orphan", src) as c:
        quiet = c.judge(Fault("delete", "journal/activemq-data-14.amq", 0, 0, "", "file"))
        told = c.judge(Fault("delete", "journal/activemq-data-17.amq", 0, 0, "", "file"))
    assert (quiet.truth, quiet.diff["back"]) == (UNPROVEN, 9)
    assert (told.truth, told.verdict) == (LOSS, "CRITICAL")


def test_an_inconsistency_the_pristine_store_shows_already_proves_no_damage(tmp_path):
    # /work/artemis-fresh/b10 (gen.sh ... 65536 7120 0 500 2: SIGKILLed while Artemis' compactor ran) is written
    # by the real JournalImpl, yet five of its older files end in bytes the oracle reads as damage (compaction
    # outputs written into reused files). Every damaged copy showed them, so every fault read as proven: its
    # oldest file deleted (61 prepared messages gone, nothing left naming them) was loss, verify's WARNING a
    # miss. Here the same flaw is made by hand in restart-orphan's activemq-data-47.amq: deleting
    # activemq-data-14.amq (9 acknowledged messages back, nothing left refers to them) stays loss-unproven,
    # while activemq-data-17.amq's deletion, which leaves updates without their message, is still proven.
    import shutil
    from pathlib import Path

    from tests.faults.artemis import pristine_flaws, restart_orphans
    from tests.faults.model import LOSS, UNPROVEN, Fault
    from tests.faults.runner import Campaign

    src = tmp_path / "s"
    shutil.copytree(Path(__file__).resolve().parents[1] / "data" / "artemis" / "restart-orphan", src)
    older = src / "journal" / "activemq-data-47.amq"
    data = bytearray(older.read_bytes())
    data[15700:15740] = b"\x7f" * 40  # after its last record (ends at 15632), zeros before: not an earlier use's
    older.write_bytes(bytes(data))
    flaw = "activemq-data-47.amq: damaged end of a file that is not the newest"
    assert pristine_flaws(src, orphans_ok=restart_orphans(src)) == {flaw}
    assert broker_could_write(src, orphans_ok=restart_orphans(src)) == flaw
    assert broker_could_write(src, orphans_ok=restart_orphans(src), known=frozenset({flaw})) == ""
    with Campaign("flawed", src) as c:
        quiet = c.judge(Fault("delete", "journal/activemq-data-14.amq", 0, 0, "", "file"))
        told = c.judge(Fault("delete", "journal/activemq-data-17.amq", 0, 0, "", "file"))
    assert (quiet.truth, quiet.diff["back"]) == (UNPROVEN, 9)
    assert (told.truth, told.verdict) == (LOSS, "CRITICAL")
