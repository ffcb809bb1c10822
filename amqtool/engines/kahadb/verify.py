"""`verify` for KahaDB: findings from one pass over the journal plus the index.

Finding codes (documented in man/amqtool-verify.1):

=================================  ========  ==========================================================
code                               severity  meaning
=================================  ========  ==========================================================
kahadb-checksum-mismatch           CRITICAL  a batch's Adler-32 does not match (file, batch offset); WARNING
                                             when latent: no live message of the intact index is damaged (and,
                                             over the checkpoint's record, no record after it is left
                                             unreplayed: checkpoint_span.py), or after the checkpoint in the
                                             newest file the index already holds its sends (index_ahead.py)
kahadb-corrupt-range               CRITICAL  bytes that are no batch, up to the next batch header; or the
                                             batches after a size-0 batch (read as the end of the data), or
                                             in an older file the record bytes after one, or after zeros
                                             over its last batch's head (zeroed_head.py)
kahadb-not-a-journal               CRITICAL  a db-N.log without a single valid batch
not-a-store                        UNKNOWN   no file holds a batch and there is no db.data (random bytes)
kahadb-bad-record                  CRITICAL  records that do not tile their batch, or an undecodable command
kahadb-truncated-tail              WARNING   the last file ends inside a batch, or with a batch that does not
                                             check out past the index checkpoint and nothing after it (torn
                                             write; the broker overwrites it and loses nothing acknowledged)
kahadb-truncated-file              CRITICAL  a file that is not the newest cut after a batch (no end marker), or
                                             the newest cut short of the preallocated length (preallocated.py),
                                             or, the broker killed, before its checkpoint record's end;
                                             WARNING when latent: no live message of the index was there
kahadb-missing-journal-file        CRITICAL  a file the index or ack map still references is gone
kahadb-reference-past-end          CRITICAL  the index references data past the newest file's logical end
                                             (any file's with checkForCorruptJournalFiles)
kahadb-gc-gap                      INFO      numbering gaps left by the broker's own journal GC
kahadb-replay-gap                  CRITICAL  a file after the checkpoint's (not the newest) missing or empty:
                                             records the broker replays at start are lost (replay_gaps.py)
kahadb-journal-ahead-of-index      WARNING   records after the index checkpoint: the broker replays them
kahadb-forwarded-acks-after-index  INFO      the records after the checkpoint are only an ack compaction's
                                             marker and forwarded acks: their replay changes nothing
kahadb-index-ahead-of-journal      WARNING   the checkpoint names a location past the journal's end
kahadb-index-duplicate-entry       CRITICAL  a sequence id held twice by a destination's order index: the
                                             broker poison-acknowledges the second read (order_dups.py)
kahadb-index-entry-moved           CRITICAL  an order-index entry under a damaged sequence key moved across a
                                             durable subscription's cursor (order_keys.py)
kahadb-subscription-no-cursor      CRITICAL  a durable subscription of the index without its LastAck: the broker
                                             hands it nothing from the store; or a LastAck no recovered
                                             subscription has: its messages go to no one; or none of the
                                             sends replayed after the checkpoint reach it (sub_cursors.py)
kahadb-index-destination-damaged   CRITICAL  live index entries filed under a destination no journal record names,
                                             their records sent to another: a damaged name in db.data
kahadb-index-journal-mismatch      CRITICAL  an intact journal replays to other live messages (or durable
                                             subscriptions and their pending messages) than the index
kahadb-rebuild-would-differ        WARNING   what a rebuild of the index from the journal would lose or bring
                                             back, explained by damage the broker does not read (latent)
kahadb-unreadable-live-message     CRITICAL  a live message of the index the broker cannot read at dispatch
kahadb-index-entry-damaged         WARNING   an order-index entry's id is damaged, its Location still right; or
                                             entries of two messages under one sequence id (order_dups.py)
kahadb-checkpoint-unreadable       WARNING   the audit/ack-map record page 0 names does not load: full replay
                                             (CRITICAL when that brings acknowledged messages back, or
                                             stops at a record it cannot load: no start)
kahadb-ack-finds-nothing           CRITICAL  an entry acked after the checkpoint under an id its messageIdIndex key
                                             no longer has: the replayed ack finds nothing, it comes back
kahadb-ack-before-send             CRITICAL  an ack precedes its message's send after the checkpoint in file order
                                             (files swapped or renamed): the replay brings it back (out_of_order.py)
kahadb-recovery-stops              CRITICAL  the replay from the checkpoint at start stops at a record it cannot
                                             load or a header it cannot step over: the broker does not start
kahadb-replay-skips                CRITICAL  the replay from a checkpoint pointing inside a record steps over
                                             records after it that change live messages (replay_skips.py)
kahadb-open-transaction            WARNING   a transaction with no outcome (rolled back at start)
kahadb-prepared-transaction        WARNING   a prepared XA transaction, in doubt
kahadb-store-locked                UNKNOWN   a process holds the lock: the store is in use
kahadb-no-index                    INFO      db.data absent: the broker rebuilds it (as after amqtool compact)
kahadb-index-unreadable            WARNING   db.data unreadable: the broker rebuilds it
kahadb-rebuild-skips-writes        CRITICAL  the broker rebuilds the index, and its replay skips records a later
                                             run wrote into an ack compaction file after its forwarded acks:
                                             what they did is lost (rebuild_skips.py)
kahadb-rebuild-would-skip          INFO      the index holds what a later run wrote after a compaction file's
                                             forwarded acks, which a replay skips: the broker's own index,
                                             only a rebuild would lose it (rebuild_skips.py)
kahadb-unknown-field               WARNING   a protobuf field the schema does not declare
kahadb-bad-message                 WARNING   a live message whose OpenWire bytes do not decode
kahadb-empty-journal-file          INFO      a zero-length db-N.log (a failed create; ignored at start)
kahadb-unclean-shutdown            INFO      the index was not closed cleanly
=================================  ========  ==========================================================
"""
from __future__ import annotations

import struct
from pathlib import Path

from amqtool.errors import Finding, Severity
from amqtool.engines.kahadb.damage import checkpoint_failures, evidence, intact, live_in, read_failure, read_message
from amqtool.errors import FormatError
from amqtool.formats.kahadb import journal as jr
from amqtool.engines.kahadb.forwarded import inert_ack, replayed_records
from amqtool.engines.kahadb.absent_subscriptions import absent_subscriptions
from amqtool.engines.kahadb.index_ahead import held, held_commits, holds, located, passed_subscriptions
from amqtool.engines.kahadb.indexed import acked_names
from amqtool.engines.kahadb.length_skips import acked_send, skips_nothing_live
from amqtool.engines.kahadb.load import DirResult, load_store
from amqtool.engines.kahadb.order_dups import duplicate_entries
from amqtool.engines.kahadb.order_keys import moved_entries
from amqtool.engines.kahadb.sub_cursors import cursorless
from amqtool.engines.kahadb.out_of_order import acks_before_sends
from amqtool.engines.kahadb.preallocated import marker_gone, preallocated_length
from amqtool.engines.kahadb.rebuild_skips import rebuild_skips
from amqtool.engines.kahadb.pins import referenced_files
from amqtool.engines.kahadb.replay_gaps import replay_gaps
from amqtool.engines.kahadb.replay_skips import skipped_effect
from amqtool.engines.kahadb.replay_walk import end_marker_only
from amqtool.engines.kahadb.superseded import replayed_unchanged, superseded
from amqtool.engines.kahadb.pins import qualified
from amqtool.engines.kahadb.scan import lock_holder, mapped, remnant_after_zero_batch
from amqtool.engines.kahadb.zeroed_head import harmless as zeroed_head_harmless
from amqtool.engines.kahadb.zeroed_head import skips_nothing as zeroed_head_skips_nothing
from amqtool.engines.kahadb.checkpoint_span import unreached, walked_records

C, W, I, U = Severity.CRITICAL, Severity.WARNING, Severity.INFO, Severity.UNKNOWN


def _log(d: DirResult, fid: int) -> str:
    return str(d.directory / f"db-{fid}.log")


