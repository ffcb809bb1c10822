"""`print` for KahaDB: the JSON document, its text rendering, and one row per journal record.

Document (man/amqtool-print.1)::

    {"verdict", "kind": "kahadb"|"mkahadb", "root",
     "stores": [{"directory", "files": [...], "index": {...},
                 "destinations": [{"name", "type", "key", "live": [message...],
                                   "subscriptions": [{"clientId", "subscriptionName", "key", "live": [...]}]}],
                 "transactions": [...], "records"?: [...], "pins"?: [...], "drain"?: {...}}]}

A live message: messageId, bodySize, bodySha256, messageType, timestamp, priority, persistent, expiration,
correlationId, jmsType, properties, location ("<file id>:<offset>"), file, offset, recordSize,
and ``body`` (text, or base64 for bytes) unless ``safe``. With ``safe`` no body byte appears anywhere.
"""
from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import Iterable, Iterator

from amqtool.errors import FormatError, Verdict
from amqtool.formats.kahadb.commands import (
    AddMessageCommand,
    EntryType,
    RemoveMessageCommand,
    SubscriptionCommand,
    TraceCommand,
    TransactionCommand,
    decode_command,
)
from amqtool.formats.kahadb.openwire import decode_message, decode_subscription_info
from amqtool.engines.kahadb.load import DirResult, load_store
from amqtool.engines.kahadb.pins import drain_effect, pins, qualified
from amqtool.engines.kahadb.scan import FileScan, iter_file, journal_files, mapped


def _openwire_version(d: DirResult) -> int:
    v = d.index.view if d.index else None
    return v.metadata.openwire_version if v else 11


def iter_live_raw(d: DirResult, messages: Iterable) -> Iterator[tuple]:
    """(LiveMessage, the stored OpenWire message's bytes | None, error | None), mapping each journal file
    once."""
    by_file: dict[int, list] = {}
    for m in messages:
        by_file.setdefault(m.file_id, []).append(m)
    for fid in sorted(by_file):
        f = d.file(fid)
        if f is None:
            for m in by_file[fid]:
                yield m, None, f"db-{fid}.log is missing"
            continue
        with mapped(f.path) as buf:
            for m in by_file[fid]:
                try:
                    raw = bytes(buf[m.offset + 5:m.offset + m.length])
                    cmd = decode_command(raw)
                    add = cmd.add if cmd.type is EntryType.UPDATE_MESSAGE else cmd
                    if not isinstance(add, AddMessageCommand):
                        raise FormatError(f"record at {fid}:{m.offset} is {cmd.type.name}, not an ADD")
                    yield m, add.message, None
                except FormatError as err:
                    yield m, None, err.message


def iter_live_decoded(d: DirResult, messages: Iterable) -> Iterator[tuple]:
    """(LiveMessage, OpenWireMessage | None, error | None), mapping each journal file once."""
    version = _openwire_version(d)
    for m, raw, err in iter_live_raw(d, messages):
        if err is not None:
            yield m, None, err
            continue
        try:
            msg = decode_message(raw, version)
        except FormatError as e:
            yield m, None, e.message
            continue
        yield m, msg, None


def live_message_json(m, msg, err, *, safe: bool) -> dict:
    row = {"messageId": m.message_id, "location": f"{m.file_id}:{m.offset}", "file": f"db-{m.file_id}.log",
           "offset": m.offset, "recordSize": m.length}
    if err is not None or msg is None:
        row.update(bodySize=None, bodySha256=None, error=err)
        return row
    row.update(openwire_message_json(msg, safe=safe))
    row["transaction"] = m.transaction
    return row


def openwire_message_json(msg, *, safe: bool) -> dict:
    """The fields of a decoded OpenWire message every store kind prints (KahaDB, the Classic JDBC adapter):
    body size and sha256, type, headers, properties and (unless ``safe``) the body. Decoding errors of the
    body or properties become ``error``."""
    row: dict = {}
    try:
        body = msg.body()
        raw = msg.body_bytes()
        row.update(bodySize=len(raw), bodySha256=hashlib.sha256(raw).hexdigest())
    except FormatError as e:
        body = None
        row.update(bodySize=None, bodySha256=None, error=e.message)
    row.update(messageType=msg.type_name, timestamp=msg.timestamp, priority=msg.priority,
               persistent=msg.persistent, expiration=msg.expiration, correlationId=msg.correlation_id,
               jmsType=msg.jms_type, compressed=msg.compressed, redeliveryCounter=msg.redelivery_counter)
    try:
        row["properties"] = _jsonable(msg.properties())
    except FormatError as e:
        row["properties"] = None
        row["error"] = e.message
    if not safe:
        if isinstance(body, str):
            row["body"] = body
        elif isinstance(body, (bytes, bytearray)):
            row["bodyBase64"] = base64.b64encode(body).decode("ascii")
        elif body is not None:
            row["body"] = _jsonable(body)
    return row


def _jsonable(v):
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_jsonable(x) for x in v]
    if isinstance(v, (bytes, bytearray)):
        return {"base64": base64.b64encode(v).decode("ascii")}
    if isinstance(v, float) and v != v:
        return None
    return v


