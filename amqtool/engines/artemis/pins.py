"""Why Artemis cannot reclaim a journal file yet, and which files draining a queue would free (``print
--pins``, ``--drain QUEUE``): the Artemis counterpart of :mod:`amqtool.engines.kahadb.pins`.

Artemis frees a data file through its ``Reclaimer`` (``Reclaimer.scan``, run after loads and compactions): a
file goes once every positive it holds (adds and updates of records, transactional records) is matched by
negatives (deletes, commits and rollbacks) in it or later files, and it holds no negative still owed to an
earlier file that stays (else the deleted records would come back at the next load). The current file never
goes. So, per file, what keeps it (every reason that applies, the first is the main one):

* ``current-file``: the file the broker appends to;
* ``live-messages`` (per queue): message records (ADD_MESSAGE_PROTOCOL, ADD_LARGE_MESSAGE) and their updates
  (ADD_REF, ACKNOWLEDGE_REF, UPDATE_DELIVERY_COUNT, SET_SCHEDULED_DELIVERY_TIME) of messages still live on the
  queue, with the records and bytes in that file; a message on two queues pins for both;
* ``acked-messages``: records of messages every queue has acknowledged but whose delete is not written
  (``data exp`` drops them; the broker deletes them at its next start);
* ``live-records`` (per user record type): bindings, page transactions, cursor acks, duplicate ids, ...;
* ``transaction``: records of a prepared (or unfinished) transaction: nothing of it can go before the
  transaction manager decides;
* ``pending-deletes``: deletes (or commit/rollback outcomes) it holds against records in earlier files that
  stay: dropping it would bring them back;
* ``reclaimer-counts``: none of the above, but positives not yet matched by later negatives.

``--drain QUEUE`` replays what the broker writes when a consumer takes every message of the queue
(``QueueImpl.acknowledge`` -> ``storeAcknowledge``: an ACKNOWLEDGE_REF update on the message; once no queue
holds it, ``deleteMessage``: a DELETE record), appended to the current file, and runs the Reclaimer again:
the files it frees then and not now are the answer.
"""
from __future__ import annotations

from typing import Callable

from amqtool.formats.artemis.records import DELETE, UPDATE
from amqtool.formats.artemis.userrecords import RECORD_TYPE_NAMES, JournalRecordIds as R

MESSAGE_TYPES = frozenset({R.ADD_MESSAGE, R.ADD_MESSAGE_PROTOCOL, R.ADD_LARGE_MESSAGE})
MESSAGE_UPDATES = frozenset({R.ADD_REF, R.ACKNOWLEDGE_REF, R.UPDATE_DELIVERY_COUNT, R.SET_SCHEDULED_DELIVERY_TIME})


def _entries(result):
    from amqtool.engines.artemis.broker_state import _entries as entries

    return entries(result.live)


