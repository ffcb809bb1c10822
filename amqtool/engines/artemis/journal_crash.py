"""A damaged end of the current journal file that no crash leaves: proven damage, not a torn tail.

``verify`` calls the bytes after the last whole record of the current file a torn tail (``torn-tail``, a
warning): the broker stopped mid-write and drops that record at its next start. That holds only for what a crash
can leave there (``amqtool/formats/artemis/torn_write.py``): the records written since the last sync cut, or
whole 4 KiB blocks of them unwritten (zero, the file's fill). A record whose type, tag or trailing size word
reads wrong but not zero, or zero in a block that holds bytes the broker wrote, or zeros from the record's start
that end inside a block before written bytes, was damaged after the broker wrote it: the broker drops it (and
whatever followed it) all the same, and that loss is proven, so it is judged as a damaged end of a file is.
"""
from __future__ import annotations

from amqtool.errors import Finding, Severity
from amqtool.formats.artemis.torn_write import journal_tail_by_crash, record_length

_HEADER = 16
_MAX_RECORD = 1 << 24  # read no more than this to rebuild one record (a journal file is 10 MiB by default)


def crash_left(result, index: int, first: int) -> bool:
    """Whether the damaged end of file ``index`` of the journal loaded as ``result`` (its first byte that is not
    the fill at ``first``, after the last whole record) is one a crash leaves."""
    opened = result.opened
    jf = opened.files[index]
    scan = next((s for s in result.scans if s.index == index), None)
    start = scan.last_data_pos if scan is not None and scan.records else _HEADER
    return journal_tail_by_crash(lambda off, n: opened.pread(index, off, n), start, first, jf.size, jf.tag,
                                 jf.version)


def lost_record_effect(opened, index: int, start: int, effect_of, max_id: int, length: int = 0,
                       kind: str = "messages", *, bare: bool = False, last_end: int | None = None):
    """What losing the record at ``start`` of file ``index`` does (``effect_of`` of it, as evidence judges a
    damaged record), read to the length its head gives (a damaged trailing size word no longer tells it) and
    rebuilt with at most one wrong field (:func:`~amqtool.engines.artemis.evidence.reconstruct`; ``bare``: of
    any user record type, ``Evidence.bare``); None when its head gives no length or the bytes do not read as one
    record.

    ``length``: the damaged tail's length (to its last byte that is not the fill: a record ends with its size
    word, never zero). When the head's length differs from it and the tail's bytes read as one record whose
    trailing size word counts them exactly, that reading stands: the damaged field was the type byte, which
    gave the head its length (public bindings journals: campaign seed 7777, a COMMIT's type byte flipped to
    ROLLBACK's read as an 18-byte rollback with a wrong size word, "harmless", while the broker discarded the
    transaction and lost its queue binding; seed 7501, a DELETE's flipped to COMMIT's).
    ``kind``: the journal's (see :func:`_zeroed_binding`, :func:`_bindings_tx_head`: a broker's bindings journal,
    not a bare one, which holds none of its record types). ``last_end``: where the file's last valid record
    ends (see :func:`own_record_at`)."""
    from amqtool.engines.artemis.evidence import LOSS, UNKNOWN

    if bare:
        kind = "journal"
    effect = _record_effect(opened, index, start, effect_of, max_id, length, kind, bare)
    if (kind == "bindings" and effect in (None, UNKNOWN) and _bindings_tx_head(opened, index, start)
            and own_record_at(opened, index, start, last_end)):
        return LOSS
    return effect


def _bindings_tx_head(opened, index: int, start: int) -> bool:
    """Whether the damaged end at ``start`` of a bindings file begins with a record of this use whose type byte
    says it belonged to a transaction (a transactional add, update or delete, a prepare or a commit) while what
    it held cannot be read (the damage took its user record type or ids).

    The broker writes to its bindings journal in transactions only what changes its bindings: a queue or address
    binding added or deleted (``AbstractJournalStorageManager.addQueueBinding``, ``addAddressBinding``,
    ``deleteQueueBinding``, ``deleteAddressBinding``: ``appendAddRecordTransactional`` /
    ``appendDeleteRecordTransactional``, then ``commitBindings``), and a persisted configuration replaced; ID
    counters, statuses and settings are single records. Losing such a record, or its COMMIT, undoes the change
    unless its reversal was lost with it, which nothing left tells. Over the ten public bindings journals
    (campaign seeds 7504-7506 and 7777, 150 faults a store) a damaged end no crash leaves that began inside such a
    record lost or brought back a binding 11 times in 11; one beginning inside an ID-counter record or a DELETE
    (the single records) did 3 times in 30: those stay untold."""
    head = opened.pread(index, start, 1)
    return len(head) == 1 and head[0] in (13, 14, 15, 17, 18) and own_record_at(opened, index, start)


