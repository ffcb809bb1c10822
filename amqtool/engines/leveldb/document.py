"""``print`` for LevelDB stores: the JSON document, its text rendering, one row per log record (jsonl).

Document (man/amqtool-print.1, "LevelDB stores")::

    {"verdict", "kind": "leveldb", "root", "directory", "logDirectory", "storeVersion",
     "logs": [{"file", "position", "size"}],
     "index": {"snapshot", "snapshotPosition", "dirty", "tables", "logs"},
     "replay": {"from", "to", "end", "records", "unitsOfWork", "stopped", "droppedOperations"},
     "unitsOfWork": {"completed", "cut": {"file", "offset", "records"} | null},
     "destinations": [{"name", "type", "qualifiedName", "key", "messageCount" (the broker's getMessageCount:
                       every entry, prepared-acked ones included), "recovered" (len(live)), "live": [message...],
                       "unreadable": [message with "error" (and "skipped")...],
                       "subscriptions": [{"clientId", "subscriptionName", "selector", "key", "ackPosition",
                                          "preparedAck", "pendingCount", "live": [message...]}]}],
     "transactions": [{"key", "xid", "state": "prepared", "sends", "acks", "live": [message...],
                       "unreadable": [...]}],
     "droppedSubscriptions", "droppedTopics", "loadProblems", "unreadableMessages", "pins"?: [...]}

A message: messageId, seq (its entry's sequence in the collection), location (log position of its DATA
record, hex), file and offset, dataLength, then the OpenWire fields KahaDB's print gives (bodySize,
bodySha256, messageType, timestamp, priority, properties, ``body`` unless ``safe``).
"""
from __future__ import annotations

from typing import Iterator

from amqtool.errors import FormatError
from amqtool.formats.leveldb import records as R
from amqtool.formats.leveldb import recordlog as L
from amqtool.engines.leveldb.load import LevelDBState, decode_data, load


def message_json(st: LevelDBState, m, *, safe: bool) -> dict:
    from amqtool.engines.kahadb.document import openwire_message_json

    f = st.reader.file_at(m.location)
    row = {"seq": m.seq, "location": f"{m.location:#x}", "file": f.name if f else None,
           "offset": m.location - f.position if f else None, "dataLength": m.length}
    msg, err = st.decode(m)
    if msg is None:
        row.update(messageId=None, bodySize=None, bodySha256=None, error=err)
        return row
    row = {"messageId": msg.message_id, **row}
    row.update(openwire_message_json(msg, safe=safe))
    if m.redelivery:
        row["redeliveryCounter"] = m.redelivery
    return row


def cut_tail(st: LevelDBState) -> dict | None:
    """The records of the last file after its last complete unit of work (what a crash leaves), and the offset
    of a record the end of the file cuts there (``tornRecord``: its header, or its data, runs past the end)."""
    if not st.logs or st.last_file_end is None:
        return None
    last = st.logs[-1]
    torn = _torn_record(st)
    if st.cut_records == 0 and torn is None and (st.last_file_scan_end is None
                                                 or st.last_file_scan_end <= st.last_file_end):
        return None
    out = {"file": last.name, "offset": st.last_file_end, "records": st.cut_records,
           "scanEnd": st.last_file_scan_end}
    if torn is not None:
        out["tornRecord"] = torn
    return out


def _torn_record(st: LevelDBState) -> int | None:
    """The offset of a record at or after the last complete unit's end of the last file that the file's end cuts
    (a write a crash tore; ``RecordLog.verifyAndGetEndOffset`` truncates the file at that unit's end), or None."""
    at = st.last_file_scan_end  # (where the record scan of the last file stopped)
    if at is None or at < st.last_file_end:
        return None
    buf = st.reader.buffer(st.logs[-1])
    n = len(buf)
    if at >= n:
        return None
    if at + L.HEADER_SIZE > n:
        return at if any(bytes(buf[at:n])) else None  # a header the end cuts (not the zero fill)
    magic, _kind, _crc, length = L.HEADER.unpack_from(buf, at)
    return at if magic == L.MAGIC and at + L.HEADER_SIZE + length > n else None


