"""A queue or address binding lost at the damaged end of a bindings journal file (``verify``'s ``damaged-tail``,
judged CRITICAL).

The id window :mod:`~amqtool.engines.artemis.tails` reads cannot judge the bindings journal: its records take
their ids from the generator the message journal shares, so the window between two bindings records spans every
message id issued meanwhile, compacted away or never stored. But the damaged record's own head may survive: a
damage that starts inside a record leaves its type, the file's tag, its transaction and record ids, its body
size and user record type (``tails.damaged_head``). When that head is the ADD or ADD_TX of a queue binding
(``QUEUE_BINDING_RECORD``, 21) or an address binding (``ADDRESS_BINDING_RECORD``, 44) whose id no surviving
record adds elsewhere nor deletes, and records were written after it there (``recordsLost``: the room the damage
leaves would have held the next file's first record, and ``JournalImpl.switchFileIfNecessary`` moves on only
for a record that does not fit; a restart after a crash resumes writing at the last valid record,
``JournalImpl.setUpCurrentFile``, overwriting a torn one), the binding was written whole and damaged since.
So it was too in a file the compactor wrote (its records carry a compactCount above 0): the compactor copies
live records whole, and its output replaces the files it compacted only once complete (``JournalCompactor``,
``journal-rename-control.ctr``), so no crash tears a record there.

Its transaction committed: the broker stores a binding and commits it at once (``ActiveMQServerImpl.createQueue``:
``addQueueBinding`` then ``commitBindings``; ``SimpleAddressManager.addAddressInfo``: ``addAddressBinding`` then
``commitBindings``), and the records written after it are that COMMIT's successors. So the broker loads the
store without that queue or address: CRITICAL.
"""
from __future__ import annotations

from amqtool.errors import Finding, Severity

_BINDINGS = {21: "queue binding", 44: "address binding"}


def lost_binding(finding: Finding, ledger, result, index: int, first: int) -> Finding | None:
    """The CRITICAL judgement of ``finding`` (a ``damaged-tail`` of bindings file ``index`` at ``first``) when
    the damaged record's head names a binding lost there (module docstring), else None."""
    from amqtool.engines.artemis.tails import damaged_head

    if result.opened.journal.kind != "bindings":
        return None
    if not finding.details.get("recordsLost") and not _compacted(result.opened, index, first):
        return None
    head = damaged_head(result.opened, index, first)
    if ((head is None or head[3] not in _BINDINGS) and result.scans[index].last_data_pos == first
            and _bare_binding_add(result.opened, index, first)):
        return _critical(finding, {"id": None, "userRecordType": None, "txId": None},
                         "an ADD_TX (its type and this file's tag survive, not its ids and user record type), and the "
                         "bindings journal writes ADD_TX records only for queue and address bindings; no surviving "
                         "record deletes a binding whose add is gone, records were written after it before the broker "
                         "moved on, so it was written whole and committed, and the broker now starts without that "
                         "binding")
    if head is None or head[3] not in _BINDINGS:
        return None
    t, tx_id, rid, utype = head
    if ledger.roles(rid - 1, rid + 1).get(rid, set()) & {"add", "delete"}:
        return None  # stored elsewhere, or deleted since: its loss changes nothing
    return _critical(finding, {"id": rid, "userRecordType": utype, "txId": tx_id if t == 13 else None},
                     f"the {_BINDINGS[utype]} {rid} (its head survives: type, this file's tag, ids), which no "
                     f"surviving record stores elsewhere or deletes; records were written after it before the broker "
                     f"moved on, so it was written whole and committed (the broker commits a binding as it stores "
                     f"it), and the broker now starts without that {_BINDINGS[utype].split()[0]}")


def _critical(finding: Finding, lost: dict, what: str) -> Finding:
    """``finding`` made CRITICAL: its damaged record is ``what``, the binding ``lost`` (details.lostBinding)."""
    details = dict(finding.details)
    details["lostBinding"] = lost
    head_msg = finding.message.split(": the broker moves")[0].split(" (what a crash")[0]
    return Finding(Severity.CRITICAL, finding.code, f"{head_msg}: the damaged record is {what}", finding.path,
                   finding.offset, details)


def _compacted(opened, index: int, first: int) -> bool:
    """Whether a record of file ``index`` before ``first`` carries a compactCount above 0: the compactor wrote
    the file."""
    for base, _data, records, _marked in opened.scan_windows(index):
        for _t, off, _size, cc, *_rest in records:
            if base + off < first and cc > 0:
                return True
    return False


def _bare_binding_add(opened, index: int, first: int) -> bool:
    """Whether the damaged bytes at ``first`` of bindings file ``index`` begin with an ADD_TX's type and this file's
    tag (as far as zeros running to the end left it; the caller has it start where the last valid record ends,
    records being written back to back, so no byte of fill) while its ids or user record type are gone (a zeroed run from inside its head: ``tails.damaged_head``
    reads zeros there), and no
    surviving DELETE_TX deletes an id no surviving record adds (which could be the lost binding's, deleted since).
    ``AbstractJournalStorageManager`` appends ADD_TX records to the bindings journal only in ``addQueueBinding``
    and ``addAddressBinding`` (the queue and address bindings; an update of a queue binding is an UPDATE_TX), and
    deletes them with DELETE_TX (``deleteQueueBinding``, ``deleteAddressBinding``)."""
    from amqtool import native

    jf = opened.files[index]
    head = opened.pread(index, first, 5)
    tag = (jf.tag & 0xFFFFFFFF).to_bytes(4, "big")
    kept = len(head[1:5].rstrip(b"\0"))  # the tag as far as the zeros left it (they run from inside the head)
    if len(head) < 5 or head[0] != 13 or head[1:1 + kept] != tag[:kept]:
        return False
    added, deleted = set(), set()
    for fi, f in enumerate(opened.files):
        records, _ = native.scan_records(opened.read_file(fi), f.tag, f.version, True, 16)
        for t, _off, _size, _cc, _tx, rid, *_rest in records:
            if t in (11, 13):
                added.add(rid)
            elif t == 15:
                deleted.add(rid)
    return not deleted - added
