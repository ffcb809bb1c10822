"""``amqtool create DEST --from KAHADB`` (or ``--from EXPORT.xml``): a new Artemis data directory holding a
Classic store's live state (or a ``data exp`` document's messages, :mod:`.xmlimport`).

What is written, under ``DEST`` (the layout ``artemis create`` gives an instance, so ``DEST`` can be used as
the broker instance's data parent, or ``DEST/data`` copied to a broker's ``data`` directory):

* ``data/bindings``: a fresh bindings journal (2 files of 1 MiB, as ``JournalStorageManager`` fixes) with one
  ADDRESS_BINDING_RECORD (44) per address and one QUEUE_BINDING_RECORD (21) per queue, each in its own
  committed transaction as ``addAddressBinding``/``addQueueBinding`` + ``commitBindings`` write them, and the
  ID generator's checkpoint (ID_COUNTER_RECORD 24, ``BatchingIDGenerator.persistCurrentID``) above every id
  used, so the broker's next ids follow them;
* ``data/journal``: per message one ADD_MESSAGE_PROTOCOL (45, core persister) record and one ADD_REF (32)
  update per queue, an UPDATE_DELIVERY_COUNT (34) per queue when the OpenWire redelivery counter is not 0
  (``toAMQMessage`` gives it back as ``deliveryCount - 1`` after the next delivery); a message whose core body
  is larger than ``--large-message-threshold`` (default 100 KiB, ``min-large-message-size``) is a large
  message: ADD_LARGE_MESSAGE (30) with ``_AMQ_LARGE_SIZE`` and its body in ``data/large-messages/<id>.msg``;
  messages of prepared XA transactions (only with ``include_prepared``) as ADD_TX/UPDATE_TX records and a
  PREPARE carrying the Xid (``XidCodecSupport``), in doubt as they were;
* ``data/paging``: empty;
* ``broker.xml.snippet``: the ``<addresses>`` element declaring the same addresses and queues, to merge into
  the broker's ``broker.xml``; ``migration.json``: the plan's summary (what was migrated, what was not, why).

Everything is written under a temporary sibling directory, fsynced, then renamed into place: ``DEST`` appears
complete or not at all. ``DEST`` must not exist or be empty. The source is only read, and refused while a
Classic broker holds its ``lock``.
"""
from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Callable
from xml.sax.saxutils import quoteattr

from amqtool.engines.artemis.create import resolve_messages_settings
from amqtool.engines.migrate.convert import LARGE_SIZE, MULTICAST
from amqtool.engines.migrate.plan import MigrationPlan
from amqtool.errors import DataAtRiskError, UsageError
from amqtool.formats.artemis import primitives as P
from amqtool.formats.artemis.message import LargeMessage
from amqtool.formats.artemis.userrecords import (
    AddRefRecord,
    AddressBindingRecord,
    DeliveryCountRecord,
    IdCounterRecord,
    JournalRecordIds as R,
    QueueBindingRecord,
)
from amqtool.store import atomic, locks, output
from amqtool.formats.artemis.records import ADD, UPDATE
from amqtool.store.journal_writer import JournalWriter
from amqtool.store.layout import BINDINGS, MESSAGES

DEFAULT_LARGE_THRESHOLD = 100 * 1024  # min-large-message-size default (ActiveMQClient.DEFAULT_MIN_LARGE_MESSAGE_SIZE)
DATA_DIRS = ("bindings", "journal", "paging", "large-messages")
RECORD_OVERHEAD = 64  # room left in a journal file around one ADD record (framing, alignment)


def open_source(source: str | os.PathLike, *, force: bool = False):
    """The detected KahaDB store at ``source``; UsageError for anything else, StoreLockedError while a
    Classic broker holds it."""
    from amqtool.store.layout import detect

    store = detect(source)
    if store.kind == "replicated-leveldb":
        raise UsageError("--from needs one LevelDB store: give the directory of the node that holds the latest "
                         "log position ('amqtool verify' on the replicas says which)", path=str(source))
    if store.kind not in ("kahadb", "leveldb"):
        raise UsageError(f"--from needs an ActiveMQ Classic KahaDB, mKahaDB or LevelDB store (found: {store.kind})",
                         path=str(source))
    # KahaDB and LevelDB (LockableServiceSupport's SharedFileLocker) lock <directory>/lock
    locks.ensure_not_locked([Path(store.root) / "lock"] + [Path(p) / "lock" for p in store.directories],
                            force=force)
    return store


def binding_records(plan: MigrationPlan) -> list[tuple[int, int, bytes, int]]:
    """``(record id, user record type, body, bindings transaction id)`` of every address and queue, in the
    order they are written (an address, then its queues)."""
    out = []
    for a in plan.addresses.values():
        rec = AddressBindingRecord(name=a.name, routing_types=a.routing_types, auto_created=False, internal=False)
        out.append((a.id, R.ADDRESS_BINDING_RECORD, rec.encode(), a.id + 1))
        for qid in a.queues:
            q = plan.queues[qid]
            rec = QueueBindingRecord.build(record_id=qid, name=q.name, address=q.address,
                                           routing_type=q.routing_type, filter=q.filter)
            out.append((qid, R.QUEUE_BINDING_RECORD, rec.encode(), qid + 1))
    return out


