"""Damaged bytes inside a journal file that held several records (``verify``'s ``damaged-record``).

:func:`~amqtool.engines.artemis.evidence.reconstruct` reads a damaged region as one record with one wrong
field, :mod:`~amqtool.engines.artemis.split_region` as two records each damaged at one end. A longer damaged
run (a zeroed page, a block of random bytes) takes records whole: the region then holds the head of the first
record it cut, the records it wiped entirely, and the tail of the last. The broker skips the whole region and
reads on at the next valid record (``JournalImpl.readJournalFile`` scans the rest of the file byte by byte), so
what it loses is every record that was there. What they were is gone with their bytes, but the store keeps the
evidence :mod:`~amqtool.engines.artemis.tails` reads for a file's damaged end, here bounded on both sides:

* **The id window.** Every id comes from one ``BatchingIDGenerator``, counting up, and records are written in
  the order they are stored, so the new ids the lost records carried lie after the highest id written before
  the region and before the lowest new ADD id after it (in the rest of the file and the later files). A couple
  of ids beyond each bound are taken too: an id is issued a moment before its record is written, so two
  records may be written in the other order (a message's duplicate-id record before the message, two
  sessions storing at once).
* **What surviving records say of each id** (:meth:`~amqtool.engines.artemis.tails.IdLedger.roles`): deleted
  since (a DELETE, no ADD: its loss changes nothing), stored elsewhere (an ADD, a transaction's records, a
  paged message), or live with no record of its own (references, acknowledgements, a ``.msg`` file, a
  queue's paging records: a live record was lost -- CRITICAL), or carried by nothing (cannot be told).
* **The first record's head.** When the run starts inside the first record, its head (type, the file's tag,
  ids, body size and user record type) survives and names it: judged as the verifier judges one lost record.
* **Transactions the run may have ended.** A transaction with records before the region and no end record
  lost its COMMIT or ROLLBACK there (or is still open): when discarding it loses live records it must be told
  whether it committed (a message it added was delivered since: ``IdLedger.delivered``) -- then the loss is
  proven; otherwise it cannot be told, unless the last record before the region is one of it: then the run took
  the records it wrote next, its end among them, most likely its COMMIT (:mod:`~.cut_off_tx`, as on a damaged
  end of a file): CRITICAL by the odds, ``cutOffTransaction``. A paged transaction's id in the window, with
  messages queues acknowledged and others still to consume and no page-transaction record left, lost its record
  here.

A region that one add fills exactly (its trailing size counts it) but whose id the damage took, in its head
and in its body, is judged so too: an add carries a new id of the window. One update or delete filling a
region is not: it carries an older id, which the window cannot see.

When every new id of the window is accounted for (deleted since or stored elsewhere), the head's record changes
nothing and no transaction the run may have ended held anything live, the region held no live message: a
warning. What no id shows -- acknowledgements or deletes of older messages written there -- is said in the
finding, as for a damaged tail: when the region's bytes leave room for such records (:func:`_filled`) the loss
of one of them cannot be told, and it stays a warning by the odds (see :func:`run_finding`).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

from amqtool.engines.artemis.cut_off_tx import cut_off_tx
from amqtool.engines.artemis.evidence import HARMLESS, LOSS, UNKNOWN, Rebuilt, _plausible
from amqtool.engines.artemis.lost_ack import lost_ack
from amqtool.engines.artemis.rolled_back import rolled_back_ids, rolled_clause
from amqtool.engines.artemis.tails import settled_clause, settled_ids
from amqtool.formats.artemis.records import fixed_size

_ADDS = (11, 13)
_DELETES = (15, 16)
_TX = (13, 14, 15, 17, 18, 19)
_NO_ID = (17, 18, 19)
_MESSAGES = (30, 31, 45)
MAX_WINDOW = 1 << 12  # ids of a window enumerated (a wider one is a restart's id batch, or no bound at all)
# ids beyond each bound taken too: issued before, written after (see the module docstring): a message's
# duplicate-id record (``PostOfficeImpl``: ``DuplicateIDCache.addToCache`` issues its id after the message's) is
# written before the message. Ids further off are not counted: a broker issues ids it never stores (a
# non-durable message, a paged message's transaction) and they would read as unaccounted for
REORDER = 2
MAX_LISTED = 20


@dataclass
class RunWindow:
    """What the surviving records say of the records a damaged run inside a file took."""

    after: int
    before: int
    head: Rebuilt | None = None
    head_effect: str = HARMLESS
    deleted: list[int] = field(default_factory=list)
    live: list[int] = field(default_factory=list)
    unaccounted: list[int] = field(default_factory=list)
    rolled_back: list[int] = field(default_factory=list)  # ids a transaction rolled back after it was sending
    open_txs: list[int] = field(default_factory=list)
    open_effect: str = HARMLESS
    committed: dict[int, int] = field(default_factory=dict)
    page_txs_lost: dict[int, int] = field(default_factory=dict)
    page_txs_settled: list[int] = field(default_factory=list)  # tails.Window's: not counted as unaccounted
    # whether the region's bytes are accounted for record by record (_filled): no room left for a record no id
    # shows (an acknowledgement or delete of an older message)
    filled: bool = False
    # ids of the window no surviving record carries, when the region is whole records zeroed exactly and shorter
    # than any add of the journal (the only records that carry a new id): not written there (_smallest_add)
    unstored: list[int] = field(default_factory=list)
    smallest_add: int = 0
    region_size: int = 0
    lost_ack: object = None  # lost_ack.LostAck: the head's record consumed a message the load still holds

    @property
    def room_only(self) -> bool:
        """Whether the only thing left untold is the room the region's bytes leave for records no id shows
        (acknowledgements or deletes of older messages): every new id accounted for, no transaction the run may
        have ended holding anything live, the head's record harmless."""
        return (self.effect == UNKNOWN and not self.unaccounted and self.open_effect == HARMLESS
                and self.head_effect == HARMLESS and not self.filled)

    @property
    def open_only(self) -> bool:
        """Whether all that is left untold, besides the room above, is whether transactions with no end record
        lost their COMMIT in the region (every new id accounted for, the head's record harmless)."""
        return (self.effect == UNKNOWN and not self.unaccounted and self.open_effect != HARMLESS
                and self.head_effect == HARMLESS)

    @property
    def effect(self) -> str:
        if self.live or self.committed or self.page_txs_lost or self.head_effect == LOSS:
            return LOSS
        if self.unaccounted or self.open_effect != HARMLESS or self.head_effect != HARMLESS or not self.filled:
            return UNKNOWN
        return HARMLESS

    def to_json(self) -> dict:
        return {"idsAfter": self.after, "idsBefore": self.before, "deletedIds": self.deleted[:100],
                "liveIds": self.live[:100], "unaccountedIds": self.unaccounted[:100],
                "unstoredIds": self.unstored[:100],
                "rolledBackIds": self.rolled_back[:100], "openTransactions": self.open_txs[:100],
                "committedTransactions": {str(t): m for t, m in list(self.committed.items())[:100]},
                "pageTransactionsLost": {str(t): n for t, n in list(self.page_txs_lost.items())[:100]},
                "settledPageTransactionIds": self.page_txs_settled[:100]}

    def describe(self) -> str:
        """What the evidence says, for the finding's message."""
        span = f"ids {self.after + 1}..{self.before - 1}"
        head = f" (the first, {_name(self.head)}, cut by the damage)" if self.head is not None else ""
        if self.effect == HARMLESS:
            return (f"records were lost there{head}, but every new id issued while they "
                    f"were written ({span}) is accounted for ({len(self.deleted)} deleted since: a DELETE survives; "
                    f"{rolled_clause(self.rolled_back)}{settled_clause(self.page_txs_settled)}the rest stored "
                    f"elsewhere), so none of them was a live "
                    f"message (acknowledgements or deletes of older messages written there carry no new id and "
                    f"cannot be seen)")
        why = []
        if self.lost_ack is not None:
            why.append(f"the first, whose header survives, is {self.lost_ack.describe()}, which the load still "
                       f"holds: the broker consumed it before the damage and will deliver it again")
        elif self.head_effect == LOSS:
            why.append(f"the first, {_name(self.head)}, is lost with them")
        if self.live:
            why.append(f"{len(self.live)} id(s) issued while they were written ({span}) keep references, "
                       f"acknowledgements, paging records or a large-message file but have no record of their own "
                       f"({_ids(self.live)})")
        if self.committed:
            why.append("the COMMIT of transaction(s) " + ", ".join(
                f"{t} (message {m} delivered since)" for t, m in list(self.committed.items())[:MAX_LISTED]))
        if self.page_txs_lost:
            why.append("the page transaction(s) " + ", ".join(
                f"{t} ({n} to consume)" for t, n in list(self.page_txs_lost.items())[:MAX_LISTED]))
        if why:
            return "records were lost there, and they held live records: " + "; ".join(why)
        if self.unaccounted:
            why.append(f"{len(self.unaccounted)} id(s) issued while they were written ({span}) are carried by no "
                       f"surviving record ({_ids(self.unaccounted)})")
        if self.open_effect != HARMLESS:
            why.append(f"transaction(s) {_ids(self.open_txs)} have no end record and held live records")
        if self.head_effect != HARMLESS:
            why.append(f"the first, {_name(self.head)}, may have been live")
        if not why and self.unstored:
            why.append(f"no record that carries a new id fits in their {self.region_size} bytes of whole records "
                       f"(the smallest add this journal holds is {self.smallest_add} bytes), so the ids issued then "
                       f"that no surviving record carries ({_ids(self.unstored)}) were never written there; but "
                       f"their bytes hold records no id shows (acknowledgements, references or deletes of older "
                       f"messages, which bring them back or take them off a queue)")
        if not why:
            why.append(f"every new id issued while they were written ({span}) is accounted for, but their bytes "
                       f"leave room for records no id shows (an acknowledgement or delete of an older message, "
                       f"which brings it back)")
        return "records were lost there, and what they held cannot be told: " + "; ".join(why)


