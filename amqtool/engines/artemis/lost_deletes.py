"""The DELETE records that damaged regions between valid records held: they explain live updates without
their add as well as a removed journal file does (issue 25).

``verify`` takes live updates whose add is gone for a lost journal file (``missing-journal-file``): the
broker never frees a file that holds the add of a live record. A DELETE the load could not read leaves the
same trace. The reclaimer frees a file once every record in it is dead (``JournalImpl.checkReclaimStatus``:
a record is dead once deleted), so the add of a message acknowledged and deleted long ago is often gone while
its updates (references, acknowledgements, delivery counts) still sit in later files, dead too; the broker
keeps those files only until their own records are all dead. When the DELETE is damaged, the load reads
those updates as live (``JournalImpl.load`` removes a record and its updates only on a DELETE it reads), and
the broker drops them, having no message for them (``AbstractJournalStorageManager.loadMessageJournal``:
"cannot find message"): nothing it delivers changes. Real JournalImpl stores showed a flip inside such a
DELETE turn into a CRITICAL ``missing-journal-file``.

The damaged bytes tell it: every reading of the region as one record (``evidence.reconstruct``) is a
DELETE (or a DELETE_TX, whose transaction the load then discards whole, judged as commit-count-mismatch)
of that id (:func:`deleted_in_damage`).

A DELETE whose id bytes were damaged reads whole, as the DELETE of another id that has no other record
(the load's ``delete-unknown-id``), one damaged byte (one bit or more of it) from the id whose updates it leaves
live (:func:`moved_deletes`; a random byte of a real JournalImpl store's DELETE turned its reclaimer gaps into a
CRITICAL ``missing-journal-file``).
The broker writes a message's DELETE after the acknowledgement of its last reference
(``QueueImpl.acknowledge`` stores the ack, then ``postAcknowledge`` deletes the message once its durable
reference count is 0, "after the preceding ack"), so such a DELETE follows an update of the id it belonged to,
right after it when nothing else was written between (a busy broker interleaves other records: such a moved
DELETE stays unexplained). Deletes of ids with no add are not rare (the delete of a message whose add was
reclaimed: 177 in a real store of about 3,000 ids), and ids are dense, so a byte away from an id is not
enough: the DELETE must also follow, in its file, an update of that id, and its own id must have no other
record. A removed file would leave its add's updates live, whatever record follows them.

The mirror case: an acknowledgement's own id was damaged (:func:`moved_updates`). Right after it in its file
stands the DELETE of the id one damaged byte away, a message with a reference on the acknowledgement's queue and
no acknowledgement there: the broker acknowledged the message's last reference and deleted it at once
(``storeAcknowledge`` then ``deleteMessage``, both in the acknowledging transaction when there is one). The
acknowledgement now applies to nothing, and the DELETE removes that message all the same: nothing delivered
changes (a flip of such an id in a real JournalImpl store read as a CRITICAL ``missing-journal-file``).

A DELETE_TX the load read but did not apply explains them too (:func:`discarded_deletes`). The broker applies
a transaction's deletes at its COMMIT (``JournalImpl.load``: the transaction's records and deletes are applied
only when the COMMIT's record count matches what the files hold of it), and the reclaimer counts them only
once committed (``JournalTransaction.commit``), so the add of a record a committed transaction deleted may be
long reclaimed. When damage elsewhere in the transaction (one of its records' transaction id, its COMMIT's
count or id) makes the load drop it (``commit-count-mismatch``) or leave it open, the updates it deleted read
as live without their add; the broker drops them, having no message for them. Real JournalImpl stores showed
such flips turn into a CRITICAL ``missing-journal-file``. A removed file holding the add leaves no DELETE of it
anywhere; a prepared transaction's pending deletes are excepted (their adds stay until it commits).

Bytes the damage took after every live record of such an id explain them as well (:func:`cut_deletes`), where
verify reports them (a damaged tail, a file cut inside a record, or a damaged region between records, each
weighed by its own finding). The broker writes a
message's DELETE after its last acknowledgement, so the DELETE of a message whose add was reclaimed lies after
all its updates, perhaps in what was cut: real JournalImpl stores showed a truncation turn the reclaimer's
fileID gaps into a CRITICAL ``missing-journal-file`` while the broker delivers the same messages. Damage that
took the ADD of a live message lies before its updates (the broker stores a message before routing it), so it
explains nothing there, and a removed file leaves no such damage.
"""
from __future__ import annotations