def skipped_json(st: LevelDBState, m) -> dict:
    """An entry the broker's cursor skips (:meth:`LevelDBState.skips`): where it points, and why."""
    return {"messageId": None, "seq": m.seq, "location": f"{m.location:#x}", "file": None, "offset": None,
            "dataLength": m.length, "error": st.skip_reason(m), "skipped": True}


def _split(rows: list) -> tuple[list, list]:
    """(live, unreadable) of message rows: the one rule of what a command lists, counts and exports as the
    broker's recovered messages: those it can read and decode. The others (``error``) are listed apart."""
    return [r for r in rows if "error" not in r], [r for r in rows if "error" in r]


def store_document(st: LevelDBState, *, safe: bool = False, pins: bool = False) -> dict:
    """One store's document. ``live`` lists the messages the broker delivers: the entries its cursors read
    and decode, which are what ``stat`` counts and ``export`` and ``create --from`` write (one rule); each
    destination's ``unreadable`` lists the others with their ``error``: entries whose DATA record lies before
    the first log file (``skipped``: the broker's cursor passes over them) and messages it cannot read or
    decode (on which its cursor fails); ``unreadableMessages`` counts them."""
    dests = []
    for d in st.queue_and_topics():
        decoded = {id(m): message_json(st, m, safe=safe) for m in d.messages}
        subs = [{"clientId": s.client_id, "subscriptionName": s.name, "selector": s.selector, "key": s.key,
                 "ackPosition": s.ack_position, "preparedAck": s.prepared_ack, "pendingCount": s.pending_count,
                 "live": _split([decoded[id(m)] for m in s.pending])[0]} for s in sorted(
                     d.subscriptions, key=lambda s: (s.client_id or "", s.name or ""))]
        live, unreadable = _split([decoded[id(m)] for m in d.messages])
        unreadable += [skipped_json(st, m) for m in d.skipped]
        dests.append({"name": d.name, "type": d.kind, "qualifiedName": d.qualified, "key": d.key,
                      "messageCount": d.entries, "recovered": len(live), "live": live,
                      "unreadable": sorted(unreadable, key=lambda r: r["seq"]), "subscriptions": subs})
    txs = []
    for t in st.transactions:
        live, unreadable = _split([dict(message_json(st, m, safe=safe), destination=dest) for m, dest in t.sends])
        txs.append({"key": t.key, "xid": t.xid, "state": "prepared", "sends": len(t.sends), "acks": len(t.acks),
                    "sendsTo": _count(dest for _m, dest in t.sends if dest is not None), "live": live,
                    "unreadable": unreadable + [skipped_json(st, m) for m in t.skipped]})
    rep = st.replay
    db = st.snapshot_db
    doc = {
        "directory": str(st.directory), "logDirectory": str(st.log_directory), "storeVersion": st.store_version,
        "logs": [{"file": f.name, "position": f.position, "size": f.size} for f in st.logs],
        "index": {"snapshot": st.snapshot[1].name if st.snapshot else None,
                  "snapshotPosition": st.snapshot[0] if st.snapshot else None,
                  "dirty": dirty_flag(st),
                  "tables": db.tables if db else [], "logs": db.logs if db else [],
                  "error": db.error if db else None},
        "replay": {"from": rep.start, "to": rep.limit, "end": rep.end, "records": rep.records,
                   "unitsOfWork": rep.units,
                   "stopped": {"position": rep.stopped[0], "reason": rep.stopped[1]} if rep.stopped else None,
                   "droppedOperations": rep.dropped_ops},
        "unitsOfWork": {"completed": rep.units, "cut": cut_tail(st)},
        "destinations": dests, "transactions": txs,
        "droppedSubscriptions": [f"{s.client_id}:{s.name}" for s in st.dropped_subscriptions],
        "droppedTopics": [d.qualified for d in st.dropped_topics],
        "loadProblems": [{"key": k, "message": m} for k, m in st.load_problems],
        "unreadableMessages": sum(len(d["unreadable"]) for d in dests) + sum(len(t["unreadable"]) for t in txs),
    }
    if pins:
        from amqtool.engines.leveldb.pins import pins as pins_of

        doc["pins"] = pins_of(st)
    return doc


