"""What an Artemis store's own records say it held, weighed against what the broker will load.

``verify`` (and every command that judges through it) calls a loss CRITICAL only when the store's evidence
proves it, and judges damaged bytes by what they held whenever that can be told (man/amqtool-verify.1,
"VERDICTS"). The evidence kept here, from the load of both journals:

* **References without their message.** A live ADD_REF/ACKNOWLEDGE_REF/delivery-count update of an id with no
  live message record: the broker never frees a file that holds the ADD of a live record (JournalImpl's
  reclaimer cancels an update only with the DELETE of its id, and a file with a DELETE whose add's file
  survives is never reclaimed), so only damage explains it. The broker drops the references
  (``JournalStorageManager.loadMessageJournal``: "cannot find message") -- the message is lost.
* **Acknowledgements without their reference.** An ACKNOWLEDGE_REF of (message, queue) for a queue the message
  has no ADD_REF for: the ack's bytes (or the ref's) were changed, so the real ack is missing.
* **References to queues the bindings journal does not have.** The broker skips them ("cannot find queue") and
  the message is lost for that queue.
* **Damaged records, reconstructed.** Bytes between valid records (or a non-current file's tail) that parse as
  one record once a single field is set right (a flipped type, tag, size or checkSize byte) are judged by what
  losing that record changes (:meth:`Evidence.effect_of_loss`); bytes that do not are an unknown loss.
"""
from __future__ import annotations

import struct
from collections import Counter
from dataclasses import dataclass, field, replace

from amqtool.formats.damage import bit_flips, byte_variants
from amqtool.engines.artemis.load import aio_padding
from amqtool.engines.artemis.ref_in_place import ref_written_in_place
from amqtool.formats.artemis.records import fixed_size
from amqtool.formats.artemis.userrecords import JournalRecordIds as R

LOSS, HARMLESS, UNKNOWN = "loss", "harmless", "unknown"

ADD, UPDATE, ADD_TX, UPDATE_TX, DELETE_TX, DELETE = 11, 12, 13, 14, 15, 16
PREPARE, COMMIT, ROLLBACK = 17, 18, 19
_TX = (13, 14, 15, 17, 18, 19)
_NO_ID = (17, 18, 19)
_BODY = (10, 11, 12, 13, 14, 15)
MESSAGE_TYPES = (R.ADD_MESSAGE, R.ADD_MESSAGE_PROTOCOL, R.ADD_LARGE_MESSAGE)
BINDING_TYPES = (R.QUEUE_BINDING_RECORD, R.ADDRESS_BINDING_RECORD)
# records whose loss changes no message the broker delivers: heuristic completions, page counters (rebuilt from
# the pages at start since 2.27, and never what is delivered). Not a DUPLICATE_ID: loadMessageJournal loads each
# live one into its address's duplicate-detection cache (PostOfficeJournalLoader.handleDuplicateIds), and without
# it the broker accepts again a message it would have rejected as a duplicate (:meth:`Evidence._duplicate_id_lost`)
_BOOKKEEPING = frozenset({R.HEURISTIC_COMPLETION, R.PAGE_CURSOR_COUNTER_VALUE,
                          R.PAGE_CURSOR_COUNTER_INC, R.PAGE_CURSOR_PENDING_COUNTER})
# the records that name paged messages: a page transaction, a cursor's acknowledgement, a cursor's completed page
_PAGE_RECORDS = frozenset({R.PAGE_TRANSACTION, R.ACKNOWLEDGE_CURSOR, R.PAGE_CURSOR_COMPLETE})
# updates whose loss changes a message's content, not whether the broker delivers it
CONTENT_UPDATES = (R.UPDATE_DELIVERY_COUNT, R.SET_SCHEDULED_DELIVERY_TIME)
# the user record types the broker writes as updates (AbstractJournalStorageManager: storeReference,
# storeAcknowledge, updateDeliveryCount, updateScheduledDeliveryTime, updatePageTransaction)
_WRITTEN_AS_UPDATE = frozenset({R.ADD_REF, R.ACKNOWLEDGE_REF, R.UPDATE_DELIVERY_COUNT,
                                R.SET_SCHEDULED_DELIVERY_TIME, R.PAGE_TRANSACTION})
MAX_RECONSTRUCT = 1 << 20  # bytes of one damaged region read for reconstruction


@dataclass(frozen=True)
class Rebuilt:
    """A record reconstructed from damaged bytes: the scanner's fields, with its body."""

    type: int
    offset: int
    total: int
    tx_id: int
    id: int
    user_type: int
    body: bytes
    wrong: str  # the field that was damaged


def _parse(buf: bytes, s: int, t: int, tag: int, version: int, end: int) -> tuple[Rebuilt | None, int]:
    """The record of type ``t`` at ``s`` in ``buf`` if at most one field is wrong and it ends exactly at
    ``end`` (or is followed by filler up to it); (record or None, number of wrong fields)."""
    wrong = []
    if buf[s] != t:
        wrong.append("type")
    p = s + 1
    if p + 4 > len(buf):
        return None, 9
    if struct.unpack_from(">i", buf, p)[0] != tag:
        wrong.append("tag")
    p += 4 + (1 if version >= 2 else 0)
    tx_id = rid = -1
    if t in _TX:
        if p + 8 > len(buf):
            return None, 9
        tx_id = struct.unpack_from(">q", buf, p)[0]
        p += 8
    if t not in _NO_ID:
        if p + 8 > len(buf):
            return None, 9
        rid = struct.unpack_from(">q", buf, p)[0]
        p += 8
    fixed = fixed_size(t, version)
    body_len, utype, body_at, extra = 0, 0, 0, 0
    if t in _BODY:
        if p + 4 > len(buf):
            return None, 9
        body_len = struct.unpack_from(">i", buf, p)[0]
        p += 4
        if t != DELETE_TX:
            utype = buf[p] if p < len(buf) else 0
            p += 1
        body_at = p
    elif t in (PREPARE, COMMIT):
        p += 4
        if t == PREPARE:
            if p + 4 > len(buf):
                return None, 9
            extra = struct.unpack_from(">i", buf, p)[0]
    total = fixed + body_len + extra
    stop = s + total
    if not (0 <= body_len and 0 <= extra and stop <= end and not buf[stop:end].strip(b"\x00J")):
        # the size field is the damaged one: the record then ends where the region ends
        wrong.append("size")
        total = end - s
        body_len = total - fixed - extra
        if body_len < 0 or t not in _BODY:
            return None, 9
        stop = end
    if stop - 4 < s or struct.unpack_from(">i", buf, stop - 4)[0] != total:
        wrong.append("checksize")
    if len(wrong) > 1:
        return None, len(wrong)
    body = bytes(buf[body_at:body_at + body_len]) if t in _BODY else b""
    return Rebuilt(t, s, total, tx_id, rid, utype, body, wrong[0] if wrong else ""), len(wrong)


def reconstruct(buf: bytes, base: int, first: int, end: int, tag: int, version: int,
                max_id: int = -1, *, bare: bool = False) -> list[Rebuilt]:
    """The records that the damaged bytes ``buf[first-base:end-base]`` may have held: every reading of them
    as one record with at most one wrong field (type, tag, size or checkSize) that fills the region and is
    plausible (a known user record type that fits the record type, any user type in a ``bare`` journal:
    :attr:`Evidence.bare`; ids the journal could have issued),
    starting at ``first`` or a few filler bytes before it (a damaged type byte may read as filler). An exact
    record, if any, alone; [] when the region is no single such record."""
    found = []
    lo = max(first - base - 24, 0)
    for s in range(first - base, lo - 1, -1):
        if s < first - base and buf[s] not in (0, 0x4A):
            break
        for t in range(10, 20):
            rec, _ = _parse(buf, s, t, tag, version, end - base)
            if rec is not None and _plausible(rec, max_id, bare) and _filler_ok(s + rec.total + base, end, version):
                found.append(Rebuilt(rec.type, rec.offset + base, rec.total, rec.tx_id, rec.id, rec.user_type,
                                     rec.body, rec.wrong))
        if found:
            break
    exact = [r for r in found if r.wrong == ""]
    return exact[:1] if exact else found