def _ids(ids: list[int]) -> str:
    return ", ".join(map(str, ids[:MAX_LISTED])) + (" ..." if len(ids) > MAX_LISTED else "")


def _name(rec: Rebuilt) -> str:
    kind = {11: "add", 12: "update", 13: "transactional add", 14: "transactional update", 15: "transactional "
            "delete", 16: "delete", 17: "prepare", 18: "commit", 19: "rollback"}.get(rec.type, "record")
    what = f"{kind} of record {rec.id}" if rec.type not in _NO_ID else kind
    if rec.type in (11, 12, 13, 14):
        what += f" (user record type {rec.user_type})"
    return what + (f" in transaction {rec.tx_id}" if rec.type in _TX else "")


def head_record(buf: bytes, base: int, first: int, end: int, tag: int, version: int, max_id: int) -> Rebuilt | None:
    """The record whose head lies at ``first`` (``buf`` holds the file's bytes from ``base``), read from its head
    alone, when the head is whole and plausible: a record type, the file's tag, ids the journal could have
    issued, a non-empty body of a user record type that fits the record type, and a length that ends inside
    the region (its end was damaged: a whole record there would have been read). Its body is what the region
    holds of it (the caller weighs whether that is enough). A damaged run that begins inside the head leaves
    zeros where the body size and user record type are read, which this refuses."""
    s = first - base
    if s < 0 or s + 5 > len(buf):
        return None
    t = buf[s]
    if not 11 <= t <= 19 or t == 17 or struct.unpack_from(">i", buf, s + 1)[0] != tag:
        return None
    p = s + 5 + (1 if version >= 2 else 0)
    tx_id = rid = -1
    if t in _TX:
        if p + 8 > len(buf):
            return None
        tx_id = struct.unpack_from(">q", buf, p)[0]
        p += 8
    if t not in _NO_ID:
        if p + 8 > len(buf):
            return None
        rid = struct.unpack_from(">q", buf, p)[0]
        p += 8
    body_len, utype, body = 0, 0, b""
    if t in (11, 12, 13, 14, 15):
        if p + 4 > len(buf):
            return None
        body_len = struct.unpack_from(">i", buf, p)[0]
        p += 4
        if t != 15:
            if p >= len(buf) or body_len <= 0:
                return None
            utype = buf[p]
            p += 1
        body = bytes(buf[p:min(p + body_len, end - base)])
    total = fixed_size(t, version) + body_len
    if total <= 0 or first + total > end:
        return None
    rec = Rebuilt(t, first, total, tx_id, rid, utype, body, "end")
    return rec if _plausible(rec, max_id) else None