def message_record(core, threshold: int, file_size: int | None = None) -> tuple[int, bytes, bytes | None]:
    """``(user record type, record body, large body or None)``: a core message record (45), or a large
    message header (30) when the body passes ``threshold`` or the record would not fit a journal file."""
    body = core.body
    if len(body) <= threshold:
        rec = core.encode()
        if file_size is None or len(rec) + RECORD_OVERHEAD <= file_size:
            return R.ADD_MESSAGE_PROTOCOL, rec, None
    props = list(core.headers.properties.entries or ()) + [P.Property(LARGE_SIZE, P.LONG, len(body))]
    headers = replace(core.headers, properties=P.TypedProperties.of(props))
    return R.ADD_LARGE_MESSAGE, LargeMessage(headers).encode(), body


def broker_xml_snippet(plan: MigrationPlan) -> str:
    """The ``<addresses>`` element of ``broker.xml`` (``<core>``) declaring the plan's addresses and queues."""
    lines = ["<!-- amqtool create --from: the addresses and queues of the migrated store;",
             "     merge into <core> of etc/broker.xml -->", "<addresses>"]
    for a in plan.addresses.values():
        lines.append(f"   <address name={quoteattr(a.name)}>")
        for rt, tag in ((1, "anycast"), (MULTICAST, "multicast")):
            if rt not in a.routing_types:
                continue
            lines.append(f"      <{tag}>")
            for qid in a.queues:
                q = plan.queues[qid]
                if q.routing_type != rt:
                    continue
                if q.filter:
                    lines.append(f"         <queue name={quoteattr(q.name)}>")
                    lines.append(f"            <filter string={quoteattr(q.filter)}/>")
                    lines.append("         </queue>")
                else:
                    lines.append(f"         <queue name={quoteattr(q.name)}/>")
            lines.append(f"      </{tag}>")
        lines.append("   </address>")
    lines.append("</addresses>")
    return "\n".join(lines) + "\n"


def _write(root: Path, plan, threshold: int, file_size: int, min_files: int,
           progress: Callable[[int], None] | None) -> dict:
    data = root / "data"
    for d in DATA_DIRS:
        (data / d).mkdir(parents=True, exist_ok=True)
    kw = dict(sync="none", buffer_size=4 << 20)
    bw = JournalWriter.create(data / "bindings", BINDINGS, **kw)
    # each finished journal file starts its way to the disk at once, so the tree's fsync before the switch
    # (atomic.tree_aside) waits for the last files only; new files are allocated, not zero-filled by writes
    # (the same bytes: the tree is fsynced whole before it is switched in)
    mw = JournalWriter.create(data / "journal", MESSAGES, file_size=file_size, min_files=min_files, writeback=True,
                              write_fill=False, **kw)
    counts = {"messageRecords": 0, "largeMessages": 0, "largeBytes": 0, "deliveryCounts": 0,
              "preparedTransactions": 0, "preparedMessages": 0}
    try:
        for rid, utype, body, tx in binding_records(plan):
            bw.append_add_tx(tx, rid, utype, body)
            bw.append_commit(tx)
        txs: dict[tuple, int] = {}
        xids: dict[int, object] = {}
        large_dir = data / "large-messages"
        add_refs: dict[int, bytes] = {}  # queue id -> its ADD_REF body (the same for every message)
        pending: list[tuple] = []  # committed messages' records, appended in bulk (JournalWriter.append_records)
        for pm in plan.messages(records=(threshold, file_size)):
            mid = pm.message_id
            if pm.record is not None:  # converted by the C path (engines.migrate.records)
                utype, rec, large = R.ADD_MESSAGE_PROTOCOL, pm.record, None
            else:
                utype, rec, large = message_record(pm.core, threshold, file_size)
            if large is not None:
                with open(large_dir / f"{mid}.msg", "wb") as fh:
                    fh.write(large)
                counts["largeMessages"] += 1
                counts["largeBytes"] += len(large)
            if pm.state == "committed":
                pending.append((ADD, mid, utype, rec))
                for q in pm.queue_ids:
                    ref = add_refs.get(q)
                    if ref is None:
                        ref = add_refs[q] = AddRefRecord(queue_id=q).encode()
                    pending.append((UPDATE, mid, R.ADD_REF, ref))
                    if pm.redelivery > 0:
                        pending.append((UPDATE, mid, R.UPDATE_DELIVERY_COUNT,
                                        DeliveryCountRecord(queue_id=q, count=pm.redelivery).encode()))
                        counts["deliveryCounts"] += 1
                if len(pending) >= 1024:
                    mw.append_records(pending)
                    pending.clear()
            else:
                mw.append_records(pending)
                pending.clear()
                key = pm.xid.key
                if key not in txs:
                    txs[key] = plan._id()
                    xids[txs[key]] = pm.xid
                tx = txs[key]
                mw.append_add_tx(tx, mid, utype, rec)
                for q in pm.queue_ids:
                    mw.append_update_tx(tx, mid, R.ADD_REF, AddRefRecord(queue_id=q).encode())
                counts["preparedMessages"] += 1
            counts["messageRecords"] += 1
            if progress is not None:
                progress(len(rec) + (len(large) if large is not None else 0))
        mw.append_records(pending)
        for tx, xid in xids.items():
            x = P.Xid(format_id=xid.format_id, branch_qualifier=xid.branch or b"",
                      global_transaction_id=xid.global_id or b"")
            mw.append_prepare(tx, x.encode())
            counts["preparedTransactions"] += 1
        cid = plan._id()  # persistCurrentID: the generator's high-water mark, above every id written
        bw.append_add(cid, R.ID_COUNTER_RECORD, IdCounterRecord(id=cid).encode())
        counts["nextId"] = cid + 1
    finally:
        bw.close()
        mw.close()
    return counts