def _filler_ok(stop: int, end: int, version: int) -> bool:
    """Whether zero filler from ``stop`` (where a rebuilt record ends) to ``end`` (the next valid record) is no
    lost record: too short to hold one, or AIO's padding (:func:`~.load.aio_padding`; format §1.3: each flush of
    the timed buffer is padded with zeros to the alignment). Elsewhere records lie back to back, and zeros there
    held a whole record a damaged run wiped."""
    return end - stop < min(fixed_size(t, version) for t in range(11, 20)) or aio_padding(stop, end)


_USER_TYPES = frozenset(v for k, v in vars(R).items() if k.isupper() and isinstance(v, int))
# what AbstractJournalStorageManager.loadMessageJournal's switch accepts; its default throws
# IllegalStateException("Invalid record type"), and the broker does not start
_MESSAGE_JOURNAL_TYPES = frozenset({29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 45, 49, 53})
# the bodies loadMessageJournal decodes with a fixed layout: i64 queueID (refs, acks), + i32 count (delivery
# count), i64 time + i64 queueID (scheduled delivery)
_FIXED_BODY = {R.ADD_REF: 8, R.ACKNOWLEDGE_REF: 8, R.UPDATE_DELIVERY_COUNT: 12, R.SET_SCHEDULED_DELIVERY_TIME: 16}
_QUEUE_ID_BODY = 8  # a reference's or an acknowledgement's body (RefEncoding: the queue id)
_UPDATE_ONLY = frozenset({R.ADD_REF, R.ACKNOWLEDGE_REF, R.UPDATE_DELIVERY_COUNT, R.SET_SCHEDULED_DELIVERY_TIME})
_ADD_ONLY = frozenset(MESSAGE_TYPES) | frozenset(BINDING_TYPES)


def _plausible(rec: Rebuilt, max_id: int, bare: bool = False) -> bool:
    t = rec.type
    if t == 10:
        return False  # EVENT records are written only with journal retention; never a broker's guess
    bound = (max_id + 1) * 2 + 1_000_000 if max_id >= 0 else 1 << 62
    if t not in _NO_ID and not 0 <= rec.id <= bound:
        return False
    if t in _TX and not 0 <= rec.tx_id <= bound:
        return False
    if t in (11, 12, 13, 14) and not bare:
        if rec.user_type not in _USER_TYPES:
            return False
        if rec.user_type in _UPDATE_ONLY and t in (11, 13):
            return False
        if rec.user_type in _ADD_ONLY and t in (12, 14):
            return False
    return True


def ref_records(result, ids) -> tuple[dict[tuple[int, int], set[int]], dict[tuple[int, int], tuple[int, int]]]:
    """For the live ADD_REF updates of the messages ``ids`` in the message journal's load ``result``: (message,
    queue) -> their body lengths, and -> (file index, body offset) of the last one. A reference's body is its
    8-byte queue id (``RefEncoding``); a delivery count's (UPDATE_DELIVERY_COUNT, 34, one bit from 32) is 12
    bytes, queue id and count, so a 12-byte "reference" is a retyped delivery count. Reads bodies: asked on
    damage only."""
    sizes: dict[tuple[int, int], set[int]] = {}
    last: dict[tuple[int, int], tuple[int, int]] = {}
    for r in result.live:
        if r.id in ids and r.is_update and r.user_record_type == R.ADD_REF and r.body_len >= 8:
            key = (r.id, int.from_bytes(result.body(r)[:8], "big", signed=True))
            sizes.setdefault(key, set()).add(r.body_len)
            last[key] = max(last.get(key, (-1, -1)), (r.file_index, r.body_offset))
    return sizes, last


