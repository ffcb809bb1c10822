"""`verify` for KahaDB: findings from one pass over the journal plus the index.

Finding codes (documented in man/amqtool-verify.1):

=================================  ========  ==========================================================
code                               severity  meaning
=================================  ========  ==========================================================
kahadb-checksum-mismatch           CRITICAL  a batch's Adler-32 does not match (file, batch offset)
kahadb-corrupt-range               CRITICAL  bytes that are no batch, up to the next batch header
kahadb-not-a-journal               CRITICAL  a db-N.log without a single valid batch
kahadb-bad-record                  CRITICAL  records that do not tile their batch, or an undecodable command
kahadb-truncated-tail              WARNING   the last file ends inside a batch (torn write; the broker
                                             overwrites it and loses nothing acknowledged)
kahadb-missing-journal-file        CRITICAL  a file the index or ack map still references is gone
kahadb-reference-past-end          CRITICAL  the index references data past a file's logical end
kahadb-gc-gap                      INFO      numbering gaps left by the broker's own journal GC
kahadb-journal-ahead-of-index      WARNING   records after the index checkpoint: the broker replays them
kahadb-index-ahead-of-journal      CRITICAL  the checkpoint names a location past the journal's end
kahadb-index-live-mismatch         WARNING   the index's live count differs from the replayed journal
kahadb-open-transaction            WARNING   a transaction with no outcome (rolled back at start)
kahadb-prepared-transaction        WARNING   a prepared XA transaction, in doubt
kahadb-store-locked                UNKNOWN   a process holds the lock: the store is in use
kahadb-no-index                    INFO      db.data absent: the broker rebuilds it (as after amqtool compact)
kahadb-index-unreadable            WARNING   db.data unreadable: the broker rebuilds it
kahadb-unknown-field               WARNING   a protobuf field the schema does not declare
kahadb-bad-message                 WARNING   a live message whose OpenWire bytes do not decode
kahadb-empty-journal-file          INFO      a zero-length db-N.log (a failed create; ignored at start)
kahadb-unclean-shutdown            INFO      the index was not closed cleanly
=================================  ========  ==========================================================
"""
from __future__ import annotations

from pathlib import Path

from amqtool.errors import Finding, Severity
from amqtool.engines.kahadb.load import DirResult, load_store
from amqtool.engines.kahadb.pins import referenced_files
from amqtool.engines.kahadb.scan import lock_holder

C, W, I, U = Severity.CRITICAL, Severity.WARNING, Severity.INFO, Severity.UNKNOWN


def _log(d: DirResult, fid: int) -> str:
    return str(d.directory / f"db-{fid}.log")


