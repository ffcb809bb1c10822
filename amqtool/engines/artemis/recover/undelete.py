"""``recover --undelete`` for Artemis stores: messages that were deleted (acknowledged, purged, expired) but
whose records are still in the journal files come back as live messages on their queues in DEST.

What the broker leaves behind (artemis-journal-format.md §5): a message is an ADD of
ADD_MESSAGE_PROTOCOL (45, or 31 for old brokers) under its message id, each queue holding it an ADD_REF (32)
update carrying the queue id; consuming or purging writes an ACKNOWLEDGE_REF (33) update per queue and, when
no queue holds the message any more, a DELETE (or DELETE_TX in the consumer's or the purge's transaction:
``QueueImpl.deleteMatchingReferences`` acknowledges and deletes in transactions it commits). The load drops
every record of a deleted id, but the bytes stay until the file is reclaimed or compacted.

Here the message journal is scanned once more, file by file in load order, with the tag check off:

* a message is **recoverable** when its ADD carries the file's own tag (and, inside a transaction, that
  transaction committed), a committed DELETE of its id follows, and its id is not live. It comes back on the
  queues of its committed ADD_REFs (``--queue`` narrows them), as a new ADD of the same message id (the
  broker's id, never reused) and one ADD_REF per queue, appended to the recovered copy before it is renamed
  into place;
* a message whose ADD is only in an earlier use of a reused file (another tag: the file was compacted or
  reclaimed and reinitialised since) is **unrecoverable**: listed, never invented. So is a large message
  whose ``<id>.msg`` body is gone (the broker deletes it with the message); while the file is still there, the
  message comes back with it.

The journal holds no time of deletion. It is bounded from the messages around the delete in journal order:
at or after the newest timestamp of a message added before it, at or before the oldest timestamp of one added
after it, and never after the modification time of the file that holds it. Timestamps are the producers'
clocks, so the bounds are as good as those clocks. ``--since T`` takes deletes that may have happened at or
after T (upper bound >= T), ``--until T`` those that may have happened before T (lower bound < T).

Each core message brought back carries two properties (``CoreMessage`` headers): ``AMQTOOL_UNDELETED`` (STRING,
the ISO 8601 time of the recovery) and ``AMQTOOL_DELETED_BEFORE`` (LONG, epoch milliseconds: the upper
bound of the deletion time), plus ``AMQTOOL_DELETED_AFTER`` when a lower bound is known. AMQP messages of
persisters 3 and 5 (``AMQPMessagePersisterV2``/``V3``) get them as extra properties; other kinds come back unmarked (listed so).
"""
from __future__ import annotations

import bisect
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from amqtool.errors import Finding, FormatError, Severity, UsageError
from amqtool.formats.artemis.records import (
    ADD,
    ADD_TX,
    COMMIT,
    DELETE,
    DELETE_TX,
    ROLLBACK,
    UPDATE,
    UPDATE_TX,
    fixed_size,
)

ADD_LARGE_MESSAGE, ADD_MESSAGE, ADD_REF, ADD_MESSAGE_PROTOCOL = 30, 31, 32, 45
MESSAGE_TYPES = (ADD_MESSAGE, ADD_MESSAGE_PROTOCOL, ADD_LARGE_MESSAGE)
PROP_UNDELETED = "AMQTOOL_UNDELETED"
PROP_DELETED_BEFORE = "AMQTOOL_DELETED_BEFORE"
PROP_DELETED_AFTER = "AMQTOOL_DELETED_AFTER"


def _parse_time(text: str | None, option: str) -> int | None:
    """Epoch milliseconds of an ISO 8601 time (UTC when no zone is given)."""
    if text is None:
        return None
    try:
        t = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"{option} {text!r}: not an ISO 8601 time (e.g. 2026-11-25T14:05:00Z)") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    return int(t.timestamp() * 1000)


def _iso(millis: int | None) -> str | None:
    if millis is None:
        return None
    return datetime.fromtimestamp(millis / 1000, timezone.utc).isoformat(timespec="milliseconds")