def file_pins(result, state, counts_out: dict, reclaim: list[int], data_files: list[int]) -> list[dict]:
    """One entry per file of ``result`` (a LoadResult) with its reasons (see the module docstring)."""
    files = result.files
    n = len(files)
    per_queue: list[dict] = [{} for _ in range(n)]  # queue name -> [records, bytes, message ids]
    acked: list[list[int]] = [[0, 0] for _ in range(n)]
    other: list[dict] = [{} for _ in range(n)]  # type name -> [records, bytes]
    live_queues: dict[int, list[int] | None] = {}
    for e in _entries(result):
        rid, utype, fi, blen = e[0], e[1], e[4], e[6]
        if state is not None and (utype in MESSAGE_TYPES or (utype in MESSAGE_UPDATES and rid in state.message_records)):
            qs = live_queues.get(rid, 0)
            if qs == 0:
                qs = live_queues[rid] = state.live_refs(rid)
            if not qs:
                acked[fi][0] += 1
                acked[fi][1] += blen
                continue
            for q in qs:
                agg = per_queue[fi].setdefault(state.queue_name(q), [0, 0, set()])
                agg[0] += 1
                agg[1] += blen
                agg[2].add(rid)
            continue
        name = RECORD_TYPE_NAMES.get(utype, f"type-{utype}")
        agg = other[fi].setdefault(name, [0, 0])
        agg[0] += 1
        agg[1] += blen
    tx_files: dict[int, list[tuple[int, str]]] = {}
    for label, txs in (("prepared", result.prepared), ("unfinished", result.failed)):
        for tx in txs:
            touched = {r.file_index for r in tx.records} | {r.file_index for r in tx.records_to_delete}
            if tx.prepare_location is not None:
                touched.add(tx.prepare_location[0])
            for fi in touched:
                tx_files.setdefault(fi, []).append((tx.tx_id, label))
    for tx_id, fis in counts_out.get("open_txs", {}).items():
        for fi in fis:
            if all(t != tx_id for t, _ in tx_files.get(fi, [])):
                tx_files.setdefault(fi, []).append((tx_id, "open"))
    counts = counts_out.get("counts")
    reclaimable, data = set(reclaim), set(data_files)
    current = max(data_files) if data_files else None
    out = []
    for fi, f in enumerate(files):
        reasons: list[dict] = []
        if fi == current:
            reasons.append({"reason": "current-file", "detail": "the file the broker appends to: never reclaimed"})
        for q, (records, size, mids) in sorted(per_queue[fi].items(), key=lambda kv: -kv[1][1]):
            reasons.append({"reason": "live-messages", "queue": q, "messages": len(mids), "records": records,
                            "bytes": size, "detail": f"{q}: {len(mids)} live message(s), {records} record(s), "
                                                     f"{size} bytes"})
        if acked[fi][0]:
            reasons.append({"reason": "acked-messages", "records": acked[fi][0], "bytes": acked[fi][1],
                            "detail": f"{acked[fi][0]} record(s) of messages acknowledged everywhere but not "
                                      "deleted yet (the broker deletes them at its next start)"})
        for name, (records, size) in sorted(other[fi].items()):
            reasons.append({"reason": "live-records", "recordType": name, "records": records, "bytes": size,
                            "detail": f"{records} live {name} record(s), {size} bytes"})
        for tx_id, label in sorted(tx_files.get(fi, [])):
            reasons.append({"reason": "transaction", "txId": tx_id, "state": label,
                            "detail": f"records of {label} transaction {tx_id}: kept until it is decided"})
        if counts is not None and fi in data and fi not in reclaimable:
            owed = sorted(fj for fj, k in counts[fi].neg.items()
                          if k and fj != fi and fj < fi and fj in data and fj not in reclaimable)
            if owed:
                reasons.append({"reason": "pending-deletes", "files": [files[fj].name for fj in owed],
                                "detail": "holds deletes or transaction outcomes for records in "
                                          + ", ".join(files[fj].name for fj in owed)
                                          + " (dropping it would bring them back at the next load)"})
        pinned = fi in data and fi not in reclaimable
        if pinned and not reasons:
            c = counts[fi] if counts is not None else None
            reasons.append({"reason": "reclaimer-counts", "positives": c.pos if c else None,
                            "detail": "positives not yet matched by negatives in this or later files"})
        if not pinned:
            reasons = [{"reason": "collectable", "detail": "the Reclaimer frees it at its next pass"}] \
                if fi in data else [{"reason": "free", "detail": "no data: a free (pool) file the broker reuses"}]
        out.append({"file": f.name, "fileId": f.file_id, "size": f.size, "dataFile": fi in data, "pinned": pinned,
                    "firstReason": reasons[0]["reason"], "reasons": reasons})
    return out


def drain_records(state, queue_ids: set[int]) -> tuple[list[tuple[int, int]], int]:
    """The records a broker appends to drain ``queue_ids``: an ACKNOWLEDGE_REF update per live reference,
    and a DELETE for each message no other queue still holds. Returns (records, messages acknowledged)."""
    out: list[tuple[int, int]] = []
    n = 0
    for mid, queues in state.live_messages():
        hit = [q for q in queues if q in queue_ids]
        if not hit:
            continue
        n += 1
        out.extend((UPDATE, mid) for _ in hit)
        if len(hit) == len(queues):
            out.append((DELETE, mid))
    return out, n


