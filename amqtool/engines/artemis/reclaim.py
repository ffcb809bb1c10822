"""Freeing journal files that hold nothing live, by Artemis' ``Reclaimer`` rules (§4.5), offline.

The positive and negative counts are built the way ``JournalImpl.load`` builds them through
``JournalRecord`` and ``JournalTransaction``:

* ADD: +1 positive on its file (``new JournalRecord``); UPDATE of a live id: +1 positive on its file
  (``addUpdateFile``); DELETE of a live id in file D: D gets +1 negative against the ADD's file and +k
  against each file holding k updates of it (``JournalRecord.delete``);
* transactional records: +1 positive on each file the transaction touches (``addFile``, also for the
  PREPARE's file); on a healthy COMMIT the records are applied as above (adds become JournalRecords,
  updates ``addUpdateFile``, deletes ``delete``) and the COMMIT's file gets +1 negative against every file
  the transaction touched; ROLLBACK gives the same negatives; an unhealthy COMMIT ``forget``s (−1 positive on
  every touched file). Transactions still open keep their positives, so their files stay.

``scan`` (criterion 2 then 1, both sticky) runs over the data files in fileID order, never the current
(last) one. As a guard, the result is checked by loading the journal without the reclaimable files: the
live list, prepared and failed transactions must come out identical, or nothing is reclaimed.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from amqtool.engines.artemis.load import load_journal
from amqtool.formats.artemis.records import (
    TransactionCounter,
    ADD,
    ADD_TX,
    COMMIT,
    DELETE,
    DELETE_TX,
    PREPARE,
    ROLLBACK,
    UPDATE,
    UPDATE_TX,
)
from amqtool.store.journal_files import OpenedJournal


@dataclass
class _Counts:
    pos: int = 0
    neg: dict = field(default_factory=dict)  # other file index -> negatives this file holds against it

    def inc_neg(self, other: int, n: int = 1) -> None:
        self.neg[other] = self.neg.get(other, 0) + n


class _Rec:
    __slots__ = ("add_file", "updates")

    def __init__(self, add_file: int):
        self.add_file = add_file
        self.updates: dict[int, int] = {}


class _Tx(TransactionCounter):
    __slots__ = ("files", "pos", "neg")

    def __init__(self):
        super().__init__()
        self.files: set[int] = set()
        self.pos: list[tuple[int, int, bool]] = []  # (file, id, is_update)
        self.neg: list[tuple[int, int]] = []


def reclaimable_files(opened: OpenedJournal, *, appended: list[tuple[int, int]] | None = None,
                      counts_out: dict | None = None) -> tuple[list[int], list[int]]:
    """Indexes (into ``opened.files``) of the files the Reclaimer would free, and of the data files.

    Returns ``(reclaimable, data_files)``; the current file (last data file) is never reclaimable.

    ``appended``: (record type UPDATE or DELETE, record id) records taken as written in a file after the
    current one, itself followed by a new current file (``print --pins --drain``: the acks and deletes of
    draining a queue; the Reclaimer counts a file's negatives only once it is no longer the current file, so
    the answer is what goes once the drain's records have rolled into a data file). Only files of
    ``opened`` are returned; the current file becomes a candidate like any other. ``counts_out``: filled with ``counts`` (per file index: ``pos``, the positives, and ``neg``,
    {file index: negatives it holds against that file}) and ``open_txs`` ({tx id: file indexes}) for
    explaining why a file stays.
    """
    files = opened.files
    counts = [_Counts() for _ in files]
    records: dict[int, _Rec] = {}
    txs: dict[int, _Tx] = {}
    has_data = [False] * len(files)

    def add_file(tx: _Tx, fi: int) -> None:
        if fi not in tx.files:
            tx.files.add(fi)
            counts[fi].pos += 1

    def delete(rid: int, fi: int) -> None:
        rec = records.pop(rid, None)
        if rec is not None:
            counts[fi].inc_neg(rec.add_file)
            for uf, n in rec.updates.items():
                counts[fi].inc_neg(uf, n)

    def update(rid: int, fi: int) -> None:
        rec = records.get(rid)
        if rec is not None:
            rec.updates[fi] = rec.updates.get(fi, 0) + 1
            counts[fi].pos += 1

    for fi, jf in enumerate(files):
        hd = False
        for _base, _data, recs, marked in opened.scan_windows(fi):
            hd = hd or marked
            for t, off, size, cc, tx_id, rid, utype, body_len, nrec, extra_len in recs:
                if t == ADD:
                    hd = True
                    records[rid] = _Rec(fi)
                    counts[fi].pos += 1
                elif t == UPDATE:
                    hd = True
                    update(rid, fi)
                elif t == DELETE:
                    hd = True
                    delete(rid, fi)
                elif t in (ADD_TX, UPDATE_TX, DELETE_TX):
                    hd = True
                    tx = txs.get(tx_id)
                    if tx is None:
                        tx = txs[tx_id] = _Tx()
                    tx.inc(fi)
                    add_file(tx, fi)
                    if t == DELETE_TX:
                        tx.neg.append((fi, rid))
                    else:
                        tx.pos.append((fi, rid, t == UPDATE_TX))
                elif t == PREPARE:
                    hd = True
                    tx = txs.get(tx_id)
                    if tx is None:
                        tx = txs[tx_id] = _Tx()
                    tx.counter_for(fi)
                    add_file(tx, fi)
                elif t == COMMIT:
                    tx = txs.pop(tx_id, None)
                    if tx is None:
                        continue
                    hd = True
                    if tx.counter_for(fi) == nrec:
                        for pf, prid, is_upd in tx.pos:
                            if prid in records:
                                update(prid, pf)
                            else:
                                records[prid] = _Rec(pf)
                                counts[pf].pos += 1
                        for nf, nrid in tx.neg:
                            delete(nrid, fi)
                        for tf in tx.files:
                            counts[fi].inc_neg(tf)
                    else:
                        for tf in tx.files:  # forget()
                            counts[tf].pos -= 1
                elif t == ROLLBACK:
                    tx = txs.pop(tx_id, None)
                    if tx is None:
                        continue
                    hd = True
                    for tf in tx.files:
                        counts[fi].inc_neg(tf)
        has_data[fi] = hd

    scan = {"counts": counts, "records": records, "has_data": has_data,
            "open_txs": {tx_id: sorted(tx.files) for tx_id, tx in txs.items()}}
    if counts_out is not None:
        counts_out.update(scan)
    if appended:
        return reclaimable_after(scan, appended), [i for i, h in enumerate(has_data) if h]
    return _decide(counts, has_data)


def _decide(counts: list, has_data: list[bool]) -> tuple[list[int], list[int]]:
    """``Reclaimer.scan`` over the data files (criterion 2, then 1, both sticky), never the last one."""
    data_files = [i for i, h in enumerate(has_data) if h]
    candidates = data_files[:-1]  # the last data file becomes the current file: never reclaimed
    neg_ok: set[int] = set()
    pos_ok: set[int] = set()
    for n, fi in enumerate(candidates):
        if fi not in neg_ok:
            outstanding = any(counts[fi].neg.get(fj, 0) != 0 for fj in candidates[:n]
                              if not (fj in neg_ok and fj in pos_ok))
            if outstanding:
                continue
            neg_ok.add(fi)
        if fi not in pos_ok:
            need = counts[fi].pos
            got = 0
            for fj in candidates[n:]:  # scan() sees dataFiles only: the current file's negatives wait
                got += counts[fj].neg.get(fi, 0)
                if got >= need:
                    break
            if got >= need:
                pos_ok.add(fi)
    reclaimable = [fi for fi in candidates if fi in neg_ok and fi in pos_ok]
    return reclaimable, data_files


def reclaimable_after(scan: dict, appended: list[tuple[int, int]]) -> list[int]:
    """The files the Reclaimer frees once ``appended`` (UPDATE/DELETE, record id) is written in a file after
    the current one and that file has rolled over (see :func:`reclaimable_files`), from the ``counts_out``
    of one :func:`reclaimable_files` pass, which is left as it was."""
    counts = [_Counts(c.pos, dict(c.neg)) for c in scan["counts"]]
    has_data = list(scan["has_data"])
    n = len(counts)
    counts += [_Counts(), _Counts()]  # the drain's file, then the new current file
    has_data += [True, True]
    records = scan["records"]
    updates: dict[int, int] = {}  # record id -> its updates in the drain's file
    deleted: set[int] = set()
    for t, rid in appended:
        rec = records.get(rid)
        if rec is None or rid in deleted:
            continue
        if t == UPDATE:
            updates[rid] = updates.get(rid, 0) + 1
            counts[n].pos += 1
        elif t == DELETE:
            deleted.add(rid)
            counts[n].inc_neg(rec.add_file)
            for uf, k in rec.updates.items():
                counts[n].inc_neg(uf, k)
            if rid in updates:
                counts[n].inc_neg(n, updates[rid])
    reclaimable, _ = _decide(counts, has_data)
    return [i for i in reclaimable if i < n]


def _state(load) -> tuple:
    live = [(r.id, r.user_record_type, r.is_update, r.compact_count, load.body_sha256(r)) for r in load.live]

    def tx(t):
        return (t.tx_id, t.prepared, t.invalid, t.extra,
                [(r.id, r.user_record_type, r.is_update, load.body_sha256(r)) for r in t.records],
                [(r.id, load.body_sha256(r)) for r in t.records_to_delete])
    return live, [tx(t) for t in load.prepared], [tx(t) for t in load.failed]


def check_reclaim_safe(opened: OpenedJournal, reclaimable: list[int]) -> bool:
    """Load with and without ``reclaimable``: True when the live list and the prepared and failed
    transactions are identical (bodies compared by hash)."""
    if not reclaimable:
        return True
    full = _state(load_journal(opened))
    drop = set(reclaimable)
    keep = [f for i, f in enumerate(opened.files) if i not in drop]
    reduced = OpenedJournal(opened.journal, files=keep)
    try:
        return _state(load_journal(reduced)) == full
    finally:
        reduced.close()
