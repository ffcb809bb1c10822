"""A record whose type byte was damaged into a transactional type (``verify``'s ``record-retyped``).

The record types differ in single bits (ADD 11, UPDATE 12, ADD_TX 13, UPDATE_TX 14, DELETE_TX 15) and a record
carries no checksum, so one damaged bit can turn an UPDATE into an ADD_TX or an UPDATE_TX. The transactional
layouts put a transaction id where the plain ones put the record id, so the record
then reads as a transaction whose id is the record's own id -- and, for an 8-byte body such as a reference or
an acknowledgement, whose one record still ends where its check size says (``JournalImpl.readJournalFile``
accepts it). With no COMMIT, the broker rolls that transaction back at load, and the update is gone.

Two things tell such a record from a transaction the broker left open (a crash before its COMMIT):

* its "transaction id" is a live record's id, which no broker store holds: transaction and record ids come
  from one ``BatchingIDGenerator``;
* or the record the transaction holds is none the broker writes (a user record type it has no such, an id
  past every id issued: for a reference, its id holds the body size, user record type and the first bytes of
  the queue id, its user record type the queue id's last byte).

Either way, when its bytes read back as exactly one plain record, with only the type byte wrong and the
transaction id as its id, that record is what was written. What its loss costs is what losing the record
costs (``Evidence.effect_of_loss``, which records an acknowledged reference lost harmlessly so that its
acknowledgement is not reported again): CRITICAL when the broker delivers something else without it (a
reference dropped, an acknowledgement undone), else a warning naming it.
"""
from __future__ import annotations

from amqtool.errors import Finding, Severity

_ADD, _UPDATE, _ADD_TX, _UPDATE_TX = 11, 12, 13, 14
MAX_LISTED = 20


def retyped_records(result, evidence) -> list:
    """``[(tx id, Rebuilt plain record, effect, path, offset)]`` for the failed transactions of the messages
    load ``result`` that are one record retyped (see the module docstring)."""
    from amqtool.engines.artemis.evidence import _USER_TYPES, _parse, _plausible
    from amqtool.formats.artemis.records import fixed_size

    out = []
    bound = (result.max_id + 1) * 2 + 1_000_000
    for tx in result.failed:
        if tx.prepared or len(tx.records) != 1 or tx.records_to_delete:
            continue
        r = tx.records[0]
        foreign = r.user_record_type not in _USER_TYPES or not 0 <= r.id <= bound
        if tx.tx_id not in evidence.live_ids and not foreign:
            continue  # a transaction left open, judged as such
        jf = result.files[r.file_index]
        t = _UPDATE_TX if r.is_update else _ADD_TX
        before = fixed_size(t, jf.version) - 4  # what the transactional type writes before the body
        start = r.body_offset - before
        if start < 16:
            continue
        try:
            raw = result.opened.pread(r.file_index, start, before + r.body_len + 4)
        except OSError:
            continue
        readings = []
        for plain in (_ADD, _UPDATE) if raw and raw[0] == t else ():  # the type byte set back (one reading)
            x, wrong = _parse(raw, 0, plain, jf.tag, jf.version, len(raw))
            if x is not None and wrong == 1 and x.wrong == "type" and x.id == tx.tx_id and _plausible(x, result.max_id):
                readings.append(x)
        if len(readings) != 1:
            continue
        rec = readings[0]
        out.append((tx.tx_id, rec, evidence.effect_of_loss("messages", rec), str(jf.path), start))
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
