"""``stat`` for Artemis stores: queue, paged-address and journal rows from one load of each journal.

Mirrors, offline, what the broker's queue controls report (``QueueControlImpl.getMessageCount``,
``getScheduledCount``, ``getPersistentSize``, ``getFirstMessageAge``) and what its journal would give back
(``JournalImpl.needsCompact``/``compact``, ``Reclaimer.scan``):

* a queue's ``messages`` are its total as the broker reports it: ``QueueImpl.getMessageCount`` adds the
  page subscription's count (``pageSubscription.getMessageCount()``) to the references held in memory, so
  ``messages`` is the live references of the messages journal (refs minus acks as ``data exp`` resolves
  them: :meth:`BrokerState.live_messages`, the figures of print's ``queueSummary``) plus ``paged``; ``bytes``
  the journal record bytes of those messages (a message on two queues counts for both); ``scheduled`` the
  references whose SET_SCHEDULED_DELIVERY_TIME is still ahead of ``now`` (``ScheduledDeliveryHandlerImpl``
  holds them back); ``expired`` messages whose expiration has passed but are still stored (the broker
  expires them only when a reaper or consumer touches them, ``QueueImpl.expireReferences``);
  ``redelivered`` references with a stored delivery count above 0 (UPDATE_DELIVERY_COUNT); ``prepared`` the
  ADD_REFs of prepared XA transactions (held until the transaction manager decides); ``paged`` the paged
  messages the queue still has to consume (deliverable page entries whose cursor has not acknowledged
  them: the paging engine's queue states); ``large`` live large messages (ADD_LARGE_MESSAGE);
The per-queue figures come from native/queue_stat.c over the packed live entries (messages' times read in
place, refs/acks/delivery counts/schedules merged in C) when the extension is built, else from the Python
reference (:func:`queue_figures_reference`: a BrokerState and :func:`message_times`), the same numbers.

* an address row per page store: its page files and bytes, and the pages still holding a message some
  queue has to consume (``PageCursorProviderImpl`` cannot delete those pages);
* a journal row per journal: files, bytes, live ratio, and the bytes ``compact`` (the planned layout, as
  ``compact --dry-run`` figures it) and ``compact --reclaim-only`` (``Reclaimer`` rules) would free.
"""
from __future__ import annotations

from typing import Callable

from amqtool.errors import FormatError


def _journal_row(journal, prep, reclaim: bool) -> dict:
    """Files, bytes, live ratio and what compaction and reclaiming would free, from a compaction plan
    (:func:`plan_journal`; nothing is written)."""
    from amqtool.engines.artemis.compact.reclaim_only import reclaim_in_place
    from amqtool.engines.artemis.compact.switch import predict_after

    report = prep.report
    predict_after(prep)
    row = {"journal": journal.kind, "directory": str(journal.directory), "files": report.files_before,
           "bytes": report.bytes_before, "dataFiles": report.data_files, "liveRecords": report.live_records,
           "liveBytes": report.live_bytes, "liveRatio": round(report.live_ratio, 6),
           "compactNeeded": report.needed, "compactFrees": report.reclaimed_bytes}
    row["reclaimOnlyFrees"] = None
    if reclaim:  # the Reclaimer's counts take a pass over every record: only when asked
        reclaim_in_place(prep, dry_run=True)  # rewrites the report's after-figures: read them last
        row["reclaimOnlyFrees"] = report.reclaimed_bytes
    return row


def _refused_row(journal, opened, result, err: FormatError | None) -> dict:
    """The row of a journal compaction would refuse (``err``), or of one with no loadable file (``result``
    None): what was read, no compaction figures."""
    return {"journal": journal.kind, "directory": str(journal.directory),
            "files": len(opened.files) if opened is not None else 0,
            "bytes": opened.bytes_total() if opened is not None else 0,
            "dataFiles": len(result.start_data_files) if result is not None else 0,
            "liveRecords": len(result.live) if result is not None else 0, "liveBytes": None, "liveRatio": None,
            "compactNeeded": None, "compactFrees": None, "reclaimOnlyFrees": None,
            "note": err.message if err is not None else "no loadable journal file"}