def _records(opened, index: int, start: int = 16):
    """(type, offset, id, tx id, size) of the records of file ``index`` from ``start`` (-1 for ids a type
    lacks)."""
    for base, _data, records, _marked in opened.scan_windows(index):
        for t, off, size, cc, tx, rid, utype, body_len, nrec, extra in records:
            if base + off >= start:
                yield t, base + off, rid if t not in _NO_ID else -1, tx if t in _TX else -1, size


def run_window(ledger, result, index: int, first: int, end: int, region, evidence, effect_of,
               deleted) -> RunWindow | None:
    """What the records the damaged region ``[first, end)`` of file ``index`` of the load ``result`` held
    were, as far as the store's surviving records tell (module docstring); None when no window bounds their
    ids (no new record after the region, or too wide a span). ``region``: the bytes to read the head from,
    their base, the file's tag and version; ``effect_of``: the verifier's judgement of one lost record;
    ``deleted``: the ids of the journal's DELETE records."""
    buf, base, tag, version = region
    opened = result.opened
    start = zeroed_from(opened, index, first)
    if start < first:
        # the zeros before the region's first non-filler byte are damage too (JournalImpl writes a file's records
        # back to back: no filler lies between two of them): the records lost begin where the last one read ends
        first, base = start, max(start - 24, 16)
        buf = opened.pread(index, base, end - base)
        region = (buf, base, tag, version)
    if end - first < 5:
        return None
    last_size = int.from_bytes(buf[end - base - 4:end - base], "big", signed=True)
    lone = last_size == end - first
    head_reads = 11 <= buf[first - base] <= 19 and int.from_bytes(buf[first - base + 1:first - base + 5], "big",
                                                                  signed=True) == tag
    if lone and not (buf[first - base] in _ADDS and head_reads or not head_reads and end - first > _LONGEST_NOT_ADD):
        # one record fills the region (its trailing size counts it): not an add, which carries a new id of the
        # window, but an update or delete of an older record, which the window cannot see. One whose head the
        # damage took is an add when it is longer than any other record the broker writes.
        return None
    after = -1
    adds = []  # the sizes of the journal's adds, outside the region (_unstored)
    for fi in range(index + 1):
        for t, off, rid, tx, size in _records(opened, fi):
            if fi == index and off >= first:
                break
            after = max(after, rid, tx)
            if t in _ADDS:
                adds.append(size)
    before = None
    for fi in range(index, len(opened.files)):
        for t, off, rid, tx, size in _records(opened, fi, end if fi == index else 16):
            if t in _ADDS:
                adds.append(size)
                if rid > after and (before is None or rid < before):
                    before = rid
    if before is None or before - after > MAX_WINDOW:
        return None
    w = RunWindow(after, before)
    head = head_record(buf, base, first, end, tag, version, result.max_id)
    if head is not None:
        w.head = head
        if head.type in (11, 12, 13, 14) and head.id in deleted and head.id not in {r.id for r in result.live}:
            w.head_effect = HARMLESS  # a record of an id deleted since: its loss changes nothing, whatever it held
        else:
            body_whole = len(head.body) == head.total - fixed_size(head.type, version) and any(head.body)
            effect = effect_of(head if body_whole or head.type in (11, 13) else _without_body(head))
            # a transaction's record is lost with its transaction only if that committed, which its own
            # records no longer tell; an update's body the damage took names no queue
            unproven = head.type in _TX or not body_whole and head.type not in (11, 13)
            w.head_effect = UNKNOWN if effect == LOSS and unproven else effect
            if (head.type == 11 and head.user_type in _MESSAGES and head.id not in evidence.messages
                    and w.head_effect == HARMLESS):
                # a message added there and never deleted: its references may have been lost with it
                w.head_effect = UNKNOWN
    if head is not None and w.head_effect != LOSS:
        # an acknowledgement or DELETE of a message the load still delivers, its header whole (lost_ack.py): the
        # broker consumed it before the damage, and the region took the record (its queue id too, maybe)
        w.lost_ack = lost_ack(opened, index, first, evidence)
        if w.lost_ack is not None:
            w.head_effect = LOSS
    # the window, widened by REORDER on both sides: a record written in the region may carry an id issued just
    # after the first new id written after it (two sessions storing at once)
    lo, hi = max(after - REORDER, 0), before + REORDER + 1
    roles = ledger.roles(lo, hi)
    stored = {"add", "delete", "update", "tx"}
    paged = ledger.paged() if any(not roles.get(x, set()) & stored for x in range(lo + 1, hi)) else set()
    unexplained = set()
    for x in range(lo + 1, hi):
        if x == before:
            continue  # the first new record after the region
        r = roles.get(x, set())
        if "add" in r or "tx" in r or x in paged or head is not None and x == head.id and w.head_effect == HARMLESS:
            continue
        if "delete" in r:
            w.deleted.append(x)
        elif "update" in r and x in evidence.live_ids or "msg" in r or "queue" in r:
            w.live.append(x)
        elif "update" in r:
            # updates the load does not apply: a transaction rolled back, left open or discarded whole (its
            # commit's count no longer matching), judged with that transaction
            continue
        else:
            unexplained.add(x)
    if unexplained and not any(not tx.prepared and any(
            r.file_index < index or r.file_index == index and r.body_offset < end for r in tx.records
            + tx.records_to_delete) for tx in result.failed):
        # ids a transaction rolled back after the region was sending: dead with it (rolled_back.py) -- unless a
        # transaction the region may have left open was sending too: whose run an id was then cannot be told
        gone = rolled_back_ids(ledger, opened, (index, end), unexplained, hi)
        w.rolled_back = sorted(gone)
        unexplained -= gone
    if unexplained and ledger.view is not None:
        delivery = ledger.page_tx_delivery(unexplained)
        for tx_id, (acked, pending) in sorted(delivery.items()):
            if acked and pending:
                w.page_txs_lost[tx_id] = pending
        # a page transaction whose paged messages every queue consumed: its id and its record's (tails)
        settled = settled_ids(delivery, unexplained, w.deleted, roles)
        w.page_txs_settled = sorted(settled)
        unexplained -= settled
    if unexplained and not any(buf[first - base:end - base]):
        # zeros laid exactly over whole records (load.file_gaps: a region of them begins where the record before
        # ends): no record that carries a new id was there when none of the journal's adds is that short
        smallest = min(adds, default=None)
        if smallest is not None and end - first < smallest:
            w.unstored, w.smallest_add, w.region_size = sorted(unexplained), smallest, end - first
            unexplained = set()
    w.unaccounted = sorted(unexplained)
    w.filled = _filled(w, buf, base, first, end, version, opened, lone)
    if not (w.filled and (lone or last_size > _LONGEST_NOT_ADD or last_size < _LONGEST_UPDATE)):
        # a region accounted for record by record held no COMMIT, PREPARE or ROLLBACK (unless its last record,
        # taken for an add, may be a PREPARE): no transaction the store leaves open ended there
        _open_transactions(w, ledger, result, index, end, evidence)
    return w


