"""Which deleted messages could have written a damaged acknowledgement: those whose own is not found.

The broker acknowledges a reference once: ``storeAcknowledge(queueID, messageID)`` writes one ACKNOWLEDGE_REF
per (message, queue), after that queue's ADD_REF (``PostOfficeImpl.processRoute`` stores the references with
the message). So an acknowledgement whose id was damaged (it now names no message) was not the acknowledgement
of a deleted message whose own acknowledgement on that queue still stands, whole, elsewhere in the journal, nor
of one whose references (the journal still holds some) name other queues only. The scan sees a deleted
message's records until the reclaimer frees their files; ``JournalImpl.load`` drops them, so only a rescan
shows them. Done on damage only (an acknowledgement without its message).

An acknowledgement in a transaction that was rolled back is written again when the message is acknowledged
later: only a non-transactional one, or one whose transaction's COMMIT is in the files, counts as the
message's own.
"""
from __future__ import annotations

from amqtool import native
from amqtool.formats.artemis.records import fixed_size

_UPDATE, _UPDATE_TX, _COMMIT = 12, 14, 18
_ADD_REF, _ACK = 32, 33


def acked_elsewhere(result, queue_id: int, ids: set[int]) -> set[int]:
    """Of ``ids`` (deleted messages that a damaged acknowledgement of ``queue_id`` in the messages journal
    loaded as ``result`` could have been read from: its id is none of theirs now), those that did not write
    it: their own acknowledgement of ``queue_id`` stands, or the journal holds references of theirs and none
    names ``queue_id``."""
    opened = result.opened if result is not None else None
    if not ids or opened is None:
        return set()
    acked: set[int] = set()
    tx_acks: list[tuple[int, int]] = []
    queues: dict[int, set[int]] = {}
    committed: set[int] = set()
    for fi, jf in enumerate(opened.files):
        data = opened.read_file(fi)
        records, _ = native.scan_records(data, jf.tag, jf.version, True, 16)
        for t, off, size, cc, tx, rid, utype, body_len, nrec, extra in records:
            if t == _COMMIT:
                committed.add(tx)
                continue
            if rid not in ids or t not in (_UPDATE, _UPDATE_TX) or utype not in (_ADD_REF, _ACK) \
                    or body_len < 8:
                continue
            at = off + fixed_size(t, jf.version) - 4
            q = int.from_bytes(data[at:at + 8], "big", signed=True)
            if utype == _ADD_REF:
                queues.setdefault(rid, set()).add(q)
            elif q == queue_id:
                if t == _UPDATE:
                    acked.add(rid)
                else:
                    tx_acks.append((tx, rid))
    acked.update(rid for tx, rid in tx_acks if tx in committed)
    return acked | {m for m, qs in queues.items() if queue_id not in qs}