def _count(items) -> dict:
    out: dict = {}
    for x in items:
        out[x] = out.get(x, 0) + 1
    return out


def dirty_flag(st: LevelDBState) -> bool | None:
    """``dirty.index``'s ``:dirty`` (``true`` while a broker runs or after it died; ``false`` after a clean
    stop); None without a readable dirty.index."""
    db = st.dirty_db
    if db is None or db.error:
        return None
    v = db.get(R.DIRTY_KEY)
    return None if v is None else v == b"true"


def print_document(store, *, safe: bool = False, pins: bool = False) -> dict:
    """The document of a LevelDB store (see the module docstring); a replicated store gives one ``nodes``
    entry per node directory. The verdict is verify's on the same load (:func:`judged_document`)."""
    return judged_document(store, safe=safe, pins=pins)[0]


def judged_document(store, *, safe: bool = False, pins: bool = False) -> tuple[dict, list, dict]:
    """(print's document, verify's findings, verify's summary), from one load of each node: the document's
    verdict is verify's (one rule for every command that judges: amqtool.engines.verdicts), so print and
    stat exit as verify does."""
    from amqtool.engines.leveldb.verify import verify_store
    from amqtool.errors import overall_verdict

    docs: list[dict] = []
    findings, summary = verify_store(store, on_state=lambda st: docs.append(store_document(st, safe=safe, pins=pins)))
    verdict = overall_verdict(findings)
    if store.replicated:
        doc = {"verdict": verdict.name, "kind": store.kind, "root": str(store.root), "nodes": docs}
    else:
        doc = {"verdict": verdict.name, "kind": "leveldb", "root": str(store.root), **docs[0]}
    return doc, findings, summary


def iter_record_rows(store, *, safe: bool = False) -> Iterator[dict]:
    """``--format jsonl``: one row per log record, every file in position order (then where each file's
    records stop, when not at its end)."""
    from amqtool.engines.kahadb.document import _jsonable
    from amqtool.engines.leveldb.logfiles import LogReader, log_files

    for directory in [n.log_dir() for n in store.nodes] if store.replicated else [store.log_dir()]:
        files = log_files(directory)
        with LogReader(files) as reader:
            for f in files:
                buf = reader.buffer(f)
                for item in L.iter_records(buf):
                    if isinstance(item, L.Stop):
                        if item.reason != "zero":
                            yield {"file": f.name, "offset": item.offset, "position": f"{f.position + item.offset:#x}",
                                   "kind": "stop", "reason": item.reason, "detail": item.detail}
                        break
                    row = {"file": f.name, "offset": item.offset,
                           "position": f"{f.position + item.offset:#x}", "kind": L.kind_name(item.kind),
                           "length": item.length, "crcOk": item.crc_ok}
                    try:
                        row.update(_payload(item, safe, _jsonable))
                    except FormatError as err:
                        row["error"] = err.message
                    yield row


