"""Live bindings records of a user type the broker's load skips (``verify``'s ``binding-type-damaged`` and
``bindings-record-skipped``).

``AbstractJournalStorageManager.loadBindingJournal`` decodes the user record types of
:data:`~amqtool.formats.artemis.bindings_load.LOAD_TYPES`; for any other it logs ``invalidRecordType`` ("invalid
record type") and goes on, so the record is ignored. Artemis writes no other type to its bindings journal
(``JournalRecordIds``), and a record carries no checksum, so such a record is one whose type byte was damaged.

What the broker loses with it is what the record was. Queue and address bindings (21, 44) are what the
broker's state hangs on: a queue whose binding is gone is not created at start, and the references of its
messages are dropped with it. When the record's body reads whole as one of them -- a damaged type byte leaves
the body as it was written -- that binding is lost: CRITICAL. Otherwise what it held (a setting, a status, an
ID counter, or a record no broker of these versions writes) is ignored: a warning that names it. A bindings
journal none of whose records is of a type the broker loads is another application's journal: not judged.
"""
from __future__ import annotations

from amqtool.errors import AmqtoolError, Finding, Severity
from amqtool.formats.artemis.bindings_load import LOAD_TYPES
from amqtool.formats.artemis.userrecords import JournalRecordIds as R

_BINDINGS = (R.QUEUE_BINDING_RECORD, R.ADDRESS_BINDING_RECORD)


def _as_binding(body: bytes, record_id: int):
    """(type, decoded) of the binding ``body`` reads whole as, or None."""
    from amqtool.formats.artemis.userrecords import decode_user_record

    for t in _BINDINGS:
        try:
            return t, decode_user_record(t, body, journal="bindings", record_id=record_id)
        except (AmqtoolError, ValueError, IndexError):
            continue
    return None


def skipped_bindings_findings(result, where: str) -> list[Finding]:
    """The findings for the live records of the bindings load ``result`` whose user record type the broker's
    load skips (see the module docstring)."""
    out = []
    skipped = [r for r in result.live if r.user_record_type not in LOAD_TYPES]
    if len(skipped) == len(result.live):
        return []  # no record a broker writes: a journal of another application's records, not a broker's store
    for r in skipped:
        found = _as_binding(result.body(r), r.id)
        where_rec = result.files[r.file_index].path if 0 <= r.file_index < len(result.files) else where
        if found is not None:
            t, rec = found
            what = (f"the queue binding of queue {rec.name!r} (address {rec.address!r}): the broker does not create "
                    f"the queue, and drops the references of the messages on it" if t == R.QUEUE_BINDING_RECORD else
                    f"the address binding of address {rec.name!r}: the broker does not create the address")
            out.append(Finding(
                Severity.CRITICAL, "binding-type-damaged",
                f"record {r.id} has user record type {r.user_record_type}, which the broker's load of the bindings "
                f"skips (it logs 'invalid record type'), but its body reads whole as {what}", str(where_rec), None,
                {"recordId": r.id, "userRecordType": r.user_record_type, "bindingType": t}))
        else:
            out.append(Finding(
                Severity.WARNING, "bindings-record-skipped",
                f"record {r.id} has user record type {r.user_record_type}, which Artemis does not write to its "
                f"bindings journal: the broker's load skips it (it logs 'invalid record type') and whatever it "
                f"held is ignored", str(where_rec), None,
                {"recordId": r.id, "userRecordType": r.user_record_type}))
    return out