def zeroed_from(opened, index: int, first: int) -> int:
    """Where the zeros that run up to ``first`` (a damaged region's first non-filler byte) in file ``index``
    begin, when they begin at the end of the record read before it (or at the header's end): that record's
    end, else ``first``."""
    last = 16
    for base, _data, records, _marked in opened.scan_windows(index):
        for rec in records:
            if base + rec[1] >= first:
                break
            last = base + rec[1] + rec[2]
        else:
            continue
        break
    if last >= first or any(opened.pread(index, last, first - last)):
        return first
    return last


def _filled(w: RunWindow, buf: bytes, base: int, first: int, end: int, version: int, opened,
            lone: bool = False) -> bool:
    """Whether the region's bytes are accounted for record by record, leaving no room for a record no id
    shows (an acknowledgement or a delete of an older message: 18 to 39 bytes, which a longer run hides).

    The region starts with the head's record (its length from its head) and ends with a record whose trailing
    size survives (``JournalImpl.readJournalFile`` checks that word: it gives the record's start); that last one
    is an add when it is longer than any update the broker writes (an ADD carries a new id: the window's one
    id beside the head's), else it is counted with what lies between. That must be the head's references: at
    most as many ADD_REFs as queues the later acknowledgements of the head's id name (the broker writes a
    message's references after it), each of the fixed length a reference has. A head that is an update or a
    delete (of an older record) is accounted for with an add that begins where it ends. A region one add fills
    exactly (``lone``: run_window read it so) is accounted for by that add."""
    head = w.head
    tail_size = int.from_bytes(buf[end - base - 4:end - base], "big", signed=True)
    tail_start = end - tail_size
    if tail_start == first:
        return lone or head is not None  # one add fills the region (run_window checks it)
    if head is None:
        return False
    head_end = first + head.total
    if head.type not in _ADDS:
        return (tail_start == head_end and tail_size >= _LONGEST_UPDATE
                and len([x for x in w.deleted if x != head.id]) <= 1)
    if tail_size < _LONGEST_UPDATE:
        tail_start = end  # the last record is no add: one of the head's references, counted with them
    if tail_start < head_end or len([x for x in w.deleted if x != head.id]) > (0 if tail_start == end else 1):
        return False
    gap = tail_start - head_end
    if gap == 0:
        return True
    ref = fixed_size(14 if head.type == 13 else 12, version) + 8
    return gap % ref == 0 and gap // ref <= len(_acked_queues(opened, head.id))