def match_queues(state, name: str) -> dict[int, str]:
    """Queue ids whose name (or ``<address>::<name>`` / data exp's UndefinedQueue_ name) is ``name``."""
    out = {}
    for qid, q in state.queues.items():
        if name in (q.name, f"{q.address}::{q.name}"):
            out[qid] = q.name
    for qs in state.refs.values():
        for qid in qs:
            if qid not in state.queues and state.queue_name(qid) == name:
                out[qid] = name
    return out


def artemis_pins(store, *, drain: str | None = None, progress: Callable[[int], None] | None = None) -> dict:
    """``{"verdict", "kind": "artemis", "root", "journals": [{"journal", "directory", "files": [pins],
    "collectableNow", "drain"?}]}``; ``drain`` (a queue name) adds to the messages journal which files the
    Reclaimer would free once that queue is drained."""
    import contextlib

    from amqtool.engines.artemis.journal_print import PrintOptions, load_store
    from amqtool.engines.artemis.verify import verify_store
    from amqtool.errors import overall_verdict

    with contextlib.ExitStack() as keep:
        # verify's verdict on the very loads the pins are read from (one rule: amqtool.engines.verdicts)
        report = verify_store(store, progress, keep=keep)
        verdict = overall_verdict(report.findings)
        journals = _pins(store, drain, load_store(store, PrintOptions(), progress, loads=report.loads))
    return {"verdict": verdict.name, "kind": "artemis", "root": str(store.root), "journals": journals}


def _pins(store, drain: str | None, loads) -> list[dict]:
    """The ``journals`` of :func:`artemis_pins` from ``loads`` ((journal, LoadResult) pairs)."""
    from amqtool.engines.artemis.broker_state import REF_TYPES, build_broker_state
    from amqtool.engines.artemis.reclaim import reclaimable_after, reclaimable_files
    from amqtool.errors import UsageError

    journals = []
    queues = {}
    for journal, result in loads:
        state = None
        if journal.kind == "bindings":
            queues = build_broker_state(result, None).queues
        else:
            state = build_broker_state(None, result, decode=REF_TYPES)
            state.queues = queues
        counts_out: dict = {}
        reclaim, data_files = reclaimable_files(result.opened, counts_out=counts_out)
        doc = {"journal": journal.kind, "directory": str(journal.directory),
               "files": file_pins(result, state, counts_out, reclaim, data_files),
               "collectableNow": [result.files[i].name for i in reclaim]}
        if drain and state is not None:
            ids = match_queues(state, drain)
            if not ids:
                known = sorted({q.name for q in state.queues.values()})
                raise UsageError(f"--drain {drain!r}: no such queue (queues: {', '.join(known[:20]) or 'none'})")
            records, messages = drain_records(state, set(ids))
            after = reclaimable_after(counts_out, records)  # the same pass's counts, copied
            freed = sorted(set(after) - set(reclaim))
            doc["drain"] = {"queue": drain, "matched": sorted(set(ids.values())), "messages": messages,
                            "filesFreed": [result.files[i].name for i in freed],
                            "bytesFreed": sum(result.files[i].size for i in freed),
                            "collectableNow": doc["collectableNow"]}
        journals.append(doc)
    if drain and not any("drain" in j for j in journals):
        raise UsageError("--drain needs the messages journal")
    return journals


def render_pins_text(doc: dict):
    """Lines for people: per journal, each file pinned or collectable with its reasons, then the drain."""
    yield f"artemis store {doc['root']}  verdict {doc['verdict']}"
    for j in doc["journals"]:
        yield ""
        yield f"{j['journal']} journal {j['directory']}"
        for p in j["files"]:
            why = "; ".join(r["detail"] for r in p["reasons"])
            state = "pinned" if p["pinned"] else p["firstReason"]
            yield f"  {p['file']}: {state} - {why}"
        if "drain" in j:
            d = j["drain"]
            yield (f"  draining {d['queue']} ({d['messages']} message(s)) would free: "
                   f"{', '.join(d['filesFreed']) or 'nothing'} ({d['bytesFreed']} bytes)")
