"""The in-process export engine: no JVM, for small stores (and the reference the Spark engine is held to).

Liveness is exactly ``JournalImpl.load`` (:func:`amqtool.engines.artemis.load.load_journal`) and the broker's view of
it exactly what ``artemis data exp`` builds (:func:`amqtool.engines.artemis.broker_state.build_broker_state`): a
message survives on a queue when it has an ADD_REF (32) for that queue and no ACKNOWLEDGE_REF (33), whatever
their order. Rows come from :mod:`amqtool.engines.export.parse`, the same functions the Spark workers run.

Row rules (both engines):

* one row per (live message, queue), ordered by message id, then by the queue order ``data exp`` uses;
* ``transaction_state`` is ``committed`` for references in the committed live list and ``prepared`` for the
  ADD_REFs of a prepared (XA, in doubt) transaction whose pair is not already live; a prepared transaction's
  acks are not applied (they take effect only if it commits);
* ``delivery_count`` and ``scheduled_time`` are the last committed UPDATE_DELIVERY_COUNT (34) and
  SET_SCHEDULED_DELIVERY_TIME (36) for the pair in live-list order (what the broker's load applies); 0 and
  null when there is none.

* then the paged messages (``data/paging``), store by store, page by page, as ``data exp`` writes them
  (artemis-journal-format.md §6.2): one row per (paged message, queue still to consume it), ``paged`` with
  ``page`` and ``page_position`` (:func:`amqtool.engines.artemis.paging.paged_export_messages`, from the same journal
  load); ``prepared`` when its page transaction is in a prepared XA transaction.

Memory: the live-record index of ``load_journal`` (a small tuple per live record, no bodies) and the
reference maps; bodies are read one message at a time and handed on, so the output streams.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterator

from amqtool.engines.export.columns import MessageBatch, row
from amqtool.engines.export.model import ExportOptions, ExportSummary
from amqtool.engines.export.parse import Bindings, LargeBodies, decode_message, message_row, missing_body
from amqtool.engines.artemis.paging import paged_export_messages
from amqtool.errors import FormatError

if TYPE_CHECKING:
    from amqtool.engines.artemis.load import LiveRecord

ENGINE = "local"


class LocalArtemisExport:
    """Export an Artemis store in process. Build, then take :meth:`binding_rows` and iterate :meth:`rows`."""

    def __init__(self, store, options: ExportOptions, progress: Callable[[int], None] | None = None):
        from amqtool.engines.artemis.live_refs import journal_refs

        self.options = options
        self._store = store
        self.summary = ExportSummary(ENGINE, "artemis")
        self.large = LargeBodies(getattr(store, "large_messages_dir", None))
        import contextlib

        self._stack = contextlib.ExitStack()  # the journals, open while the rows are read
        try:
            self.summary.findings, results = self._judge(progress)
        except BaseException:
            self._stack.close()
            raise
        self.summary.files = 0
        for result in results.values():
            self.summary.bytes_scanned += result.opened.bytes_total()
            self.summary.files += len(result.opened.files)
        self.bindings_result = results.get("bindings")
        self.messages_result = results.get("messages")
        # only what the rows need: refs, acks, delivery counts, scheduled times (the paging facts come
        # from paging_view; duplicate ids and the rest are never exported)
        self.refs = journal_refs(self.messages_result) if self.messages_result is not None else None
        live_bindings = []
        if self.bindings_result is not None:
            for rec in self.bindings_result.live:
                if rec.user_record_type in (21, 44):
                    live_bindings.append((rec.id, rec.user_record_type, self.bindings_result.body(rec)))
        self.bindings = Bindings(live_bindings, options.undefined_prefix)
        for rid, msg in self.bindings.problems:
            self.summary.problem(rid, f"binding record does not decode: {msg}")

    def _judge(self, progress: Callable[[int], None] | None) -> tuple[list, dict]:
        """verify's findings on the store and the loads it judged, by journal kind (open in ``self._stack``
        until :meth:`close`): verify judges the very load this export reads (amqtool.engines.verdicts), one
        scan of the journals. A CRITICAL source is refused here, before a row is written, unless --salvage."""
        from amqtool.engines.artemis.verify import verify_store
        from amqtool.engines.verdicts import refuse_unless_salvage

        report = verify_store(self._store, progress, keep=self._stack)
        refuse_unless_salvage(report.findings, self.options.salvage, command="export", path=str(self._store.root))
        return report.findings, report.loads

    def close(self) -> None:
        self._stack.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def binding_rows(self) -> list[tuple]:
        from amqtool.engines.artemis.jms import jms_binding_rows

        rows = self.bindings.rows() + jms_binding_rows(self._store)  # an upgraded broker's 1.x JMS objects
        self.summary.set_bindings(rows)
        return rows

    def _pairs(self) -> Iterator[tuple[int, LiveRecord, list[tuple]]]:
        """(message id, record, [(queue id, state, tx id, delivery count, scheduled time)]) in message-id order;
        queues in data exp order, then the prepared ones in their transaction's ADD_REF order. ``record``: the
        message's live record, else the one of the prepared transaction that adds it."""
        import heapq

        refs = self.refs
        prepared: dict[int, list[tuple[int, int]]] = {}
        prepared_messages = {}
        for tx in refs.prepared:
            for mid, qids in tx.refs.items():
                for qid in qids:
                    prepared.setdefault(mid, []).append((qid, tx.tx_id))
            for mid, rec in tx.messages.items():
                prepared_messages.setdefault(mid, rec)
        # messages only a prepared transaction adds, merged into the committed ones by id
        only_prepared = sorted(m for m in prepared if m in prepared_messages and not refs.has_message(m))
        merged = heapq.merge(refs.committed(), ((m, prepared_messages[m], []) for m in only_prepared),
                             key=lambda t: t[0])
        counts, scheduled = refs.delivery_counts, refs.scheduled
        for mid, rec, committed in merged:
            if counts or scheduled:
                pairs = [(q, "committed", None, counts.get((mid, q), 0), scheduled.get((mid, q))) for q in committed]
            else:  # (most stores: none of either)
                pairs = [(q, "committed", None, 0, None) for q in committed]
            if prepared and mid in prepared:
                seen = set(committed)
                for qid, tx_id in prepared[mid]:
                    if qid not in seen:
                        seen.add(qid)
                        pairs.append((qid, "prepared", tx_id, counts.get((mid, qid), 0), scheduled.get((mid, qid))))
            if pairs:
                yield mid, rec, pairs

    def message_refs(self) -> Iterator[tuple[int, object, list[tuple]]]:
        """``(message id, record, refs)`` of every journal message with rows, in message-id order: ``record``
        the LiveRecord its rows are decoded from (its live record, else the one of the prepared transaction
        that adds it), ``refs`` its rows' ``(queue id, state, tx id, delivery count, scheduled time)`` in row
        order, only queues the options want. What :meth:`messages` is built from."""
        opts = self.options
        if not opts.queues and opts.only_queues is None:
            yield from self._pairs()
            return
        b = self.bindings
        for mid, rec, pairs in self._pairs():
            wanted = [p for p in pairs if opts.wants(b.queue_name(p[0]))]
            if wanted:
                yield mid, rec, wanted

    def rows(self) -> Iterator[tuple]:
        """Export rows (``schema.MESSAGE_COLUMNS`` tuples, decoded by the Python reference): the journal's
        messages in id order, then the paged ones. The XML document's path; tables take :meth:`batches`."""
        if self.messages_result is None:
            return
        yield from message_rows(self.messages(), large=self.large, safe=self.options.safe, summary=self.summary)

    def messages(self) -> Iterator[tuple]:
        """Every message to export as ``(user record type, body, message id, rows, where)``
        (:class:`~amqtool.engines.export.columns.MessageBatch`'s input): the journal's in message-id order,
        then the paged ones. Bodies are read through windows of the journal files (messages come mostly in
        file order)."""
        from amqtool.store.journal_files import BodyWindows

        body = BodyWindows(self.messages_result.opened).body
        b = self.bindings
        plain: dict[int, tuple] = {}  # queue id -> its committed row without delivery count or schedule
        for mid, rec, refs in self.message_refs():
            rows = []
            for q, state, tx, dc, sched in refs:
                r = plain.get(q) if state == "committed" and dc == 0 and sched is None else None
                if r is None:
                    r = row(b.queue_name(q), q, b.routing_type(q), delivery_count=dc, scheduled_time=sched,
                            transaction_state=state, transaction_id=tx)
                    if state == "committed" and dc == 0 and sched is None:
                        plain[q] = r
                rows.append(r)
            yield rec.user_record_type, body(rec.file_index, rec.body_offset, rec.body_len), mid, rows, ""
        yield from self.paged_messages()

    def paged_messages(self) -> Iterator[tuple]:
        """The paged messages, as :meth:`messages` gives them (from the journals this engine loaded)."""
        return paged_export_messages(self._store, bindings=self.bindings, wants=self.options.wants,
                                     view=self.paging_view(), problem=self.summary.problem)

    def paging_view(self):
        """What the journals this engine loaded say about paging (read once, while they are open)."""
        from amqtool.engines.artemis.paging import PagingJournalView

        view = PagingJournalView()
        if self.bindings_result is not None:
            view.add_bindings(self.bindings_result)
        view.add_messages(self.messages_result)
        return view

    def batches(self, use_native: bool | None = None) -> Iterator:
        """The rows of :meth:`rows` as Arrow record batches (``export.columns``), counted in the summary: what
        the table formats are written from. ``use_native`` False: the Python reference decoder only."""
        if self.messages_result is None:
            return
        yield from message_batches(self.messages(), safe=self.options.safe, large=self.large,
                                   summary=self.summary, use_native=use_native)