from amqtool.formats.artemis.records import ADD, ADD_TX, COMMIT, DELETE, DELETE_TX, UPDATE, UPDATE_TX

_UPDATES = (UPDATE, UPDATE_TX)
_ID_RECORDS = (ADD, ADD_TX, UPDATE, UPDATE_TX)


def deleted_in_damage(regions, max_id: int) -> set[int]:
    """The ids of the DELETE and DELETE_TX records the damaged regions held, when the region reads as nothing
    else. ``regions``: the ``(path, first, next record, (bytes, base, tag, version) or None)`` the load's gap
    inspector kept (``verify._GapInspector.regions``); ``max_id``: the load's highest id (what a rebuilt
    record's ids are weighed against)."""
    from amqtool.engines.artemis.evidence import reconstruct

    out: set[int] = set()
    for _path, first, end, region in regions:
        if region is None:
            continue
        buf, base, tag, version = region
        candidates = reconstruct(buf, base, first, end, tag, version, max_id)
        ids = {(r.type in (DELETE, DELETE_TX), r.id) for r in candidates}
        if len(ids) == 1:
            is_delete, rid = next(iter(ids))
            if is_delete:
                out.add(rid)
    return out


def moved_deletes(result, orphans: set[int], max_orphans: int = 8) -> set[int]:
    """The ids of ``orphans`` (ids of live updates without their add in the load ``result``) whose DELETE had
    its id damaged: a DELETE of an id one damaged byte away that has no other record, right after an update of
    the orphan id in its file (see the module docstring). Rescans the journal's files; [] for more than
    ``max_orphans`` orphan ids (what a removed file leaves)."""
    from amqtool import native
    from amqtool.formats.damage import ByteNeighbours

    if not orphans or len(orphans) > max_orphans:
        return set()
    from amqtool.engines.artemis.write_order import compacted

    neighbours = ByteNeighbours(orphans)  # signed 64-bit, as the ids are read
    near: dict[int, int] = {}  # DELETE id -> the orphan one byte from it (the last, in the set's order)
    opened = result.opened
    carried: dict[int, tuple[int, int]] = {}  # id some record other than a DELETE carries -> where it first does
    follows: dict[int, list] = {}  # DELETE id one byte from an orphan -> ids of the update records before each
    first_delete: dict[int, tuple[int, int]] = {}  # such a DELETE id -> where the first DELETE of it stands
    for fi, jf in enumerate(opened.files):
        records, _ = native.scan_records(opened.read_file(fi), jf.tag, jf.version, True, 16)
        prev = None
        for rec in records:
            t, rid = rec[0], rec[5]
            if t in (DELETE, DELETE_TX):
                if rid not in near:
                    xs = neighbours.of(rid)
                    if xs:
                        near[rid] = xs[-1]
                if rid in near:
                    follows.setdefault(rid, []).append(prev[5] if prev is not None and prev[0] in _UPDATES else None)
                    first_delete.setdefault(rid, (fi, rec[1]))
            elif t in _ID_RECORDS:
                carried.setdefault(rid, (fi, rec[1]))
            prev = rec
    # in the broker's write order a record is deleted after it was written: a DELETE of an id whose records all
    # come later deleted nothing of it, its id was damaged. And a record is deleted once: of two DELETEs of one
    # id, the one right after the orphan's update is the orphan's, its id damaged (campaign sweep seed 9132: the
    # id of a DELETE_TX moved onto a message stored before it and deleted later)
    ordered = not compacted(result)
    out = set()
    for y, before in follows.items():
        unowned = y not in carried or ordered and carried[y] > first_delete[y]
        if unowned and set(before) == {near[y]} or len(before) == 2 and before.count(near[y]) == 1:
            out.add(near[y])
    return out


