"""Damaged bytes inside a bindings journal file too few to have held a binding change (``damaged-record``).

A damaged run between two valid records of a file took every record it touched (``JournalImpl.readJournalFile``
reads on at the next valid record), and what they were is mostly gone with their bytes. In the bindings journal
the records that change what the broker delivers to -- queue and address bindings -- are written only in
transactions: ``AbstractJournalStorageManager.addQueueBinding``/``updateQueueBinding``/``deleteQueueBinding`` and
their address forms append ADD_TX, UPDATE_TX or DELETE_TX records under the caller's transaction, which the
broker then commits. The plain records there are the rest: id counter checkpoints (``storeID``/``deleteID``, the
ADD and DELETE pairs every restart leaves), address and security settings, queue and address status, diverts,
users and roles, connectors and key-value pairs, none of which holds a binding. (HornetQ's format-1 journals
deleted a binding with a plain DELETE: they are not judged here.)

So a lost binding change is one of:

* a whole transaction lost inside the run: at least a DELETE_TX and its COMMIT, 30 + 22 bytes in format 2
  (``fixed_size``); an ADD_TX or UPDATE_TX carries a binding encoding besides and is longer;
* part of one, with the rest outside the run: then the surviving part shows it -- a COMMIT whose records the
  run took is counted short or names no records (``commit-count-mismatch``, ``commit-unknown-tx``), and records
  whose COMMIT the run took leave their transaction open (the load's failed transactions).

A run whose bytes, with the zeros before it back to the record read before (they took whole records), less the
records it still names that are no part of a binding transaction (a plain record
whose header survives at its start; at its end, the record its trailing size word counts when that is a plain
record's whose header survives, or a DELETE's or ROLLBACK's length), are fewer than the smallest whole binding
transaction, in a journal with neither trace, held no binding change: the broker
loads the same queues and addresses. What it did hold (most often a restart's id-counter pair) changes no
stored message. So does a longer run whose bytes are exactly the records of the broker starts the surviving
id-counter records around it count (:mod:`~amqtool.engines.artemis.restart_counters`), or one that bindings
deleted since fill (:mod:`~amqtool.engines.artemis.deleted_since`).
"""
from __future__ import annotations

import struct

from amqtool.engines.artemis.deleted_since import deleted_since
from amqtool.engines.artemis.evidence import HARMLESS, transaction_records
from amqtool.engines.artemis.restart_counters import counters_fill
from amqtool.formats.artemis.records import fixed_size

_PLAIN = (11, 12, 16)  # ADD, UPDATE, DELETE
_TX_ANOMALIES = ("commit-count-mismatch", "commit-unknown-tx")
# bytes below which no record can be a binding's ADD_TX or UPDATE_TX: 31 fixed and an address binding's shortest
# encoding (PersistentAddressBindingEncoding: a one-character name, 4 + 2 bytes; a routing-type count, 4; one
# type, 1; autoCreated, 1), less a margin of four
SMALLEST_BINDING_ADD = 31 + 12 - 4


def smallest_binding_tx(version: int) -> int:
    """Bytes of the smallest whole binding transaction: a DELETE_TX and its COMMIT."""
    return fixed_size(15, version) + fixed_size(18, version)


def _head_size(buf: bytes, s: int, e: int, tag: int, version: int) -> int:
    """Bytes of the plain record whose header (type, this file's tag, id, body size) starts the run, when it
    fits in it; else 0 (no record named)."""
    if e - s < 5 or buf[s] not in _PLAIN or struct.unpack_from(">i", buf, s + 1)[0] != tag:
        return 0
    t = buf[s]
    if t == 16:
        return fixed_size(16, version) if fixed_size(16, version) <= e - s else 0
    p = s + 5 + (version >= 2) + 8
    if p + 4 > e:
        return 0
    size = fixed_size(t, version) + struct.unpack_from(">i", buf, p)[0]
    return size if 0 < size <= e - s else 0


def _tail_size(buf: bytes, s: int, e: int, tag: int, version: int) -> int:
    """Bytes of the record whose trailing size word ends the run (``JournalImpl`` checks that word: a record's
    last four bytes hold its whole length) when that record is no part of a binding transaction: a plain record
    whose head survives, or one of a length no record of a binding transaction has -- those are a COMMIT (22
    bytes in format 2), a DELETE_TX (30: the storage manager deletes with an empty encoding), an ADD_TX or
    UPDATE_TX carrying a binding's encoding (31 bytes and the encoding: an address binding's name, routing types
    and flags take 11 bytes at the least), and a ROLLBACK (18, which changed nothing); else 0."""
    if e - s < 4:
        return 0
    size = struct.unpack_from(">i", buf, e - 4)[0]
    if not fixed_size(16, version) <= size <= e - s:
        return 0
    if size < SMALLEST_BINDING_ADD and size not in (fixed_size(18, version), fixed_size(15, version)):
        return size  # too short for a binding's ADD_TX or UPDATE_TX, and no COMMIT's or DELETE_TX's length
    return size if _head_size(buf, e - size, e, tag, version) == size else 0


def no_binding_change(region, first: int, end: int, result, evidence, index: int | None = None) -> str | None:
    """Why the damaged run ``[first, end)`` of a bindings journal file held no binding change (see the module's
    contract), or no binding the broker still holds (:mod:`~amqtool.engines.artemis.deleted_since`), or None when
    neither can be shown. ``region``: (bytes from ``base``, ``base``, tag, version); ``index``: the file's, for
    the zeros running up to ``first`` from the end of the record read before it
    (:func:`~amqtool.engines.artemis.wiped_run.zeroed_from`)."""
    if region[3] < 2 or evidence is None or evidence.bare:
        return None
    why = _no_change(region, first, end, result, evidence, index)
    if why is None and index is not None:
        why = deleted_since(result, index, first, end)
    return why