@dataclass
class Evidence:
    """The live facts of both journals that judging a loss needs (from their load results, while open)."""

    queues: set[int] = field(default_factory=set)
    queue_address: dict[int, str] = field(default_factory=dict)  # queue id -> its address (queue bindings)
    bindings_ids: dict[int, int] = field(default_factory=dict)  # live bindings record id -> user record type
    messages: set[int] = field(default_factory=set)  # ids with a live message record
    refs: dict[int, set[int]] = field(default_factory=dict)
    acked: set[tuple[int, int]] = field(default_factory=set)
    live_ids: set[int] = field(default_factory=set)  # ids with any live record (messages journal)
    deleted_unknown: set[int] = field(default_factory=set)
    deleted_unknown_complete: bool = True
    have_bindings: bool = False
    # no live record of either journal has a user record type of the broker's (JournalRecordIds): a journal
    # JournalImpl wrote for another user (its own tests write types 101..), whose loss is judged by what
    # JournalImpl.load returns, records by id (effect_of_loss)
    bare: bool = False
    binding_problems: list = field(default_factory=list)  # bindings records whose body does not decode
    unknown_types: list = field(default_factory=list)  # live message-journal records of no known user type
    bad_refs: list = field(default_factory=list)  # live ref/ack records whose body is not one queue id
    # live updates of a message record type with an 8-byte body: a reference or acknowledgement retyped
    retyped_updates: list = field(default_factory=list)
    orphan_updates: dict[int, list[tuple[int, int]]] = field(default_factory=dict)  # orphan id -> (type, queue)
    explained: set[tuple[int, int]] = field(default_factory=set)  # (message, queue) refs lost harmlessly
    double_refs: list[tuple[int, int]] = field(default_factory=list)  # (message, queue) with two ADD_REFs or more
    opened: object = None  # the messages journal, for the rescan of delete records (done only on damage)
    bindings_opened: object = None  # the bindings journal, likewise (a binding deleted since)
    # page transaction id -> its paged messages some queue still has to consume, when the journals do not
    # commit it (PagingVerifier.pending_of_page_tx: read on damage only); None without page stores
    paged_pending: object = None
    # (queue, page) -> that page's messages of the queue with no cursor acknowledgement
    # (PagingVerifier.unacked_on_page: read on damage only); None without page stores
    page_unacked: object = None
    no_pages: bool = False  # the store has no paging directory: no paged message a page record could cover
    _deleted: set | None = None
    _bindings_deleted: set | None = None
    _messages: object = None  # the messages journal's load (bodies of stray updates, read on damage only)
    _bindings: object = None  # the bindings journal's load (a bare journal's records, read on damage only)
    _applied_deletes: dict = field(default_factory=dict)  # journal -> applied_deletes() (bare, on damage only)
    _typo_refs: set | None = None
    _routed_with: dict | None = None  # address -> the addresses some message is routed to together with it
    _run_owners: dict = field(default_factory=dict)  # orphan id -> _run_owner() (a rescan, on damage only)

    @classmethod
    def build(cls, bindings, messages) -> "Evidence":
        from amqtool.engines.artemis.broker_state import REF_TYPES, build_broker_state

        ev = cls()
        state = build_broker_state(bindings, messages, decode=REF_TYPES)
        ev.have_bindings = bindings is not None
        types = {r.user_record_type for j in (bindings, messages) if j is not None for r in j.live}
        ev.bare = bool(types) and not types & _USER_TYPES
        ev.bindings_opened = bindings.opened if bindings is not None else None
        ev._bindings = bindings
        ev.binding_problems = [p for p in state.problems if p.journal == "bindings"]
        ev.queues = set(state.queues)
        ev.queue_address = {q.id: q.address for q in state.queues.values()}
        if bindings is not None:
            ev.bindings_ids = {r.id: r.user_record_type for r in bindings.live}
        ev.messages = set(state.message_records)
        ev.refs = {m: set(q) for m, q in state.refs.items()}
        ev.double_refs = sorted((m, q) for m, qs in state.refs.items() for q, n in qs.items() if n > 1)
        ev.acked = set(state.acked)
        if messages is not None:
            ev.opened = messages.opened
            ev._messages = messages
            ev.live_ids = {r.id for r in messages.live}
            # a broker's store (its bindings journal beside): then the user record types are the broker's (a bare
            # journal directory of other user types, as JournalImpl's own tests write, is not judged so)
            broker = bindings is not None
            for r in messages.live if broker else ():
                if r.user_record_type not in _MESSAGE_JOURNAL_TYPES:
                    ev.unknown_types.append(r)
                elif _FIXED_BODY.get(r.user_record_type, r.body_len) > r.body_len:
                    ev.bad_refs.append(r)  # its decode reads past the body and throws: the load fails
                elif r.body_len == _QUEUE_ID_BODY and r.is_update and r.user_record_type in MESSAGE_TYPES:
                    # the broker writes a message record only as an ADD (storeMessage), and no message encodes
                    # in 8 bytes: a queue id, the body of a reference or acknowledgement (storeReference,
                    # storeAcknowledge) whose user record type was damaged (32 or 33 read as 45)
                    ev.retyped_updates.append(r)
            for mid, qs in ev.refs.items():
                if mid not in ev.messages:
                    ev.orphan_updates[mid] = [(R.ADD_REF, q) for q in qs]
            for m, q in ev.acked:
                if m not in ev.messages:
                    ev.orphan_updates.setdefault(m, []).append((R.ACKNOWLEDGE_REF, q))
            for a in messages.anomalies:
                if a.code == "delete-unknown-id":
                    ev.deleted_unknown.add(a.ids["id"])
            ev.deleted_unknown_complete = (
                messages.anomaly_counts.get("delete-unknown-id", 0) == len(ev.deleted_unknown))
        return ev

    # -- references -------------------------------------------------------------------------------------

    def orphan_refs(self) -> dict[int, set[int]]:
        """Message id -> the queues it still has unacked refs on, for messages with no message record whose
        loss is proven: its refs cannot be the updates of another message whose id byte was damaged (see
        :meth:`misfiled`), nor ADD records: the broker writes a reference only as an update of its message
        (``storeReference``), so an ADD of ADD_REF with no message of its id is another record whose user record
        type was damaged (a page transaction's, a duplicate-detection entry's: paging/retyped_adds.py and
        retyped_dupids.py weigh those), no message's reference (sweep seed 9546: a PAGE_TRANSACTION read so was a
        lost message record, CRITICAL where nothing was lost)."""
        out = {}
        moved = {o for o, _, _ in self.run_moved_refs()}
        for mid, qs in self.refs.items():
            if mid in self.messages or mid in moved:
                continue
            left = {q for q in qs if (mid, q) not in self.acked}
            if left and self.misfiled(mid) != HARMLESS:
                out[mid] = left
        if out and self._messages is not None:
            updates = self._messages.updates_of(set(out))
            out = {m: qs for m, qs in out.items() if any(r.user_record_type == R.ADD_REF for r in updates[m])}
        return out

    def run_moved_refs(self) -> list[tuple[int, int, int]]:
        """(damaged id, queue, the message whose reference it was) for a lone ADD_REF of an id with no message
        record that stands in the run of references written right after a live message's ADD, one damaged
        byte from that message's id (:meth:`_run_owner`), when that message has no reference and no
        acknowledgement on that queue: it lost its reference there, and the broker never delivers it there."""
        out = []
        for orphan, updates in self.orphan_updates.items():
            if orphan in self.messages or len(updates) != 1 or updates[0][0] != R.ADD_REF:
                continue
            q = updates[0][1]
            owner = self._run_owner(orphan)
            if owner in self.messages and (owner, q) not in self.acked and q not in self.refs.get(owner, ()):
                out.append((orphan, q, owner))
        return sorted(out)

    def _one_byte_neighbours(self, rid: int, ids) -> list[int]:
        """The ids of ``ids`` one flipped bit away from ``rid``; else the one id one damaged byte away, if
        only one is (a byte of small ids has many neighbours: none of them is then evidence)."""
        bits = [x for x in bit_flips(rid) if x in ids]  # signed 64-bit: a top-bit flip is a negative id
        if bits:
            return bits
        out = [cand for cand in byte_variants(rid) if cand in ids]
        return out if len(out) == 1 else []

    def misfiled(self, orphan: int) -> str:
        """The updates of ``orphan`` (an id with refs or acks but no message record) read as another
        message's, whose id differs in one byte (a damaged id field): HARMLESS when giving them back to it
        changes nothing (the message was deleted since, or it is acknowledged there anyway), LOSS when it does
        or when the orphan is a message whose ADD's id was damaged (a message record without refs one byte
        away), UNKNOWN when no message is one byte away."""
        from amqtool.engines.artemis.write_order import added_before

        updates = self.orphan_updates.get(orphan, [])
        # a message without refs whose ADD's id may be the damaged one -- unless it is acknowledged on a
        # queue the orphan has a ref for: then it was routed there, and the orphan ref is its own, misfiled
        ref_queues = {q for kind, q in updates if kind == R.ADD_REF}
        # (sought among the messages without references: a healthy store has none, so one of them one damaged
        # byte away is that message even where many messages with references share the byte's other values)
        refless = [m for m in self._one_byte_neighbours(orphan, {m for m in self.messages if not self.refs.get(m)})
                   if not any((m, q) in self.acked for q in ref_queues)]
        if refless:
            return LOSS  # the message's own ADD carries a damaged id: the broker drops it and its refs
        if len(updates) != 1:
            return UNKNOWN
        kind, q = updates[0]
        if kind == R.ADD_REF and self._messages is not None:
            # the broker writes a message's references right after its ADD (ref_in_place.run_owner): the run's
            # message, one damaged byte away, wrote it (campaign sweep seed 9131: six false OKs)
            owner = self._run_owner(orphan)
            if owner is not None:
                if owner in self.messages:
                    if (owner, q) in self.acked:
                        return HARMLESS  # acknowledged there anyway: the broker drops that acknowledgement
                    if q not in self.refs.get(owner, ()):
                        return LOSS  # the message lost its reference: that queue loses it
                elif self._deleted_later(owner):
                    return HARMLESS  # its DELETE took every record of it
        # only a message routed to q's address (or to one the store shows routed with it) can own the update,
        # and a reference only a message without its own on q (PostOfficeImpl.route routes a message to a
        # queue once)
        candidates = self._routable_to(q)
        if kind == R.ADD_REF:
            candidates = {m for m in candidates if q not in self.refs.get(m, ())}
        earlier = added_before(self, orphan)  # an update follows its add: a message added later owns none
        if earlier is not None:
            candidates = candidates & earlier
        if self._dead_bit_neighbour(orphan, candidates):
            return HARMLESS  # the update of a message deleted since, its id damaged: its DELETE took it anyway
        owners = self._one_byte_neighbours(orphan, candidates)
        if not owners:
            # no live message one byte away: the update belonged to a message deleted since (its DELETE took
            # every record of it), or the message itself is gone -- which a damaged region or file shows. A
            # reference no deleted message can have written (deleted_refs.deleted_owners) was a live message's,
            # its id damaged in more than one byte, or its own message's record is gone: lost either way, unless
            # a live message acknowledged on q without its reference there may own it (acknowledged anyway)
            if kind == R.ADD_REF and not any(m in self.messages and aq == q and q not in self.refs.get(m, ())
                                             for m, aq in self.acked):
                from amqtool.engines.artemis.deleted_refs import deleted_owners

                at = min(((r.file_index, r.body_offset) for r in self._messages.live
                          if r.id == orphan and r.is_update), default=None) if self._messages is not None else None
                if at is not None and not deleted_owners(self, q, at):
                    return LOSS
            return HARMLESS
        if kind == R.ADD_REF:
            # one damaged id field explains both this orphan ref and an ack of (m, q) without its ref: the
            # ref is m's, which is acknowledged there anyway
            acked_here = [m for m in owners if (m, q) in self.acked and q not in self.refs.get(m, ())]
            if len(acked_here) == 1:
                return HARMLESS
        for m in owners:
            if kind == R.ADD_REF and (m, q) not in self.acked:
                return LOSS
            if kind == R.ACKNOWLEDGE_REF and q in self._live_queues(m):
                return LOSS
        return HARMLESS

    def _run_owner(self, orphan: int) -> int | None:
        """The message whose ADD begins the run of references holding the one live update of ``orphan`` (an
        ADD_REF under a damaged id), when its id is one damaged byte from ``orphan``; else None
        (ref_in_place.run_owned)."""
        from amqtool.engines.artemis.ref_in_place import run_owned

        if orphan not in self._run_owners:
            owned = run_owned(self._messages, {orphan}) if self._messages is not None else {}
            self._run_owners[orphan] = owned.get(orphan)
        return self._run_owners[orphan]

    def _routable_to(self, q: int) -> set[int]:
        """The live messages that could have a reference on queue ``q``: ``PostOfficeImpl.route`` routes a
        message to the queues bound to its address (or to addresses matching it: wildcards, diverts), so a
        message with references on queues of other addresses only -- and no message of the store routed to
        both -- was never routed to ``q``. Without ``q``'s address, or a message's, every message can."""
        aq = self.queue_address.get(q)
        if aq is None:
            return self.messages
        if self._routed_with is None:
            self._routed_with = {}
            for m, qs in self.refs.items():
                if m in self.messages:
                    addrs = {self.queue_address[x] for x in qs if x in self.queue_address}
                    for a in addrs:
                        self._routed_with.setdefault(a, set()).update(addrs)
        near = self._routed_with.get(aq, set()) | {aq}
        out = set()
        for m in self.messages:
            mine = {self.queue_address[x] for x in self.refs.get(m, ()) if x in self.queue_address}
            if not mine or mine & near:
                out.add(m)
        return out

    def lost_adds(self) -> dict[int, list[tuple[int, int]]]:
        """Message id -> its surviving (update type, queue) records, for ids whose references or
        acknowledgements survive while no message record and no DELETE of them does -- when at least two such
        records survive.

        JournalImpl never reclaims the file holding the ADD of a record that was not deleted, and keeps a
        file holding a DELETE while any file it has negatives against survives (``JournalFileImpl``'s
        negative counts; the reclaimer's ``canReclaim``), so an update of an id never deleted outlives its
        add only by damage: the message record (its file, or its bytes) is gone and every queue it was still
        on loses it (``loadMessageJournal`` drops the references: "cannot find message"). One damaged id field
        makes one such record (its message is judged by :meth:`misfiled`); two or more records cannot all be a
        single damaged field, so their adds were lost."""
        out = self.undeleted_orphans()
        if sum(len(u) for u in out.values()) < 2:
            return {}
        return out

    def undeleted_orphans(self) -> dict[int, list[tuple[int, int]]]:
        """Message id -> its surviving (update type, queue) records, for ids whose references or
        acknowledgements survive while no message record and no DELETE of them does (a rescan for the DELETEs,
        on damage only)."""
        return {mid: updates for mid, updates in self.orphan_updates.items()
                if mid not in self.messages and not self._deleted_later(mid)}

    def _retyped_counts(self, pairs) -> set[tuple[int, int]]:
        """The doubled (message, queue) ``pairs`` one of whose references is not 8 bytes long: a delivery count
        read as a reference (:func:`ref_records`), which loses only the count -- no reference was moved."""
        if not pairs or self._messages is None:
            return set()
        sizes, _ = ref_records(self._messages, {m for m, _ in pairs})
        return {p for p in pairs if sizes.get(p, {8}) != {8}}

    def moved_refs(self) -> list[tuple[int, int, int]]:
        """(message, queue, the message whose reference it was) for references whose message id was damaged
        onto another message routed to the same queue: the broker routes a message to a queue once
        (``PostOfficeImpl.route`` adds one reference per queue), so a second ADD_REF of (message, queue) is
        damage, and the one message one damaged byte away that is routed elsewhere, has no reference to that
        queue and no acknowledgement there lost it (an acknowledgement there shows as one without its
        reference). A message left with no reference at all is such a one too: the broker stores a message
        only with the references of the queues it was routed to (``PostOfficeImpl``: ``storeMessage``, then
        ``storeReference`` per durable queue), so a live message without any lost them. The owner is sought
        among the messages routable to that queue (:meth:`_routable_to`): a message of another address was never
        routed there, and taking it as a candidate (its id one bit away where the owner's is one byte away) hides
        the owner. A doubled pair one of whose references has a 12-byte body is a delivery count read as a
        reference (:func:`ref_records`), no moved reference."""
        from amqtool.engines.artemis.acked_refs import acked_pair_refs

        out = []
        acked_own = set(acked_pair_refs(self)) | self._retyped_counts(self.double_refs)
        for m, q in self.double_refs:
            if m not in self.messages or (m, q) in acked_own:
                continue
            lacking = {o for o in self._routable_to(q) if q not in self.refs.get(o, ()) and (o, q) not in self.acked}
            owners = self._one_byte_neighbours(m, lacking)
            if len(owners) == 1:
                out.append((m, q, owners[0]))
        return out

    def requeued_refs(self) -> list[tuple[int, int, int]]:
        """(message, queue its doubled reference names, the queue it lost) for a second ADD_REF of (message,
        queue) whose queue id is one damaged byte from the one queue of the same address that the message has
        no reference and no acknowledgement on: the broker routes a message to a queue once, so the doubled
        reference is that queue's, its queue id damaged, and the message is never delivered there. Where more
        than one such queue is one damaged byte away, the one a delivery-count or scheduled-delivery update of the
        message names is it (the broker writes those only for a reference it holds: queue_updates.py). A doubled
        reference explained by a damaged message id (:meth:`moved_refs`) is not counted again."""
        from amqtool.engines.artemis.acked_refs import acked_pair_refs
        from amqtool.engines.artemis.queue_updates import updated_queues

        moved = ({(m, q) for m, q, _ in self.moved_refs()} | set(acked_pair_refs(self))
                 | self._retyped_counts(self.double_refs))
        out = []
        for m, q in self.double_refs:
            if m not in self.messages or (m, q) in moved or q not in self.queue_address:
                continue
            lacking = {x for x, a in self.queue_address.items()
                       if a == self.queue_address[q] and x not in self.refs.get(m, ()) and (m, x) not in self.acked}
            lost = self._one_byte_neighbours(q, lacking)
            if len(lost) > 1:
                # the queue one of its delivery-count or scheduled-delivery updates names (queue_updates.py)
                lost = sorted(set(lost) & updated_queues(self, m))
            if len(lost) == 1 and bin(lost[0] ^ q).count("1") > 1 and self._dead_bit_neighbour(
                    m, {o for o in self.messages if q not in self.refs.get(o, ())}):
                continue  # a deleted message's reference, its id one bit damaged: nearer than a queue id a byte off
            if len(lost) == 1 and self._owned_by_run(m, q):
                continue  # the record sits among another message's references, its id damaged (ref_in_place.py)
            if len(lost) == 1:
                out.append((m, q, lost[0]))
        return out

    def moved_acks(self) -> list[tuple[int, int, int]]:
        """(damaged id, queue, the message whose acknowledgement it was) for a lone ACKNOWLEDGE_REF of an id
        with no message record, never deleted, whose id is one damaged bit (or the one damaged byte) away from
        a message still on that queue -- and one damaged byte from no deleted message whose own acknowledgement
        it could have been. The broker drops an acknowledgement of a message it has not loaded ("cannot find
        message"), so that message, acknowledged, is delivered there again. A deleted message one byte away
        leaves it unproven: its acknowledgement outlives its DELETE when its id is damaged, to no effect.

        Only a message that could have written the acknowledgement where it stands is a candidate
        (:meth:`_could_have_acked`: in the broker's write order, a message's ADD comes before its
        acknowledgement and nothing of it after its DELETE; a deleted message whose own acknowledgement of that
        queue stands wrote no other). Several live candidates and no deleted one prove the
        loss as well (whichever it was comes back): one tuple per candidate, the damaged id the same."""
        out = []
        for orphan, updates in self.orphan_updates.items():
            if len(updates) != 1 or updates[0][0] != R.ACKNOWLEDGE_REF or orphan in self.messages:
                continue
            if self._deleted_later(orphan):
                continue
            q = updates[0][1]
            on_q = {m for m in self.messages if q in self._live_queues(m)}
            deleted = (self._deleted or set()) | self.deleted_unknown
            owners = [x for x in bit_flips(orphan) if x in on_q]
            gone = [x for x in bit_flips(orphan) if x in deleted]
            if len(owners) != 1 or gone:
                owners, gone = self._could_have_acked(orphan, q, owners, gone)
            if not gone:
                # a byte damaged in more than one bit: a deleted message that could have written the
                # acknowledgement, one damaged byte away, leaves it unproven even beside a live message one bit
                # away (campaign seed 9111: a random byte turned one deleted message's id three bits from its
                # own, and one bit from a live message's)
                near, gone = self._could_have_acked(orphan, q, _byte_neighbours(orphan, on_q),
                                                    _byte_neighbours(orphan, deleted))
                owners = owners or near
            if owners and not gone:
                out.extend((orphan, q, m) for m in owners)
        return sorted(out)

    def _ordered(self) -> bool:
        """Whether the messages journal keeps the broker's write order (not compacted: write_order.py)."""
        from amqtool.engines.artemis.write_order import compacted

        return self._messages is not None and self.opened is not None and not compacted(self._messages)

    def _ack_of(self, m: int, q: int):
        """The first live acknowledgement record of (``m``, ``q``); None without one."""
        result = self._messages
        return min((r for r in (result.live if result is not None else ())
                    if r.id == m and r.is_update and r.user_record_type == R.ACKNOWLEDGE_REF and r.body_len >= 8
                    and int.from_bytes(result.body(r)[:8], "big", signed=True) == q),
                   key=lambda r: (r.file_index, r.body_offset), default=None)

    def _could_have_acked(self, orphan: int, q: int, owners: list[int], gone: list[int],
                          at: tuple[int, int] | None = None) -> tuple[list[int], list[int]]:
        """``owners`` and ``gone`` without the messages whose own records show they did not write the
        acknowledgement of queue ``q`` that now names ``orphan``: a deleted message whose own acknowledgement
        of ``q`` stands, or whose references name other queues (own_acks.py: the broker acknowledges a
        reference once); and, in a journal in the broker's write order, a message written after it or deleted
        before it (write_order.not_owners_at). ``at``: where the acknowledgement stands (default: the first live
        update of ``orphan``). Unchanged where they cannot tell."""
        from amqtool.engines.artemis.own_acks import acked_elsewhere
        from amqtool.engines.artemis.write_order import not_owners_at

        if gone:
            other = acked_elsewhere(self._messages, q, set(gone))
            gone = [m for m in gone if m not in other]
        if not owners and not gone or not self._ordered():
            return owners, gone
        if at is None:
            at = min(((r.file_index, r.body_offset) for r in self._messages.live if r.id == orphan and r.is_update),
                     default=None)
        if at is None:
            return owners, gone
        ruled = not_owners_at(self, at, set(owners) | set(gone))
        return [m for m in owners if m not in ruled], [m for m in gone if m not in ruled]

    def acks_without_ref(self) -> list[tuple[int, int]]:
        """Acks of (message, queue) with no ref for that queue and not explained by a damaged ref record
        whose loss was harmless (the message was acknowledged on that queue anyway), or read as a doubled
        reference (:func:`~amqtool.engines.artemis.acked_refs.acked_pair_refs`)."""
        from amqtool.engines.artemis.acked_refs import acked_pair_refs, refs_before_their_add

        acked_pair_refs(self)
        out = sorted((m, q) for m, q in self.acked
                     if m in self.messages and q not in self.refs.get(m, ()) and (m, q) not in self.explained
                     and self._ack_misplaced(m, q))
        if out:
            typos = self.typo_refs() | refs_before_their_add(self, set(out))
            out = [a for a in out if a not in typos]
        if out:
            # two acknowledgements of one (message, queue) and no reference there: the broker writes one
            # ACKNOWLEDGE_REF a reference, after its ADD_REF, so the first is that ADD_REF with its user record
            # type damaged (32 -> 33, one bit): the message was acknowledged there anyway, to the same effect
            twice = self._acked_twice({m for m, _ in out})
            out = [a for a in out if a not in twice]
        return out

    def _acked_twice(self, mids: set[int]) -> set[tuple[int, int]]:
        """(message, queue) pairs of ``mids`` with two live ACKNOWLEDGE_REF records or more (bodies read only
        for those messages' acknowledgements: done on damage only)."""
        result = self._messages
        seen: dict = {}
        for r in result.live if result is not None else ():
            if r.id in mids and r.is_update and r.user_record_type == R.ACKNOWLEDGE_REF and r.body_len >= 8:
                pair = (r.id, int.from_bytes(result.body(r)[:8], "big", signed=True))
                seen[pair] = seen.get(pair, 0) + 1
        return {p for p, n in seen.items() if n > 1}

    def typo_refs(self) -> set[tuple[int, int]]:
        """(message, queue) of live updates of a message id with a user record type the broker never writes as
        an update (``AbstractJournalStorageManager`` writes ADD_REF, ACKNOWLEDGE_REF, delivery counts, schedules
        and page-transaction counts so), whose body is one queue id, as an ADD_REF's is: an ADD_REF whose type
        byte was damaged. Its acknowledgement, now without its reference, is the message's own on that queue:
        the message was acknowledged there, and the broker drops the acknowledgement to the same effect."""
        if self._typo_refs is None:
            self._typo_refs = set()
            result = self._messages
            for r in result.live if result is not None else ():
                if (r.is_update and r.body_len == 8 and r.id in self.messages
                        and r.user_record_type not in _WRITTEN_AS_UPDATE):
                    self._typo_refs.add((r.id, int.from_bytes(result.body(r), "big", signed=True)))
        return self._typo_refs

    def _ack_misplaced(self, m: int, q: int) -> bool:
        """Whether the acknowledgement of (``m``, ``q``), a queue ``m`` has no reference for, is one damaged
        byte away from the acknowledgement of a pair still live: a message one byte from ``m`` still on
        ``q``, or a queue one byte from ``q`` that ``m`` is still on -- which then comes back. With none (the
        acknowledged message was deleted since, as :meth:`misfiled` reads an update; or its reference was lost
        or misfiled, and it was acknowledged there anyway), the broker delivers the same: an acknowledgement for a queue
        without the reference is dropped (``loadMessageJournal`` finds no reference to remove)."""
        for orphan, updates in self.orphan_updates.items():
            # the reference of (m, q) whose message id was damaged: an orphan reference on q one byte from m
            # (misfiled() judges it: m is acknowledged there anyway)
            if (R.ADD_REF, q) in updates and orphan not in self.messages and \
                    m in self._one_byte_neighbours(orphan, self.messages):
                return False
        on_q = {o for o in self.messages if q in self._live_queues(o)}
        # an acknowledgement of a message deleted since, its id damaged onto m's: dropped, to no effect
        dead = self._dead_bit_neighbour(m, on_q)
        moved = [] if dead else self._one_byte_neighbours(m, on_q)
        near = 1 if dead else None  # bits between m and the deleted message's id: the nearest reading wins
        queues = self._one_byte_neighbours(q, self._live_queues(m))
        # every message of q one damaged byte away, for when the nearest readings are ruled out below
        wide = [] if dead else [x for x in _byte_neighbours(m, on_q) if x not in moved]
        ack = self._ack_of(m, q) if moved or queues or wide else None
        if ack is not None:
            from amqtool.engines.artemis.own_acks import delete_right_after, own_ack_wanted
            from amqtool.engines.artemis.write_order import not_owners_at

            # only a message that could have written it where it stands is a reading (:meth:`_could_have_acked`;
            # campaign sweep seed 9111: a live message one bit away, added after it; a deleted one a byte away)
            self._deleted_later(-1)  # reads the journal's DELETE records once
            deleted = (self._deleted or set()) | self.deleted_unknown
            at = (ack.file_index, ack.body_offset)
            owners, gone = self._could_have_acked(m, q, self._one_byte_neighbours(m, on_q),
                                                  _byte_neighbours(m, deleted), at)
            if gone and delete_right_after(self._messages, ack) in gone:
                return False  # that message's last acknowledgement: its DELETE follows it (own_acks.py)
            if not owners and not gone and wide and self._ordered() and m in not_owners_at(self, at, {m}):
                # m was added after the acknowledgement that names it, so its id was what was damaged, and
                # no deleted message one damaged byte away could have written it there, nor one of q's one
                # flipped bit away: its owner is one of q's messages a damaged byte away, written before it,
                # which comes back (loadMessageJournal drops an ACKNOWLEDGE_REF read before the message's
                # ADD_REF: no reference to remove; hold-out sweep seed 7789, d41)
                owners, _ = self._could_have_acked(m, q, wide, [], at)
            moved = [] if gone else owners
            near = min((bin((x ^ m) & 0xFFFFFFFFFFFFFFFF).count("1") for x in gone), default=None)
            if queues and self._ordered() and m in not_owners_at(self, at, {m}):
                queues = []  # m was written after it (write_order.py): not m's own, its id was what was damaged
            if queues and gone and own_ack_wanted(self._messages, q, set(gone), at):
                # a deleted candidate lacks its own acknowledgement of q in the very file that holds its
                # reference there and its DELETE: this record is that acknowledgement, however near m's queue
                # reading is -- which would leave that one unexplained (hold-out sweep seed 7789, d41)
                return False
        # a queue of m's one byte from q: m's own acknowledgement, its queue id damaged -- unless that reading is
        # farther than the deleted message's (fewer bits are nearer than more: requeued_refs weighs so)
        queues = [x for x in queues if near is None or bin(x ^ q).count("1") <= near]
        if (moved or queues) and self._messages is not None and ref_written_in_place(self._messages, m, q):
            # m's own reference on q is where the broker wrote it, under a damaged id: the acknowledgement is
            # m's and was not damaged (campaign seed 7676025028006240)
            return False
        return bool(moved or queues)

    def _owned_by_run(self, m: int, q: int) -> bool:
        """Whether one of the live references of (message ``m``, queue ``q``) lies in the run of references
        written right after the ADD (live or dead) of another message one damaged byte from ``m`` that holds no
        live reference on ``q``: ``PostOfficeImpl.processRoute`` writes a message's references right after it,
        so that record was the other message's, its id damaged -- not a reference of ``m`` whose queue id was
        (ref_in_place.py: ``run_owner``). Rescans up to each such record, on damage only."""
        from amqtool.engines.artemis.ref_in_place import run_owner
        from amqtool.engines.artemis.ref_order import queue_records
        from amqtool.formats.damage import one_byte_apart

        result = self._messages
        if result is None:
            return False
        for _i, r, queue in queue_records(result, {m}).get(m, ()):
            if r.user_record_type == R.ADD_REF and r.body_len == 8 and queue == q:
                owner = run_owner(result, (r.file_index, r.body_offset))
                if owner is not None and owner != m and one_byte_apart(owner, m) \
                        and q not in self.refs.get(owner, ()):
                    return True
        return False

    def _dead_bit_neighbour(self, rid: int, live) -> bool:
        """Whether ``rid``, read from a damaged id field, is one flipped bit from an id the journal deleted
        (a DELETE survives and no live record) and from none of ``live``: the damaged record was that deleted
        record's -- the nearest reading, as :meth:`_one_byte_neighbours` prefers one bit to one byte -- and
        the DELETE took its message with every update (``JournalImpl.load``), so it changes nothing."""
        bits = [rid ^ (1 << k) for k in range(63)]
        if any(b in live for b in bits):
            return False
        self._deleted_later(-1)  # reads the journal's DELETE records once
        deleted = (self._deleted or set()) | self.deleted_unknown
        return any(b in deleted and b not in self.live_ids for b in bits)

    def refs_to_unknown_queues(self) -> dict[int, set[int]]:
        """Queue id -> unacked messages referring to it, for queue ids with no binding (needs the bindings
        journal)."""
        if not self.have_bindings:
            return {}
        out: dict[int, set[int]] = {}
        for mid, qs in self.refs.items():
            if mid not in self.messages:
                continue
            for q in qs:
                if q not in self.queues and (mid, q) not in self.acked:
                    out.setdefault(q, set()).add(mid)
        return out

    def live_pairs(self) -> set[tuple[int, int]]:
        """(message, queue) of every live message record on every queue still holding it."""
        return {(m, q) for m in self.messages for q in self._live_queues(m)}

    def changes_with(self, journal: str, opened) -> bool:
        """Whether loading ``opened`` (this journal's files, some header set right) instead gives other live
        messages, refs or bindings than the load this evidence was built from. In the bindings journal only the
        queue and address bindings count, as :meth:`effect_of_loss` weighs a bindings record: the others (id
        counters, statuses, settings, users, diverts) change no stored message."""
        from amqtool.engines.artemis.load import load_journal

        with opened:
            other_result = load_journal(opened)
            if self.bare:
                # a bare journal's user gets its live records (JournalImpl.load's RecordInfo list): compare them
                own = self._messages if journal == "messages" else self._bindings
                return own is None or _records_of(other_result) != _records_of(own)
            if journal == "bindings":
                return ({r.id for r in other_result.live if r.user_record_type in BINDING_TYPES}
                        != {i for i, t in self.bindings_ids.items() if t in BINDING_TYPES})
            other = Evidence.build(None, other_result)
            return other.live_pairs() != self.live_pairs()

    # -- what losing a record changes ---------------------------------------------------------------------

    def _deleted_later(self, rid: int) -> bool:
        if rid in self.deleted_unknown:
            return True
        if self.opened is not None and self._deleted is None:
            self._deleted = deleted_ids(self.opened)
        return self._deleted is not None and rid in self._deleted

    def _binding_deleted_later(self, rid: int) -> bool:
        """Whether a DELETE or DELETE_TX of ``rid`` is in the bindings journal (a rescan, on damage only)."""
        if self.bindings_opened is not None and self._bindings_deleted is None:
            self._bindings_deleted = deleted_ids(self.bindings_opened)
        return self._bindings_deleted is not None and rid in self._bindings_deleted

    def effect_of_loss(self, journal: str, rec: Rebuilt) -> str:
        """What the broker loses because it never read ``rec`` (a record of ``journal`` it skipped)."""
        t = rec.type
        if t in (PREPARE, COMMIT, ROLLBACK, 10):
            # a lost COMMIT rolls its transaction back; a lost PREPARE makes it fail; both drop its records,
            # which the load then shows as an incomplete transaction: judged with it
            return HARMLESS if t in (ROLLBACK, 10) else UNKNOWN
        if t in (ADD_TX, UPDATE_TX, DELETE_TX):
            # its transaction's COMMIT no longer counts it: Artemis discards the whole transaction, judged there
            return UNKNOWN
        rid = rec.id
        if self.bare:
            return self._bare_effect(journal, rec)
        if journal == "bindings":
            if t == DELETE:
                # the deleted record comes back: only a queue or address binding changes what the broker has
                return LOSS if self.bindings_ids.get(rid) in BINDING_TYPES else HARMLESS
            if rid in self.bindings_ids or self._deleted_later(rid) or self._binding_deleted_later(rid):
                return HARMLESS
            # a queue or address binding is what the broker delivers to; the other bindings records (status,
            # id counter, settings, users, diverts) change no stored message
            return LOSS if rec.user_type in BINDING_TYPES else HARMLESS
        if t == DELETE:
            return LOSS if self._live_queues(rid) else HARMLESS
        if t == ADD:
            if rec.user_type in MESSAGE_TYPES:
                if rid in self.messages or self._deleted_later(rid):
                    return HARMLESS
                return LOSS if self._live_queues(rid) else HARMLESS
            if rec.user_type in _BOOKKEEPING:
                return HARMLESS
            if rec.user_type == R.DUPLICATE_ID:
                return self._duplicate_id_lost(rid)
            if self._deleted_later(rid):
                return HARMLESS
            return self._page_tx_effect(rec) or UNKNOWN
        # UPDATE: an update always follows its add, so an id with no live record was deleted since
        if rid not in self.live_ids:
            return HARMLESS
        q = int.from_bytes(rec.body[:8], "big", signed=True) if len(rec.body) >= 8 else None
        if rec.user_type == R.ADD_REF:
            if q is not None and (rid, q) in self.acked:
                self.explained.add((rid, q))
                return HARMLESS
            return LOSS
        if rec.user_type == R.ACKNOWLEDGE_REF:
            if q is not None and self.unbound(q):
                # the damage took the queue id too; the message's id names what the broker consumed, a reference
                # of it no surviving acknowledgement took
                return LOSS if self.live_queues(rid) else HARMLESS
            return LOSS if q is not None and q in self.refs.get(rid, ()) else HARMLESS
        if rec.user_type in CONTENT_UPDATES:
            return HARMLESS
        return self._page_tx_effect(rec) or UNKNOWN

    def _bare_effect(self, journal: str, rec: Rebuilt) -> str:
        """:meth:`effect_of_loss` in a bare journal, whose user gets what ``JournalImpl.load`` returns: every
        live ADD and UPDATE of an id no DELETE names (``JournalImpl.load`` drops all records of a deleted id).
        A lost DELETE brings its id's records back when some are still in the files (they are live now); a
        lost ADD or UPDATE is a live entry lost when its id is live still (nothing deleted it: a DELETE_TX of
        a transaction left prepared deletes nothing yet), and an ADD too unless a DELETE of its id survives (an
        UPDATE follows its ADD: with no live record, its id was deleted since)."""
        live = self.live_ids if journal == "messages" else set(self.bindings_ids)
        if rec.type in (DELETE, UPDATE) or rec.id in live:
            return LOSS if rec.id in live else HARMLESS
        opened = self.opened if journal == "messages" else self.bindings_opened
        if opened is None:
            return UNKNOWN
        if journal not in self._applied_deletes:
            self._applied_deletes[journal] = applied_deletes(opened)
        return HARMLESS if rec.id in self._applied_deletes[journal] else LOSS

    def _duplicate_id_lost(self, rid: int) -> str:
        """What losing the DUPLICATE_ID record ``rid`` costs: its entry in the duplicate-detection cache the
        broker loads (``loadMessageJournal``, case DUPLICATE_ID; ``PersistentDuplicateIDCache.load``), so a resend
        it would have rejected is accepted, delivered twice -- unless a DELETE of it survives (the cache evicted
        it: ``deleteDuplicateID``) or the record is live anyway."""
        return HARMLESS if rid in self.live_ids or self._deleted_later(rid) else LOSS

    def live_queues(self, mid: int) -> set[int]:
        """The queues still holding message ``mid`` (its refs without an ack)."""
        return {q for q in self.refs.get(mid, ()) if (mid, q) not in self.acked}

    _live_queues = live_queues

    def unbound(self, queue: int) -> bool:
        """Whether no queue is bound under ``queue`` in a store whose bindings were read: a queue id the damage
        took (zeros over it read 0), not one a record was written for."""
        return self.have_bindings and queue not in self.queues

    def _page_tx_effect(self, rec: Rebuilt) -> str | None:
        """What losing a PAGE_TRANSACTION or PAGE_CURSOR_COMPLETE record costs. A PAGE_TRANSACTION add: every cursor
        skips its paged messages (``PageSubscriptionImpl``: "Could not locate page transaction"), a loss only for
        those some queue still has to consume (paging/page_tx.py). Its update (``updatePageTransaction``: the count
        of messages consumed since) only lowers the count the load keeps (``PageTransactionInfoImpl.onUpdate``),
        which decides when the transaction's record is deleted, never which message is delivered. None when this is
        not such a record or the pages cannot tell."""
        if self.no_pages and rec.user_type in _PAGE_RECORDS:
            # no page holds a message: losing the record of a page transaction, a cursor's acknowledgement or its
            # completed page skips or brings back nothing (a paging directory lost is judged by itself)
            return HARMLESS
        if rec.user_type == R.PAGE_CURSOR_COMPLETE and rec.type in (ADD, ADD_TX) and len(rec.body) >= 16:
            # a queue's completed page: without it the cursor reads the page again and delivers what no cursor
            # acknowledgement of it covers (PageSubscriptionImpl: isComplete(page)); the cleanup that writes it
            # deletes those acknowledgements in the same transaction, so losing the whole transaction keeps them
            if self.page_unacked is None:
                return None
            q, page = (int.from_bytes(rec.body[i:i + 8], "big", signed=True) for i in (0, 8))
            return LOSS if self.page_unacked(q, page) else HARMLESS
        if rec.user_type != R.PAGE_TRANSACTION:
            return None
        if rec.type in (UPDATE, UPDATE_TX):
            return HARMLESS
        if rec.type not in (ADD, ADD_TX) or self.paged_pending is None or len(rec.body) < 8:
            return None
        return LOSS if self.paged_pending(int.from_bytes(rec.body[:8], "big", signed=True)) else HARMLESS

    def effect_of_discarded(self, records: list[Rebuilt], intact: list[Rebuilt] = ()) -> str:
        """What the broker loses when it discards a whole transaction (its COMMIT no longer counts its
        records): ``records`` are the transaction's records, which the load then applied none of.

        ``intact``: more of its records, read whole by the load (their ids are the ones written). A reference
        among them to a message no ADD carries anywhere was routed right after that message's ADD_TX, which the
        damage took (``JournalImpl.appendAddRecordTransactional``, then ``appendUpdateRecordTransactional``:
        the commit's count, written in the same file, counted both): the broker committed it and, unless a
        DELETE of it survives, delivers it."""
        records = [*records, *intact]
        whole = {id(r) for r in intact}
        if self.bare:
            # JournalImpl.load's user loses each record the transaction added or updated (unless its id is
            # deleted since) and keeps each it deleted (a loss when the id is live: brought back)
            journal = "messages" if self.opened is not None else "bindings"
            effects = {self._bare_effect(journal, replace(r, type=DELETE if r.type == DELETE_TX else ADD))
                       for r in records if r.type in (ADD_TX, UPDATE_TX, DELETE_TX)}
            return LOSS if LOSS in effects else HARMLESS
        worst = HARMLESS
        # the messages the transaction sent, when each was deleted since: a reference of it whose id the damage
        # made one no record carries was one of theirs (a session routes what it sends in a transaction right after
        # its ADD_TX), and goes with them
        sent = {r.id for r in records if r.type == ADD_TX and r.user_type in MESSAGE_TYPES}
        sent_gone = bool(sent) and all(self._deleted_later(x) for x in sent)
        for rec in records:
            rid, t = rec.id, rec.type
            q = int.from_bytes(rec.body[:8], "big", signed=True) if len(rec.body) >= 8 else None
            if t == ADD_TX and rec.user_type in MESSAGE_TYPES:
                effect = HARMLESS if self._deleted_later(rid) else LOSS
            elif t == UPDATE_TX and rec.user_type == R.ADD_REF:
                if (rid, q) in self.acked:
                    self.explained.add((rid, q))  # its acknowledgement, now without it, is no loss either
                # (only a reference read from damaged bytes: one read whole names the message it was written for)
                unknown = (sent_gone and rid not in self.messages and rid not in self.live_ids and rid not in sent
                           and id(rec) not in whole)
                effect = HARMLESS if unknown or self._deleted_later(rid) or (rid, q) in self.acked else LOSS
            elif t == UPDATE_TX and rec.user_type == R.ACKNOWLEDGE_REF:
                effect = LOSS if rid in self.live_ids and q in self._live_queues(rid) else HARMLESS
            elif t == UPDATE_TX and rec.user_type in CONTENT_UPDATES:
                effect = HARMLESS
            elif t == DELETE_TX:
                # a message still on a queue is deleted no more; nor is a queue or address binding, which
                # comes back (the broker recreates that queue or address)
                effect = LOSS if self._live_queues(rid) or self.bindings_ids.get(rid) in BINDING_TYPES else HARMLESS
            elif t == ADD_TX and rec.user_type in BINDING_TYPES:
                # the queue or address it added is gone, unless a later DELETE removed it anyway
                effect = HARMLESS if self._binding_deleted_later(rid) else LOSS
            elif t in (ADD_TX, UPDATE_TX) and rec.user_type in _BOOKKEEPING:
                effect = HARMLESS  # as effect_of_loss: no message the broker delivers changes
            elif t == ADD_TX and rec.user_type == R.DUPLICATE_ID:
                effect = self._duplicate_id_lost(rid)
            elif self._deleted_later(rid):
                effect = HARMLESS
            else:
                effect = self._page_tx_effect(rec) or UNKNOWN
            if effect == LOSS:
                return LOSS
            if effect == UNKNOWN:
                worst = UNKNOWN
        return worst