def verify_directory(d: DirResult, findings: list[Finding], *, strict: bool = False, in_doubt: bool = False,
                     siblings: tuple = ()):
    """Findings of one store directory. ``strict``: the broker runs with ``checkForCorruptJournalFiles=true``
    and refuses to start on any corrupted range, read or not (MessageDatabase.recoverIndex). ``in_doubt``
    (mKahaDB): a child store still has a prepared transaction whose outcome only the txStore can give.
    ``siblings`` (mKahaDB): the other child stores' DirResults (preallocated.py reads their files' lengths).
    Returns the locations of the live messages read (decoded already)."""
    add = findings.append
    last_id = d.files[-1].id if d.files else None
    ev = evidence(d)
    judge = _Judge(d, ev, strict, in_doubt)
    torn = d.torn_tail()
    cut = _cut_after_checkpoint(d, siblings)  # the newest file cut short of its preallocated length
    for f in d.files:
        scan = d.scans[f.id]
        path = str(f.path)
        if f.size == 0:
            if f.id != last_id:
                # Only the newest file can be a failed create: at the next start the broker takes the file
                # after its newest non-empty one for its next write (Journal.start: nextDataFileId), which
                # is that empty file. An empty file before another one lost what it held: what a rebuild
                # would lose or bring back is damage, not an index that disagrees with an intact journal.
                judge.damaged = True
            add(Finding(I, "kahadb-empty-journal-file", "zero-length journal file (a failed create; the broker "
                        "ignores it)", path, 0))
            continue
        if scan.batches == 0 and scan.corrupt and scan.corrupt[0].first == 0 and scan.corrupt[0].to_eof \
                and scan.corrupt[0].reason == "bad-header" and scan.corrupt[0] is not torn:
            # (the newest file's one batch, past the checkpoint, torn by a crash is judged below as such)
            sev, note, extra = judge(f, 0, f.size - 1, C)
            add(Finding(sev, "kahadb-not-a-journal", "no KahaDB batch header found anywhere in the file (expected "
                        "'WRITE BATCH' control records at offset 0): not a KahaDB journal file" + note, path, 0,
                        extra or None))
            continue
        for cr in scan.corrupt:
            span = f"{cr.first}..{cr.last}" if not cr.to_eof else f"{cr.first} to EOF"
            details = {"first": cr.first, "last": cr.last, "reason": cr.reason, "toEof": cr.to_eof}
            if cr is torn and cut is not None and f.size < cut and _cut_loses(d, f.id, cr.first):
                add(_cut_newest(f, cut, cr.first, details))
                continue
            if cr is torn and cr.to_eof and marker_gone(d, siblings) and _cut_loses(d, f.id, cr.first):
                add(_marker_gone(f, cr.first, details))
                continue
            if cr is torn and _killed_cut_before_checkpoint(d, f):
                add(_cut_before_checkpoint(f, cr.first, details))
                continue
            if cr is torn and cr.reason == "truncated":
                add(Finding(W, "kahadb-truncated-tail",
                            f"the last journal file ends inside a batch at offset {cr.first} (torn or truncated "
                            "write); the broker discards it and appends from there", path, cr.first, details))
                continue
            if cr is torn:
                add(Finding(W, "kahadb-truncated-tail",
                            f"the last journal file ends with a batch that does not check out ({cr.reason}) at "
                            f"offset {cr.first}, past the index checkpoint, with no batch after it: a write torn "
                            "by a crash; the broker appends from there and loses nothing it acknowledged",
                            path, cr.first, details))
                continue
            sev, note, extra = judge(f, cr.first, cr.last, C)
            details.update(extra)
            if cr.reason == "checksum":
                details.update(stored=cr.stored, computed=cr.computed)
                add(Finding(sev, "kahadb-checksum-mismatch",
                            f"batch checksum mismatch: stored Adler-32 {cr.stored}, computed {cr.computed}; "
                            f"corrupt journal records between offsets {span}" + note, path, cr.first, details))
            else:
                add(Finding(sev, "kahadb-corrupt-range",
                            f"corrupt journal records ({cr.reason}) between offsets {span}" + note, path, cr.first,
                            details))
        if scan.end is not None and scan.end.how == "end-of-file" and f.id == last_id and not scan.corrupt \
                and cut is not None and _cut_loses(d, f.id, scan.end.offset):
            add(_cut_newest(f, cut, scan.end.offset, None))
        elif scan.end is not None and scan.end.how == "end-of-file" and f.id == last_id and not scan.corrupt \
                and marker_gone(d, siblings) and _cut_loses(d, f.id, scan.end.offset):
            add(_marker_gone(f, scan.end.offset, None))
        elif scan.end is not None and scan.end.how == "end-of-file" and f.id == last_id and not scan.corrupt \
                and _killed_cut_before_checkpoint(d, f):
            add(_cut_before_checkpoint(f, scan.end.offset, None))
        elif scan.end is not None and scan.end.how == "end-of-file" and f.id == last_id and not scan.corrupt:
            add(Finding(W, "kahadb-truncated-tail", "the last journal file ends without the end-of-data marker "
                        "'-qMa4' (truncated after its last batch?)", path, scan.end.offset))
        elif scan.end is not None and scan.end.how == "end-of-file" and not scan.corrupt:
            # DataFileAppender writes the EOF record after every batch (and preallocation one at the end), so
            # an older file whose last batch runs into the file's end lost what came after it
            sev, note, extra = judge(f, scan.end.offset, 1 << 62, C)
            add(Finding(sev, "kahadb-truncated-file", f"a journal file that is not the newest ends at {f.size} "
                        "without the end-of-data marker '-qMa4' the broker writes after every batch: it was cut "
                        "after a batch, and what followed is lost" + note, path, scan.end.offset, extra or None))
        if scan.hidden is not None:
            first, last = scan.hidden
            sev, note, extra = judge(f, first, last, C)
            add(Finding(sev, "kahadb-corrupt-range", f"a batch of size 0 at offset {first} ends the file for the "
                        f"broker's recovery (Journal.recoveryCheck takes it for the end of the data), but batches "
                        f"follow up to offset {last}: a rebuild of the index does not read them" + note, path,
                        first, {"first": first, "last": last, "reason": "zero-size-batch", **extra}))
        elif f.id != last_id and (rem := remnant_after_zero_batch(judge.buf(f), scan.end)) is not None:
            # (the newest file's is left to the torn-tail rules: a crash can leave it)
            first, last = rem
            sev, note, extra = judge(f, first, last, C)
            if scan.end.how == "zeros":
                add(Finding(sev, "kahadb-corrupt-range", f"zeros at offset {first} end the file for the broker "
                            "(Journal.getNextLocation reads a record header of type 0 as the end of the file and "
                            f"moves on to the next), but record bytes follow up to offset {last}, not the end marker "
                            "and zero fill the broker leaves after its last batch: a batch whose control record "
                            "was zeroed, which the replay and a rebuild of the index do not read" + note, path,
                            first, {"first": first, "last": last, "reason": "zero-header", **extra}))
            else:
                add(Finding(sev, "kahadb-corrupt-range", f"a batch of size 0 at offset {first} ends the file for "
                            f"the broker's recovery (Journal.recoveryCheck takes it for the end of the data), but "
                            f"record bytes follow up to offset {last}, not the zero fill after the end marker the "
                            f"broker writes: a damaged batch, which a rebuild of the index does not read" + note,
                            path, first, {"first": first, "last": last, "reason": "zero-size-batch", **extra}))
        for off, msg in scan.bad_records:
            sev, note, extra = judge(f, off, off, C)
            add(Finding(sev, "kahadb-bad-record", msg + note, path, off, extra or None))
    for fid, off, msg in d.decode_errors:
        f = d.file(fid)
        sev, note, extra = judge(f, off, off, C) if f is not None else (C, "", {})
        add(Finding(sev, "kahadb-bad-record", f"journal command does not decode: {msg}" + note, _log(d, fid), off,
                    extra or None))
    judge.close()
    _live_reads(d, ev, judge, findings)
    _index_rest(d, ev, judge, findings)
    return judge.checked


def _torn_by_a_crash(d: DirResult, findings: list[Finding], end: int) -> bool:
    """The newest file's logical ``end`` is where a batch torn by a crash starts (``DirResult.torn_tail``: past the
    index checkpoint, nothing written after it), judged so already (a ``kahadb-truncated-tail`` WARNING there).
    ``recoverIndex`` rolls back the index entries at or past it: index pages are written between checkpoints
    (every ``indexWriteBatchSize`` pages), so a crash can leave pages holding sends of a journal write it tore --
    the loss of that write, which the torn tail already stands for."""
    torn = d.torn_tail()
    return torn is not None and torn.first == end and any(
        x.code == "kahadb-truncated-tail" and x.offset == end and x.severity is W for x in findings)