def create_from(dest: str | os.PathLike, source: str | os.PathLike, *,
                large_threshold: int = DEFAULT_LARGE_THRESHOLD, include_prepared: bool = False,
                dry_run: bool = False, file_size: int | None = None, min_files: int | None = None,
                force: bool = False, salvage: bool = False,
                progress: Callable[[int], None] | None = None) -> dict:
    """Migrate the KahaDB store (or the ``data exp`` XML file) at ``source`` into a new Artemis store at
    ``dest`` (see the module docstring); with ``dry_run`` nothing is written. Returns the document
    ``--format json`` prints: the plan summary (:meth:`PlanBase.summary`), plus ``dest``, ``dryRun``,
    ``largeMessageThreshold`` and the written ``counts``.

    A KahaDB source that verify calls CRITICAL is refused (:class:`DataAtRiskError`, nothing written) unless
    ``salvage``: then what survives is migrated and what is left out is listed (``notConverted``). A dry run
    is not refused; its document carries ``sourceVerdict``."""
    from amqtool.gcpause import gc_paused

    with gc_paused():  # the load, the plan and the records make no reference cycles: see amqtool.gcpause
        return _create_from(dest, source, large_threshold=large_threshold, include_prepared=include_prepared,
                            dry_run=dry_run, file_size=file_size, min_files=min_files, force=force,
                            salvage=salvage, progress=progress)


def _create_from(dest, source, *, large_threshold: int, include_prepared: bool, dry_run: bool,
                 file_size: int | None, min_files: int | None, force: bool, salvage: bool,
                 progress: Callable[[int], None] | None) -> dict:
    from amqtool.engines.verdicts import left_out, refuse_unless_salvage
    from amqtool.errors import overall_verdict

    if large_threshold < 0:
        raise UsageError("--large-message-threshold must not be negative")
    fs, mf = resolve_messages_settings(file_size, min_files)
    target = Path(dest).absolute()
    if Path(source).is_file():
        from amqtool.engines.migrate.xmlimport import XmlImportPlan

        if include_prepared:
            raise UsageError("--include-prepared applies to KahaDB sources (a data exp document holds no "
                             "prepared transactions)")
        inputs = [Path(source)]
        if not dry_run:
            output.check(target, output.STORE, inputs=inputs)
        plan = XmlImportPlan(source)
    else:
        store = open_source(source, force=force)
        inputs = output.store_inputs(store, source)
        if not dry_run:
            output.check(target, output.STORE, inputs=inputs)
        from amqtool.engines.migrate.leveldb import plan_for

        plan = plan_for(store, include_prepared=include_prepared)
    findings = getattr(plan, "findings", [])
    refuse_unless_salvage(findings, salvage or dry_run, command="create --from", path=str(source))
    doc: dict = {"dest": str(target), "dryRun": dry_run, "largeMessageThreshold": large_threshold,
                 "sourceVerdict": overall_verdict(findings).name, "findings": left_out(findings)}
    if dry_run:
        large = large_bytes = 0
        for pm in plan.messages(records=(large_threshold, None)):
            if pm.body_length > large_threshold:
                large += 1
                large_bytes += pm.body_length
        doc["counts"] = {"largeMessages": large, "largeBytes": large_bytes}
        doc.update(plan.summary())
        return doc
    with output.claiming(target, inputs=inputs) as claimed:  # absent or empty, never an input; one writer
        target = claimed.path
        atomic.ensure_free_space(target.parent,
                                 int(plan.bytes_scanned * 1.2) + 2 * BINDINGS.default_file_size + mf * fs)
        with atomic.tree_aside(target) as tmp:
            counts = _write(tmp, plan, large_threshold, fs, mf, progress)
            doc["counts"] = counts
            doc.update(plan.summary())
            (tmp / "broker.xml.snippet").write_text(broker_xml_snippet(plan), encoding="utf-8")
            with open(tmp / "migration.json", "w", encoding="utf-8") as fh:
                json.dump(doc, fh, indent=1, ensure_ascii=False)
                fh.write("\n")
    return doc