def verify_directory(d: DirResult, findings: list[Finding]) -> None:
    add = findings.append
    last_id = d.files[-1].id if d.files else None
    for f in d.files:
        scan = d.scans[f.id]
        path = str(f.path)
        if f.size == 0:
            add(Finding(I, "kahadb-empty-journal-file", "zero-length journal file (a failed create; the broker "
                        "ignores it)", path, 0))
            continue
        if scan.batches == 0 and scan.corrupt and scan.corrupt[0].first == 0 and scan.corrupt[0].to_eof \
                and scan.corrupt[0].reason == "bad-header":
            add(Finding(C, "kahadb-not-a-journal", "no KahaDB batch header found anywhere in the file (expected "
                        "'WRITE BATCH' control records at offset 0): not a KahaDB journal file", path, 0))
            continue
        for cr in scan.corrupt:
            span = f"{cr.first}..{cr.last}" if not cr.to_eof else f"{cr.first} to EOF"
            details = {"first": cr.first, "last": cr.last, "reason": cr.reason, "toEof": cr.to_eof}
            if cr.reason == "checksum":
                details.update(stored=cr.stored, computed=cr.computed)
                add(Finding(C, "kahadb-checksum-mismatch",
                            f"batch checksum mismatch: stored Adler-32 {cr.stored}, computed {cr.computed}; "
                            f"corrupt journal records between offsets {span}", path, cr.first, details))
            elif cr.reason == "truncated" and cr.to_eof and f.id == last_id:
                add(Finding(W, "kahadb-truncated-tail",
                            f"the last journal file ends inside a batch at offset {cr.first} (torn or truncated "
                            "write); the broker discards it and appends from there", path, cr.first, details))
            else:
                add(Finding(C, "kahadb-corrupt-range",
                            f"corrupt journal records ({cr.reason}) between offsets {span}", path, cr.first, details))
        if scan.end is not None and scan.end.how == "end-of-file" and f.id == last_id and not scan.corrupt:
            add(Finding(W, "kahadb-truncated-tail", "the last journal file ends without the end-of-data marker "
                        "'-qMa4' (truncated after its last batch?)", path, scan.end.offset))
        for off, msg in scan.bad_records:
            add(Finding(C, "kahadb-bad-record", msg, path, off))
    for fid, off, msg in d.decode_errors:
        add(Finding(C, "kahadb-bad-record", f"journal command does not decode: {msg}", _log(d, fid), off))
    for fid, off, tname, unknown in d.unknown_fields[:20]:
        add(Finding(W, "kahadb-unknown-field", f"{tname}: fields not in journal-data.proto: "
                    + ", ".join(f"{f}/wt{w}" for f, w in unknown), _log(d, fid), off))

    # The index.
    idx = d.index
    view = idx.view if idx else None
    if idx is not None and not idx.present and not d.is_tx_store:
        # Not a risk: the broker's recovery rebuilds the index from the journal, the state a KahaDB
        # compaction leaves on purpose. Only the next start takes longer.
        add(Finding(I, "kahadb-no-index", "no db.data: the broker rebuilds the index by replaying "
                    "the whole journal at start", str(d.directory / "db.data")))
    elif idx is not None and idx.error:
        add(Finding(W, "kahadb-index-unreadable", f"db.data cannot be read ({idx.error}); the broker rebuilds "
                    "it from the journal at start (findings below rely on the journal alone)",
                    str(d.directory / "db.data")))
    present = d.file_ids
    refs = referenced_files(d)  # file id -> [reasons]
    for fid in sorted(refs):
        if fid not in present:
            add(Finding(C, "kahadb-missing-journal-file",
                        f"db-{fid}.log is missing but still referenced: " + "; ".join(refs[fid][:5]),
                        _log(d, fid), None, {"fileId": fid, "referencedBy": refs[fid]}))
    if d.files:
        gaps = sorted(set(range(d.files[0].id, d.files[-1].id + 1)) - present)
        lowest = d.files[0].id
        below = [i for i in range(1, lowest)]
        unref_gaps = [g for g in gaps if g not in refs]
        unref_below = [g for g in below if g not in refs]
        if unref_below or unref_gaps:
            ids = unref_below + unref_gaps
            add(Finding(I, "kahadb-gc-gap", f"{len(ids)} journal file id(s) absent ({_ranges(ids)}); nothing "
                        "references them: removed by the broker's journal GC", str(d.directory), None,
                        {"fileIds": ids}))
    if view is not None:
        meta = view.metadata
        if not view.header.clean_shutdown:
            add(Finding(I, "kahadb-unclean-shutdown", "db.data was not closed cleanly (cleanShutdown=false): "
                        "the broker was killed or is running", str(d.directory / "db.data")))
        # Index references past a file's logical end.
        for key, files in view.location_files.items():
            for fid, (count, _size, end) in files.items():
                scan = d.scans.get(fid)
                if scan is not None and scan.end is not None and end > scan.end.offset:
                    add(Finding(C, "kahadb-reference-past-end", f"the index holds messages of {key} up to offset "
                                f"{end}, past the file's logical end {scan.end.offset}", _log(d, fid), scan.end.offset,
                                {"destination": key, "fileId": fid}))
        lu = meta.last_update
        if lu is not None and d.last_record is not None:
            lu_t = (lu.log_id, lu.offset)
            if lu.log_id in present and lu_t > d.last_record:
                add(Finding(C, "kahadb-index-ahead-of-journal", f"the index checkpoint names {lu} but the journal's "
                            f"last record is {d.last_record[0]}:{d.last_record[1]}: records the index reflects are "
                            "gone", _log(d, lu.log_id), lu.offset))
        if d.records_after_last_update:
            s = d.replay_start
            add(Finding(W, "kahadb-journal-ahead-of-index",
                        f"{d.records_after_last_update} journal record(s) after the index checkpoint {lu or '(none yet)'}: "
                        "the broker "
                        f"will log 'Recovering from the journal @{s[0]}:{s[1]}' and replay them",
                        _log(d, s[0]), s[1], {"records": d.records_after_last_update,
                                              "replayFrom": f"{s[0]}:{s[1]}"}))
        elif not any(x.severity is C for x in findings):
            # A consistent checkpoint: the index's live counts must equal the replay.
            for key, count in view.message_counts.items():
                st = d.replay.destinations.get(key)
                live = len(st.messages) if st else 0
                if live != count:
                    add(Finding(W, "kahadb-index-live-mismatch", f"destination {key}: the index holds {count} "
                                f"message(s), the journal replays to {live}", str(d.directory / "db.data"), None,
                                {"destination": key, "index": count, "journal": live}))
    for tx in d.open_transactions:
        if tx.state == "prepared":
            add(Finding(W, "kahadb-prepared-transaction", f"prepared transaction {tx.id} ({tx.sends} send(s), "
                        f"{tx.acks} ack(s)) has no outcome: in doubt, its operations are not applied",
                        _log(d, tx.first[0]), tx.first[1], tx.to_json()))
        else:
            add(Finding(W, "kahadb-open-transaction", f"open transaction {tx.id} ({tx.sends} send(s), {tx.acks} "
                        "ack(s)) has no outcome: the broker rolls it back at start",
                        _log(d, tx.first[0]), tx.first[1], tx.to_json()))