def _split_sub(key: str, info: bytes | None, version: int) -> tuple[str, str]:
    if info:
        try:
            si = decode_subscription_info(info, version)
            if si.client_id is not None and si.subscription_name is not None:
                return si.client_id, si.subscription_name
        except FormatError:
            pass
    client, _, name = key.rpartition(":")
    return client, name


def _store_doc(d: DirResult, *, safe: bool, records: bool, want_pins: bool, drain: str | None) -> dict:
    version = _openwire_version(d)
    dests = []
    for key in sorted(d.replay.destinations):
        st = d.replay.destinations[key]
        decoded = {m.message_id: live_message_json(m, msg, err, safe=safe)
                   for m, msg, err in iter_live_decoded(d, st.messages.values())}
        entry = {"name": st.destination.name, "type": st.destination.kind, "key": key,
                 "qualifiedName": qualified(key),
                 "live": [decoded[mid] for mid in st.messages]}
        if st.destination.type in (1, 3):
            subs = []
            for skey in sorted(st.subscriptions):
                sub = st.subscriptions[skey]
                client, name = _split_sub(skey, sub.info, version)
                pending = [decoded[mid] for mid, m in st.messages.items() if m.waiting and skey in m.waiting]
                subs.append({"clientId": client, "subscriptionName": name, "key": skey,
                             "record": f"{sub.file_id}:{sub.offset}", "retroactive": sub.retroactive,
                             "live": pending})
            entry["subscriptions"] = subs
        else:
            entry["subscriptions"] = []
        dests.append(entry)
    view = d.index.view if d.index else None
    index = {"present": bool(d.index and d.index.present), "error": d.index.error if d.index else None}
    if view is not None:
        m = view.metadata
        index.update(cleanShutdown=view.header.clean_shutdown, pageSize=view.header.page_size,
                     version=m.version, openwireVersion=m.openwire_version, state=m.state,
                     lastUpdate=str(m.last_update) if m.last_update else None,
                     producerAudit=str(m.producer_audit) if m.producer_audit else None,
                     ackMessageFileMap=str(m.ack_map) if m.ack_map else None,
                     firstInProgressTransaction=str(m.first_in_progress_tx) if m.first_in_progress_tx else None,
                     messages={qualified(k): v for k, v in sorted(view.message_counts.items())})
    index["recordsAfterCheckpoint"] = d.records_after_last_update
    index["replayFrom"] = f"{d.replay_start[0]}:{d.replay_start[1]}" if d.replay_start else None
    files = []
    for f in d.files:
        sc = d.scans[f.id]
        files.append({"file": f.path.name, "id": f.id, "size": f.size, "batches": sc.batches, "records": sc.records,
                      "logicalEnd": sc.end.offset if sc.end else None, "endMarker": sc.end.how if sc.end else None,
                      "corruptRanges": [{"first": c.first, "last": c.last, "reason": c.reason} for c in sc.corrupt]})
    txs = [dict(t.to_json()) for t in d.replay.finished] + [t.to_json() for t in d.open_transactions]
    doc = {"directory": str(d.directory), "txStore": d.is_tx_store, "files": files, "index": index,
           "recordCounts": dict(sorted(d.replay.counts.items())),
           "destinations": dests, "transactions": txs,
           "transactionTotals": dict(d.replay.finished_total, open=sum(1 for t in d.open_transactions
                                                                        if t.state == "open"),
                                     prepared=sum(1 for t in d.open_transactions if t.state == "prepared"))}
    if records:
        doc["records"] = list(_dir_rows(d.directory, safe=safe, version=version))
    if want_pins or drain:
        doc["pins"] = pins(d)
    if drain:
        doc["drain"] = drain_effect(d, drain)
    return doc


def print_document(store, *, safe: bool = False, records: bool = False, pins: bool = False,
                   drain: str | None = None, progress=None) -> dict:
    """The whole store as one JSON document (see the module docstring). ``verdict`` is verify's verdict
    (:func:`amqtool.engines.kahadb.verify.judge_results` over the same load)."""
    from amqtool.engines.kahadb.verify import judge_results
    from amqtool.errors import overall_verdict

    results = load_store(store, progress=progress)
    verdict = overall_verdict(judge_results(store, results))  # verify's verdict, from the same load
    return {"verdict": verdict.name, "kind": "mkahadb" if store.multi else "kahadb", "root": str(store.root),
            "stores": [_store_doc(d, safe=safe, records=records, want_pins=pins, drain=drain) for d in results]}


