"""Damaged bytes between records that held two records back to back (``verify``'s ``damaged-record``).

:func:`~amqtool.engines.artemis.evidence.reconstruct` reads a damaged region as one record with at most one
wrong field. A short damaged run across the boundary of two records (a few zeroed bytes ending one record and
starting the next) leaves a region holding both, each damaged at one end: the first keeps its head (record
type, the file's tag, ids, body size), the second its tail (ids, body, and the trailing size word that
``JournalImpl.readJournalFile`` checks: a record's last four bytes hold its whole length). The region is then
read at the boundary one of them gives -- where the first record's own fields end it, or where the second's
size word starts it -- as two records filling it exactly, when exactly one such reading fits.

Only damage confined to the boundary is read so, as a zeroed run there leaves it: the first record wrong in its
size word alone, the byte before that word not zero (a run reaching back into its body would leave it zero, and
the body -- a queue id, a message -- would then be read wrong); the second wrong in its type or tag alone (the
bytes after, its ids, intact), or a COMMIT or ROLLBACK whose head is gone (type, tag, compactCount), read from
its length and vouched for by the load: it must end a transaction left open, a COMMIT counting exactly the
records that transaction holds in the file (the load's and the pair's own). An id read after a lost head may
have lost its high bytes with it and name another record: no other record is read without its head.

What the two held is judged as the loss of both together: a message's ADD and its reference lost side by side
lose the message, which neither does alone; a lost COMMIT takes its whole transaction.
"""
from __future__ import annotations

import struct

from amqtool.engines.artemis.evidence import (
    COMMIT, PREPARE, ROLLBACK, Rebuilt, _parse, _plausible, reconstruct)
from amqtool.formats.artemis.records import fixed_size

_TX = (13, 14, 15, 17, 18, 19)
_ENDS = (PREPARE, COMMIT, ROLLBACK)
_MIN_RECORD = 13


def two_records(buf: bytes, base: int, first: int, end: int, tag: int, version: int,
                max_id: int = -1) -> list[Rebuilt] | None:
    """The two records the damaged bytes ``[first, end)`` held (``buf`` holds the file's bytes from ``base``),
    when exactly one reading as two records back to back fits (see the module docstring); else None. The
    second is marked ``wrong="head"`` when it was read without its head (:func:`vouched` checks it)."""
    s, e = first - base, end - base
    if s < 0 or e > len(buf) or e - s < 2 * _MIN_RECORD:
        return None
    splits = set()
    size = struct.unpack_from(">i", buf, e - 4)[0]
    if _MIN_RECORD <= size <= e - s - _MIN_RECORD:
        splits.add(end - size)
    head = _head_size(buf, s, tag, version)
    if head is not None and _MIN_RECORD <= head <= e - s - _MIN_RECORD:
        splits.add(first + head)
    readings = []
    for p in sorted(splits):
        a = reconstruct(buf, base, first, p, tag, version, max_id)
        # each reading fills its part exactly (filler inside the region may be a whole record zeroed), and the
        # damage lies at their boundary only: the first record's size word, the second's type or tag
        a = [r for r in a if r.offset == first and r.total == p - first and _intact_before_size(buf, base, r)]
        b = reconstruct(buf, base, p, end, tag, version, max_id)
        b = ([r for r in b if r.offset == p and r.total == end - p and r.wrong in ("", "type", "tag")]
             or _headless(buf, base, p, end, tag, version, max_id))
        if len(a) == 1 and len(b) == 1:
            readings.append([a[0], b[0]])
    return readings[0] if len(readings) == 1 else None


def _intact_before_size(buf: bytes, base: int, rec: Rebuilt) -> bool:
    """Whether the head-side reading ``rec`` is damaged in its trailing size word at most, with the byte before
    that word non-zero: a zeroed run reaching back into its body (or ids) would leave that byte zero, and a
    body read so would name the wrong queue or message."""
    if rec.wrong == "":
        return True
    return rec.wrong == "checksize" and buf[rec.offset - base + rec.total - 5] != 0


def _head_size(buf: bytes, s: int, tag: int, version: int) -> int | None:
    """The length the record at ``s`` gives itself when its type and tag are intact (fixed part, body size,
    a PREPARE's extra data), else None."""
    t = buf[s]
    if not 11 <= t <= 19 or struct.unpack_from(">i", buf, s + 1)[0] != tag:
        return None
    p = s + 5 + (1 if version >= 2 else 0) + (8 if t in _TX else 0) + (0 if t in _ENDS else 8)
    if t in (11, 12, 13, 14, 15):
        if p + 4 > len(buf):
            return None
        return fixed_size(t, version) + struct.unpack_from(">i", buf, p)[0]
    if t == PREPARE:
        if p + 8 > len(buf):
            return None
        return fixed_size(t, version) + struct.unpack_from(">i", buf, p + 4)[0]
    return fixed_size(t, version)


