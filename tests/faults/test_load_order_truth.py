"""The campaign's truth walks the committed records in load order, as the broker's load does
(tests/faults/artemis.py ``as_walked``).

``AbstractJournalStorageManager.loadMessageJournal`` (Artemis 6700541d46) walks the list ``JournalImpl.load``
gives (records outside a transaction where they are read, a transaction's at its COMMIT): an ADD_REF whose
message has no record yet is logged (``cannotFindMessage``) and dropped, an ACKNOWLEDGE_REF of a pair not yet
in ``queueMap`` is logged and does nothing. The export's own rule (a pair lives with an ADD_REF and no
ACKNOWLEDGE_REF, whatever their order) counted a reference damaged onto a later message as delivered, and an
acknowledgement damaged onto a message referenced later as taking it. The real JournalImpl lists such a
reference first (the oracle: /work/shared/tools/artemis-oracle on a06 with a reference of 2147485104 moved
onto 2147485616, whose ADD comes 570 records later).
"""
from __future__ import annotations

import shutil

import pytest

from tests.faults import artemis
from tests.faults.stores import campaign_demo

ADD_REF, ACK_REF = 32, 33


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return campaign_demo(tmp_path_factory.mktemp("order") / "d")


def _walk(store):
    """(live list, bodies' queue ids, load) of the store's message journal, and each message's list index."""
    from amqtool.engines.artemis.load import load_journal
    from amqtool.store.journal_files import open_journal
    from amqtool.store.layout import detect

    with open_journal(detect(store).messages) as opened:
        result = load_journal(opened)
        live = list(result.live)
        queues = {i: int.from_bytes(result.body(r)[:8], "big") for i, r in enumerate(live)
                  if r.user_record_type in (ADD_REF, ACK_REF)}
        paths = [jf.path for jf in result.files]
    added = {r.id: i for i, r in enumerate(live) if r.user_record_type in (30, 45) and not r.is_update}
    return live, queues, paths, added


def _move(copy, store, paths, rec, new_id):
    """Write ``new_id`` over the id of the update ``rec`` (UPDATE or UPDATE_TX: the id ends 5 bytes before the
    body: body size, user record type) in the copy."""
    path = copy / paths[rec.file_index].relative_to(store)
    data = bytearray(path.read_bytes())
    at = rec.body_offset - 13
    assert int.from_bytes(data[at:at + 8], "big") == rec.id
    data[at:at + 8] = new_id.to_bytes(8, "big")
    path.write_bytes(bytes(data))


def _held(delivered):
    return {(q, m) for (q, m, state), n in delivered.rows.items() if state == "committed" and n}


def _held_after_move(store, tmp_path, paths, rec, later):
    """What a copy of ``store`` whose record ``rec`` names ``later`` instead of its own id delivers."""
    copy = tmp_path / "copy"
    shutil.copytree(store, copy)
    _move(copy, store, paths, rec, later)
    return _held(artemis.delivered(copy))


def test_reference_moved_onto_a_later_message_is_dropped(store, tmp_path):
    live, queues, paths, added = _walk(store)
    pristine = _held(artemis.delivered(store))
    case = next((i, r, m) for i, r in enumerate(live) if r.user_record_type == ADD_REF
                and (queues[i], r.id) in pristine
                for m, at in added.items() if at > i and (queues[i], m) not in pristine)
    i, rec, later = case
    held, q = _held_after_move(store, tmp_path, paths, rec, later), queues[i]
    assert (q, rec.id) not in held  # its own message lost the reference
    assert (q, later) not in held  # and the broker attached it to nothing: the message was not loaded yet
    assert held == pristine - {(q, rec.id)}


def test_acknowledgement_moved_onto_a_message_referenced_later_takes_nothing(store, tmp_path):
    live, queues, paths, added = _walk(store)
    pristine = _held(artemis.delivered(store))
    ref_at = {(queues[i], r.id): i for i, r in enumerate(live) if r.user_record_type == ADD_REF}
    case = next((i, r, m) for i, r in enumerate(live) if r.user_record_type == ACK_REF
                for (q, m), at in ref_at.items() if q == queues[i] and at > i and (q, m) in pristine)
    i, rec, later = case
    held, q = _held_after_move(store, tmp_path, paths, rec, later), queues[i]
    assert (q, later) in held  # the acknowledgement came before the pair was there: it took nothing
    assert (q, rec.id) in held  # and its own message is back on the queue
    assert held == pristine | {(q, rec.id)}


def test_pristine_stores_lose_nothing_to_the_walk(store):
    # a broker writes every reference after its message and every acknowledgement after its reference
    from amqtool.engines.artemis.load import load_journal
    from amqtool.store.journal_files import open_journal
    from amqtool.store.layout import detect

    with open_journal(detect(store).messages) as opened:
        result = load_journal(opened)
        assert artemis.as_walked(result) is result
