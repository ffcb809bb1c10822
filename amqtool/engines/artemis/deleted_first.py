"""DELETEs whose id was damaged onto another record: an ADD read after a DELETE of its id (``verify``'s
``add-of-deleted-id``), and a DELETE moved onto a message stored before it (``delete-moved``).

The broker deletes a record only once it was added: a message is deleted after its last acknowledgement, a
binding or a bookkeeping record after it was stored, and every id comes from one counter counting up, so in the
order ``JournalImpl.load`` reads the files a DELETE of an id follows its ADD. ``JournalImpl.load`` applies a
DELETE to the whole load, not only to what came before it (``recordsToDelete``, checked as the load ends), so an
ADD read after a DELETE of its id is dropped with every update of it. The store then shows that one of the two
ids was damaged:

* the DELETE's id, moved onto a later record: the record its DELETE named is deleted no more (its references
  were acknowledged: nothing changes there), and the later record is dropped: when it is a message whose
  references after its ADD are not all acknowledged and no DELETE follows it, the broker loses it from those
  queues, a proven loss: CRITICAL;
* or the ADD's id, moved onto a deleted record's: the message it added is dropped, and its own references, left
  without it, are other findings' to weigh (``message-record-missing``). A warning here.

The same damage can move a DELETE onto a message written *before* it, which the load then deletes as the broker
would (:func:`moved_onto_live`). The broker writes a message's DELETE right after the acknowledgement of its last
reference (``storeAcknowledge`` then ``deleteMessage``, in the acknowledging transaction when there is one), so
such a DELETE follows an acknowledgement of another id one damaged byte away, which the load now leaves live
without its message (its own ADD reclaimed long ago, as a deleted message's is). When the message the DELETE
names has references no acknowledgement covers, the broker loses it from those queues: CRITICAL
``delete-moved``. Not when one of those queues is the acknowledgement's: an acknowledgement whose own id was
damaged leaves the same records (the DELETE's message then lacks that one acknowledgement), and is far more
common.

A compaction keeps the order: its outputs, loaded first, hold only live records, never a DELETE of a later
ADD's id. A file whose header fileID is damaged (not its records' tag: ``file-id-damaged``) is loaded out of
its write order, and so are two files with one fileID (``duplicate-file-id``: a copy): an ADD or a DELETE
there proves nothing of the order and is not judged here. A bare
journal (no broker record type: JournalImpl used directly, as the oracle fixtures do) may add a deleted id again
through the API, so it is not judged.
"""
from __future__ import annotations

from amqtool import native
from amqtool.errors import Finding, Severity
from amqtool.formats.artemis.records import fixed_size
from amqtool.formats.artemis.userrecords import JournalRecordIds as R

_MESSAGES = (30, 31, 45)  # ADD_LARGE_MESSAGE, ADD_MESSAGE, ADD_MESSAGE_PROTOCOL
_ADDS, _UPDATES, _DELETES = (11, 13), (12, 14), (15, 16)


def _history(opened, ids: set[int]) -> dict[int, list[tuple]]:
    """id -> its records in load order: (type, user record type, file index, offset, queue id or None). A rescan
    of the files, done only when the load noted such an ADD."""
    out: dict[int, list[tuple]] = {i: [] for i in ids}
    for fi, jf in enumerate(opened.files):
        data = opened.read_file(fi)
        records, _ = native.scan_records(data, jf.tag, jf.version, True, 16)
        for t, off, size, cc, tx, rid, utype, body_len, nrec, extra in records:
            if rid not in out or t not in _ADDS + _UPDATES + _DELETES:
                continue
            queue = None
            if t in _UPDATES and utype in (R.ADD_REF, R.ACKNOWLEDGE_REF) and body_len >= 8:
                start = off + fixed_size(t, jf.version) - 4
                queue = int.from_bytes(data[start:start + 8], "big", signed=True)
            out[rid].append((t, utype, fi, off, queue))
        del data
    return out