def _headless(buf: bytes, base: int, p: int, end: int, tag: int, version: int, max_id: int) -> list[Rebuilt]:
    """The record ``[p, end)`` read with its head (type, tag, compactCount) set to each record type in turn:
    the readings with no wrong field left that are plausible (one at most is kept by the caller)."""
    region = bytearray(buf[p - base:end - base])
    out = []
    # only the records whose ids the load can vouch for whatever a zeroed run took past the head: a
    # transaction's end (its id must be a transaction left open, a COMMIT's count what it holds); an id read
    # after a lost head may have lost its high bytes and land on another record's
    for t in (COMMIT, ROLLBACK):
        patched = bytearray(region)
        patched[0] = t
        patched[1:5] = struct.pack(">i", tag)
        rec, wrong = _parse(bytes(patched), 0, t, tag, version, len(patched))
        if rec is not None and wrong == 0 and _plausible(rec, max_id):
            # a COMMIT's or PREPARE's record count (after its transaction id) stands in for its body
            body = bytes(patched[rec.total - 8:rec.total - 4]) if t in (COMMIT, PREPARE) else rec.body
            out.append(Rebuilt(t, p, rec.total, rec.tx_id, rec.id, rec.user_type, body, "head"))
    return out


def vouched(rec: Rebuilt, result, index: int, records: list[Rebuilt]) -> bool:
    """Whether ``rec`` (of file ``index`` of the load ``result``), when read without its head, is vouched for
    by the load (see the module docstring): ``records`` are the region's two readings."""
    if rec.wrong != "head":
        return True
    incomplete = {tx.tx_id: tx for tx in result.failed if not tx.prepared}
    if rec.type == ROLLBACK:
        return rec.tx_id in incomplete
    if rec.type == COMMIT:
        tx = incomplete.get(rec.tx_id)
        if tx is None or len(rec.body) != 4:
            return False
        # a COMMIT counts its transaction's records in its own file (JournalTransaction's counter, checked by
        # JournalImpl.load): those the load kept there, and the region's other record if it is one of them
        held = sum(1 for r in tx.records + tx.records_to_delete if r.file_index == index)
        held += sum(1 for r in records if r is not rec and r.type in (13, 14, 15) and r.tx_id == rec.tx_id)
        return int.from_bytes(rec.body, "big", signed=True) == held
    return False  # only a transaction's end is read without its head (_headless)


def read_pair(region, first: int, end: int, result, index: int) -> list[Rebuilt] | None:
    """:func:`two_records` of the damaged region ``[first, end)`` of file ``index`` (``region``: the bytes to
    rebuild from, their base, the file's tag and version), when the load ``result`` vouches for both readings."""
    buf, base, tag, version = region
    pair = two_records(buf, base, first, end, tag, version, result.max_id)
    if pair is None or not all(vouched(r, result, index, pair) for r in pair):
        return None
    return pair


def pair_effect(pair: list[Rebuilt], effect_of, evidence, opened, journal: str) -> str:
    """What losing both records of ``pair`` costs, judged together: a message's add and its reference lost
    side by side lose the message, which neither does alone. A lost COMMIT or PREPARE takes its transaction's
    records, the pair's own included (the broker discards the transaction whole); a transaction's record whose
    end survives is judged by ``effect_of`` (the verifier's judgement of one lost record: with its
    transaction); the records outside transactions are judged as records the load applied none of
    (``Evidence.effect_of_discarded``), in the messages journal (the bindings journal's, one by one)."""
    import dataclasses

    from amqtool.engines.artemis.evidence import HARMLESS, LOSS, UNKNOWN, transaction_records

    ended = {r.tx_id for r in pair if r.type in (PREPARE, COMMIT)}
    effects = set()
    plain = []
    for r in pair:
        if r.type in (PREPARE, COMMIT):
            own = [x for x in pair if x.type in (13, 14, 15) and x.tx_id == r.tx_id]
            effects.add(evidence.effect_of_discarded(transaction_records(opened, r.tx_id) + own))
        elif r.type in (13, 14, 15, ROLLBACK, 10) or journal != "messages":
            if not (r.type in (13, 14, 15) and r.tx_id in ended):
                effects.add(effect_of(r))
        else:
            plain.append(dataclasses.replace(r, type={11: 13, 12: 14, 16: 15}[r.type]))
    if plain:
        effects.add(evidence.effect_of_discarded(plain))
    if LOSS in effects:
        return LOSS
    return HARMLESS if effects == {HARMLESS} else UNKNOWN