def _record_effect(opened, index: int, start: int, effect_of, max_id: int, length: int, kind: str, bare: bool):
    """:func:`lost_record_effect` from the record's bytes alone."""
    from amqtool.engines.artemis.evidence import UNKNOWN, reconstruct

    jf = opened.files[index]
    total = record_length(opened.pread(index, start, 64), jf.version)
    if total is None or not 0 < total <= _MAX_RECORD or start + total > jf.size:
        return None
    base = max(start - 24, 16)
    if length and length != total and start + length <= jf.size:
        whole = [r for r in reconstruct(opened.pread(index, base, start + length - base), base, start,
                                        start + length, jf.tag, jf.version, max_id, bare=bare)
                 if r.total == length and r.wrong != "checksize"]
        if whole:
            total = length
    candidates = reconstruct(opened.pread(index, base, start + total - base), base, start, start + total, jf.tag,
                             jf.version, max_id, bare=bare)
    if total == length:
        candidates = [r for r in candidates if r.total == length and r.wrong != "checksize"] or candidates
    if not candidates:
        return None
    tail = opened.pread(index, start + total - 4, 4)
    if tail.count(0) == len(tail):
        if kind == "bindings":
            return _zeroed_binding(candidates, effect_of)
        # a record whose end the zeros ran over: they read as the fill from there on, so where they stopped cannot
        # be told, and they may have wiped the records written after it as well. For a transactional record its
        # COMMIT would follow it (campaign seed 3303012909009248: 3 messages lost with their COMMITs); for any
        # other, the broker had gone on writing more often than not: zeroing the current file from inside one
        # record in three to its end, in the four campaign demos and two JournalImpl stores (small-s11,
        # k64k-s6), lost what the broker delivers 145 times against 4 unchanged stores (make fuzz seed 4304:
        # demo-s1 seed 4304012914000248, a DELETE's id zeroed with the 11,349 bytes after it, 106 acknowledged
        # messages back; seed 8484044452057028 over the JournalImpl stores: two messages and their references
        # under one zeroed run, the first's loss alone read as harmless). What the record alone held proves
        # nothing harmless then.
        return UNKNOWN
    effects = {effect_of(rec) for rec in candidates}
    return effects.pop() if len(effects) == 1 else UNKNOWN


def _zeroed_binding(candidates, effect_of):
    """What losing a bindings-journal record does when zeros ran from inside it over its end (and perhaps over
    records written after it): LOSS when its head names, read by every candidate, an add of a queue or address
    binding whose id has no live record and no surviving DELETE, or a delete of a live one; else UNKNOWN.

    A lost delete brings its binding back whatever else the zeros took (an id is added once, deleted once). A
    binding's add is lost with its COMMIT, written after it (so judged here as the add itself, not as a record
    of a transaction left open); only a DELETE of the same id written after it, wiped too, would leave the
    broker's bindings as they were, which nothing left tells. Over the ten public bindings journals (campaign
    seed 7777, 150 faults a store) a zeroed run from inside such a head to the end lost a binding 9 times in 9;
    from inside an ID-counter record or its DELETE (what a queue's creation or a restart writes around the
    bindings), nothing 10 times in 11: those stay untold (a warning: the bytes prove damage, not a loss)."""
    from amqtool.engines.artemis.evidence import BINDING_TYPES, LOSS, UNKNOWN, Rebuilt

    def plain(r):  # the add or delete itself, not a record of its (now open) transaction
        t = {13: 11, 15: 16}.get(r.type, r.type)
        return Rebuilt(t, r.offset, r.total, -1, r.id, r.user_type, r.body, r.wrong)

    named = all(r.type in (11, 13) and r.user_type in BINDING_TYPES or r.type in (15, 16) for r in candidates)
    if named and all(effect_of(plain(r)) == LOSS for r in candidates):
        return LOSS
    return UNKNOWN