_LONGEST_UPDATE = 64  # longer than any update the broker writes (references, acks, counts, schedules: 31-47)
# longer than any record but an add the broker writes: its updates, deletes, commits and rollbacks (at most 47
# bytes) and a PREPARE: JournalImpl.SIZE_PREPARE_RECORD and its compact count (26 bytes), then its extra data, an
# Xid (XidCodecSupport.getXidEncodeLength: three ints, a global transaction id and a branch qualifier of at most
# 64 bytes each, Xid.MAXGTRIDSIZE and MAXBQUALSIZE): at most 166 bytes
_LONGEST_NOT_ADD = 192


def _acked_queues(opened, rid: int) -> set[int]:
    """The queues of every ACKNOWLEDGE_REF of ``rid`` in the files of ``opened`` (a rescan, on damage only)."""
    from amqtool import native

    out: set[int] = set()
    for fi, jf in enumerate(opened.files):
        data = opened.read_file(fi)
        records, _ = native.scan_records(data, jf.tag, jf.version, True, 16)
        for t, off, size, cc, tx, r_id, utype, body_len, nrec, extra in records:
            if r_id == rid and t in (12, 14) and utype == 33 and body_len == 8:
                at = off + fixed_size(t, jf.version) - 4
                out.add(int.from_bytes(data[at:at + 8], "big", signed=True))
    return out