def _ranges(ids: list[int]) -> str:
    out = []
    start = prev = None
    for i in ids:
        if start is None:
            start = prev = i
        elif i == prev + 1:
            prev = i
        else:
            out.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = prev = i
    if start is not None:
        out.append(f"{start}" if start == prev else f"{start}-{prev}")
    return ", ".join(out)


def lock_findings(store) -> list[Finding]:
    out = []
    lock = Path(store.root) / "lock"
    pid = lock_holder(lock) if lock.exists() else None
    if pid is not None:
        who = f"process {pid}" if pid else "another process"
        out.append(Finding(U, "kahadb-store-locked", f"{who} holds the KahaDB lock: a broker is using this store; "
                           "its files change while they are read", str(lock), None, {"pid": pid}))
    return out


def verify_store(store, *, progress=None, results=None, decode: bool = True):
    """Verify every journal batch and record, the index and their consistency.

    Returns ``(findings, summary)``; summary: ``stores`` (per directory: files, records, bytes, batches,
    live messages per destination), and totals ``files``, ``records``, ``bytes``, ``live``. ``results``: a
    :func:`load_store` of ``store`` already made (the export judges the load it exports, so the journal is
    read once); ``decode=False`` leaves out the decoding of every live message (the export decodes them
    itself and lists those that do not decode).
    """
    findings: list[Finding] = lock_findings(store)
    if results is None:
        results = load_store(store, progress=progress)
    summary = {"kind": "mkahadb" if store.multi else "kahadb", "root": str(store.root), "stores": [],
               "files": 0, "records": 0, "bytes": 0, "live": 0}
    for d in results:
        verify_directory(d, findings)
        # Decode the OpenWire bytes of live messages: what a consumer would get must be readable.
        bad = 0
        for key, st in d.replay.destinations.items() if decode else ():
            for m in _decode_failures(d, st):
                bad += 1
                if bad <= 20:
                    findings.append(Finding(W, "kahadb-bad-message", f"live message {m[0]} on {key}: {m[1]}",
                                            _log(d, m[2]), m[3]))
        live = {k: len(st.messages) for k, st in d.replay.destinations.items()}
        entry = {"directory": str(d.directory), "files": len(d.files),
                 "records": d.records, "bytes": d.bytes_scanned,
                 "batches": sum(s.batches for s in d.scans.values()),
                 "live": live, "recordCounts": dict(sorted(d.replay.counts.items())),
                 "openTransactions": len(d.open_transactions)}
        summary["stores"].append(entry)
        summary["files"] += len(d.files)
        summary["records"] += d.records
        summary["bytes"] += d.bytes_scanned
        summary["live"] += sum(live.values())
    return findings, summary


def _decode_failures(d: DirResult, st):
    """(message id, error, file id, offset) for live messages whose payload does not decode."""
    from amqtool.engines.kahadb.document import iter_live_decoded

    for m, msg, err in iter_live_decoded(d, st.messages.values()):
        if err is not None:
            yield m.message_id, err, m.file_id, m.offset
