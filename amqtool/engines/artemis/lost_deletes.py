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
of that id.
"""
from __future__ import annotations

from amqtool.formats.artemis.records import DELETE, DELETE_TX


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