def _index_rest(d, ev, judge, findings) -> None:
    add = findings.append
    last_id = d.files[-1].id if d.files else None
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
    elif view is not None and d.indexed_error and not d.is_tx_store:
        add(Finding(W, "kahadb-index-unreadable", f"db.data's order indexes cannot be read ({d.indexed_error}); "
                    "the broker rebuilds the index from the journal at start, or fails when it reaches the "
                    "damaged page", str(d.directory / "db.data")))
    if idx is not None and (not idx.present or idx.error or (view is not None and d.indexed_error)) \
            and not d.is_tx_store:
        _rebuild_skips(d, findings)
    if not d.is_tx_store:
        findings.extend(duplicate_entries(d))
        for key, m, name in ev.unfound if ev is not None else ():
            add(Finding(C, "kahadb-ack-finds-nothing",
                        f"the order-index entry {m.message_id} of {qualified(key)} (sequence {m.seq}) is acknowledged "
                        f"after the index checkpoint, but the messageIdIndex names that sequence {name!r}: the "
                        "broker's replay of the ack looks the id up there, finds nothing, and the acknowledged "
                        "message is delivered again", str(d.directory / "db.data"), None,
                        {"destination": key, "messageId": m.message_id, "sequence": m.seq, "indexedAs": name}))
        if ev is not None:
            findings.extend(moved_entries(d, ev.openwire_version, ev.acked_after))
        if ev is not None:
            findings.extend(cursorless(d, ev.openwire_version, ev.acked_after))
    present = d.file_ids
    # order indexes that do not read: the broker rebuilds db.data from the journal (MessageDatabase.open),
    # so what the discarded index names (files, locations past an end) is no risk
    rebuilds = view is not None and bool(d.indexed_error) and not d.is_tx_store
    refs = referenced_files(d, index=not rebuilds)  # file id -> [reasons]
    for fid in sorted(refs):
        if fid not in present:
            # recoverIndex's check (locationIndex, ack map) and the replay start (page 0) stop the broker; a
            # subscription's record location (subLocations) is only read by the journal GC
            gc_only = all(r.startswith("subscription record of") for r in refs[fid])
            add(Finding(W if gc_only else C, "kahadb-missing-journal-file",
                        f"db-{fid}.log is missing but still referenced: " + "; ".join(refs[fid][:5])
                        + ("; only the journal GC reads that location" if gc_only else ""),
                        _log(d, fid), None, {"fileId": fid, "referencedBy": refs[fid]}))
    if d.files:
        gaps = sorted(set(range(d.files[0].id, d.files[-1].id + 1)) - present)
        lowest = d.files[0].id
        below = [i for i in range(1, lowest)]
        lu = view.metadata.last_update if view is not None else None
        lost = replay_gaps(d, lu.log_id if lu is not None else None) \
            if view is not None and not rebuilds and not d.is_tx_store else []
        for fid, how in lost:
            add(Finding(C, "kahadb-replay-gap", f"db-{fid}.log is {how}, after the index checkpoint "
                        f"{lu or '(none yet: the broker replays the whole journal)'}: the broker's GC never removes "
                        "such a file, so records the broker would replay at start are lost (sends not delivered, "
                        "acknowledged messages back)", _log(d, fid), None, {"fileId": fid, "how": how}))
        unref_gaps = [g for g in gaps if g not in refs and g not in {fid for fid, _how in lost}]
        unref_below = [g for g in below if g not in refs and g not in {fid for fid, _how in lost}]
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
        for key, files in ({} if rebuilds else view.location_files).items():
            for fid, (count, _size, end) in files.items():
                scan = d.scans.get(fid)
                # Only the newest file's logical end counts at start (Journal.recoveryCheck; recoverIndex rolls
                # back what lies past it), every file's with checkForCorruptJournalFiles. Elsewhere the broker
                # reads the records where they are: damage there is judged with the corrupt range.
                if fid != last_id and not judge.strict:
                    continue
                # (Location order is file then offset: recoverIndex's GTEVisitor(lastAppendLocation) and the
                # strict check's BetweenVisitor compare where a record starts, not its size)
                if scan is not None and scan.end is not None and end >= scan.end.offset:
                    crash = fid == last_id and _torn_by_a_crash(d, findings, scan.end.offset)
                    add(Finding(W if crash else C, "kahadb-reference-past-end", f"the index holds a message of "
                                f"{key} at offset {end}, at or past the file's logical end {scan.end.offset}: the "
                                "broker rolls it back at start" + (
                                    "; the end is a write torn by a crash past the index checkpoint, and index "
                                    "pages written between checkpoints can hold what that write held: the "
                                    "crash's loss" if crash else ""), _log(d, fid), scan.end.offset,
                                {"destination": key, "fileId": fid}))
        lu = meta.last_update
        if lu is not None and d.last_record is not None:
            lu_t = (lu.log_id, lu.offset)
            if lu.log_id in present and lu_t > d.last_record:
                # What the lost records held is judged where it shows: live messages past the end
                # (kahadb-reference-past-end), acks a rebuild would miss (kahadb-rebuild-would-differ), the
                # checkpoint records (kahadb-checkpoint-unreadable). The broker starts from its index.
                judge.damaged = True  # what the index reflects and the journal lost explains any mismatch
                add(Finding(W, "kahadb-index-ahead-of-journal", f"the index checkpoint names {lu} but the journal's "
                            f"last readable record is {d.last_record[0]}:{d.last_record[1]}: records the index "
                            "reflects are gone or damaged", _log(d, lu.log_id), lu.offset))
        inert = judge.forwarded_only = _forwarded_only(d, view)
        if inert:
            s = d.replay_start
            there = [i for i in inert if i in present]
            how = (f"skips them (process(KahaRewrittenDataFileCommand): db-{', db-'.join(map(str, there))}.log "
                   "still there)" if there else "replays them onto messages its index no longer holds")
            add(Finding(I, "kahadb-forwarded-acks-after-index",
                        f"{d.records_after_last_update} journal record(s) after the index checkpoint {lu} are the "
                        f"ack compaction's rewrite of db-{', db-'.join(map(str, inert))}.log (its marker and "
                        "forwarded acknowledgements, written without moving the checkpoint): at start the broker "
                        f"{how}, and its index stays as it is; not a sign of an unclean stop",
                        _log(d, s[0]), s[1], {"records": d.records_after_last_update,
                                              "replayFrom": f"{s[0]}:{s[1]}", "sourceFileIds": inert}))
        elif d.records_after_last_update:
            s = d.replay_start
            add(Finding(W, "kahadb-journal-ahead-of-index",
                        f"{d.records_after_last_update} journal record(s) after the index checkpoint {lu or '(none yet)'}: "
                        "the broker "
                        f"will log 'Recovering from the journal @{s[0]}:{s[1]}' and replay them",
                        _log(d, s[0]), s[1], {"records": d.records_after_last_update,
                                              "replayFrom": f"{s[0]}:{s[1]}"}))
    _index_against_journal(d, ev, judge, findings)
    for tx in d.open_transactions:
        if tx.state == "prepared":
            add(Finding(W, "kahadb-prepared-transaction", f"prepared transaction {tx.id} ({tx.sends} send(s), "
                        f"{tx.acks} ack(s)) has no outcome: in doubt, its operations are not applied",
                        _log(d, tx.first[0]), tx.first[1], tx.to_json()))
        else:
            add(Finding(W, "kahadb-open-transaction", f"open transaction {tx.id} ({tx.sends} send(s), {tx.acks} "
                        "ack(s)) has no outcome: the broker rolls it back at start",
                        _log(d, tx.first[0]), tx.first[1], tx.to_json()))


def _first_five(ids: list[str]) -> str:
    """The first five of ``ids``, and " ..." when there are more."""
    return ", ".join(ids[:5]) + (" ..." if len(ids) > 5 else "")


def _rebuild_skips(d: DirResult, findings: list[Finding]) -> None:
    """The broker rebuilds the index: what it loses to an ack compaction file written on after its forwarded
    acks (rebuild_skips.py) is lost for good, whatever the index held."""
    lost, back, files = rebuild_skips(d)
    if not lost and not back:
        return
    parts = []
    if lost:
        parts.append(f"loses {len(lost)} live message(s) ({_first_five([m for _k, m in lost])})")
    if back:
        parts.append(f"brings back {len(back)} acknowledged message(s) ({_first_five([m for _k, m in back])})")
    names = ", ".join(f"db-{fid}.log" for fid in files)
    findings.append(Finding(C, "kahadb-rebuild-skips-writes", "the broker rebuilds the index from the journal, "
                            f"and its replay skips the rest of ack compaction file(s) {names} after the marker "
                            "(process(KahaRewrittenDataFileCommand): the source file is still there), where a later "
                            f"run wrote on: it {' and '.join(parts)}", _log(d, files[0]), None,
                            {"lose": len(lost), "bringBack": len(back), "rebuildWouldLose": [m for _k, m in lost[:100]],
                             "rebuildWouldBringBack": [m for _k, m in back[:100]]}))