def message_rows(messages, *, large: LargeBodies | None, safe: bool, summary: ExportSummary) -> Iterator[tuple]:
    """Row tuples of ``messages`` (as :meth:`LocalArtemisExport.messages` gives them), decoded by the Python
    reference and counted in ``summary``; a body that does not decode is a problem and gives no rows."""
    for utype, body, mid, rows, where in messages:
        try:
            msg = decode_message(utype, body, message_id=mid, large=large, safe=safe)
        except FormatError as err:
            summary.problem(mid, where + err.message)
            continue
        summary.messages += 1
        lost = missing_body(msg, where)
        if lost:
            summary.problem(mid, lost)
        for (name, q, routing, paged, page, position, dc, sched, state, tx_id, smid) in rows:
            summary.count_row(name, state)
            yield message_row(msg, queue=name, queue_id=q, routing_type=routing, delivery_count=dc,
                              scheduled_time=sched, transaction_state=state, transaction_id=tx_id, paged=paged,
                              page=page, page_position=position, store_message_id=smid)


def message_batches(messages, *, safe: bool, large: LargeBodies | None, summary: ExportSummary,
                    use_native: bool | None = None) -> Iterator:
    """Arrow record batches of ``messages`` (``(user record type, body, message id, rows, where)``, see
    :class:`~amqtool.engines.export.columns.MessageBatch`), a bounded number of messages and bytes each."""
    batch = MessageBatch(safe=safe, large=large, summary=summary, use_native=use_native)
    for m in messages:
        batch.add(*m)
        if batch.full:
            out = batch.take()
            if out is not None:
                yield out
    out = batch.take()
    if out is not None:
        yield out


def check_messages(messages, *, safe: bool, large: LargeBodies | None, summary: ExportSummary,
                   use_native: bool | None = None) -> None:
    """The decoding of :func:`message_batches` without its batches: every message of ``messages`` (as it
    takes them) that does not decode, or whose body is missing, is a problem in ``summary``, as there
    (:meth:`MessageBatch.check`). What verify asks of the messages it would deliver."""
    batch = MessageBatch(safe=safe, large=large, summary=summary, use_native=use_native)
    for m in messages:
        batch.add(*m)
        if batch.full:
            batch.check()
    batch.check()