def loads_alike(journal: str, first, second, bare: bool) -> bool:
    """Whether two ways of loading one journal (``first``, ``second``: opened journals, closed here) give the
    broker the same: for a bare journal the records ``JournalImpl.load`` hands its user; for the bindings the
    queue and address bindings; for the messages journal the live (message, queue) pairs
    (:meth:`Evidence.live_pairs`) of the load as the broker walks it (:func:`load_walk.as_walked`); and in
    either of these the records of its prepared transactions, which the broker keeps for their transaction
    manager (each one's messages are delivered once it commits)."""
    from amqtool.engines.artemis.load import load_journal
    from amqtool.engines.artemis.load_walk import as_walked

    def held(opened) -> tuple:
        with opened:
            result = load_journal(opened)
            prepared = Counter((tx.tx_id, r.id, r.user_record_type, bool(r.is_update)) for tx in result.prepared
                               for r in tx.records)
            if bare:
                return _records_of(result), prepared
            if journal == "bindings":
                return {r.id for r in result.live if r.user_record_type in BINDING_TYPES}, prepared
            # as the broker's start walks them: a file read first can put a reference or acknowledgement before
            # its message's record, where it applies to nothing (load_walk.py)
            return Evidence.build(None, as_walked(result)).live_pairs(), prepared

    return held(first) == held(second)