def _no_change(region, first: int, end: int, result, evidence, index: int | None) -> str | None:
    """:func:`no_binding_change`'s reading of the run's bytes and the id-counter records around it."""
    from amqtool.engines.artemis.wiped_run import zeroed_from

    buf, base, tag, version = region
    commit = fixed_size(18, version)
    if (index is not None and end - first < commit and end - base >= 4
            and struct.unpack_from(">i", buf, end - base - 4)[0] == commit
            and zeroed_from(result.opened, index, first) <= end - commit):
        # The run's bytes are the end of a COMMIT whose head lies in zeros running back from it to the last record
        # read (records are written back to back: the zeros took whole records too). The bindings journal's
        # transactions are its binding changes; one ended there, and no record of it is left open: its records
        # were taken with it (demo-s3's bindings zeroed over an address binding's ADD_TX and most of its COMMIT:
        # 9 non-zero bytes, which read as too few for a binding transaction; the broker lost the address)
        return None
    if any(a.code in _TX_ANOMALIES for a in result.anomalies):
        return None
    for tx in result.failed:
        if not tx.prepared and evidence.effect_of_discarded(transaction_records(result.opened, tx.tx_id)) != HARMLESS:
            return None  # a binding transaction whose COMMIT may have been in the run
    s, e = first - base, end - base
    if s < 0 or e > len(buf) or e <= s:
        return None
    head = _head_size(buf, s, e, tag, version)
    tail = _tail_size(buf, s + head, e, tag, version) if head < e - s else 0
    # zeros running up to the run from the end of the record read before it took whole records too (records are
    # written back to back): benemon's bindings zeroed over three binding transactions up to the last bytes of a
    # DELETE read as 5 damaged bytes, "too few for a binding transaction", while the broker lost the bindings
    zeros = first - zeroed_from(result.opened, index, first) if index is not None else 0
    unknown = zeros + (e - s) - head - tail
    if unknown >= smallest_binding_tx(version):
        return _starts_only(result, index, first, end)
    named = []
    if head:
        named.append(f"a plain record of {head} bytes its surviving header names")
    if tail:
        named.append(f"a record of {tail} bytes its trailing size names, no part of a binding transaction")
    rest = f"{unknown} byte(s) besides " + " and ".join(named) if named else f"{unknown} byte(s)"
    return (f"{rest}, fewer than the {smallest_binding_tx(version)} of the smallest binding transaction (the broker "
            f"writes queue and address bindings only in transactions, and no COMMIT or open transaction shows one "
            f"cut by the damage): no binding was lost, and the bindings journal holds no message")


def _starts_only(result, index: int | None, first: int, end: int) -> str | None:
    """Why the run ``[first, end)``, with the zeros before it, held only the records of broker starts
    (:func:`~amqtool.engines.artemis.restart_counters.counters_fill`), or None."""
    from amqtool.engines.artemis.wiped_run import zeroed_from

    if index is None:
        return None
    start = zeroed_from(result.opened, index, first)
    counted = counters_fill(result.opened, index, start, end)
    if counted is None:
        return None
    return (f"its {end - start} byte(s), with the zeros before them back to the record read before, are exactly "
            f"the {counted} records the broker's starts between the id-counter records around them wrote (each "
            f"start's counter checkpoint, what it stores with it, and the DELETEs of what the start before wrote): "
            f"no binding transaction was there, so no binding was lost, and the bindings journal holds no message")


def commit_in_zeros(result, evidence, index: int, first: int) -> int | None:
    """The binding transaction left open whose COMMIT the zeros running up to the damaged run at ``first`` of file
    ``index`` may have taken, when those zeros begin at the end of the record read before them (records are
    written back to back: they took whole records) and the transaction's records all lie before them and hold
    live bindings (its discard is no harmless one); else None. The run's own bytes then tell only its last record:
    einerfreiheit's bindings zeroed over a queue binding's COMMIT, two binding deletes and most of an id-counter
    DELETE read as that DELETE alone ("changes nothing"), while the broker got a deleted binding back."""
    from amqtool.engines.artemis.wiped_run import zeroed_from

    if evidence is None or evidence.bare:
        return None
    start = zeroed_from(result.opened, index, first)
    if start >= first:
        return None
    for tx in result.failed:
        records = tx.records + tx.records_to_delete
        if tx.prepared or not records or any((r.file_index, r.body_offset) >= (index, start) for r in records):
            continue
        if evidence.effect_of_discarded(transaction_records(result.opened, tx.tx_id)) != HARMLESS:
            return tx.tx_id
    return None


def zeroed_commit_records(result, index: int, first: int, rec) -> int | None:
    """The transaction of ``rec``, a COMMIT rebuilt from the damaged run at ``first`` of file ``index``, when the
    zeros running up to the run begin at the end of the record read before them and no record of that
    transaction is left anywhere while the COMMIT counts one or more in its file: the zeros took them (a COMMIT
    follows its transaction's records, written back to back), and the transaction's binding change is lost with
    them; else None. demo-s5's bindings zeroed over an address binding's ADD_TX and the head of its COMMIT: the
    COMMIT read back from its last 18 bytes \"changes nothing\" (no record of it left), while the broker lost the
    address."""
    from amqtool.engines.artemis.wiped_run import zeroed_from

    if rec is None or rec.type != 18 or rec.tx_id < 0:
        return None
    if zeroed_from(result.opened, index, first) >= first:
        return None
    end = rec.offset + rec.total
    count = int.from_bytes(result.opened.pread(index, end - 8, 4), "big", signed=True)
    if count < 1 or transaction_records(result.opened, rec.tx_id):
        return None
    return rec.tx_id