def _cut_after_checkpoint(d: DirResult, siblings: tuple = ()) -> int | None:
    """The preallocated length the newest file of ``d`` is cut short of (preallocated.py), or None."""
    return preallocated_length(d, siblings) if d.files and d.files[-1].size else None


def _killed_cut_before_checkpoint(d: DirResult, f) -> bool:
    """The newest file ``f`` of a killed broker's store (page 0's cleanShutdown false) ends before the end of
    the index checkpoint's own record (``lastUpdate``, in ``f``): not a crash's tear, which only loses a write
    after the checkpoint (the checkpoint's records were written before lastUpdate named them, and a killed
    process loses no written byte), but a cut; and the killed broker ran on after that checkpoint
    (:func:`_cut_loses`), so what it wrote after it was in the cut part too."""
    view = d.index.view if d.index else None
    if view is None or view.header.clean_shutdown or view.metadata.last_update is None:
        return False
    lu = view.metadata.last_update
    if lu.log_id != f.id or lu.offset < 0:
        return False
    if f.size < lu.offset + jr.RECORD_HEAD_SPACE:
        return True
    with mapped(f.path) as buf:
        size = struct.unpack_from(">i", buf, lu.offset)[0]
    return jr.RECORD_HEAD_SPACE <= size and f.size < lu.offset + size


def _cut_before_checkpoint(f, offset: int, details: dict | None) -> Finding:
    """:func:`_killed_cut_before_checkpoint`'s finding."""
    return Finding(C, "kahadb-truncated-file", f"the newest journal file ends at {f.size}, before the end of the "
                   "index checkpoint's own record, in a store whose broker was killed (cleanShutdown=false): no crash "
                   "cuts records the checkpoint was written after, and the broker ran on after it: the file was cut, "
                   f"and what followed (from offset {offset}) is lost", str(f.path), offset,
                   {**(details or {}), "beforeCheckpoint": True})


def _cut_loses(d: DirResult, fid: int, offset: int) -> bool:
    """A cut of the newest (preallocated) file at ``fid:offset`` lost records the broker replays at start: it
    lies after the index checkpoint (:func:`_past`), or the index was not closed cleanly (page 0's
    cleanShutdown false: the broker was killed, not stopped). ``MessageDatabase.close`` checkpoints last and
    marks the index clean only then, so only a clean stop's journal ends with the checkpoint's records; a killed
    broker's ran on after its last checkpoint, so a cut before that checkpoint's end took what followed it too
    (sweep of such cuts over the kahadb-fresh and hold-out stores: every one in a killed store lost messages,
    21 of 35 judged WARNING; in the cleanly stopped ones the broker delivered the same)."""
    if _past(d, fid, offset):
        return True
    view = d.index.view if d.index else None
    return view is not None and not view.header.clean_shutdown


def _past(d: DirResult, fid: int, offset: int) -> bool:
    """``fid:offset`` lies after the index checkpoint: what a cut there lost are records the broker would have
    replayed at start. A cut before it is judged by what the index says it lost (index-ahead-of-journal,
    checkpoint-unreadable, reference-past-end), as after a clean stop whose last records are the checkpoint's."""
    view = d.index.view if d.index else None
    if view is None:
        return False
    lu = view.metadata.last_update
    # (an index with no checkpoint yet: the broker replays every record, getNextLocation(null))
    return lu is None or (fid, offset) > (lu.log_id, lu.offset)


def _cut_newest(f, length: int, offset: int, details: dict | None) -> Finding:
    """The newest file cut short of the length the journal preallocates (preallocated.py)."""
    return Finding(C, "kahadb-truncated-file", f"the newest journal file is {f.size} bytes, short of the "
                   f"{length} of the other files and of the end marker they end with: the broker preallocates each "
                   "file to its full length before its first write (Journal.rotateWriteFile), so no crash leaves "
                   "it; it was cut at "
                   f"{f.size}, and what followed (from offset {offset}) is lost", str(f.path), offset,
                   {**(details or {}), "preallocatedLength": length})


def _marker_gone(f, offset: int, details: dict | None) -> Finding:
    """The newest file's end was cut or zeroed (preallocated.marker_gone), from a batch on that the broker
    replays at start (:func:`_cut_loses`)."""
    return Finding(C, "kahadb-truncated-file", f"the newest journal file ends at {f.size} without the end marker "
                   "'-qMa4' that every file of this journal ends with (the preallocation writes it into a file's "
                   "last five bytes before its first batch, Journal.doPreallocationSparseFile, and a crash only "
                   f"tears a batch inside the file): its end was cut or zeroed, and what followed offset {offset} "
                   "is lost", str(f.path), offset, {**(details or {}), "endMarkerGone": True})


def _forwarded_only(d: DirResult, view) -> list:
    """The source file ids of the ack compaction files when every record after the index checkpoint is their
    inert marker or forwarded ack (forwarded.py), else []."""
    lu = view.metadata.last_update
    if not d.records_after_last_update or lu is None or d.is_tx_store:
        return []
    inert, other, sources = replayed_records(d, (lu.log_id, lu.offset), d.indexed,
                                             view.metadata.first_in_progress_tx is not None)
    return sources if inert and not other else []


