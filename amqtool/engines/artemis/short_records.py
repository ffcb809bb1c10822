"""Live records whose body the broker's decode of their type reads past (``verify``'s ``record-undecodable``).

The page transactions, cursor acknowledgements, page completions and page counters of the message journal are
decoded with fixed layouts (:mod:`amqtool.formats.artemis.body_reads`). A damaged user record type byte turns
one of them into another of a longer layout (a PAGE_TRANSACTION, 12 bytes, read as an ACKNOWLEDGE_CURSOR, 20:
35 and 39 differ in one bit), or a damaged size leaves a body too short: ``loadMessageJournal`` rethrows the
decode's ``IndexOutOfBoundsException`` and the broker does not start. A DUPLICATE_ID record
(``DuplicateIDEncoding``: address, then the id, each behind an i32 length) throws the same way when a damaged
length is negative or runs past the body (``body_reads.duplicate_id_value``). References and their updates are
judged as ``ref-undecodable`` (:class:`~amqtool.engines.artemis.evidence.Evidence`).
"""
from __future__ import annotations

from amqtool.errors import Finding, Severity
from amqtool.formats.artemis.body_reads import MIN_BODY, duplicate_id_value, reads_past_body
from amqtool.formats.artemis.userrecords import JournalRecordIds as R

_JUDGED_AS_REFS = frozenset({R.ADD_REF, R.ACKNOWLEDGE_REF, R.UPDATE_DELIVERY_COUNT, R.SET_SCHEDULED_DELIVERY_TIME})
_PAGING = frozenset(MIN_BODY) - _JUDGED_AS_REFS


def short_paging_records(result) -> list:
    """The live records of the message journal load ``result`` of a paging type whose body the decode reads
    past."""
    if result is None:
        return []
    return [r for r in result.live if r.user_record_type in _PAGING and reads_past_body(r.user_record_type, r.body_len)]


def undecodable_duplicate_ids(result) -> list:
    """The live DUPLICATE_ID records of the message journal load ``result`` whose decode throws."""
    if result is None:
        return []
    live = result.live
    find = getattr(live, "indexes_of_types", None)
    found = ([live[i] for i in find((R.DUPLICATE_ID,))] if find is not None
             else [r for r in live if r.user_record_type == R.DUPLICATE_ID])
    return [r for r in found if duplicate_id_value(result.body(r)) is None]


def short_record_finding(result, have_bindings: bool) -> Finding | None:
    """CRITICAL ``record-undecodable`` for :func:`short_paging_records` and :func:`undecodable_duplicate_ids`, in
    a broker's store (its bindings journal beside: a bare journal directory may hold other user types), or
    None."""
    short = short_paging_records(result) + undecodable_duplicate_ids(result) if have_bindings else []
    if not short:
        return None
    short.sort(key=lambda x: (x.file_index, x.body_offset))
    r = short[0]
    shown = ", ".join(f"record {x.id} (type {x.user_record_type}, {x.body_len} bytes)" for x in short[:20])
    return Finding(
        Severity.CRITICAL, "record-undecodable",
        f"{len(short)} live record(s) have a body the broker's decode of their type reads past (page transactions "
        f"12 bytes, cursor acknowledgements and page completions 20, page counters 16 or 12 with an optional 8; a "
        f"duplicate id's address and id lengths): its load throws and the broker does not start: {shown}",
        str(result.files[r.file_index].path), r.body_offset, {"count": len(short), "recordIds": [x.id for x in short[:100]]})