def _journal_rows(store, report, reclaim: bool) -> list[dict]:
    """One row per journal, laid out by the compaction planner from the load ``verify`` judged (made with
    ``sources=True``: the journal is scanned once for the verdict and the figures)."""
    from amqtool.engines.artemis.compact.plan import plan_journal
    from amqtool.engines.artemis.compact.settings import settings_for

    rows = []
    broker = getattr(store, "settings", None)
    for journal in store.journals():
        load = report.loads.get(journal.kind)
        if load is None:  # no loadable file (verify's findings say why)
            rows.append(_refused_row(journal, None, None, None))
            continue
        try:
            prep = plan_journal(journal, settings_for(journal, broker), load=load)
        except FormatError as err:  # a file Artemis refuses: the live state still shows, no plan
            rows.append(_refused_row(journal, load.opened, load, err))
            continue
        rows.append(_journal_row(journal, prep, reclaim))
    return rows


def _message_times(state, mids) -> dict[int, tuple[int, int]]:
    """message id -> (timestamp, expiration), reading the message records file by file in offset order
    through bounded windows (:class:`BodyWindows`); an undecodable record gives (0, 0)."""
    from amqtool.formats.artemis.message import message_times
    from amqtool.store.journal_files import BodyWindows

    result = state.messages_result
    recs = sorted(((state.message_records[m], m) for m in mids), key=lambda x: (x[0].file_index, x[0].body_offset))
    windows = BodyWindows(result.opened)
    out = {}
    for rec, mid in recs:
        try:
            out[mid] = message_times(windows.body(rec.file_index, rec.body_offset, rec.body_len),
                                     rec.user_record_type)
        except FormatError:
            out[mid] = (0, 0)
    return out


def _paging(store, report, row_for: Callable[[int], dict]) -> list[dict]:
    """Address rows, and each queue's ``paged`` figure, from the paging part of ``verify``
    (:class:`PagingVerifier`: the page walk in C, fed the journals already loaded): the walk verify made,
    or, when verify had no reason to walk the pages (a message journal without a loadable file), one walk
    for the figures only."""
    if store.paging_dir is None:
        return []
    from amqtool.engines.artemis.paging.stores import find_page_stores
    from amqtool.engines.artemis.paging.verify import PagingVerifier

    verifier = report.pager
    if verifier is None:
        results = report.loads
        verifier = PagingVerifier(store, figures_only=True)
        if "bindings" in results:
            verifier.add_bindings(results["bindings"])
        if "messages" in results:
            verifier.add_messages(results["messages"])
        verifier.verify([])  # the findings are verify's business; stat wants the figures
    for qid, n in verifier.expected.items():
        row = row_for(qid)
        row["paged"] += n
        row["messages"] += n  # QueueImpl.getMessageCount counts the page subscription's messages too
    rows = []
    stores, _notes = find_page_stores(store.paging_dir)
    for ps in stores:
        size = 0
        for name in ps.pages.values():
            try:
                size += (ps.folder / name).stat().st_size
            except OSError:
                pass
        pages, messages = verifier.pending_by_folder.get(str(ps.folder), (0, 0))
        rows.append({"address": ps.address, "folder": str(ps.folder), "pageFiles": ps.page_files, "bytes": size,
                     "pagesToConsume": pages, "pagedMessages": messages})
    return rows


FIGURES = ("messages", "bytes", "oldest", "newest", "expired", "scheduled", "redelivered", "large")


def queue_figures_reference(bindings, messages, now: int) -> tuple[dict[int, tuple], dict[int, int]]:
    """({queue id: (messages, bytes, oldest, newest, expired, scheduled, redelivered, large)}, {queue id:
    references held by prepared transactions}) from a BrokerState of the messages journal (decode=
    DELIVERY_TYPES) and :func:`message_times`: the reference of :func:`queue_figures_native`. oldest/newest
    are 0 when no message of the queue has a timestamp."""
    from amqtool.engines.artemis.broker_state import DELIVERY_TYPES, build_broker_state

    state = build_broker_state(bindings, messages, decode=DELIVERY_TYPES)
    live = list(state.live_messages())
    times = _message_times(state, [mid for mid, _ in live])
    acc: dict[int, list[int]] = {}
    for mid, qids in live:
        rec = state.message_records[mid]
        stamp, expiration = times[mid]
        for qid in qids:
            f = acc.setdefault(qid, [0, 0, 0, 0, 0, 0, 0, 0])
            f[0] += 1
            f[1] += rec.body_len
            if stamp > 0:
                f[2] = stamp if f[2] == 0 else min(f[2], stamp)
                f[3] = max(f[3], stamp)
            f[4] += 0 < expiration <= now
            f[5] += state.scheduled.get((mid, qid), 0) > now
            f[6] += state.delivery_counts.get((mid, qid), 0) > 0
            f[7] += rec.user_record_type == 30
    prepared: dict[int, int] = {}
    for tx in state.prepared:
        for qids in tx.refs.values():
            for qid in qids:
                prepared[qid] = prepared.get(qid, 0) + 1
    return {q: tuple(f) for q, f in acc.items()}, prepared