class _Judge:
    """Severity of damage at ``[first, last]`` of a journal file: what the broker reads of it (damage.py)."""

    def __init__(self, d: DirResult, ev, strict: bool, in_doubt: bool = False):
        self.d, self.ev, self.strict, self.in_doubt = d, ev, strict, in_doubt
        self.maps: dict = {}
        self.damaged = False  # any damaged region, read or latent
        self.latent: list = []  # (file id, first, last)
        self.checked: set = set()  # (file id, offset) of live messages already judged
        self.forwarded_only: list = []  # the records after the checkpoint are all inert (forwarded.py)
        written = [x.id for x in d.files if x.size]
        self.newest = written[-1] if written else None
        view = d.index.view if d.index else None
        self.inert = inert_ack(d.indexed, view.metadata.first_in_progress_tx is not None) \
            if view is not None and not d.is_tx_store else None
        self._ended: set | None = None
        self._rolled: dict | None = None
        self._unmatched = None
        self._idle = None
        self._spent = None
        self._located = None
        self._held_commit = None
        self._walked = None
        self._rejects = None
        self._subscribed = None
        self._last_ack_places = None
        self._quiet: dict = {}  # (file id, batch offset) -> quiet_acks' predicate

    def ended(self) -> set:
        """The transactions whose outcome (COMMIT or ROLLBACK) the replay after the checkpoint reads intact."""
        if self._ended is None:
            from amqtool.engines.kahadb.after_acks import ended_transactions

            self._ended = ended_transactions(self.d, self.ev.last_update) if self.ev is not None and \
                self.ev.last_update is not None else set()
        return self._ended

    def rolled_back_after(self, where: tuple) -> set:
        """The transactions whose ROLLBACK the replay after the checkpoint reads intact after ``where`` ((file id,
        offset)); built once."""
        if self._rolled is None:
            from amqtool.engines.kahadb.after_acks import rolled_back_transactions

            self._rolled = rolled_back_transactions(self.d, self.ev.last_update) if self.ev is not None and \
                self.ev.last_update is not None else {}
        return {key for key, at in self._rolled.items() if at > where}

    def unmatched(self):
        """unhanded.unmatched_ack of this store directory (built once)."""
        if self._unmatched is None:
            from amqtool.engines.kahadb.unhanded import unmatched_ack

            self._unmatched = unmatched_ack(self.d, self.ev.openwire_version if self.ev is not None else 11)
        return self._unmatched

    def quiet_acks(self, f, first: int, last: int):
        """:meth:`unmatched`, or for a batch of the newest file also an ack whose message the subscription is
        handed again from its LastAck anyway (last_acks.handed_anyway); built for this batch."""
        base = self.unmatched()
        if f.id != self.newest or self.ev is None or self.ev.last_update is None:
            return base
        if (f.id, first) in self._quiet:
            return self._quiet[(f.id, first)]
        from amqtool.engines.kahadb.last_acks import handed_anyway, last_ack_places
        from amqtool.engines.kahadb.superseded import as_written
        from amqtool.formats.kahadb import journal as jr
        from amqtool.formats.kahadb.commands import EntryType, decode_command

        written = as_written(self.buf(f), first, last)
        if written is None:
            return base
        acks = set()
        for rec in jr.iter_batch_records(*written):
            try:
                cmd = decode_command(bytes(rec.payload))
            except FormatError:
                continue
            if cmd.type is EntryType.REMOVE_MESSAGE and cmd.subscription_key and cmd.destination is not None:
                acks.add((cmd.destination.key, cmd.message_id, cmd.subscription_key))
        if self._last_ack_places is None:
            self._last_ack_places = last_ack_places(self.d, self.ev.last_update)
        anyway = handed_anyway(self.d, acks, (f.id, last), self._last_ack_places)
        self._quiet[(f.id, first)] = quiet = lambda cmd: base(cmd) or anyway(cmd)  # noqa: E731
        return quiet

    def rejects(self):
        """unhanded.selector_rejects of this store directory (built once)."""
        if self._rejects is None:
            from amqtool.engines.kahadb.unhanded import selector_rejects

            self._rejects = selector_rejects(self.d, self.ev.openwire_version if self.ev is not None else 11)
        return self._rejects

    def subscribed(self, key: str) -> set:
        """The durable subscription keys of destination ``key`` that the index or the journal's replay holds."""
        if self._subscribed is None:
            subs: dict = {}
            for k, st in self.d.replay.destinations.items():
                subs.setdefault(k, set()).update(st.subscriptions)
            for k, dest in (self.d.indexed or {}).items():
                subs.setdefault(k, set()).update(dest.subscriptions)
            self._subscribed = subs
        return self._subscribed.get(key, set())

    def open_txs(self) -> frozenset:
        """The keys of the transactions the replay leaves open (no outcome, not prepared): the broker rolls
        them back at start."""
        return frozenset(t.id.key for t in self.d.open_transactions if t.state == "open")

    def walked(self) -> set:
        """The (file id, offset) of the records the broker's replay at start loads (built once): from the
        checkpoint, and from the journal's start too when a checkpoint record does not load (the whole journal
        is then replayed on top of the index: damage.checkpoint_failures)."""
        if self._walked is None:
            ids = [x.id for x in self.d.files if x.size]
            read = lambda fid: self.buf(self.d.file(fid))  # noqa: E731
            self._walked = walked_records(ids, read, self.ev.last_update)
            if checkpoint_failures(self.d):
                self._walked |= walked_records(ids, read, None)
        return self._walked

    def _reads_whole(self, f, first: int, last: int) -> bool:
        """The index's live messages in ``[first, last]`` read at dispatch as written (damage.py)."""
        buf = self.buf(f)
        live = live_in(self.ev, f.id, first, last)
        return not any(read_failure(buf, m, self.ev.openwire_version) for _k, m in live) and (
            not live or intact(buf, f.id, live, first))

    def holds_at(self, f):
        """``(offset, send) -> bool``: the index holds that send of file ``f`` at its Location (index_ahead.py)."""
        where = self.located()
        return lambda off, cmd: holds(where, f.id, off, cmd)

    def held_commit(self):
        """index_ahead.held_commits of this store directory after its checkpoint (built once)."""
        if self._held_commit is None:
            acked = self.ev.acked_after
            self._held_commit = held_commits(self.d, self.ev.last_update, self.located(), lambda cmd: acked_send(
                cmd, acked, self.subscribed, in_transaction=True))
        return self._held_commit

    def located(self) -> dict:
        """index_ahead.located of this store directory's order indexes (built once)."""
        if self._located is None:
            self._located = located(self.d.indexed or {})
        return self._located

    def spent(self):
        """after_acks.spent_acks of this store directory after its checkpoint (built once)."""
        if self._spent is None:
            from amqtool.engines.kahadb.after_acks import spent_acks

            self._spent = spent_acks(self.d, self.ev.last_update)
        return self._spent

    def idle(self):
        """after_acks.acks_nothing of this store directory (built once)."""
        if self._idle is None:
            from amqtool.engines.kahadb.after_acks import acks_nothing

            self._idle = acks_nothing(self.d)
        return self._idle

    def buf(self, f):
        if f.id not in self.maps:
            cm = mapped(f.path)
            self.maps[f.id] = (cm, cm.__enter__())
        return self.maps[f.id][1]

    def close(self) -> None:
        for cm, _buf in self.maps.values():
            cm.__exit__(None, None, None)
        self.maps = {}

    def _latent(self, f, first: int, last: int, why: str):
        """A damaged batch the broker's replay reads to the same effect: a warning, noted as latent."""
        self.latent.append((f.id, first, last))
        return W, "; latent: " + why, {"latent": True, "read": False}

    def __call__(self, f, first: int, last: int, default):
        """``(severity, note for the message, details)``."""
        self.damaged = True
        ev = self.ev
        if self.d.is_tx_store and not self.in_doubt and not self.strict:
            # Each child store holds its own PREPARE and COMMIT of a cross-store transaction; the txStore
            # only decides those a child still has prepared (MultiKahaDBTransactionStore recovery).
            return W, ("; the mKahaDB txStore: no child store has a prepared transaction waiting for its "
                       "outcome, so nothing the broker delivers depends on it"), {"latent": True, "read": False}
        after = ev is not None and ev.last_update is not None and (f.id, first) > ev.last_update
        older = after and f.id != self.newest  # an older file's batch after the checkpoint
        if after and superseded(
                self.buf(f), first, last, ev.acked_after,
                self.open_txs(),
                {key: set(st.subscriptions) for key, st in self.d.replay.destinations.items() if st.subscriptions},
                newest=f.id == self.newest, inert=self.inert, ended=self.ended,
                unmatched=lambda: self.quiet_acks(f, first, last),
                rolled_back=lambda: self.rolled_back_after((f.id, first)),
                spent=None if self.strict else self.spent, held_commit=None if self.strict else self.held_commit):
            return self._latent(f, first, last, "after the index checkpoint, and its records are only sends that "
                                "later acks (or an open transaction's rollback) take back, prepares of transactions "
                                "whose outcome follows, or acks of messages the subscription's selector does not "
                                "match: the broker's replay delivers the same")
        if after and f.id == self.newest and not self.strict and held(
                self.buf(f), first, last, f.id, self.located(), self.d.replay.transactions) \
                and self._reads_whole(f, first, last):
            return self._latent(f, first, last, "after the index checkpoint in the newest file, and its records are "
                                "sends the index already holds at their place (index pages are written between "
                                "checkpoints), or the COMMIT of a local transaction whose sends it holds: the "
                                "broker's replay skips the corrupted batch and delivers what the index holds")
        if older and replayed_unchanged(self.buf(f), first, last, ev.acked_after, self.unmatched(), self.idle(),
                                        self.rejects(), self.subscribed, None if self.strict else self.holds_at(f),
                                        None if self.strict else self.spent()):
            return self._latent(f, first, last, "an older file's batch after the index checkpoint whose records "
                                "read to the same effect as written: the broker's replay reads record headers "
                                "there, not batches (only the newest file is checked at start), and replays them "
                                "unchanged")
        if older and skips_nothing_live(self.buf(f), first, ev.acked_after, self.subscribed, self.unmatched(),
                                        None if self.strict else self.holds_at(f),
                                        lambda: self.rolled_back_after((f.id, first)) | self.open_txs(),
                                        None if self.strict else self.held_commit()):
            return self._latent(f, first, last, "an older file's batch after the index checkpoint whose one damaged "
                                "byte is a record length (a user record's, which the broker's replay loads as "
                                "written, or the batch control record's): the replay then steps over what follows "
                                "it in the file, and what it steps over are sends acknowledged later in the "
                                "replay or the index holds already, or records that change nothing: it delivers "
                                "the same")
        if older and zeroed_head_skips_nothing(self.buf(f), first, ev.acked_after, self.subscribed,
                                               self.unmatched(), self.open_txs()):
            return self._latent(f, first, last, "an older file's batch after the index checkpoint whose control "
                                "record was zeroed: the broker's replay takes the zeros for the end of the file and "
                                "goes on with the next, and what it skips are sends acknowledged later in the "
                                "replay or records that change nothing: it delivers the same")
        if older and end_marker_only(self.buf(f), first, last):
            return self._latent(f, first, last, "an older file's end-of-data marker damaged, with nothing but zeros "
                                "and markers after it: the broker's replay leaves the file there as at the marker, "
                                "and reads the same")
        if ev is None or ev.last_update is None or (f.id, first) > ev.last_update:
            return default, "", {}  # the broker rebuilds the index, or replays this region at start
        spans = ev.last_update[0] == f.id and first <= ev.last_update[1] <= last
        lost = spans and unreached(self.buf(f), first, last, ev.last_update, f.id, self.walked(),
                                   lambda cmd: zeroed_head_harmless(cmd, ev.acked_after, self.subscribed,
                                                                    self.unmatched(), self.open_txs()))
        if lost:
            offs = ", ".join(str(off) for off, _cmd in lost[:5])
            return C, (f"; it runs over the index checkpoint's record ({ev.last_update[0]}:{ev.last_update[1]}), "
                       f"and the broker's replay at start no longer reaches the record(s) written after it there "
                       f"(offsets {offs}{' ...' if len(lost) > 5 else ''}), whose loss changes what it delivers"), \
                {"unreached": [off for off, _cmd in lost], "read": True}
        live = live_in(ev, f.id, first, last)
        if live:
            buf = self.buf(f)
            bad = [(k, m, why) for k, m in live if (why := read_failure(buf, m, ev.openwire_version))]
            for _k, m in live:
                self.checked.add((m.file_id, m.offset))
            if bad or not intact(buf, f.id, live, first):
                ids = [m.message_id for _k, m, _w in bad] or [m.message_id for _k, m in live]
                why = f": {bad[0][2]}" if bad else ": the batch checksum shows their bytes changed"
                return C, (f"; the index's live message(s) {', '.join(ids[:5])}"
                           f"{' ...' if len(ids) > 5 else ''} are read from it at dispatch{why}"), \
                    {"liveMessages": ids, "read": True}
        self.latent.append((f.id, first, last))
        hit = [name for name, fid, off in ev.checkpoint if fid == f.id and first <= off <= last]
        what = (f"; the broker cannot read the {' and '.join(hit)} record page 0 names and replays the whole "
                "journal on top of the index at start") if hit else ""
        sev = C if self.strict else W
        note = ("; latent: " + ("the broker runs with checkForCorruptJournalFiles=true and refuses to start on it"
                                if self.strict else "no live message of the index is damaged: the broker with this "
                                "index delivers what it did, the loss happens only if the index is rebuilt from "
                                "the journal") + what)
        return sev, note, {"latent": True, "read": False}


