"""A record added after a DELETE of its id (``verify``'s ``add-of-deleted-id``).

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
would: orphan_acks.py reads that (``delete-moved``).

A compaction keeps the order: its outputs, loaded first, hold only live records, never a DELETE of a later
ADD's id. A file whose header fileID is damaged (not its records' tag: ``file-id-damaged``) is loaded out of
its write order, and so are two files with one fileID (``duplicate-file-id``: a copy): an ADD or a DELETE
there proves nothing of the order and is not judged here. A bare journal (no broker record type: JournalImpl
used directly, as the oracle fixtures do) may add a deleted id again through the API, so it is not judged.
"""
from __future__ import annotations

from amqtool import native
from amqtool.errors import Finding, Severity
from amqtool.formats.artemis.records import fixed_size
from amqtool.formats.artemis.userrecords import JournalRecordIds as R

_MESSAGES = (30, 31, 45)  # ADD_LARGE_MESSAGE, ADD_MESSAGE, ADD_MESSAGE_PROTOCOL
_ADDS, _UPDATES, _DELETES = (11, 13), (12, 14), (15, 16)


def _history(opened, ids: set[int]) -> dict[int, list[tuple]]:
    """id -> its records in load order: (type, user record type, file index, offset, queue id or None, body
    offset). A rescan of the files, done only when the load noted such an ADD."""
    out: dict[int, list[tuple]] = {i: [] for i in ids}
    for fi, jf in enumerate(opened.files):
        data = opened.read_file(fi)
        records, _ = native.scan_records(data, jf.tag, jf.version, True, 16)
        for t, off, size, cc, tx, rid, utype, body_len, nrec, extra in records:
            if rid not in out or t not in _ADDS + _UPDATES + _DELETES:
                continue
            start = off + fixed_size(t, jf.version) - 4
            queue = None
            if t in _UPDATES and utype in (R.ADD_REF, R.ACKNOWLEDGE_REF) and body_len >= 8:
                queue = int.from_bytes(data[start:start + 8], "big", signed=True)
            out[rid].append((t, utype, fi, off, queue, start))
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
        # the anomaly stands at the dropped ADD's body (where both loaders keep an entry)
        add = next((i for i, r in enumerate(recs) if r[0] in _ADDS and (r[2], r[5]) == (a.file_index, a.offset)),
                   None)
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