def _without_body(rec: Rebuilt) -> Rebuilt:
    return Rebuilt(rec.type, rec.offset, rec.total, rec.tx_id, rec.id, rec.user_type, b"", rec.wrong)


def _open_transactions(w: RunWindow, ledger, result, index: int, end: int, evidence) -> None:
    """Transactions with records before the region's end and no end record: the region may have held their
    COMMIT (the broker then discards them) or their ROLLBACK. Judged as :func:`tails.lost_window` judges
    those a damaged end left open: a loss proven only when a message they added was delivered since."""
    from amqtool.engines.artemis.evidence import transaction_records

    w.open_txs = sorted(tx.tx_id for tx in result.failed if not tx.prepared and any(
        r.file_index < index or r.file_index == index and r.body_offset < end
        for r in tx.records + tx.records_to_delete))
    worst = HARMLESS
    for tx_id in w.open_txs:
        records = transaction_records(result.opened, tx_id)
        effect = evidence.effect_of_discarded(records)
        if effect == LOSS:
            sent = {r.id for r in records if r.type == 13 and r.user_type in _MESSAGES}
            proof = ledger.delivered(sent, tx_id)
            if proof:
                w.committed[tx_id] = min(proof)
        if worst != LOSS and effect != HARMLESS:
            worst = effect
    w.open_effect = worst