def _live_reads(d: DirResult, ev, judge: _Judge, findings: list[Finding]) -> None:
    """Every live message of the index, read as the broker reads it at dispatch (outside damaged batches,
    which the judge read already): a read that fails or finds another message stops the broker or loses one
    (CRITICAL). OpenWire bytes amqtool cannot decode in a batch whose checksum holds were written so by the
    broker: ``kahadb-bad-message``, a WARNING, as for the replay's live messages without an index."""
    if ev is None:
        return
    from amqtool.formats.kahadb.openwire import decode_message

    bad, undecoded, elsewhere = [], [], []
    for fid, lst in ev.live.items():
        f = d.file(fid)
        if f is None:
            # (an order-index entry whose location names a file the locationIndex does not: the broker starts,
            # then its read at dispatch fails: Journal.getDataFile)
            bad.extend((key, m, f"db-{fid}.log does not exist") for key, m in lst)
            continue
        buf = judge.buf(f)
        for key, m in lst:
            if (fid, m.offset) in judge.checked:
                continue
            judge.checked.add((fid, m.offset))
            why, add = read_message(buf, m, ev.openwire_version, openwire=False)
            if why:
                bad.append((key, m, why))
                continue
            if add.destination is not None and add.destination.key != key and key not in d.replay.destinations:
                elsewhere.append((key, m, add.destination.key))
            try:
                decode_message(add.message, ev.openwire_version)
            except FormatError as err:
                undecoded.append((key, m, err.message))
    judge.close()
    bad = _damaged_entries(d, ev, bad, findings)
    for key, m, why in bad[:20]:
        findings.append(Finding(C, "kahadb-unreadable-live-message", f"live message {m.message_id} of "
                                f"{qualified(key)}: the broker's read at dispatch fails ({why}); it stops there",
                                _log(d, m.file_id), m.offset, {"destination": key, "messageId": m.message_id}))
    if len(bad) > 20:
        findings.append(Finding(C, "kahadb-unreadable-live-message", f"{len(bad) - 20} more live message(s) the "
                                "broker cannot read", str(d.directory), None, {"more": len(bad) - 20}))
    for key, m, why in undecoded[:20]:
        findings.append(Finding(W, "kahadb-bad-message", f"live message {m.message_id} on {key}: {why}",
                                _log(d, m.file_id), m.offset))
    _renamed_destinations(d, elsewhere, findings)


def _renamed_destinations(d: DirResult, elsewhere: list, findings: list[Finding]) -> None:
    """Index destinations whose name db.data damaged: ``elsewhere`` holds ``(index destination key, entry, the
    destination key of the ADD record at the entry's Location)`` for the live entries filed under a destination
    no journal record names. The broker writes each order-index entry from the ADD that names its destination
    (``updateIndex(KahaAddMessageCommand)``: ``getStoredDestination(command.getDestination())``), and recovers a
    destination by the key of the index's destinations B-tree (``MessageDatabase.loadStoredDestination``): its
    messages go to consumers of a destination no producer sent to, and the acknowledgements replayed after the
    checkpoint, which name the real one, do not find them (found on a hold-out store of the real 5.17.2 broker:
    one flipped bit in a destination name, 'fx.k1.q' read as 'dx.k1.q', gave back 7 acknowledged messages, and
    verify said WARNING). A destination the journal names too is left alone: a damaged destination field in an
    ADD record is the journal's damage, which the broker does not read at dispatch."""
    by_key: dict = {}
    for key, m, real in elsewhere:
        by_key.setdefault(key, []).append((m, real))
    for key, entries in sorted(by_key.items()):
        reals = sorted({real for _m, real in entries})
        ids = [x.message_id for x, _r in entries]
        findings.append(Finding(C, "kahadb-index-destination-damaged",
                                f"the index files {len(entries)} live message(s) ({_first_five(ids)}) under "
                                f"{qualified(key)}, a destination no journal record names, while their records "
                                f"were sent to {', '.join(qualified(r) for r in reals[:3])}: the destination's name in "
                                "db.data is damaged; the broker delivers them to consumers of the damaged name, and "
                                "acknowledgements replayed after the checkpoint do not find them",
                                str(d.directory / "db.data"), None,
                                {"destination": key, "journalDestinations": reals[:10], "messages": len(entries),
                                 "messageIds": ids[:100]}))


def _damaged_entries(d: DirResult, ev, bad: list, findings: list[Finding]) -> list:
    """Of the reads that found another message than the index names, those where the index's own entry is
    what is damaged (a WARNING, ``kahadb-index-entry-damaged``): the record holds the message the journal
    replays live at that very location, no other entry of the index names it, and the id the entry gives
    is nowhere in the journal, or is a live message that an entry of its own holds at its own location (a
    flipped digit made one sequence number's id another's). The broker reads that record and delivers it
    right (the order index's id string is not what it delivers: the cursor takes the message's own id, and
    acknowledgements find the entry through the messageIdIndex). So is an entry whose sequence the index's
    messageIdIndex gives to the id the record holds (indexed.acked_names): that separate B-tree names the
    message the location holds, and only the entry's own id string disagrees. The others are returned (files
    swapped, locations damaged: CRITICAL).

    All of it is judged within the entry's own destination: a message the broker copies to several
    destinations keeps its id in each (a virtual topic's consumer queues, composite destinations: each copy is
    an ADD of its own, ``KahaDBStore.addMessage`` per destination), so another destination's live entry or
    record of that id says nothing about this one."""
    at = {}
    for dest, st in d.replay.destinations.items():
        for mid, m in st.messages.items():
            at[dest, mid] = (m.file_id, m.offset)
    names = {(key, m.message_id) for lst in ev.live.values() for key, m in lst}
    own = {(key, m.message_id, m.file_id, m.offset) for lst in ev.live.values() for key, m in lst}
    out = []
    by_index = None
    for key, m, why in bad:
        got = why.split(" holds message ", 1)[1].split(", not ", 1)[0] if " holds message " in why else None
        named = at.get((key, m.message_id))
        if got is not None and by_index is None:
            by_index = acked_names(d.directory)
        if got is not None and (key, got) not in names and (
                at.get((key, got)) == (m.file_id, m.offset) and (named is None or (key, m.message_id, *named) in own)
                or by_index.get(key, {}).get(m.seq) == got):
            findings.append(Finding(W, "kahadb-index-entry-damaged", f"the order index of {qualified(key)} names "
                                    f"{m.message_id!r} at {m.file_id}:{m.offset}, where the journal holds {got}: "
                                    "the entry's id is damaged; the broker delivers the record's message",
                                    str(d.directory / "db.data"), None, {"destination": key, "index": m.message_id,
                                                                         "journal": got}))
        else:
            out.append((key, m, why))
    return out