def _records_of(result) -> Counter:
    """The live records of a journal load as ``JournalImpl.load`` hands them to its user: id, user record type,
    isUpdate, body."""
    return Counter((r.id, r.user_record_type, bool(r.is_update), result.body(r)) for r in result.live)


def _byte_neighbours(rid: int, ids) -> list[int]:
    """The ids of ``ids`` that differ from ``rid`` in exactly one byte."""
    from amqtool.formats.damage import one_byte_apart

    return [i for i in ids if one_byte_apart(i, rid)]


def strayed_records(result, opened, tx_id: int, unexplained: int = 1,
                    file_index: int | None = None) -> list[Rebuilt]:
    """The records of the open transactions (no COMMIT, PREPARE or ROLLBACK: the broker rolls them back at
    start) whose id is one damaged byte from ``tx_id``: records of transaction ``tx_id`` whose transaction id
    was damaged. When ``tx_id``'s commit no longer counts its records (commit-count-mismatch), the broker
    discards them with the rest of it, so they are weighed with it.

    ``unexplained``: how many records the commit counts in its file beyond those found there and those the
    damaged regions of that file held (rebuilt as records of ``tx_id``). At 0 or below the damage accounts for
    the whole shortfall and no record strayed: [] (``JournalTransaction.getCounter`` counts the transaction's
    records in the commit's own file, so a record that strayed under another transaction id is one of those
    the count misses). Real JournalImpl stores leave open transactions whose ids differ from a committed
    one's in the low byte alone (ids are issued one after another), which were weighed as strayed records.
    So an open transaction is taken for strayed records only when it holds exactly ``unexplained`` records,
    all in the commit's file (``file_index``, when given): a left-open transaction of six records, or of
    records in another file, is no shortfall of one record of this commit's file; and one damage either moves
    records to another transaction id or changes the count, so a shortfall other than what the open
    transaction holds (a count byte damaged: 16777220 counted, 4 there) is no record that strayed."""
    if unexplained <= 0:
        return []
    out = []
    for tx in result.failed:
        if tx.prepared or not _byte_neighbours(tx_id, (tx.tx_id,)):
            continue
        own = tx.records + tx.records_to_delete
        if len(own) != unexplained or file_index is not None and any(r.file_index != file_index for r in own):
            continue
        out += [Rebuilt(UPDATE_TX if r.is_update else ADD_TX, 0, 0, tx.tx_id, r.id, r.user_record_type,
                        opened.pread(r.file_index, r.body_offset, r.body_len), "") for r in tx.records]
        out += [Rebuilt(DELETE_TX, 0, 0, tx.tx_id, r.id, 0, b"", "") for r in tx.records_to_delete]
    return out


