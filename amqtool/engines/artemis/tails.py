"""What the surviving records say about the records lost at the damaged end of a journal file that is not the
newest (``verify``'s ``damaged-tail``).

A damaged end of a file the broker moved on from lost every record written there (the broker skips the rest
of a file at the first record it cannot read: ``JournalImpl.readJournalFile``). What those records were is
gone with their bytes, but the store keeps two kinds of evidence about them:

* **The id sequence.** Every id a broker gives (message ids, transaction ids, queue and binding ids, page
  transaction, duplicate-id and cursor records) comes from one ``BatchingIDGenerator``, counting up, and the
  journal is written in the order records are stored. So the new ids the lost records carried lie after the
  highest id written before the damage and before the first new record of the next data file (the record
  that did not fit is that file's first; a record id is issued a moment before it is written, so the bound
  is the lowest new id of the next files that is above the first bound): the *window*.
* **What later records say of the window's ids.** A DELETE of an id whose ADD is nowhere proves that
  record was deleted since: its loss changes nothing. An update (reference, acknowledgement, delivery count)
  of an id with no ADD and no DELETE proves a live record was lost (the broker drops the references:
  ``loadMessageJournal``, "cannot find message"), and so does a large message's ``<id>.msg`` file with no
  record: the broker deletes that file with the message. An id carried by another surviving record (an
  ADD elsewhere, a transaction of records elsewhere, a paged message, a bindings record) was not lost here.
  So does a queue id that surviving page cursor or page counter records name, with no binding (a queue's
  paging records are deleted before its binding).
  An id no surviving record carries may have been a live record lost here -- or an id the broker issued and
  never stored (a non-durable message, an id batch left at a restart): that cannot be told. But one that a
  transaction whose ROLLBACK survives after the damage was sending held nothing live
  (:mod:`~amqtool.engines.artemis.rolled_back`).
* **What later records say of a transaction the damage left open.** A transaction whose first records
  survive before the damage and whose end is nowhere lost its COMMIT or its ROLLBACK there. When a message it
  added (in a surviving record, or in the damaged record's own header) was delivered since -- acknowledged,
  redelivered or deleted by a later record outside it -- it was committed: the broker routes a transaction's
  messages to their queues only as it commits (``TransactionImpl.commit``), and only then can a consumer see
  them. Its COMMIT was lost, and the broker discards it at load (``JournalImpl.load`` reports it as failed).
  Likewise an id of the window that paged messages carry as their transaction, with no page-transaction record
  left: a rollback stores none, but when a queue acknowledged one of those messages the transaction committed,
  its PAGE_TRANSACTION was lost here, and the cursors skip the messages still to consume.

:func:`lost_window` reads that evidence; :func:`reweigh` turns today's ``damaged-tail`` finding into the
judgement the evidence supports: CRITICAL when it proves a live record lost (or the lost COMMIT of a transaction
that held one), and, by the odds rather than a proof, when records were lost at a message journal file's end
(room left for the next file's first record, or a record of this use damaged there) and ids of the window are
carried by no surviving record; a
warning when every new id the
window held is accounted for as deleted or stored elsewhere and no transaction left open by the damage held
anything live (what it cannot show: acknowledgements or deletes of older messages written there, which carry
no new id); and otherwise the finding as it was, saying what could not be told.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from amqtool.engines.artemis.rolled_back import rolled_back_ids, rolled_clause
from amqtool.errors import AmqtoolError, Finding, Severity

_ADDS = (11, 13)  # ADD, ADD_TX
_DELETES = (15, 16)  # DELETE_TX, DELETE
_TX = (13, 14, 15, 17, 18, 19)
_NO_ID = (17, 18, 19)
_DELIVERED = (33, 34)  # ACKNOWLEDGE_REF, UPDATE_DELIVERY_COUNT: written only for a message delivered
_MESSAGES = (30, 31, 45)  # ADD_LARGE_MESSAGE, ADD_MESSAGE, ADD_MESSAGE_PROTOCOL
_DUPLICATE_ID = 37
MAX_WINDOW = 1 << 16  # ids of a window enumerated (a wider one is a restart's id batch, or no bound at all)
REORDER = 2  # ids past the window's upper bound taken too (a duplicate-id record: see lost_window)
MAX_LISTED = 20


@dataclass
class Window:
    """The ids the records lost at the damaged end of one file may have carried, and what the surviving
    records of the store say of each (:func:`lost_window`)."""

    after: int  # the highest id written before the damage
    before: int  # the lowest new id written in the next data files above ``after``
    deleted: list[int] = field(default_factory=list)  # no ADD anywhere, a DELETE: deleted since
    live: list[int] = field(default_factory=list)  # no ADD, no DELETE, updates or a .msg file: lost live
    unaccounted: list[int] = field(default_factory=list)  # no surviving record carries them (the first few)
    unaccounted_count: int = 0
    # of those, the ids no transaction the damage left open in this file may have added in the lost bytes
    # (those share its fate: ``_owned``, ``reweigh``)
    unowned_count: int = 0
    open_txs: list[int] = field(default_factory=list)  # transactions the damage may have left open
    open_effect: str = "harmless"  # evidence.effect_of_discarded of their records
    # open transactions proven committed (a message they added was delivered since), whose discard loses
    # live records: tx id -> the delivered message that proves it
    committed: dict[int, int] = field(default_factory=dict)
    # ids no surviving record carries that a transaction rolled back after the damage was sending
    # (rolled_back.py): dead with it, so not counted as unaccounted
    rolled_back: list[int] = field(default_factory=list)
    # ids of the window that are paged messages' transaction ids with no page-transaction record, where a
    # queue acknowledged some of those messages (so the transaction committed): tx id -> messages still to
    # consume, which the broker now skips
    page_txs_lost: dict[int, int] = field(default_factory=dict)
    # ids of the window explained by page transactions whose paged messages no queue still has to consume
    # (settled_page_txs): the transactions' ids and their PAGE_TRANSACTION records', not counted
    page_txs_settled: list[int] = field(default_factory=list)
    # ids just below ``after`` counted because the record carrying ``after`` is a DUPLICATE_ID record, written
    # before its message (lost_window)
    reordered: list[int] = field(default_factory=list)
    # no record precedes the damage: ``after`` is one below the lowest id the records after it carry
    from_lowest: bool = False

    @property
    def size(self) -> int:
        return self.before - self.after - 1

    def to_json(self) -> dict:
        return {"idsAfter": self.after, "idsBefore": self.before, "deletedIds": self.deleted[:100],
                "liveIds": self.live[:100], "unaccountedIds": self.unaccounted[:100],
                "unaccountedCount": self.unaccounted_count, "unownedCount": self.unowned_count,
                "openTransactions": self.open_txs[:100], "rolledBackIds": self.rolled_back[:100],
                "committedTransactions": {str(t): m for t, m in list(self.committed.items())[:100]},
                "pageTransactionsLost": {str(t): n for t, n in list(self.page_txs_lost.items())[:100]},
                "settledPageTransactionIds": self.page_txs_settled[:100]}


class IdLedger:
    """The ids the surviving records of a store carry, read on demand for the windows of damaged tails:
    every journal's records (both journals: one id generator serves them), the paged messages and the
    large-message files. Built by ``verify_store`` and read only when a damaged tail is judged (a rescan of
    the journals per window, in bounded windows of their files)."""

    def __init__(self, journals: list, store=None, view=None):
        self.journals = journals  # OpenedJournal of each journal, open while the verdict is judged
        self.store = store
        self.view = view  # the paging verifier's PagingJournalView (the pages' transactions and cursors)
        self._paged: set[int] | None = None
        self._dup: bool | None = None

    # -- the window --------------------------------------------------------------------------------------

    def bounds(self, opened, index: int, first: int) -> tuple[int, int | None, bool, bool]:
        """(highest id written before ``first`` in file ``index`` and the files loaded before it, lowest
        new id above it -- an ADD's id -- in the files loaded after it, None when they hold none; whether the
        highest is a DUPLICATE_ID record's id, whose message may follow it: see lost_window; whether no record
        precedes the damage, the lower bound then being the lowest id the records after it carry)."""
        after, dup = -1, False
        for fi in range(index + 1):
            for t, off, rid, tx, utype in _records(opened, fi):
                if fi == index and off >= first:
                    break
                if max(rid, tx) > after:
                    after, dup = max(rid, tx), t in _ADDS and rid > tx and utype == _DUPLICATE_ID
        before = None
        lowest = None  # the lowest id a record after the damage carries
        for fi in range(index + 1, len(opened.files)):
            for t, off, rid, tx, _ in _records(opened, fi):
                if t in _ADDS and rid > after and (before is None or rid < before):
                    before = rid
                for i in (rid, tx):
                    if i > 0 and (lowest is None or i < lowest):
                        lowest = i
        below = after < 0 and lowest is not None and before is not None
        if below:
            # nothing before the damage (the oldest file's first records): the ids just above the lowest one the
            # records after it carry (updates and deletes of older messages included) are weighed; what lay
            # below it (a message never consumed since, pinning the file) leaves no trace, so such a window
            # only adds evidence (see reweigh)
            after = lowest - 1
        return after, before, dup, below

    def duplicate_ids(self) -> bool:
        """Whether the journals hold a DUPLICATE_ID record (duplicate detection in use; read once)."""
        if self._dup is None:
            self._dup = any(utype == _DUPLICATE_ID and t in _ADDS for opened in self.journals
                            for fi in range(len(opened.files)) for t, _off, _rid, _tx, utype in _records(opened, fi))
        return self._dup

    def roles(self, lo: int, hi: int) -> dict[int, set[str]]:
        """id -> what carries it ("add", "delete", "update", "tx", "paged", "msg"), for ids in (lo, hi)."""
        out: dict[int, set[str]] = {}
        for opened in self.journals:
            for fi in range(len(opened.files)):
                for t, off, rid, tx, _ in _records(opened, fi):
                    if lo < rid < hi:
                        out.setdefault(rid, set()).add(
                            "add" if t in _ADDS else "delete" if t in _DELETES else "update")
                    if lo < tx < hi:
                        out.setdefault(tx, set()).add("tx")
        for mid in self._large_files():
            if lo < mid < hi:
                out.setdefault(mid, set()).add("msg")
        for qid in self._paging_queues():
            if lo < qid < hi:
                out.setdefault(qid, set()).add("queue")
        return out

    def _paging_queues(self) -> set[int]:
        """Queue ids that surviving page cursor and page counter records name (PAGE_CURSOR_COUNTER_VALUE/INC,
        ACKNOWLEDGE_CURSOR, PAGE_CURSOR_COMPLETE) with no queue binding: a queue the broker created (queue ids
        come from the same generator) whose binding is gone while its paging records live on. Deleting a queue
        deletes its cursor's acknowledgements, page-complete and counter records before its binding
        (``QueueImpl.deleteQueue``: ``destroyPaging``, then ``deleteQueueBinding``)."""
        v = self.view
        if v is None or not v.bindings_loaded:
            return set()
        return (set(v.counter_value) | set(v.counter_inc) | set(v.acks) | set(v.complete)) - v.queues

    def delivered(self, ids: set[int], tx_id: int) -> dict[int, int]:
        """Of the message ids ``ids`` (added by transaction ``tx_id``), those a record outside that transaction
        shows delivered since -> that record's id: a DELETE, or an acknowledgement or delivery-count update
        (ACKNOWLEDGE_REF, UPDATE_DELIVERY_COUNT), in any other transaction or none. The broker delivers a
        transaction's messages only once it committed (``TransactionImpl.commit`` adds the references to their
        queues afterwards), so any of them proves the commit."""
        out: dict[int, int] = {}
        for opened in self.journals:
            for rid, (t, _fi, _off) in first_deliveries(opened, dict.fromkeys(ids, tx_id)).items():
                out.setdefault(rid, t)
        return out

    def paged(self) -> set[int]:
        """The message ids of every paged message (read once, only when a window needs them)."""
        if self._paged is None:
            self._paged = set()
            if self.store is not None and self.store.paging_dir is not None:
                from amqtool.engines.artemis.paging import iter_paged_entries

                try:
                    self._paged = {e.message.message_id for e in iter_paged_entries(self.store, self.view)}
                except (AmqtoolError, OSError):  # unreadable pages are judged by the paging verifier
                    self._paged = set()
        return self._paged

    def page_tx_delivery(self, tx_ids: set[int]) -> dict[int, tuple[int, int]]:
        """Page transaction id -> (paged messages a queue acknowledged, paged messages a queue still has to
        consume), for the ids of ``tx_ids`` that carry paged messages and have no page-transaction record.
        A cursor acknowledgement (ACKNOWLEDGE_CURSOR) is written only for a message the cursor delivered
        (``PageSubscriptionImpl.confirmPosition``; a message of a transaction it cannot find is ignored in
        memory: ``positionIgnored``), so one proves the transaction committed."""
        out: dict[int, list[int]] = {}
        if not tx_ids or self.view is None or self.store is None or self.store.paging_dir is None:
            return {}
        from amqtool.engines.artemis.paging.stores import find_page_stores
        from amqtool.engines.artemis.paging.view import PAGE_TX_NOT_FOUND, Q_ACKED, Q_PENDING
        from amqtool.formats.artemis.paging import PageSummaries

        try:
            stores = find_page_stores(self.store.paging_dir)[0]
        except (AmqtoolError, OSError):
            return {}
        for ps in stores:
            for pid in sorted(ps.pages):
                try:
                    pf = ps.open_page(pid)
                except (AmqtoolError, OSError):
                    continue
                with pf:
                    for number, _, _, tx_id, _, _, qids, _ in PageSummaries(pf.buf, pf.size):
                        if tx_id not in tx_ids or self.view.tx_state(tx_id) != PAGE_TX_NOT_FOUND:
                            continue
                        states = {self.view.queue_state(q, pid, number) for q in qids}
                        counts = out.setdefault(tx_id, [0, 0])
                        counts[0] += Q_ACKED in states
                        counts[1] += Q_PENDING in states
        return {t: (a, p) for t, (a, p) in out.items()}

    def _large_files(self) -> list[int]:
        lm = self.store.large_messages_dir if self.store is not None else None
        if lm is None:
            return []
        try:
            names = os.listdir(lm)
        except OSError:
            return []
        return [int(n[:-4]) for n in names if n.endswith(".msg") and n[:-4].isdigit()]


def first_deliveries(opened, owners: dict[int, int]) -> dict[int, tuple[int, int, int]]:
    """Of the message ids of ``owners`` (message id -> the transaction that added it), those a record of
    ``opened`` outside that transaction shows delivered -> (that record's type, file index, offset), the first in
    load order: a DELETE, or an acknowledgement or delivery-count update (ACKNOWLEDGE_REF,
    UPDATE_DELIVERY_COUNT), in any other transaction or none. One pass over the files."""
    out: dict[int, tuple[int, int, int]] = {}
    if not owners:
        return out
    for fi in range(len(opened.files)):
        for t, off, rid, tx, utype in _records(opened, fi):
            owner = owners.get(rid)
            if owner is not None and tx != owner and rid not in out and (
                    t in _DELETES or t in (12, 14) and utype in _DELIVERED):
                out[rid] = (t, fi, off)
    return out


def added_elsewhere(opened, owners: dict[int, int]) -> set[int]:
    """Of the message ids of ``owners`` (message id -> the transaction that added it), those another ADD or
    ADD_TX record of ``opened`` outside that transaction adds too. The broker stores a message once
    (``storeMessage``, under the id it was given), so one of the two ids was damaged, and what delivers that
    id later may be the other's. One pass over the files."""
    out: set[int] = set()
    if not owners:
        return out
    for fi in range(len(opened.files)):
        for t, _off, rid, tx, utype in _records(opened, fi):
            owner = owners.get(rid)
            if owner is not None and t in _ADDS and tx != owner and utype in _MESSAGES:
                out.add(rid)
    return out


def _records(opened, index: int):
    """(type, offset, id, tx id, user record type) of every record of file ``index`` (-1 for the ids a type
    does not carry), in file order, read in bounded windows."""
    for base, _data, records, _marked in opened.scan_windows(index):
        for t, off, size, cc, tx, rid, utype, body_len, nrec, extra in records:
            yield t, base + off, rid if t not in _NO_ID else -1, tx if t in _TX else -1, utype


def damaged_head(opened, index: int, first: int) -> tuple[int, int, int, int] | None:
    """(type, tx id, id, user record type) of the damaged record at ``first`` of file ``index`` when it starts
    with an ADD or ADD_TX header carrying this file's tag (the damage lying further on), else None (tx id -1 for
    an ADD). A header alone proves nothing: callers use it only with what later records say of its ids."""
    jf = opened.files[index]
    v2 = jf.version >= 2
    try:
        head = opened.pread(index, first, 32)
    except OSError:
        return None
    t = head[0] if head else 0
    if t not in _ADDS or int.from_bytes(head[1:5], "big", signed=True) != jf.tag:
        return None
    p = 5 + v2
    tx = -1
    if t == 13:
        tx = int.from_bytes(head[p:p + 8], "big", signed=True)
        p += 8
    rid = int.from_bytes(head[p:p + 8], "big", signed=True)
    p += 12  # the id, then the body size
    if len(head) <= p or rid < 0:
        return None
    return t, tx, rid, head[p]


def settled_page_txs(delivery: dict[int, tuple[int, int]], ids: set[int],
                     bare_deletes: set[int]) -> dict[int, int | None]:
    """The ids of ``ids`` (a window's ids no surviving record carries) that a page transaction whose paged
    messages no queue still has to consume explains (``delivery``: :meth:`IdLedger.page_tx_delivery` of
    ``ids``): page transaction id -> the id taken for its PAGE_TRANSACTION record (None when none is).

    Such a transaction's id is a transaction's, not a record lost there, and losing its page-transaction
    record skips only messages every queue already consumed (a cursor skips a message whose transaction it
    cannot find: ``PageSubscriptionImpl``, "Could not locate page transaction"): nothing the broker delivers
    changes. When a queue acknowledged one of its messages it committed, so its PAGE_TRANSACTION record was
    stored with one more id, issued after the transaction's (``JournalStorageManager.storePageTransaction``:
    ``generateID()`` as it stores it), and no surviving record carries that either -- unless the window holds
    a DELETE of an id above the transaction's that no other surviving record carries (``bare_deletes``): the
    broker deletes the record once every message of it is consumed (``PageTransactionInfoImpl``:
    ``deletePageTransactional``), and that may be its DELETE. Otherwise the lowest id of ``ids`` above the
    transaction's not taken already is counted for the record: which one it was cannot be told; that one was
    stored there, can. A transaction no queue acknowledged may have rolled back, storing no record: only its
    own id is taken."""
    out: dict[int, int | None] = {}
    taken: set[int] = set()
    for tx_id, (acked, pending) in sorted(delivery.items()):
        if pending or tx_id not in ids:
            continue
        taken.add(tx_id)
        out[tx_id] = None
        if acked and not any(x > tx_id for x in bare_deletes):
            rec = min((x for x in ids if x > tx_id and x not in taken), default=None)
            if rec is not None:
                out[tx_id] = rec
                taken.add(rec)
    return out


def settled_ids(delivery: dict[int, tuple[int, int]], ids: set[int], deleted, roles: dict) -> set[int]:
    """Every id of ``ids`` that :func:`settled_page_txs` explains (a transaction's and its record's), the bare
    DELETEs among them being the ids of ``deleted`` that no other surviving record carries (``roles``:
    :meth:`IdLedger.roles`)."""
    bare = {x for x in deleted if roles.get(x) == {"delete"}}
    return {x for t, r in settled_page_txs(delivery, ids, bare).items() for x in (t, r) if x is not None}


def settled_clause(ids: list[int], listed: int = MAX_LISTED) -> str:
    """The clause of a finding's message naming the window's ids that page transactions whose paged messages
    every queue consumed explain (:func:`settled_page_txs`; '' for none)."""
    if not ids:
        return ""
    more = " ..." if len(ids) > listed else ""
    return (f"{len(ids)} of page transactions whose paged messages every queue consumed, the transactions' own "
            f"and their PAGE_TRANSACTION records' ({', '.join(map(str, ids[:listed]))}{more}); ")


def _unaccounted(w: Window, roles: dict, paged: set, after: int, before: int):
    """Every id of the window no surviving record carries (``w.unaccounted`` keeps the first 100 only)."""
    if w.unaccounted_count == len(w.unaccounted):
        return iter(w.unaccounted)
    carried = {"add", "tx", "delete", "update", "msg", "queue"}
    settled = set(w.page_txs_settled)
    return (x for x in range(after + 1, before + REORDER + 1)
            if not roles.get(x, set()) & carried and x not in paged and x not in settled)


def _owned(ledger: IdLedger, txs: list, unaccounted: set[int], before: int) -> set[int]:
    """The ids of ``unaccounted`` that transactions ``txs`` (left open by the damage) may have added in the lost
    bytes: those that follow a transaction's own id with nothing between but ids of its surviving records, ids no
    surviving record carries, and one another. ``TransactionImpl`` takes its id from the generator as it is
    created, and each message sent in it takes the next ones (``ServerSessionImpl.send``); an id another record
    carries in between was issued to something else, and the ids after it are not the transaction's run."""
    lo = min(tx.tx_id for tx in txs)
    roles = ledger.roles(lo, before)
    owned: set[int] = set()
    for tx in txs:
        own = {r.id for r in tx.records + tx.records_to_delete}
        x = tx.tx_id + 1
        while x < before and (x in own or x in unaccounted or not roles.get(x)):
            if x in unaccounted:
                owned.add(x)
            x += 1
    return owned


def lost_window(ledger: IdLedger, result, index: int, first: int, evidence=None) -> Window | None:
    """The window of ids the records lost at ``first`` (to the end of file ``index``) of the journal loaded
    as ``result`` may have carried, and what the store's surviving records say of each; None when there is
    no bound (no new record in the files after it) or the window is too wide to enumerate."""
    after, before, dup, below = ledger.bounds(result.opened, index, first)
    if before is None or before - after - 1 > MAX_WINDOW:
        return None
    w = Window(after, before, from_lowest=below)
    roles = ledger.roles(after, before)
    # the pages are read only when the journals leave an id of the window unexplained
    stored = {"add", "delete", "update", "tx"}
    # and the REORDER ids just past the bound: a message's DUPLICATE_ID record takes its id after the message's
    # (DuplicateIDCache.addToCache, as PostOfficeImpl routes it) but is written before it, so the record of the
    # first message after the damage may have been lost there (wiped_run.py reads its windows so)
    # -- in a store that holds such records: without duplicate detection no id is taken out of order, and an id
    # past the bound that no record carries was only dropped by a compaction (hold-out h31, real JournalImpl)
    ahead = range(before + 1, before + REORDER + 1) if ledger.duplicate_ids() else range(0)
    roles.update(ledger.roles(before, before + REORDER + 1))
    # for the same reason, when the last record before the damage is a DUPLICATE_ID record, the message it
    # was written for (an id just below it) may be the first record lost
    behind = range(max(after - REORDER, 0), after) if dup else range(0)
    if dup:
        roles.update(ledger.roles(behind.start - 1, after))
        w.reordered = [x for x in behind if not roles.get(x)]
    # the damaged record's own header, when it is a message sent in a transaction (an ADD_TX carrying this file's
    # tag), names that transaction: its id is a transaction's (TransactionImpl takes its id from the generator),
    # not a record lost there. Not so a consuming transaction's header (an acknowledgement, a delete): the loss of
    # such a transaction whole (its acknowledgements, deletes and COMMIT) brings messages back, and its id left
    # unaccounted is the only trace of it
    head = damaged_head(result.opened, index, first)
    if head is not None and head[0] == 13 and head[3] in _MESSAGES:
        roles.setdefault(head[1], set()).add("tx")
    ids = [*behind, *range(after + 1, before), *ahead]
    low = behind.start - 1 if dup else after  # the ids counted lie above it
    paged = ledger.paged() if any(not roles.get(x, set()) & stored for x in ids) else set()
    for x in ids:
        r = roles.get(x, set())
        if (x in ahead or x in behind) and r:
            continue  # past the bounds, only an id no surviving record carries is counted
        if "add" in r or "tx" in r or x in paged:
            continue  # stored elsewhere: not lost here
        if "delete" in r:
            w.deleted.append(x)
        elif "update" in r or "msg" in r or "queue" in r:
            w.live.append(x)
        else:
            w.unaccounted_count += 1
            if len(w.unaccounted) < 100:
                w.unaccounted.append(x)
    # a paged transaction's id with no page-transaction record: its PAGE_TRANSACTION (and COMMIT) were lost
    # here, or it rolled back (a rollback stores no page transaction); a queue's acknowledgement of one of its
    # messages tells: the cursor delivers a message only once its transaction committed
    if w.unaccounted_count and ledger.view is not None:
        unexplained = set(w.unaccounted) if w.unaccounted_count == len(w.unaccounted) else {
            x for x in range(after + 1, before) if not roles.get(x, set()) & (stored | {"msg"}) and x not in paged}
        delivery = ledger.page_tx_delivery(unexplained)
        for tx_id, (acked, pending) in sorted(delivery.items()):
            if acked and pending:
                w.page_txs_lost[tx_id] = pending
        # and one every queue consumed: its id and its record's were lost here, with nothing it delivered
        pool = set(_unaccounted(w, roles, paged, low, before))
        settled = settled_ids(delivery, pool, w.deleted, roles)
        if settled:
            w.page_txs_settled = sorted(settled)
            w.unaccounted = [x for x in w.unaccounted if x not in settled]
            w.unaccounted_count -= len(settled)
    # ids a transaction rolled back after the damage was sending: dead with it (rolled_back.py) -- unless a
    # transaction the damage may have left open was sending too: with two transactions sending at once (their
    # ids interleave), whose run an id was cannot be told. One that wrote nothing in this file or the one
    # before it (left open by a client long before, as a crashed client leaves it) was not sending then
    if w.unaccounted_count and not any(
            not tx.prepared and any(index - 1 <= r.file_index <= index for r in tx.records + tx.records_to_delete)
            for tx in result.failed):
        gone = rolled_back_ids(ledger, result.opened, (index + 1, 0),
                               set(_unaccounted(w, roles, paged, low, before)), before)
        if gone:
            w.rolled_back = sorted(gone)
            w.unaccounted = [x for x in w.unaccounted if x not in gone]
            w.unaccounted_count -= len(gone)
    # ids whose surviving records are all a dead transaction's (its ROLLBACK after the damage, or records after it
    # and no end anywhere): a message sent in it whose ADD was lost here keeps only that transaction's references,
    # which the load discards with it (JournalImpl.load drops every record of a rolled-back transaction), so it
    # was never live
    if w.live:
        from amqtool.engines.artemis.rolled_back import only_rolled_back

        dead = only_rolled_back(result.opened, (index, first), {x for x in w.live if roles.get(x) == {"update"}})
        if dead:
            w.rolled_back = sorted(set(w.rolled_back) | dead)
            w.live = [x for x in w.live if x not in dead]
    # a transaction whose records were written before the damage and whose end is nowhere: its COMMIT may
    # have been lost here (the broker then rolls it back), or its ROLLBACK
    w.unowned_count = w.unaccounted_count
    if evidence is not None:
        from amqtool.engines.artemis.evidence import transaction_records

        open_txs = [tx for tx in result.failed if not tx.prepared
                    and any(r.file_index <= index for r in tx.records + tx.records_to_delete)]
        w.open_txs = sorted(tx.tx_id for tx in open_txs)
        # a transaction open while this file was written (a record of it here) may have added more records in
        # the lost bytes: those ids share its fate
        here = [tx for tx in open_txs if any(r.file_index == index for r in tx.records + tx.records_to_delete)]
        worst = "harmless"
        head = damaged_head(result.opened, index, first)
        delivered_txs = set()  # open transactions proven committed, whatever their surviving records hold
        for tx_id in w.open_txs:
            records = transaction_records(result.opened, tx_id)
            effect = evidence.effect_of_discarded(records)
            # a transaction whose messages were delivered since was committed: its COMMIT was lost (the
            # broker, finding none, discards it and the live records it held)
            sent = {r.id for r in records if r.type == 13 and r.user_type in _MESSAGES}
            if head is not None and head[0] == 13 and head[1] == tx_id and head[3] in _MESSAGES:
                sent.add(head[2])  # the damaged record's own header: a message this transaction added
            proof = ledger.delivered(sent, tx_id) if effect == "loss" or any(t.tx_id == tx_id for t in here) else {}
            if proof:
                delivered_txs.add(tx_id)
                if effect == "loss":
                    w.committed[tx_id] = min(proof)
            if worst != "loss" and effect != "harmless":
                worst = effect
        w.open_effect = worst
        # ids such a transaction may have added in the lost bytes share its fate: none when it may have rolled
        # back or been in progress; when it committed (proven above), they were live messages lost like any
        # other id of the window, so they are not set apart
        sharing = [tx for tx in here if tx.tx_id not in delivered_txs]
        if sharing and w.unaccounted_count:
            owned = _owned(ledger, sharing, set(_unaccounted(w, roles, paged, low, before)), before)
            w.unowned_count = w.unaccounted_count - len(owned)
    return w


def _committed_later(result, index: int, first: int, live_ids: set | None = None) -> int | None:
    """The id of the transaction whose record is the last one before the damage at ``first`` of file ``index``,
    when its COMMIT lies in a later file although the room this file had after that record (to the journal's
    file size) would have held the COMMIT, and (given ``live_ids``, the ids of the load's live records) a
    message it added or referenced here is still live; else None.

    ``JournalImpl.switchFileIfNecessary`` moves to the next file only for a record that does not fit, and a
    transaction's COMMIT (``appendCommitRecord``) counts only the records in its own file
    (``JournalTransaction.getCounter``), so no count shows what the transaction wrote here. With room for the
    COMMIT here, records were written after that last record before the broker moved on: lost with the
    damage, and they may be that transaction's references or acknowledgements, which carry no new id and which
    no window shows -- the lost records held live ones, by the evidence of a transaction still being written."""
    from amqtool.engines.artemis.cut_file import journal_file_size
    from amqtool.formats.artemis.records import fixed_size

    size = journal_file_size(result)
    if size is None:
        return None
    opened = result.opened
    last = None
    ids: dict[int, set] = {}  # tx id -> the ids its ADD_TX / UPDATE_TX records here name
    for base, _data, records, _marked in opened.scan_windows(index):
        for t, off, rsize, cc, tx, rid, *_rest in records:
            if base + off < first:
                last = (t, tx, base + off + rsize)
                if t in (13, 14):
                    ids.setdefault(tx, set()).add(rid)
    if last is None or last[0] not in (13, 14, 15):
        return None
    t, tx_id, end = last
    if size - end < fixed_size(18, opened.files[index].version):
        return None
    if live_ids is not None and not ids.get(tx_id, set()) & live_ids:
        return None  # every record it wrote here is deleted since: what else it wrote here changes nothing
    for fi in range(index + 1, len(opened.files)):
        for t, off, rid, tx, _ in _records(opened, fi):
            if t == 18 and tx == tx_id:
                return tx_id
    return None


def _records_lost(finding: Finding, result, index: int, first: int) -> str | None:
    """Why records of the message journal were lost at the damaged end ``first`` of file ``index`` (a finding
    whose window is bounded), or None when nothing shows it (or the finding is a cut, judged as it was):

    * the room it leaves would have held the next file's first record (``recordsLost``:
      ``JournalImpl.switchFileIfNecessary`` moves on only for a record that does not fit);
    * its damaged bytes begin with a record header carrying this file's tag, a record this use of the file
      wrote: a crash tears the record being written, but the broker restarts with ids a checkpoint further on
      (``BatchingIDGenerator`` resumes at the id it stored ahead), which bounds no window; with the ids running
      on, the broker wrote past that record whole, and it was damaged since. A flipped filler byte after the
      last record carries no tag, and is not judged so."""
    if result.opened.journal.kind != "messages" or finding.severity != Severity.WARNING:
        return None
    if finding.details.get("cutRecordBytes"):
        return ("the file was cut through a record this use of it wrote whole (a file the broker moved on from "
                "holds no torn record), so records were lost")
    if finding.details.get("recordsLost"):
        return (f"the {finding.details['freeBytes']} byte(s) it leaves would have held the next file's "
                f"{finding.details['nextRecordSize']}-byte first record, so records were written there and are lost")
    jf = result.opened.files[index]
    try:
        head = result.opened.pread(index, first, 5)
    except OSError:
        return None
    if len(head) == 5 and 11 <= head[0] <= 19 and int.from_bytes(head[1:5], "big", signed=True) == jf.tag:
        return ("its damaged bytes begin with a record of this use of the file (its tag), and the ids run on "
                "without the jump a restart makes, so no crash tore it: records written there are lost")
    return None


def _cut_severity(finding: Finding) -> Severity:
    """A finding's severity when nothing bounds what its lost records carried: CRITICAL for a file cut through a
    record (records were lost, and nothing weighs them), else as it was."""
    return Severity.CRITICAL if finding.details.get("cutRecordBytes") else finding.severity


def _cut_off(finding: Finding, head: str, details: dict, result, index: int, first: int, evidence) -> Finding | None:
    """CRITICAL, by the odds, when records were lost at ``first`` (:func:`_records_lost`) and the last record
    before them is of a transaction with no end record anywhere whose discard loses live records
    (:mod:`~amqtool.engines.artemis.cut_off_tx`); else None."""
    from amqtool.engines.artemis.cut_off_tx import cut_off_tx

    proof = _records_lost(finding, result, index, first)
    tx_id = cut_off_tx(result, index, first, evidence) if proof is not None else None
    if tx_id is None:
        return None
    details = dict(details, recordsLost=True, cutOffTransaction=tx_id)
    return Finding(Severity.CRITICAL, finding.code, head + f": {proof}, and the last record before them is of "
                   f"transaction {tx_id}, which has no COMMIT, PREPARE or ROLLBACK anywhere and held live records: "
                   f"its end was written among the lost records, most likely its COMMIT (a start rolls back every "
                   f"transaction it loads without an end, and clients commit far more than they roll back), and "
                   f"the broker now discards it with what it held", finding.path, finding.offset, details)


def reweigh(finding: Finding, ledger: IdLedger | None, result, index: int, first: int, evidence=None) -> Finding:
    """``finding`` (today's ``damaged-tail`` of file ``index`` at ``first``) judged by the window's evidence:

    * CRITICAL when it proves a live record lost there (an id of the window with references,
      acknowledgements or a large-message file but no record of its own), or the COMMIT of a transaction the
      damage left open that held live records and whose messages were delivered since (so it committed), or
      the PAGE_TRANSACTION of a paged transaction (its id in the window) some of whose messages queues
      acknowledged while others are still to consume;
    * CRITICAL when the damaged record's own header is the PREPARE or COMMIT of a transaction the load holds
      open with live records (:mod:`~amqtool.engines.artemis.lost_end`): the broker wrote its end, and fails it;
    * a warning when every new id of the window is accounted for (deleted since, or stored elsewhere) and
      no transaction the damage may have left open held anything live: none of the lost records was a live
      message (what no id shows: acknowledgements or deletes of older messages written there) -- unless the
      last record before the damage is of a transaction committed in a later file though this file had room
      for its COMMIT, with a message it wrote here still live (:func:`_committed_later`): its own references
      and acknowledgements, which carry no new id, may be among the records written after it;
    * CRITICAL, by the odds, when records were lost there (:func:`_records_lost`) and the last record before
      them is of a transaction with no end record anywhere whose discard loses live records: its end, most
      likely its COMMIT, was among the lost records (:mod:`~amqtool.engines.artemis.cut_off_tx`,
      ``cutOffTransaction``; also when no window bounds the ids);
    * CRITICAL, in the message journal, when records were lost there (the damaged end left room for the next
      file's first record, or its damaged bytes begin with a record of this use of the file while the ids run
      on: :func:`_records_lost`, ``recordsLost``) and ids of the window are carried by no surviving record,
      other than ids a transaction the damage left open in this file may have added (the run of ids after its
      own: :func:`_owned`; those share its fate, next item, unless it is proven committed -- a message it
      added delivered since: then its COMMIT was lost here, and the messages it added there with it). This is
      not a proof: a live message whose ADD
      and references were all lost leaves exactly that trace, and so do a transaction's id, a
      duplicate-detection record, a message stored and deleted within the lost bytes, or an id never stored.
      It is the verdict of the odds. Zeroing the end of non-newest files from inside their records (every
      second record of the four campaign demos; 150 drawn in each of six stores written by Artemis'
      JournalImpl, tests/data/artemis/tools/gen.sh), the stores this rule turned from WARNING to CRITICAL
      were losses 577 times against 16 unchanged (demos) and 228 against 9 (JournalImpl stores; 29 against 8
      in one of them). A real broker also issues ids it never stores (consumers, notifications, non-durable
      messages: ``storageManager.generateID()``), which neither writer does: on its stores the trace is
      nearly always there, and this reads "records were lost at the end of a file the broker moved on from".
      Damaged bytes with neither evidence (a flipped filler byte after the last record reads the same) and
      the bindings journal (whose window spans the message journal's ids, compacted away or never stored; but a
      damaged record whose head names a binding lost there is CRITICAL:
      :mod:`~amqtool.engines.artemis.lost_binding`) stay as they were;
    * as it was when ids of the window are carried by no surviving record (outside the case above), or a
      transaction the damage may have left open held live records, or no window bounds the ids (no new record
      after the damage, or a restart's jump): the records lost there may have been live messages, or a
      transaction's id, a duplicate-detection record, a message stored and deleted within the lost bytes --
      which, cannot be told. The finding says so, with the ids. A file cut through a record (``cutRecordBytes``:
      a file the broker moved on from holds no torn record, so records were lost, :func:`_records_lost`) is
      weighed as any damaged end whose records were lost, and stays CRITICAL here unless all that cannot be told
      is whether transactions without an end lost their COMMIT there (as on a zeroed end, mostly they had none
      to lose); other damaged ends stay warnings.
    """
    if ledger is None or finding.code != "damaged-tail":
        return finding
    from amqtool.engines.artemis.lost_ack import lost_ack
    from amqtool.engines.artemis.lost_binding import lost_binding
    from amqtool.engines.artemis.lost_end import lost_end
    from amqtool.engines.artemis.lone_record import lone_record
    from amqtool.engines.artemis.lost_ref import lost_ref
    from amqtool.engines.artemis.refless_add import refless_add

    binding = lost_binding(finding, ledger, result, index, first)
    if binding is not None:
        return binding  # the bindings journal: the damaged record's own head names a binding lost there
    details = dict(finding.details)
    # today's message up to its reasoning about the cause, which the evidence replaces
    head = finding.message.split(": it was truncated")[0].split(", which leaves")[0].split(" (what a crash")[0]
    ack = lost_ack(result.opened, index, first, evidence)
    if ack is not None:
        details["lostAck"] = {"recordType": ack.record_type, "messageId": ack.message, "queueId": ack.queue,
                              "txId": ack.tx_id}
        return Finding(Severity.CRITICAL, finding.code, head + f": records were lost there, and the first of them, "
                       f"whose header survives, is {ack.describe()}, which the load still holds: the broker consumed "
                       f"it before the damage and will deliver it again", finding.path, finding.offset, details)
    ref = lost_ref(result.opened, index, first, evidence)
    if ref is not None:
        details["lostRef"] = {"messageId": ref.message, "queueId": ref.queue, "txId": ref.tx_id}
        why = (f"no other record puts the message on that queue: the broker loads it without queue {ref.queue}"
               if ref.queue is not None else "every other reference of the message was acknowledged: the broker "
               "finds it on no queue and deletes it")
        return Finding(Severity.CRITICAL, finding.code, head + f": records were lost there, and the first of them, "
                       f"whose header survives, is {ref.describe()}, and {why}", finding.path, finding.offset,
                       details)
    refless = refless_add(result.opened, index, first, evidence)
    if refless is not None:
        details["reflessMessage"] = refless
        return Finding(Severity.CRITICAL, finding.code, head + f": records were lost there, and message {refless}, "
                       f"whose ADD is the last record before them, has no reference left anywhere: its references "
                       f"followed it in the lost bytes, and the broker deletes a message no queue holds at start",
                       finding.path, finding.offset, details)
    lone = lone_record(result.opened, index, first, evidence)
    if lone is not None:
        details["loneRecord"] = {"recordType": lone.record_type, "id": lone.id, "txId": lone.tx_id,
                                 "userRecordType": lone.user_type, "queueIds": list(lone.queues)}
        said = (head + f": the one record lost there is {lone.describe()} (its header survives, and nothing this "
                f"use of the file wrote follows it)")
        if lone.queues:
            return Finding(Severity.CRITICAL, finding.code, said + f", and the message is still referenced on "
                           f"queue(s) {', '.join(map(str, lone.queues))}: the broker loses it",
                           finding.path, finding.offset, details)
        why = lone.why_not or ("the message is no longer live, the queue holds it otherwise, or the transaction "
                               "never committed")
        return Finding(Severity.WARNING, finding.code, said + f", and losing it changes nothing the broker "
                       f"delivers: {why}", finding.path, finding.offset, details)
    # (the bindings journal's ends are weighed by the bindings they held first: lost_binding, the window's ids)
    ended = (lost_end(result.opened, result, index, first, result.scans[index].last_data_pos, evidence)
             if result.opened.journal.kind == "messages" else None)
    if ended is not None:
        what = "PREPARE" if ended[0] == 17 else "COMMIT"
        details["lostEnd"] = {"recordType": ended[0], "txId": ended[1]}
        return Finding(Severity.CRITICAL, finding.code, head + f": records were lost there, and the first of them, "
                       f"whose header survives, is the {what} of transaction {ended[1]}, which the load holds open "
                       f"with live records: the broker fails the transaction and loses them", finding.path,
                       finding.offset, details)
    w = lost_window(ledger, result, index, first, evidence)
    if w is not None and w.from_lowest and not (w.live or w.committed or w.page_txs_lost or w.unowned_count):
        w = None  # ids below its lower bound may have been lost unseen: it proves nothing either way
    if w is None:
        details["lostIds"] = None
        cut = _cut_off(finding, head, details, result, index, first, evidence)
        if cut is not None:
            return cut
        return Finding(_cut_severity(finding), finding.code, finding.message + "; no window of ids bounds what "
                       "the lost records carried (no new record after them, or a restart's jump in the ids), so what "
                       "they held cannot be told", finding.path, finding.offset, details)
    details["lostIds"] = w.to_json()
    span = f"ids {w.after + 1}..{w.before - 1}" if w.size > 0 else "no new id"
    if w.reordered:
        span += f", and {', '.join(map(str, w.reordered))} written after its duplicate-id record"
    if w.live:
        shown = ", ".join(map(str, w.live[:MAX_LISTED])) + (" ..." if len(w.live) > MAX_LISTED else "")
        return Finding(Severity.CRITICAL, finding.code, head + f": records were lost there, and they held live "
                       f"records: {len(w.live)} id(s) issued while they were written ({span}) keep references, "
                       f"acknowledgements, page cursor or counter records (a queue's) or a large-message file but "
                       f"have no record of their own ({shown})",
                       finding.path, finding.offset, details)
    if w.committed:
        shown = ", ".join(f"{t} (message {m})" for t, m in list(w.committed.items())[:MAX_LISTED])
        return Finding(Severity.CRITICAL, finding.code, head + f": records were lost there, among them the COMMIT "
                       f"of transaction(s) {shown}: a message each added was delivered since (acknowledged, "
                       f"redelivered or deleted by a later record), so it was committed, but with no COMMIT left the "
                       f"broker discards it at load, and the live records it held with it", finding.path,
                       finding.offset, details)
    if w.page_txs_lost:
        shown = ", ".join(f"{t} ({n} to consume)" for t, n in list(w.page_txs_lost.items())[:MAX_LISTED])
        return Finding(Severity.CRITICAL, finding.code, head + f": records were lost there, among them the page "
                       f"transaction(s) {shown}: ids issued while they were written ({span}) that paged messages "
                       f"carry with no page-transaction record left, while queues acknowledged some of those "
                       f"messages (so the transaction committed): the broker skips the rest, which are lost",
                       finding.path, finding.offset, details)
    cut = _cut_off(finding, head, details, result, index, first, evidence)
    if cut is not None:
        return cut
    straddling = _committed_later(result, index, first, evidence.live_ids if evidence is not None else None)
    if not w.unaccounted_count and w.open_effect == "harmless" and straddling is None:
        what = (f"every new id issued while they were written ({span}) is accounted for ({len(w.deleted)} "
                f"deleted since: a DELETE survives; {rolled_clause(w.rolled_back)}{settled_clause(w.page_txs_settled)}"
                f"the rest stored elsewhere)"
                if w.size > 0 else "no new id was issued while they were written")
        return Finding(Severity.WARNING, finding.code, head + f": records were lost there, but {what}, so none of "
                       f"them was a live message (acknowledgements or deletes of older messages written there carry "
                       f"no new id and cannot be seen)", finding.path, finding.offset, details)
    proof = _records_lost(finding, result, index, first) if w.unowned_count else None
    if proof is not None:
        shown = ", ".join(map(str, w.unaccounted[:MAX_LISTED])) + (" ..." if w.unaccounted_count > MAX_LISTED else "")
        details["recordsLost"] = True
        return Finding(Severity.CRITICAL, finding.code, head + f": {proof}, and {w.unowned_count} id(s) issued while "
                       f"they were written ({span}) are carried by no surviving record ({shown}): live messages "
                       f"stored there are lost with them (a transaction's id, a duplicate-detection record, a message "
                       f"stored and deleted within the lost bytes or an id never stored would leave the same trace, "
                       f"which no surviving record tells apart)", finding.path, finding.offset, details)
    why = []
    if straddling is not None:
        why.append(f"the last record before them is of transaction {straddling}, whose COMMIT lies in a later file "
                   f"though this file had room for it: records were written after it here, and its own (references, "
                   f"acknowledgements, which carry no new id) may be among them")
    if w.unaccounted_count:
        shown = ", ".join(map(str, w.unaccounted[:MAX_LISTED])) + (" ..." if w.unaccounted_count > MAX_LISTED else "")
        why.append(f"{w.unaccounted_count} id(s) issued while they were written ({span}) are carried by no "
                   f"surviving record ({shown}): live records stored there, or a transaction's id, a "
                   f"duplicate-detection record or a message stored and deleted there")
    if w.open_effect != "harmless":
        ended = (lost_end(result.opened, result, index, first, result.scans[index].last_data_pos, evidence)
                 if result.opened.journal.kind == "bindings" else None)
        if ended is not None:  # (the message journal's was read before the window)
            details["lostEnd"] = {"recordType": ended[0], "txId": ended[1]}
            return Finding(Severity.CRITICAL, finding.code, head + f": records were lost there, and the first of "
                           f"them, whose header survives, is the COMMIT of transaction {ended[1]}, which the load "
                           f"holds open with live bindings: the broker drops what it held", finding.path,
                           finding.offset, details)
        why.append(f"transaction(s) {', '.join(map(str, w.open_txs[:MAX_LISTED]))} have no end record and held "
                   f"live records: a commit lost there rolls them back, a rollback lost there changes nothing")
    # a cut through a record stays CRITICAL unless all that cannot be told is whether transactions without an end
    # lost their COMMIT there: mostly they had none to lose (a cut campaign over the 48 JournalImpl stores, seed
    # 9621: 182 unchanged against 76 losses, the losses being acknowledgements lost with it), as a zeroed end's
    severity = _cut_severity(finding) if straddling is not None or w.unaccounted_count else finding.severity
    return Finding(severity, finding.code, finding.message + "; what the lost records held cannot be "
                   "told: " + "; ".join(why), finding.path, finding.offset, details)