def _full_replay_stops(d: DirResult, judge: _Judge) -> str:
    """Where the broker's replay of the whole journal stops on a record it cannot load (replay_walk.py), or
    ''."""
    from amqtool.engines.kahadb.replay_walk import full_replay_failure

    try:
        return full_replay_failure([f.id for f in d.files],
                                   lambda fid: b"" if d.file(fid).size == 0 else judge.buf(d.file(fid)))
    finally:
        judge.close()


def _recovery_replay(d: DirResult, judge: _Judge) -> tuple[list, str]:
    """What the broker's replay from its index checkpoint at start loads, and where it stops on a record its walk
    cannot load (replay_walk.replay: a damaged lastUpdate sends it into the middle of a record), or ''."""
    from amqtool.engines.kahadb.replay_walk import replay

    lu = d.index.view.metadata.last_update
    try:
        return replay([f.id for f in d.files if f.size], lambda fid: judge.buf(d.file(fid)),
                      (lu.log_id, lu.offset) if lu is not None else None)
    finally:
        judge.close()


def _replay_skips(d: DirResult, walked: list, findings: list[Finding]) -> None:
    """The replay from a ``lastUpdate`` that points inside a record steps over records after it
    (replay_skips.py): CRITICAL when that changes which messages are live."""
    meta = d.index.view.metadata
    lu = meta.last_update
    if lu is None:
        return
    anchor = max(((x.log_id, x.offset) for x in (meta.producer_audit, meta.ack_map) if x is not None), default=None)
    from amqtool.engines.kahadb.unhanded import selector_rejects

    count, changed = skipped_effect(d, (lu.log_id, lu.offset), walked, anchor,
                                    selector_rejects(d, meta.openwire_version))
    if changed:
        names = ", ".join(f"{mid} on {qualified(k)}" for k, mid in changed[:3]) + (" ..." if len(changed) > 3 else "")
        findings.append(Finding(C, "kahadb-replay-skips", f"the broker's replay from the index checkpoint {lu} "
                                f"steps over {count} record(s) after the checkpoint (Journal.getNextLocation reads "
                                f"a header inside a record there, or past the journal's end, or an ack compaction "
                                f"marker moves it past the rest of a file a later run wrote on): {names} "
                                f"({len(changed)} message(s)) end up otherwise than the journal says: sends lost "
                                "or acknowledged messages back", str(d.directory / "db.data"), None,
                                {"skipped": count, "messages": len(changed),
                                 "messageIds": [mid for _k, mid in changed[:100]]}))


def _index_against_journal(d: DirResult, ev, judge: _Judge, findings: list[Finding]) -> None:
    """The index's live state against the journal's replay, up to the checkpoint.

    What the index no longer holds but the replay keeps (``d.rebuild_extra``, taken out of the replay) and
    what the index holds but the replay does not are what a rebuild of the index would bring back or lose.
    With damage in the journal that explains it, that is the latent part of the damage (a WARNING naming
    them). With an intact journal the index itself is wrong, and the broker delivers from it: CRITICAL."""
    if ev is None:
        return
    extra = d.rebuild_extra
    replays = checkpoint_failures(d)
    if replays:
        back = sorted({mid for _k, _s, mid, _l in extra})
        stops = _full_replay_stops(d, judge)
        sev = C if back or stops else W
        findings.append(Finding(sev, "kahadb-checkpoint-unreadable", "the broker cannot load the "
                                f"{'; '.join(replays)} page 0 names and replays the whole journal on top of its "
                                "index at start" + (f": that brings back {len(back)} message(s) the index knows "
                                                    f"acknowledged ({', '.join(back[:5])}"
                                                    f"{' ...' if len(back) > 5 else ''})" if back else "") +
                                (f"; that replay stops at {stops}: the broker does not start" if stops else ""),
                                str(d.directory / "db.data"), None, {"bringBack": len(back),
                                                                     "rebuildWouldBringBack": back[:100],
                                                                     **({"replayStops": stops} if stops else {})}))
    else:
        walked, stops = _recovery_replay(d, judge)
        if stops:
            lu = d.index.view.metadata.last_update
            findings.append(Finding(C, "kahadb-recovery-stops", "the broker's replay of the journal from the "
                                    f"index checkpoint {lu or '(none yet: from the start)'} stops at {stops}: "
                                    "the broker does not start (MessageDatabase.recover)",
                                    str(d.directory / "db.data"), None, {"replayStops": stops}))
        elif not d.is_tx_store:
            _replay_skips(d, walked, findings)
    if d.records_after_last_update and not d.is_tx_store:
        lu = d.index.view.metadata.last_update
        early = acks_before_sends(d, (lu.log_id, lu.offset) if lu is not None else None)
        if early:
            fid, off, _key, _mid = early[0]
            findings.append(Finding(C, "kahadb-ack-before-send", f"{len(early)} acknowledgement(s) come before the "
                                    "send of their message, which lies after the index checkpoint, in the journal's "
                                    "file order ("
                                    + ", ".join(mid for _f, _o, _k, mid in early[:3]) + (" ..." if len(early) > 3
                                                                                        else "") +
                                    "): no broker writes that (journal files swapped or renamed?); the broker's "
                                    "replay adds each message after its ack (which found nothing yet, or took it out "
                                    "of the index before the checkpoint), and the message comes back",
                                    _log(d, fid), off, {"count": len(early),
                                                        "messageIds": [mid for _f, _o, _k, mid in early[:100]]}))
    lose = []
    subs = []  # (destination, sub key, what differs) for the durable subscriptions
    passed = []  # (destination, sub key, [message id]) the index passed over after the checkpoint
    if d.records_after_last_update == 0 or judge.forwarded_only:
        for key, dest in d.indexed.items():
            st = d.replay.destinations.get(key)
            live = st.messages if st else {}
            locs = {(x.file_id, x.offset) for x in live.values()}
            lose.extend((key, m.message_id, (m.file_id, m.offset)) for m in dest.messages
                        if m.message_id not in live and (m.file_id, m.offset) not in locs)
        subs = _subscriptions_against_journal(d)
    elif d.index.view.metadata.last_update is not None:
        # killed: the replay after the checkpoint redoes the sends the index already holds (index_ahead.py)
        lu = d.index.view.metadata.last_update
        passed = passed_subscriptions(d, (lu.log_id, lu.offset))
        subs = absent_subscriptions(d, (lu.log_id, lu.offset))
    extra, lose = _skipped_by_rebuild_only(d, extra, lose, findings)
    if not extra and not lose and not subs and not passed:
        return
    # (what only the journal's file order explains: each message a rebuild brings back has an ack before its
    # send in file order, which no broker writes -- files swapped or renamed -- so the journal is the damaged
    # side, and the broker with this index delivers what it did)
    early = {(k, mid) for _f, _o, k, mid in acks_before_sends(d, None)} if extra and not lose and not subs \
        and not passed else set()
    misordered = bool(early) and all((k, mid) in early for k, _s, mid, _l in extra)
    back = sorted({mid for _k, _s, mid, _l in extra})
    details = {"rebuildWouldBringBack": back[:100], "rebuildWouldLose": [x[1] for x in lose[:100]],
               "bringBack": len(back), "lose": len(lose)}
    parts = []
    if back:
        parts.append(f"bring back {len(back)} message(s) the index knows acknowledged ({_first_five(back)})")
    if lose:
        parts.append(f"lose {len(lose)} live message(s) ({_first_five([x[1] for x in lose])})")
    if subs:
        details["subscriptions"] = [{"destination": k, "subscription": sk, "index": a, "journal": b}
                                    for k, sk, a, b in subs[:100]]
        parts.append(f"give {len(subs)} durable subscription(s) other pending messages than the index does ("
                     + ", ".join(f"{sk} on {qualified(k)}: {a} in the index, {b} in the journal"
                                 for k, sk, a, b in subs[:3]) + (" ..." if len(subs) > 3 else "") + ")")
    if passed:
        ids = [mid for _k, _sk, mids in passed for mid in mids]
        details["passedSubscriptions"] = [{"destination": k, "subscription": sk, "messageIds": mids[:100]}
                                          for k, sk, mids in passed[:100]]
        parts.append(f"give back {len(ids)} message(s) sent after the checkpoint to durable subscription(s) "
                     "whose cursor in the index passed over them, which no ack of theirs took and the broker's "
                     "replay (a redo of a send the index holds) does not hand back ("
                     + ", ".join(f"{sk} on {qualified(k)}" for k, sk, _m in passed[:3])
                     + (" ..." if len(passed) > 3 else "") + f": {_first_five(ids)})")
    what = " and ".join(parts)
    db = str(d.directory / "db.data")
    if judge.damaged or misordered or any(f.code == "kahadb-missing-journal-file" for f in findings):
        why = ("; each of them has an acknowledgement before its send in the journal's file order, which no "
               "broker writes (journal files swapped or renamed): the journal is damaged, not the index"
               if misordered else "")
        findings.append(Finding(W, "kahadb-rebuild-would-differ", f"a rebuild of the index from the journal "
                                f"would {what}; the broker with this index does not{why}", db, None, details))
    else:
        findings.append(Finding(C, "kahadb-index-journal-mismatch", f"the journal is intact but the index "
                                f"differs from it: a rebuild would {what}; the broker delivers from the index",
                                db, None, details))