def transaction_records(opened, tx_id: int) -> list[Rebuilt]:
    """Every record of transaction ``tx_id`` in the files of ``opened`` (a rescan, done only for a transaction
    the load discarded), with the bodies of its adds and updates."""
    from amqtool import native

    out = []
    for fi, jf in enumerate(opened.files):
        data = opened.read_file(fi)
        records, _ = native.scan_records(data, jf.tag, jf.version, True, 16)
        for t, off, size, cc, tx, rid, utype, body_len, nrec, extra in records:
            if tx == tx_id and t in (ADD_TX, UPDATE_TX, DELETE_TX):
                start = off + fixed_size(t, jf.version) - 4
                out.append(Rebuilt(t, off, size, tx, rid, utype, bytes(data[start:start + body_len]), ""))
    return out


def deleted_ids(opened) -> set[int]:
    """The ids of every DELETE and DELETE_TX record in the files of ``opened`` (a rescan with the C scanner,
    done only when a damaged record or transaction is judged: the load keeps no deleted ids)."""
    from amqtool import native

    out: set[int] = set()
    for fi, jf in enumerate(opened.files):
        records, _ = native.scan_records(opened.read_file(fi), jf.tag, jf.version, True, 16)
        out.update(r[5] for r in records if r[0] in (DELETE, DELETE_TX))
    return out