@dataclass
class UndeleteFilter:
    queues: frozenset[str] | None = None
    since: int | None = None  # epoch millis
    until: int | None = None

    @classmethod
    def parse(cls, queues, since: str | None, until: str | None) -> "UndeleteFilter":
        f = cls(frozenset(queues) if queues else None, _parse_time(since, "--since"), _parse_time(until, "--until"))
        if f.since is not None and f.until is not None and f.since >= f.until:
            raise UsageError("--since must be before --until")
        return f


@dataclass
class _Add:
    path: Path
    offset: int  # of the body
    length: int
    utype: int
    tx: int
    seq: int
    stale: bool = False


@dataclass
class Deleted:
    """A message found deleted."""

    message_id: int
    queue_ids: list[int]
    add: _Add
    delete_file: str
    delete_offset: int
    deleted_after: int | None
    deleted_before: int | None
    queues: list[str] = field(default_factory=list)
    marked: bool = False
    reason: str | None = None  # why it is not brought back, when it is not

    def to_json(self) -> dict:
        return {"messageId": self.message_id, "queues": self.queues, "queueIds": self.queue_ids,
                "file": str(self.add.path), "offset": self.add.offset,
                "deleteFile": self.delete_file, "deleteOffset": self.delete_offset,
                "deletedAfter": _iso(self.deleted_after), "deletedBefore": _iso(self.deleted_before),
                "marked": self.marked, "recoverable": self.reason is None, "reason": self.reason}


def _timestamp(body: bytes) -> int | None:
    from amqtool.formats.artemis.message import CoreMessage, CORE_PERSISTER

    if not body or body[0] != CORE_PERSISTER:
        return None
    try:
        return CoreMessage.decode(body).headers.timestamp or None
    except FormatError:
        return None


def find_deleted(opened, live_ids: set[int], large_dir=None) -> tuple[list[Deleted], list[dict]]:
    """Scan the message journal ``opened``: the deleted messages whose records survive, and the
    unrecoverable ones (ADD only in an earlier use of a file). A large message is recoverable only while
    its ``<id>.msg`` is still in ``large_dir`` (it then comes back with DEST's copy of that file)."""
    adds: dict[int, _Add] = {}
    stale: dict[int, tuple[str, int]] = {}
    stale_refs: dict[int, set[int]] = {}
    refs: dict[int, list[tuple[int, int]]] = {}
    deletes: dict[int, tuple[str, int, int, int, int]] = {}  # id -> (file, offset, tx, seq, file mtime)
    committed: set[int] = set()
    rolled_back: set[int] = set()
    ts_seq: list[int] = []
    ts_val: list[int] = []
    seq = 0
    for fi, jf in enumerate(opened.files):
        try:
            mtime = int(os.stat(jf.path).st_mtime * 1000)
        except OSError:
            mtime = None
        tag_bytes = jf.tag.to_bytes(4, "big", signed=True)
        body_at = {t: fixed_size(t, jf.version) - 4 for t in (ADD, UPDATE, ADD_TX, UPDATE_TX)}
        for base, data, recs, _marked in opened.scan_windows(fi, check_tag=False):
            for t, off, _size, _cc, tx, rid, utype, body_len, _nrec, _extra in recs:
                own = data[off + 1:off + 5] == tag_bytes
                if not own:
                    if t in (ADD, ADD_TX) and utype in MESSAGE_TYPES:
                        stale.setdefault(rid, (str(jf.path), base + off))
                    elif t in (UPDATE, UPDATE_TX) and utype == ADD_REF and body_len >= 8:
                        b = off + body_at[t]
                        stale_refs.setdefault(rid, set()).add(int.from_bytes(data[b:b + 8], "big", signed=True))
                    continue
                seq += 1
                if t in (ADD, ADD_TX) and utype in MESSAGE_TYPES:
                    b = off + body_at[t]
                    adds[rid] = _Add(jf.path, base + b, body_len, utype, tx, seq)
                    ts = _timestamp(bytes(data[b:b + body_len])) if utype == ADD_MESSAGE_PROTOCOL else None
                    if ts is not None:
                        ts_seq.append(seq)
                        ts_val.append(ts)
                elif t in (UPDATE, UPDATE_TX) and utype == ADD_REF and body_len >= 8:
                    b = off + body_at[t]
                    refs.setdefault(rid, []).append((int.from_bytes(data[b:b + 8], "big", signed=True), tx))
                elif t in (DELETE, DELETE_TX):
                    deletes[rid] = (str(jf.path), base + off, tx if t == DELETE_TX else -1, seq, mtime)
                elif t == COMMIT:
                    committed.add(tx)
                elif t == ROLLBACK:
                    rolled_back.add(tx)

    def done(tx: int) -> bool:
        return tx == -1 or tx in committed

    # bounds: newest timestamp before, oldest after, in journal order (prefix max / suffix min)
    prefix_max: list[int] = []
    m = None
    for v in ts_val:
        m = v if m is None or v > m else m
        prefix_max.append(m)
    suffix_min = [0] * len(ts_val)
    m = None
    for i in range(len(ts_val) - 1, -1, -1):
        m = ts_val[i] if m is None or ts_val[i] < m else m
        suffix_min[i] = m

    found: list[Deleted] = []
    for rid, (dfile, doff, dtx, dseq, mtime) in deletes.items():
        add = adds.get(rid)
        if add is None or rid in live_ids or not done(dtx) or not done(add.tx):
            continue
        k = bisect.bisect_left(ts_seq, dseq)
        after = prefix_max[k - 1] if k > 0 else None
        before = suffix_min[k] if k < len(ts_seq) else None
        if mtime is not None and (before is None or mtime < before):
            before = mtime
        qids = []
        for q, tx in refs.get(rid, ()):
            if done(tx) and q not in qids:
                qids.append(q)
        d = Deleted(rid, qids, add, dfile, doff, after, before)
        if add.utype == ADD_LARGE_MESSAGE and (large_dir is None or not (Path(large_dir) / f"{rid}.msg").is_file()):
            d.reason = "large message whose .msg body file is gone (the broker deletes it with the message)"
        elif not qids:
            d.reason = "no queue reference survives"
        found.append(d)
    found.sort(key=lambda d: d.add.seq)
    unrecoverable = [{"messageId": rid, "file": f, "offset": off, "queueIds": sorted(stale_refs.get(rid, ())),
                      "reason": "deleted before the last compaction or reclaim: only an earlier use of a reused "
                                "file holds it"}
                     for rid, (f, off) in sorted(stale.items()) if rid not in live_ids and rid not in adds]
    return found, unrecoverable