def own_record_at(opened, index: int, first: int, last_end: int | None = None) -> bool:
    """Whether the damaged bytes at ``first`` begin with a record head of this use of the file (a record type,
    and the file's tag as far as a zeroed run left it): a record the broker wrote was there, not stray bytes in
    the fill. ``last_end``: where the file's last valid record ends; fill between it and ``first`` says no:
    JournalImpl writes a file's records back to back, so a record written after the last one began at
    ``last_end``, and a byte after fill is one inside it (whose head the zeros took) or in the fill (campaign
    seed 8301055903093013: one byte of a bindings file's fill flipped to a COMMIT's type read as a lost
    binding's COMMIT, CRITICAL while the broker loads the same)."""
    if last_end is not None and first > last_end and not any(opened.pread(index, last_end, first - last_end)):
        return False
    head = opened.pread(index, first, 5)
    tag = (opened.files[index].tag & 0xFFFFFFFF).to_bytes(4, "big")
    return (len(head) == 5 and 10 <= head[0] <= 19
            and all(got in (want, 0) for got, want in zip(head[1:5], tag)))


def not_a_crash_finding(path: str, first: int, length: int, effect, kind: str = "bindings",
                        record: bool = False, bare: bool = False) -> Finding:
    """The finding for a damaged end of the current file that no crash leaves, by what the record it held does
    to what the broker delivers (``effect``: :mod:`~amqtool.engines.artemis.evidence`'s judgement of the bytes
    read as one record, None when they do not read as one): CRITICAL when its loss loses (or brings back)
    messages, a warning when it changes nothing or what it held cannot be told (as for a damaged end of a file
    that is not the newest: the bytes prove damage, not a loss). ``bare``: a bare JournalImpl journal
    (``Evidence.bare``), whose every live record is what its user loads: a record of it lost is judged as one of
    the message journal."""
    from amqtool.engines.artemis.evidence import HARMLESS, LOSS

    why = ("it is the newest file's end, but no crash leaves it so: a crash cuts the last write or leaves whole "
           "4 KiB blocks of it unwritten (zeros), never a changed byte or a zeroed run that ends inside a block "
           "before bytes that were written")
    said = {HARMLESS: "; its loss changes nothing the broker delivers",
            LOSS: ", losing what it held"}.get(effect, " (what it held cannot be told)")
    # a record of the message journal lost with nothing to tell it harmless: its loss is proven damage
    critical = effect == LOSS or ((kind == "messages" or bare) and record and effect != HARMLESS)
    return Finding(
        Severity.CRITICAL if critical else Severity.WARNING, "damaged-tail",
        f"{length} byte(s) of a damaged record after the last valid record; {why}: the record was damaged after "
        f"the broker wrote it, and the broker drops it" + said, path, first, {"crash": False})


def lost_bindings(findings: list[Finding], pager) -> None:
    """Raise the warning of a damaged end of the bindings journal's current file that no crash leaves
    (:func:`not_a_crash_finding`, what it held untold) to CRITICAL when page counters of queues no binding holds
    still count messages (``pager``: the paging verifier once it has read the pages): the lost records held
    those queues' bindings, and the broker delivers none of their paged messages. A queue's page counter lives
    in the message journal (``PageSubscriptionCounterImpl``) and goes with its queue; only a crash between the
    two deletes leaves one behind, and then the bindings end whole: here they end in damage."""
    view = getattr(pager, "view", None)
    if view is None or not view.bindings_loaded or not view.messages_loaded:
        return
    orphans = {q: n for q, n in view.counters().items() if n > 0 and q not in view.queues}
    if not orphans:
        return
    for i, f in enumerate(findings):
        # (a finding already CRITICAL, its record read as a binding's loss, names the queues all the same)
        details = f.details or {}
        if (f.code == "damaged-tail" and details.get("crash") is False and "queuesLost" not in details
                and f.path and f.path.endswith(".bindings")):
            shown = ", ".join(f"queue {q} ({n})" for q, n in sorted(orphans.items())[:20])
            findings[i] = Finding(
                Severity.CRITICAL, f.code,
                f.message + f"; page counters still count messages of queues no binding holds ({shown}): the lost "
                f"records held their bindings, and the broker delivers none of their paged messages",
                f.path, f.offset, {**(f.details or {}), "queuesLost": sorted(orphans)})