def run_finding(ledger, result, path: str, first: int, end: int, region, evidence, effect_of, deleted):
    """The ``damaged-record`` finding of the region ``[first, end)`` of the file at ``path`` judged by
    :func:`run_window`: a warning when it shows the region held nothing live, or when only the room its bytes
    leave for records no id shows is untold (:attr:`RunWindow.room_only`), or besides it only whether
    transactions with no end lost their COMMIT there (:attr:`RunWindow.open_only`) -- but CRITICAL when the last
    record before the region is of such a transaction (:func:`~.cut_off_tx.cut_off_tx`) --, CRITICAL otherwise;
    None when no window bounds the region (the caller's finding stands)."""
    from amqtool.errors import Finding, Severity

    if ledger is None or region is None:
        return None
    index = next(i for i, f in enumerate(result.files) if str(f.path) == path)
    w = run_window(ledger, result, index, first, end, region, evidence, effect_of, deleted)
    if w is None:
        return None
    # Room alone is a warning: zeroing runs inside older files wherever nothing else was untold, the room held
    # what the broker delivers 18 times against 37 unchanged stores over the 33 JournalImpl stores of
    # /work/artemis-fresh (30 runs a store) and once against 8 on the demos: by the odds, nothing live.
    # So is a doubt only about transactions with no end (as on a damaged end of a file, tails.reweigh): nothing
    # proves their COMMIT was there, and a transaction left open by a crash stays without one. Zeroing runs
    # inside every messages file of the 48 JournalImpl stores (seed 9651, 597 runs), this turned 73 CRITICALs
    # of stores the broker delivers as before into warnings, and 59 losses (mostly acknowledgements the run
    # took, which carry no new id) from CRITICAL to WARNING: no loss is proven there
    warn = w.effect == HARMLESS or w.room_only or w.open_only
    details = {"nextValidRecord": end, "lostIds": w.to_json()}
    if w.open_only:
        # ... unless the last record before the run is of such a transaction: the run took records it wrote
        # next, its end among them (cut_off_tx, as on a damaged end of a file)
        tx_id = cut_off_tx(result, index, first, evidence)
        if tx_id is not None:
            return Finding(Severity.CRITICAL, "damaged-record", f"{end - first} damaged byte(s) followed by valid "
                           f"records (the broker skips them and goes on): records were lost there, and the last "
                           f"record before them is of transaction {tx_id}, which has no COMMIT, PREPARE or ROLLBACK "
                           f"anywhere and held live records: its end was written among the lost records, most "
                           f"likely its COMMIT (a start rolls back every transaction it loads without an end, and "
                           f"clients commit far more than they roll back), and the broker now discards it with "
                           f"what it held", path, first, dict(details, cutOffTransaction=tx_id))
    return Finding(Severity.WARNING if warn else Severity.CRITICAL, "damaged-record",
                   f"{end - first} damaged byte(s) followed by valid records (the broker skips them and goes on): "
                   + w.describe(), path, first, details)