def _marked_body(body: bytes, props: dict, utype: int = ADD_MESSAGE_PROTOCOL) -> tuple[bytes, bool]:
    """``body`` (a type-45 message) with ``props`` added; (body, False) when its kind cannot carry them."""
    from dataclasses import replace

    from amqtool.formats.artemis.message import (
        AMQP_PERSISTER_V2,
        AMQP_PERSISTER_V3,
        AmqpMessage,
        CoreMessage,
        LargeMessage,
        decode_persisted_message,
    )
    from amqtool.formats.artemis.primitives import LONG, STRING, Property, TypedProperties

    def merged(tp: TypedProperties | None) -> TypedProperties:
        entries = list(tp.entries or ()) if tp is not None else []
        entries = [p for p in entries if p.key not in props]
        for k, v in props.items():
            entries.append(Property(k, STRING if isinstance(v, str) else LONG, v))
        return TypedProperties.of(entries)

    try:
        msg = LargeMessage.decode(body) if utype == ADD_LARGE_MESSAGE else decode_persisted_message(body)
    except FormatError:
        return body, False
    if isinstance(msg, LargeMessage):
        return replace(msg, headers=replace(msg.headers, properties=merged(msg.headers.properties))).encode(), True
    if isinstance(msg, CoreMessage):
        msg = replace(msg, headers=replace(msg.headers, properties=merged(msg.headers.properties)))
        return msg.encode(), True
    if isinstance(msg, AmqpMessage) and msg.persister in (AMQP_PERSISTER_V2, AMQP_PERSISTER_V3):
        ext = merged(msg.extra_properties)
        msg = replace(msg, extra_properties=ext, extra_size=len(ext.encode()))
        return msg.encode(), True
    return body, False