def moved_updates(result, orphans: set[int], max_orphans: int = 8) -> set[int]:
    """The ids of ``orphans`` (ids of live updates without their add in the load ``result``) that are an
    acknowledgement's damaged id: each update of the id is an acknowledgement, followed in its file right away
    by a DELETE (or DELETE_TX) of an id one damaged byte away whose reference on that queue the journal holds
    and no other acknowledgement does (see the module docstring: ids are dense, so the byte alone would tie
    most updates to some neighbour). Rescans the journal's files; [] for more than ``max_orphans`` orphan ids
    (what a removed file leaves)."""
    from amqtool import native
    from amqtool.engines.artemis.orphans import ACKNOWLEDGE_REF, ADD_REF
    from amqtool.formats.artemis.records import body_offset
    from amqtool.formats.damage import one_byte_apart

    if not orphans or len(orphans) > max_orphans:
        return set()
    opened = result.opened
    carried: set[int] = set()  # ids an ADD or update record carries
    refs: dict[int, set] = {}  # message id -> queues of its references (live or dead, in the files present)
    acks: dict[int, set] = {}  # message id -> queues of its acknowledgements
    updates: dict[int, list] = {}  # orphan id -> (user type, queue, id of the DELETE right after) of each update
    for fi, jf in enumerate(opened.files):
        buf = opened.read_file(fi)
        records, _ = native.scan_records(buf, jf.tag, jf.version, True, 16)
        for rec, nxt in zip(records, records[1:] + [None]):
            t, rid, utype = rec[0], rec[5], rec[6]
            if t not in _ID_RECORDS:
                continue
            carried.add(rid)
            queue = None
            if t in _UPDATES and utype in (ADD_REF, ACKNOWLEDGE_REF) and rec[7] >= 8:
                at = body_offset(rec, jf.version)
                queue = int.from_bytes(buf[at:at + 8], "big", signed=True)
                (refs if utype == ADD_REF else acks).setdefault(rid, set()).add(queue)
            if t in _UPDATES and rid in orphans:
                after = nxt[5] if nxt is not None and nxt[0] in (DELETE, DELETE_TX) else None
                updates.setdefault(rid, []).append((utype, queue, after))
    out = set()
    for x, ups in updates.items():
        if all(utype == ACKNOWLEDGE_REF and y is not None and y in carried and one_byte_apart(x, y)
               and q in refs.get(y, ()) and q not in acks.get(y, ()) for utype, q, y in ups):
            out.add(x)
    return out


def discarded_deletes(result) -> set[int]:
    """The ids that DELETE_TX records of the load ``result``'s files delete in a transaction the load did not
    apply although it was not left prepared: one whose COMMIT the files hold (the load dropped it for a count
    that does not match) or one left open without a valid PREPARE (see the module docstring). Rescans the
    files."""
    from amqtool import native

    out = {r.id for tx in result.failed for r in tx.records_to_delete}
    committed: set[int] = set()
    pending: dict[int, set[int]] = {}
    opened = result.opened
    for fi, jf in enumerate(opened.files):
        records, _ = native.scan_records(opened.read_file(fi), jf.tag, jf.version, True, 16)
        for rec in records:
            if rec[0] == DELETE_TX:
                pending.setdefault(rec[4], set()).add(rec[5])
            elif rec[0] == COMMIT:
                committed.add(rec[4])
    for tx in committed & pending.keys():
        out |= pending[tx]
    return out


def cut_deletes(result, regions=(), tails=()) -> set[int]:
    """The ids of the load ``result``'s live updates without their add whose every live record lies before
    bytes the damage took and verify reports (see the module docstring): a damaged region of ``regions`` (the
    ``(path, first, next record, ...)`` of ``verify._GapInspector.regions``) or a damaged tail of ``tails``
    (``(file index, path, first, last)`` of ``_GapInspector.tails``: a file cut inside a record, or garbage
    after its last record). A file cut exactly between records leaves neither: nothing tells it from a file
    the broker moved on from, and the updates left without their add stay evidence of a lost file."""
    files = result.files
    index = {str(jf.path): i for i, jf in enumerate(files)}
    cuts = [(t[0], t[2]) for t in tails] + [(index[r[0]], r[1]) for r in regions if r[0] in index]
    if not cuts:
        return set()
    last_cut = max(cuts)
    added = {r.id for r in result.live if not r.is_update}
    last: dict[int, tuple[int, int]] = {}
    for r in result.live:
        if r.is_update and r.id not in added:
            pos = (r.file_index, r.body_offset)
            if pos > last.get(r.id, (-1, -1)):
                last[r.id] = pos
    return {i for i, pos in last.items() if pos < last_cut}