def queue_figures_native(messages, now: int) -> tuple[dict[int, tuple], dict[int, int]] | None:
    """:func:`queue_figures_reference` in C (native/queue_stat.c) over the packed live entries, read through
    bounded windows; None without the extension or with a Python load."""
    from amqtool import native
    from amqtool.engines.artemis.load import LiveList
    from amqtool.formats.artemis.message import message_times
    from amqtool.store.journal_files import BodyWindows

    live = messages.live
    if native.stat_live is None or not isinstance(live, LiveList):
        return None
    buf, n = live.buffer, len(live)
    windows = BodyWindows(messages.opened)
    acc, handback = bytearray(), []
    sizes = [f.size for f in messages.files]
    i = 0
    while i < n:
        rec = live[i]
        base, data = windows.holding(rec.file_index, rec.body_offset, rec.body_len)
        nxt = native.stat_live(buf, i, n, data, rec.file_index, acc, base, sizes[rec.file_index], handback)
        if nxt == i:
            raise RuntimeError(f"stat_live made no progress at live entry {i}")
        i = nxt
    overrides = {}
    for idx in handback:  # messages C leaves to the Python decoders (AMQP large, unknown persisters)
        rec = live[idx]
        try:
            overrides[rec.id] = message_times(messages.body(rec), rec.user_record_type)
        except FormatError:
            overrides[rec.id] = (0, 0)
    prepared: dict[int, int] = {}
    for tx in messages.prepared:
        for rec in tx.records:
            if rec.user_record_type == 32:
                body = messages.body(rec)
                if len(body) == 8:
                    qid = int.from_bytes(body, "big", signed=True)
                    prepared[qid] = prepared.get(qid, 0) + 1
    return native.stat_queues(acc, now, overrides), prepared


def queue_rows(bindings, messages, now: int) -> tuple[dict[str, dict], Callable[[int], dict]]:
    """({queue name: row}, row_for(queue id)) from the loads of the bindings and messages journals (files or
    database tables): one row per queue name, its figures from :func:`queue_figures_native` or the reference.
    ``row_for`` adds the row of a queue id met later (paging)."""
    from amqtool.engines.artemis.broker_state import build_broker_state
    from amqtool.engines.stat import new_queue_row, see_time

    state = build_broker_state(bindings, None)  # the queues; messages: below
    by_id: dict[int, dict] = {}
    by_name: dict[str, dict] = {}

    def row_for(qid: int) -> dict:
        """One row per queue name (a queue id without a binding gets data exp's UndefinedQueue_ name)."""
        row = by_id.get(qid)
        if row is None:
            q = state.queues.get(qid)
            name = state.queue_name(qid)
            row = by_name.get(name)
            if row is None:
                row = by_name[name] = new_queue_row(name, q.address if q else None,
                                                    q.routing_type if q else None)
            by_id[qid] = row
        return row

    for qid in state.queues:
        row_for(qid)
    if messages is not None:
        figures = queue_figures_native(messages, now)
        if figures is None:
            figures = queue_figures_reference(bindings, messages, now)
        per_queue, prepared = figures
        for qid, f in per_queue.items():
            row = row_for(qid)
            for key, v in zip(FIGURES, f):
                if key in ("oldest", "newest"):
                    see_time(row, v)
                else:
                    row[key] += v
        for qid, k in prepared.items():
            row_for(qid)["prepared"] += k
    return by_name, row_for


def artemis_stat(store, now: int, progress: Callable[[int], None] | None = None, reclaim: bool = False) -> dict:
    """The stat document's rows for an Artemis store (see the module docstring). The verdict is verify's
    (:func:`amqtool.engines.artemis.verify.verify_store`, the one judge: :mod:`amqtool.engines.verdicts`), on
    the very loads the rows are counted from."""
    import contextlib

    from amqtool.engines.artemis.verify import verify_store
    from amqtool.errors import overall_verdict

    with contextlib.ExitStack() as keep:
        report = verify_store(store, progress, keep=keep, sources=True)
        verdict = overall_verdict(report.findings)
        journal_rows = _journal_rows(store, report, reclaim)
        by_name, row_for = queue_rows(report.loads.get("bindings"), report.loads.get("messages"), now)
        addresses = _paging(store, report, row_for)
    rows = list(by_name.values())
    return {"verdict": verdict.name, "kind": "artemis", "path": str(store.root), "queues": rows,
            "addresses": addresses, "journals": journal_rows}