def _cmd_row(cmd, safe: bool, version: int) -> dict:
    row: dict = {"type": cmd.name}
    if isinstance(cmd, TraceCommand):
        row["message"] = cmd.message
    dest = getattr(cmd, "destination", None)
    if dest is not None:
        row["destination"] = qualified(dest.key)
    tx = getattr(cmd, "transaction", None)
    if tx is not None:
        row["transaction"] = str(tx)
    if isinstance(cmd, AddMessageCommand):
        row["messageId"] = cmd.message_id
        row["priority"] = cmd.priority
        try:
            msg = decode_message(cmd.message, version)
            raw = msg.body_bytes()
            row.update(messageType=msg.type_name, timestamp=msg.timestamp, bodySize=len(raw),
                       bodySha256=hashlib.sha256(raw).hexdigest())
            row["properties"] = _jsonable(msg.properties())
            if not safe:
                b = msg.body()
                if isinstance(b, str):
                    row["body"] = b
                elif isinstance(b, (bytes, bytearray)):
                    row["bodyBase64"] = base64.b64encode(b).decode("ascii")
        except FormatError as err:
            row["error"] = err.message
    elif isinstance(cmd, RemoveMessageCommand):
        row["messageId"] = cmd.message_id
        if cmd.subscription_key is not None:
            row["subscriptionKey"] = cmd.subscription_key
    elif isinstance(cmd, SubscriptionCommand):
        row["subscriptionKey"] = cmd.subscription_key
        row["action"] = "add" if cmd.subscription_info is not None else "remove"
    elif isinstance(cmd, TransactionCommand):
        pass
    elif cmd.type is EntryType.ACK_MESSAGE_FILE_MAP:
        from amqtool.formats.kahadb.javaser import decode_ack_file_map

        try:
            row["ackMessageFileMap"] = {str(k): sorted(v) for k, v in sorted(decode_ack_file_map(cmd.blob).items())}
        except FormatError as err:
            row["error"] = err.message
    elif cmd.type is EntryType.REWRITTEN_DATA_FILE:
        row.update(sourceDataFileId=cmd.source_data_file_id, rewriteType=cmd.rewrite_type)
    return row


def _dir_rows(directory: Path, *, safe: bool, version: int = 11) -> Iterator[dict]:
    for f in journal_files(directory):
        scan = FileScan(f)
        with mapped(f.path) as buf:
            for rec in iter_file(f, buf, scan):
                row = {"store": str(directory), "file": f.path.name, "offset": rec.offset, "length": rec.length,
                       "location": f"{f.id}:{rec.offset}"}
                try:
                    cmd = decode_command(rec.payload)
                    row.update(_cmd_row(cmd, safe, version))
                except FormatError as err:
                    row.update(type=None, error=err.message)
                rec.payload.release()
                yield row
        for c in scan.corrupt:
            yield {"store": str(directory), "file": f.path.name, "offset": c.first, "length": c.last - c.first + 1,
                   "type": "corrupt-range", "reason": c.reason}


def iter_record_rows(store, *, safe: bool = False) -> Iterator[dict]:
    """One row per journal record, every sub-store, in (file id, offset) order (``--format jsonl``)."""
    from amqtool.engines.kahadb.scan import load_index

    for directory in store.directories:
        idx = load_index(Path(directory))
        version = idx.view.metadata.openwire_version if idx.view else 11
        yield from _dir_rows(Path(directory), safe=safe, version=version)


def render_text(doc: dict) -> Iterator[str]:
    """Lines for people: per store, index state, destinations with live counts and messages,
    subscriptions, transactions, pins."""
    yield f"{doc.get('kind', 'kahadb')} store {doc.get('root')}  verdict {doc.get('verdict')}"
    for st in doc.get("stores", []):
        yield ""
        yield f"store {st['directory']}" + ("  (mKahaDB txStore)" if st.get("txStore") else "")
        ix = st.get("index", {})
        files = st.get("files", [])
        yield (f"  journal: {len(files)} file(s) "
               f"{', '.join(f['file'] for f in files[:8])}{' ...' if len(files) > 8 else ''}")
        if ix.get("present"):
            if ix.get("error"):
                yield f"  index: unreadable ({ix['error']})"
            else:
                yield (f"  index: version {ix.get('version')}, cleanShutdown={ix.get('cleanShutdown')}, "
                       f"lastUpdate {ix.get('lastUpdate')}, records after checkpoint "
                       f"{ix.get('recordsAfterCheckpoint')}")
        else:
            yield "  index: none"
        for dest in st.get("destinations", []):
            yield f"  {dest['type']} {dest['name']}: {len(dest['live'])} live"
            for m in dest["live"][:50]:
                yield (f"    {m['messageId']}  {m.get('messageType', '?')}  {m.get('bodySize')} bytes  "
                       f"at {m['location']}")
            if len(dest["live"]) > 50:
                yield f"    ... {len(dest['live']) - 50} more"
            for sub in dest.get("subscriptions", []):
                yield f"    durable {sub['clientId']}/{sub['subscriptionName']}: {len(sub['live'])} pending"
        for tx in st.get("transactions", []):
            yield f"  transaction {tx['id']}: {tx['state']} ({tx['sends']} send(s), {tx['acks']} ack(s))"
        for p in st.get("pins", []):
            why = "; ".join(r["detail"] for r in p["reasons"])
            yield f"  {p['file']}: {'pinned' if p['pinned'] else 'collectable'} - {why}"
        if st.get("drain"):
            dr = st["drain"]
            yield (f"  draining {dr['destination']} would free: {', '.join(dr['filesFreed']) or 'nothing'} "
                   f"({dr['bytesFreed']} bytes)")
        for r in st.get("records", [])[:0]:
            yield str(r)