def recover_undelete(store, req, filt: UndeleteFilter, *, progress=None):
    """``recover --undelete``: :func:`~amqtool.engines.artemis.recover.run.recover_store` plus the deleted
    messages selected by ``filt``, appended to DEST's message journal before DEST is renamed into place."""
    from amqtool.engines.artemis.recover.run import recover_store
    from amqtool.store.journal_writer import JournalWriter

    if store.messages is None:
        raise UsageError("--undelete needs the message journal")
    state: dict = {"chosen": [], "names": {}}

    def transform_for(kind: str):
        if kind == "bindings":
            def names(load):
                from amqtool.engines.artemis.recover.run import _queue_names

                state["names"] = _queue_names(load)
            return names

        def undelete(load):
            live = {r.id for r in load.live}
            for tx in load.prepared:
                live.update(r.id for r in tx.records)
            found, unrecoverable = find_deleted(load.opened, live, store.large_messages_dir)
            names = state["names"]
            chosen = []
            for d in found:
                d.queues = [names.get(q, f"<queue {q}>") for q in d.queue_ids]
                if filt.queues is not None:
                    keep = [(q, n) for q, n in zip(d.queue_ids, d.queues) if n in filt.queues]
                    if not keep:
                        continue
                    d.queue_ids, d.queues = [q for q, _ in keep], [n for _, n in keep]
                if filt.since is not None and d.deleted_before is not None and d.deleted_before < filt.since:
                    continue
                if filt.until is not None and d.deleted_after is not None and d.deleted_after >= filt.until:
                    continue
                chosen.append(d)
            state["chosen"] = chosen
            for u in unrecoverable:
                u["queues"] = [names.get(q, f"<queue {q}>") for q in u["queueIds"]]
            if filt.queues is not None:  # an earlier use's ADD_REFs say which queues held it, when they survive
                unrecoverable = [u for u in unrecoverable if set(u["queues"]) & filt.queues]
            state["unrecoverable"] = unrecoverable
            ids = {d.message_id for d in chosen if d.reason is None}
            if load.max_id in ids:
                # the compactor would keep maxID with an ADD+DELETE marker of that id, which would delete the
                # message brought back; the message's own ADD keeps maxID instead
                load.max_id = max([r.id for r in load.live] + [-1])
        return undelete

    now = datetime.now(timezone.utc)

    def before_switch(tmp: Path, preps, single: bool) -> None:
        prep = next(p for p, _n in preps if p.report.kind == "messages")
        target = tmp if single else tmp / store.messages.directory.name
        w = JournalWriter.open(target, store.messages.spec, file_size=prep.report.settings.file_size,
                               sync="close")
        try:
            for d in state["chosen"]:
                if d.reason is not None:
                    continue
                with open(d.add.path, "rb") as fh:
                    fh.seek(d.add.offset)
                    body = fh.read(d.add.length)
                props = {PROP_UNDELETED: now.isoformat(timespec="seconds")}
                if d.deleted_before is not None:
                    props[PROP_DELETED_BEFORE] = d.deleted_before
                if d.deleted_after is not None:
                    props[PROP_DELETED_AFTER] = d.deleted_after
                body, d.marked = _marked_body(body, props, d.add.utype)
                w.append_add(d.message_id, d.add.utype, body)
                for q in d.queue_ids:
                    w.append_update(d.message_id, ADD_REF, q.to_bytes(8, "big", signed=True))
        finally:
            w.close()

    report = recover_store(store, req, progress=progress, transform_for=transform_for,
                           before_switch=None if req.dry_run else before_switch)
    if filt.queues is not None:
        known = set(state["names"].values())
        unknown = sorted(filt.queues - known)
        if unknown:
            report.findings.append(Finding(
                Severity.WARNING, "queue-unknown",
                f"--queue {', '.join(unknown)}: no such queue in the bindings journal (queues: "
                f"{', '.join(sorted(known)) or 'none'})", str(store.root)))
    report.undelete = True
    report.undeleted = [d.to_json() for d in state["chosen"] if d.reason is None]
    report.unrecoverable = state.get("unrecoverable", []) + [
        {**d.to_json(), "reason": d.reason} for d in state["chosen"] if d.reason is not None]
    return report