def _skipped_by_rebuild_only(d: DirResult, extra: list, lose: list, findings: list[Finding]) -> tuple[list, list]:
    """``extra`` and ``lose`` of :func:`_index_against_journal` without what only the skip of an ack compaction
    file a later run wrote on explains (rebuild_skips.py), with an INFO finding naming it.

    The running broker indexed those records as it wrote them (the marker's skip is a replay's,
    ``process(KahaRewrittenDataFileCommand)``), so an index that holds their sends, or not the messages their
    acks took, is the broker's own, not a wrong index: the broker with it loses nothing. Only a rebuild would
    (kahadb-rebuild-skips-writes, when the index is gone). A real 5.17.2 broker writes such a store whenever it
    stops with its compaction file the newest and starts again (the kl52 hold-out r5-archive-gc-kill). The
    loader put the queue messages back into the replay already (load._restore_skipped: ``d.skip_restored``)."""
    if d.replay.skip_file is None or not d.replay.skipped_records or not (extra or lose or d.skip_restored):
        return extra, lose
    lost, back, files = rebuild_skips(d)
    lost = sorted(set(lost) | set(d.skip_restored))
    lost_set, back_set = set(lost), set(back)
    kept_lose = [x for x in lose if (x[0], x[1]) not in lost_set]
    kept_extra = [x for x in extra if (x[0], x[2]) not in back_set]
    gone = len(d.skip_restored) + len(lose) - len(kept_lose) + len(extra) - len(kept_extra)
    if gone:
        if not files:
            files = [d.replay.skip_file]
        names = ", ".join(f"db-{fid}.log" for fid in files)
        findings.append(Finding(I, "kahadb-rebuild-would-skip", f"{gone} message(s) the index holds otherwise than "
                                "a replay of the journal: a later run wrote on after the forwarded acks of ack "
                                f"compaction file(s) {names}, which a replay skips while the source file is there; "
                                "the broker delivers from its index and loses nothing (a rebuild of the index would)",
                                _log(d, files[0]) if files else str(d.directory / "db.data"), None,
                                {"rebuildWouldLose": [m for _k, m in lost[:100]],
                                 "rebuildWouldBringBack": [m for _k, m in back[:100]]}))
    return kept_extra, kept_lose


def _subscriptions_against_journal(d: DirResult) -> list[tuple]:
    """The durable subscriptions of the index against the journal's replay (reconciled, up to the
    checkpoint): ``(destination key, sub key, pending in the index, pending in the journal)`` for every
    subscription only one of them holds, and every one whose index cursor leaves pending a message the
    journal's replay has no subscription waiting for (acknowledged, or never its own).

    The broker delivers a durable subscription's messages by its key in the index (``KahaDBStore
    .recoverSubscription``: ``subscriptions``/``subscriptionAcks`` under the client id and subscription
    name); a key that differs from the one its SUBSCRIPTION record names leaves the real subscriber with
    nothing, and a cursor behind the subscription's acks redelivers. The opposite difference, the journal
    waiting for a message the index's cursor has passed, is what :func:`reconcile` took out already
    (``rebuild_extra``)."""
    out = []
    for key in sorted(set(d.indexed) | set(d.replay.destinations)):
        dest = d.indexed.get(key)
        st = d.replay.destinations.get(key)
        index_subs = set(dest.subscriptions) if dest is not None else set()
        journal_subs = set(st.subscriptions) if st is not None else set()
        waiting: dict = {}
        for m in (st.messages.values() if st is not None else ()):
            for sk in m.waiting or ():
                waiting.setdefault(sk, set()).add((m.file_id, m.offset))
        for sk in sorted(index_subs | journal_subs):
            in_index = [(m.file_id, m.offset) for m in dest.pending(sk)] if sk in index_subs else None
            in_journal = waiting.get(sk, set()) if sk in journal_subs else None
            if in_index is None or in_journal is None:
                out.append((key, sk, "absent" if in_index is None else len(in_index),
                            "absent" if in_journal is None else len(in_journal)))
            elif any(loc not in in_journal for loc in in_index):
                out.append((key, sk, len(in_index), len(in_journal)))
    return out


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


def strict_settings(store) -> bool:
    """The broker refuses to start on any corrupted range: ``checkForCorruptJournalFiles=true`` in the
    activemq.xml given (``--activemq-xml``); the broker's default, false, otherwise."""
    return str(getattr(store, "settings", {}).get("checkForCorruptJournalFiles", "false")).strip().lower() == "true"


def judge_results(store, results: list[DirResult], decode: bool = True) -> list[Finding]:
    """The findings of loaded directories: what ``verify`` reports and every command that judges a KahaDB
    store (print's verdict, create --from) takes its verdict from."""
    findings: list[Finding] = lock_findings(store)
    strict = strict_settings(store)
    in_doubt = any(t.state == "prepared" for c in results if not c.is_tx_store for t in c.open_transactions)
    for d in results:
        checked = verify_directory(d, findings, strict=strict, in_doubt=in_doubt,
                                   siblings=tuple(x for x in results if x is not d))
        # Decode the OpenWire bytes of live messages (those the index did not name were not read yet): what a
        # consumer would get must be readable.
        bad = 0
        for key, st in d.replay.destinations.items() if decode else ():
            for m in _decode_failures(d, st, checked):
                bad += 1
                if bad <= 20:
                    findings.append(Finding(W, "kahadb-bad-message", f"live message {m[0]} on {key}: {m[1]}",
                                            _log(d, m[2]), m[3]))
    _not_a_store(store, results, findings)
    return findings


def _not_a_store(store, results: list[DirResult], findings: list[Finding]) -> None:
    """No journal file holds a single batch and no directory has an index: what is here is not a KahaDB
    store (random bytes named ``db-N.log``), which is UNKNOWN ("could not check": the man page's "not a
    store"), as for an Artemis directory without one journal header. The ``kahadb-not-a-journal`` findings are
    folded into one ``not-a-store`` finding naming the files. With a ``db.data`` beside them the files were a
    store's journal: their loss stays CRITICAL."""
    if not results or any(s.batches for d in results for s in d.scans.values()):
        return
    if any(d.index is not None and d.index.present for d in results):
        return
    junk = [f for f in findings if f.code == "kahadb-not-a-journal"]
    if not junk:
        return
    findings[:] = [f for f in findings if f.code not in ("kahadb-not-a-journal", "kahadb-no-index")]
    findings.append(Finding(U, "not-a-store", f"no file here holds a KahaDB batch and there is no db.data "
                            f"({len(junk)} file(s) named like journal files, first {Path(junk[0].path).name}): "
                            "not a store", str(store.root), None, {"files": [f.path for f in junk]}))


def verify_store(store, *, progress=None, results=None, decode: bool = True):
    """Verify every journal batch and record, the index and their consistency.

    Returns ``(findings, summary)``; summary: ``stores`` (per directory: files, records, bytes, batches,
    live messages per destination), and totals ``files``, ``records``, ``bytes``, ``live``. ``results``: a
    :func:`load_store` of ``store`` already made (the export judges the load it exports, so the journal is
    read once); ``decode=False`` leaves out the decoding of every live message (the export decodes them
    itself and lists those that do not decode).
    """
    if results is None:
        results = load_store(store, progress=progress)
    findings = judge_results(store, results, decode=decode)
    summary = {"kind": "mkahadb" if store.multi else "kahadb", "root": str(store.root), "stores": [],
               "files": 0, "records": 0, "bytes": 0, "live": 0}
    for d in results:
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


def _decode_failures(d: DirResult, st, checked: set = frozenset()):
    """(message id, error, file id, offset) for live messages whose payload does not decode (those at a
    location in ``checked`` were decoded already)."""
    from amqtool.engines.kahadb.document import iter_live_decoded

    todo = [m for m in st.messages.values() if (m.file_id, m.offset) not in checked]
    for m, msg, err in iter_live_decoded(d, todo):
        if err is not None:
            yield m.message_id, err, m.file_id, m.offset