def _payload(rec, safe: bool, jsonable) -> dict:
    k = rec.kind
    if k == L.UOW_END:
        return {"unitStart": rec.uow_start()}
    if k == L.TRACE:
        return {"trace": bytes(rec.data).decode("ascii", "replace")}
    if k in (L.ADD_COLLECTION,):
        c = R.decode_collection(rec.data)
        out = {"collection": c.key, "collectionType": c.type_name}
        if c.type in (R.QUEUE, R.TOPIC):
            out["destination"] = (c.meta or b"").decode("utf-8", "replace")
        elif c.type == R.SUBSCRIPTION:
            s = R.decode_subscription(c.meta or b"")
            out.update(topic=s.topic_key, clientId=s.client_id, subscriptionName=s.subscription_name,
                       selector=s.selector)
        elif c.type == R.TRANSACTION:
            out["xid"] = R.decode_xid(c.meta or b"")
        return out
    if k == L.REMOVE_COLLECTION:
        return {"collection": R.decode_vlong(rec.data)}
    if k in (L.ADD_ENTRY, L.UPDATE_ENTRY, L.REMOVE_ENTRY):
        e = R.decode_entry(rec.data)
        ek = e.entry_key or b""
        return {"collection": e.collection_key,
                "entry": R.seq_of(ek) if R.seq_of(ek) is not None else ek.decode("ascii", "replace"),
                "valueLocation": e.value_location, "valueLength": e.value_length, "hasMeta": e.meta is not None}
    if k == L.DATA:
        from amqtool.engines.kahadb.document import openwire_message_json

        msg = decode_data(bytes(rec.data))
        return {"messageId": msg.message_id,
                "destination": "://".join(msg.destination) if msg.destination else None,
                **openwire_message_json(msg, safe=safe)}
    return {}


def render_text(doc: dict) -> Iterator[str]:
    if doc.get("nodes") is not None:
        yield f"{doc['kind']} store {doc['root']}  verdict {doc['verdict']}"
        for n in doc["nodes"]:
            yield ""
            yield f"node {n['directory']}"
            yield from _render_one(n)
        return
    yield f"leveldb store {doc['root']}  verdict {doc['verdict']}"
    yield from _render_one(doc)


def _render_one(doc: dict) -> Iterator[str]:
    logs = doc["logs"]
    yield (f"  logs: {len(logs)} file(s) {', '.join(f['file'] for f in logs[:6])}{' ...' if len(logs) > 6 else ''}")
    ix = doc["index"]
    yield (f"  index: snapshot {ix['snapshot'] or 'none'}, dirty.index "
           f"{'dirty' if ix['dirty'] else 'clean' if ix['dirty'] is False else 'absent'}")
    rp = doc["replay"]
    yield (f"  replay: {rp['from']:#x} .. {rp['to']:#x}, {rp['records']} record(s), {rp['unitsOfWork']} unit(s) "
           f"of work" + (f"; STOPPED at {rp['stopped']['position']:#x}: {rp['stopped']['reason']}"
                         if rp["stopped"] else ""))
    cut = doc["unitsOfWork"]["cut"]
    if cut:
        yield f"  cut unit of work: {cut['records']} record(s) in {cut['file']} after offset {cut['offset']}"
    for d in doc["destinations"]:
        yield f"  {d['type']} {d['name']}: {d['messageCount']} message(s)"
        for m in d["live"][:50]:
            yield f"    {m.get('messageId')}  {m.get('messageType', '?')}  {m.get('bodySize')} bytes  seq {m['seq']}"
        if len(d["live"]) > 50:
            yield f"    ... {len(d['live']) - 50} more"
        for m in d["unreadable"][:10]:
            yield f"    UNREADABLE seq {m['seq']} at {m['location']}: {m['error']}"
        if len(d["unreadable"]) > 10:
            yield f"    ... {len(d['unreadable']) - 10} more unreadable"
        for s in d["subscriptions"]:
            yield (f"    durable {s['clientId']}/{s['subscriptionName']}: {s['pendingCount']} pending "
                   f"(ack position {s['ackPosition']})")
    for t in doc["transactions"]:
        yield f"  transaction {t['xid']}: prepared ({t['sends']} send(s), {t['acks']} ack(s))"
    for p in doc.get("pins", []):
        why = "; ".join(r["detail"] for r in p["reasons"]) or "nothing"
        yield f"  {p['file']}: {'pinned' if p['pinned'] else 'collectable'} - {why}"