def applied_deletes(opened) -> set[int]:
    """The ids that a DELETE, or a DELETE_TX of a transaction whose COMMIT is in the files, deletes: what
    ``JournalImpl.load`` drops (a DELETE_TX of a transaction left prepared, rolled back or open deletes nothing).
    A rescan with the C scanner, done only when a bare journal's damaged record is judged."""
    from amqtool import native

    deleted, in_tx, committed = set(), [], set()
    for fi, jf in enumerate(opened.files):
        records, _ = native.scan_records(opened.read_file(fi), jf.tag, jf.version, True, 16)
        for r in records:
            if r[0] == DELETE:
                deleted.add(r[5])
            elif r[0] == DELETE_TX:
                in_tx.append((r[4], r[5]))
            elif r[0] == COMMIT:
                committed.add(r[4])
    return deleted | {rid for tx, rid in in_tx if tx in committed}


def committed_ids(opened) -> set[int]:
    """The transaction ids of every COMMIT record in the files of ``opened`` (a rescan, on damage only)."""
    from amqtool import native

    out: set[int] = set()
    for fi, jf in enumerate(opened.files):
        records, _ = native.scan_records(opened.read_file(fi), jf.tag, jf.version, True, 16)
        out.update(r[4] for r in records if r[0] == COMMIT)
    return out


