"""A record whose type byte was damaged into a transactional type (``verify``'s ``record-retyped``).

The record types differ in single bits (ADD 11, UPDATE 12, ADD_TX 13, UPDATE_TX 14, DELETE_TX 15) and a record
carries no checksum, so one damaged bit can turn an UPDATE into an ADD_TX or an UPDATE_TX, or an ADD into a
DELETE_TX. The transactional layouts put a transaction id where the plain ones put the record id, so the record
then reads as a transaction whose id is the record's own id -- and, for an 8-byte body such as a reference or
an acknowledgement, whose one record still ends where its check size says (``JournalImpl.readJournalFile``
accepts it). With no COMMIT, the broker rolls that transaction back at load, and the update is gone.

A transaction id and a record id never coincide in a store the broker wrote: both come from one
``BatchingIDGenerator``. So a failed transaction of one record whose id is a live record's id, and whose bytes
read back whole as that record's plain type with only the type byte wrong, is that record retyped. What its
loss costs is what losing the record costs (``Evidence.effect_of_loss``): CRITICAL when the broker delivers
something else without it (a reference dropped, an acknowledgement undone), else a warning naming it.
"""
from __future__ import annotations

from amqtool.errors import Finding, Severity

_ADD, _UPDATE, _ADD_TX, _UPDATE_TX, _DELETE_TX = 11, 12, 13, 14, 15
# the plain type one bit away from each transactional type
_PLAIN = {_ADD_TX: _UPDATE, _UPDATE_TX: _UPDATE, _DELETE_TX: _ADD}
MAX_LISTED = 20


def retyped_records(result, evidence) -> list:
    """``[(tx id, Rebuilt plain record, effect, path, offset)]`` for the failed transactions of the messages load ``result``
    that are one record retyped (see the module docstring)."""
    from amqtool.engines.artemis.evidence import _parse
    from amqtool.formats.artemis.records import fixed_size

    out = []
    for tx in result.failed:
        recs = list(tx.records) + list(tx.records_to_delete)
        if tx.prepared or len(recs) != 1 or tx.tx_id not in evidence.live_ids:
            continue
        r = recs[0]
        if not 0 <= r.file_index < len(result.files):
            continue
        jf = result.files[r.file_index]
        for t, plain in _PLAIN.items():
            # the record's start: its body less what the transactional type writes before it (the body_len
            # bytes are the body; the fixed part holds the check size after it)
            before = fixed_size(t, jf.version) - 4
            start = r.body_offset - before
            if start < 16:
                continue
            try:
                with open(jf.path, "rb") as fh:
                    fh.seek(start)
                    raw = fh.read(before + r.body_len + 4)
            except OSError:
                continue
            if not raw or raw[0] != t:
                continue
            rec, wrong = _parse(raw, 0, plain, jf.tag, jf.version, len(raw))
            if rec is None or rec.wrong != "type" or rec.id != tx.tx_id:
                continue
            out.append((tx.tx_id, rec, evidence.effect_of_loss("messages", rec), str(jf.path), start))
            break
    return out


def retyped_findings(result, evidence) -> list[Finding]:
    """One finding per retyped record of :func:`retyped_records`."""
    from amqtool.engines.artemis.evidence import HARMLESS, LOSS

    if result is None or not result.failed:
        return []
    names = {32: "reference", 33: "acknowledgement", 34: "delivery count"}
    out = []
    for tx_id, rec, effect, path, offset in retyped_records(result, evidence)[:MAX_LISTED]:
        what = names.get(rec.user_type, f"user type {rec.user_type} record")
        q = int.from_bytes(rec.body[:8], "big", signed=True) if len(rec.body) >= 8 and rec.user_type in names else None
        of = f"the {what} of message {rec.id}" + (f" on queue {q}" if q is not None else "")
        cost = ("the broker delivers something else without it" if effect == LOSS else
                "its loss changes nothing the broker delivers" if effect == HARMLESS else
                "what its loss costs cannot be told")
        out.append(Finding(
            Severity.CRITICAL if effect == LOSS else Severity.WARNING, "record-retyped",
            f"transaction {tx_id} is one record with no commit, and its id is the id of a live record (the broker "
            f"issues transaction and record ids from one generator): it is {of}, its type byte damaged "
            f"({_name(rec.type)} read as a transactional record), which the broker rolls back at load: {cost}",
            path, offset, {"txId": tx_id, "recordId": rec.id, "userRecordType": rec.user_type,
                         "effect": effect}))
    return out


def _name(t: int) -> str:
    return {_ADD: "an add", _UPDATE: "an update"}.get(t, f"type {t}")