def findings(result, evidence) -> list[Finding]:
    """One ``add-of-deleted-id`` finding per ADD the load ``result`` of a broker's journal dropped for a DELETE
    of its id read before it: CRITICAL when the dropped message is still on a queue (see the module)."""
    noted = [a for a in result.anomalies if a.code == "add-of-deleted-id"]
    if not noted or evidence.bare:
        return []
    opened = result.opened
    ids = [f.file_id for f in opened.files]
    if len(set(ids)) < len(ids):
        return []  # two files with one fileID (duplicate-file-id's): their order is no write order
    history = _history(opened, {a.ids["id"] for a in noted})
    out = []
    for a in noted:
        rid = a.ids["id"]
        recs = history.get(rid, [])
        add = next((i for i, r in enumerate(recs) if r[0] in _ADDS and r[2] == a.file_index and r[3] < a.offset
                    and a.offset - r[3] < 64), None)
        first_delete = next((r for r in recs if r[0] in _DELETES), None)
        if add is None or first_delete is None or any(
                opened.files[fi].file_id != opened.files[fi].tag for fi in (recs[add][2], first_delete[2])):
            continue
        after = recs[add + 1:]
        refs = {r[4] for r in after if r[0] in _UPDATES and r[1] == R.ADD_REF and r[4] is not None}
        acked = {r[4] for r in after if r[0] in _UPDATES and r[1] == R.ACKNOWLEDGE_REF}
        deleted_after = any(r[0] in _DELETES for r in after)
        queues = sorted(refs - acked)
        lost = recs[add][1] in _MESSAGES and queues and not deleted_after
        where = f"{opened.files[first_delete[2]].path.name}@{first_delete[3]}"
        path, offset = str(opened.files[recs[add][2]].path), recs[add][3]
        if lost:
            out.append(Finding(
                Severity.CRITICAL, "add-of-deleted-id",
                f"message {rid} is added after a DELETE of its id ({where}): the broker deletes a record only once "
                f"it was added, so one of the two ids was damaged, and JournalImpl.load applies every DELETE to "
                f"the whole load: the broker drops the message, still on queue(s) {', '.join(map(str, queues))}",
                path, offset, {"id": rid, "deleteAt": where, "queues": queues}))
        else:
            out.append(Finding(
                Severity.WARNING, "add-of-deleted-id",
                f"record {rid} is added after a DELETE of its id ({where}): the broker deletes a record only once "
                f"it was added, so one of the two ids was damaged; the broker drops the record, which holds no "
                f"message still on a queue", path, offset, {"id": rid, "deleteAt": where}))
    return out


def moved_onto_live(result, evidence, max_candidates: int = 8) -> list[Finding]:
    """One CRITICAL ``delete-moved`` finding per DELETE (or DELETE_TX) of the messages journal's load ``result``
    that follows, in its file, an acknowledgement of an id one damaged byte away that the load leaves live
    without its message, and deletes a message still on a queue (see the module). Rescans the files only when
    such acknowledgements exist (at most ``max_candidates`` ids)."""
    from amqtool.formats.damage import one_byte_apart

    if result is None or evidence.bare:
        return []
    messages = {r.id for r in result.live if not r.is_update and r.user_record_type in _MESSAGES}
    acked = {r.id for r in result.live if r.is_update and r.user_record_type == R.ACKNOWLEDGE_REF}
    candidates = acked - messages
    if not candidates or len(candidates) > max_candidates:
        return []
    opened = result.opened
    moved: list[tuple[int, int, int, int, int]] = []  # (DELETE id, acknowledged id, its queue, file, offset)
    for fi, jf in enumerate(opened.files):
        data = opened.read_file(fi)
        records, _ = native.scan_records(data, jf.tag, jf.version, True, 16)
        for prev, rec in zip(records, records[1:]):
            if (rec[0] in _DELETES and prev[0] in _UPDATES and prev[6] == R.ACKNOWLEDGE_REF and prev[7] >= 8
                    and prev[5] in candidates and rec[5] != prev[5] and one_byte_apart(rec[5], prev[5])):
                at = prev[1] + fixed_size(prev[0], jf.version) - 4
                moved.append((rec[5], prev[5], int.from_bytes(data[at:at + 8], "big", signed=True), fi, rec[1]))
        del data
    if not moved:
        return []
    history = _history(opened, {m[0] for m in moved})
    out = []
    for rid, acked_id, acked_queue, fi, off in moved:
        recs = history.get(rid, [])
        add = next((r for r in recs if r[0] in _ADDS and r[1] in _MESSAGES), None)
        if add is None or sum(1 for r in recs if r[0] in _DELETES) != 1:
            continue
        refs = {r[4] for r in recs if r[0] in _UPDATES and r[1] == R.ADD_REF and r[4] is not None}
        queues = sorted(refs - {r[4] for r in recs if r[0] in _UPDATES and r[1] == R.ACKNOWLEDGE_REF})
        if not queues or acked_queue in queues:
            # an acknowledgement whose own id was damaged leaves this very trace: the DELETE's message then
            # lacks the acknowledgement on that queue (lost_deletes.moved_updates), and nothing is lost
            continue
        out.append(Finding(
            Severity.CRITICAL, "delete-moved",
            f"the DELETE of message {rid} follows the acknowledgement of message {acked_id}, one damaged byte away, "
            f"which is left without its DELETE: the broker deletes a message right after its last acknowledgement, "
            f"so this DELETE's id was damaged, and the broker drops message {rid}, still on queue(s) "
            f"{', '.join(map(str, queues))}", str(opened.files[fi].path), off,
            {"id": rid, "acknowledgedId": acked_id, "queues": queues}))
    return out