def ended_tx_ids(opened) -> set[int]:
    """The transaction ids of every COMMIT and ROLLBACK record in the files of ``opened`` (a rescan, done only
    when a damaged region reads as a commit). ``JournalImpl`` ends a transaction once (``appendCommitRecord``
    or ``appendRollbackRecord``, then forgets it), so damaged bytes read as the COMMIT of a transaction whose
    end record survives elsewhere were no such COMMIT: that reading is wrong."""
    from amqtool import native

    out: set[int] = set()
    for fi, jf in enumerate(opened.files):
        records, _ = native.scan_records(opened.read_file(fi), jf.tag, jf.version, True, 16)
        out.update(r[4] for r in records if r[0] in (COMMIT, ROLLBACK))
    return out


def rolled_back_ids(opened) -> set[int]:
    """The transaction ids of every ROLLBACK record in the files of ``opened`` (a rescan with the C scanner,
    done only when a damaged transactional record is judged: the load keeps no rolled-back ids). A rolled-back
    transaction's records are never applied (``JournalImpl.load``: onReadRollbackRecord drops them), so losing
    one of them changes nothing."""
    from amqtool import native

    out: set[int] = set()
    for fi, jf in enumerate(opened.files):
        records, _ = native.scan_records(opened.read_file(fi), jf.tag, jf.version, True, 16)
        out.update(r[4] for r in records if r[0] == ROLLBACK)
    return out
