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
  ``page`` and ``page_position`` (:func:`amqtool.engines.artemis.paging.paged_export_rows`, from the same journal
  load); ``prepared`` when its page transaction is in a prepared XA transaction.

Memory: the live-record index of ``load_journal`` (a small tuple per live record, no bodies) and the
reference maps; bodies are read one message at a time and handed on, so the output streams.
"""
from __future__ import annotations

from typing import Callable, Iterator

from amqtool.engines.export.model import ExportOptions, ExportSummary
from amqtool.engines.export.parse import Bindings, LargeBodies, decode_message, message_row
from amqtool.engines.artemis.paging import paged_export_rows
from amqtool.errors import FormatError

ENGINE = "local"


class LocalArtemisExport:
    """Export an Artemis store in process. Build, then take :meth:`binding_rows` and iterate :meth:`rows`."""

    def __init__(self, store, options: ExportOptions, progress: Callable[[int], None] | None = None):
        from amqtool.engines.artemis.broker_state import DELIVERY_TYPES, build_broker_state
        from amqtool.engines.artemis.load import load_journal
        from amqtool.store.journal_files import open_journal

        self.options = options
        self._store = store
        self.summary = ExportSummary(ENGINE, "artemis")
        self.large = LargeBodies(getattr(store, "large_messages_dir", None))
        self._opened = []
        results = {}
        for jd in store.journals():
            opened = open_journal(jd)
            self._opened.append(opened)
            self.summary.bytes_scanned += opened.bytes_total()
            results[jd.kind] = load_journal(opened, check_tag=options.check_tag, progress=progress)
        self.bindings_result = results.get("bindings")
        self.messages_result = results.get("messages")
        # only what the rows need: refs, acks, delivery counts, scheduled times (the paging facts come
        # from paging_view; duplicate ids and the rest are never exported)
        self.state = build_broker_state(None, self.messages_result, decode=DELIVERY_TYPES)
        live_bindings = []
        if self.bindings_result is not None:
            for rec in self.bindings_result.live:
                if rec.user_record_type in (21, 44):
                    live_bindings.append((rec.id, rec.user_record_type, self.bindings_result.body(rec)))
        self.bindings = Bindings(live_bindings, options.undefined_prefix)
        for rid, msg in self.bindings.problems:
            self.summary.problem(rid, f"binding record does not decode: {msg}")

    def close(self) -> None:
        for o in self._opened:
            o.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def binding_rows(self) -> list[tuple]:
        from amqtool.engines.artemis.jms import jms_binding_rows

        rows = self.bindings.rows() + jms_binding_rows(self._store)  # an upgraded broker's 1.x JMS objects
        self.summary.set_bindings(rows)
        return rows

    def _pairs(self) -> Iterator[tuple[int, list[tuple[int, str, int | None]]]]:
        """(message id, [(queue id, state, tx id)]) in message-id order; queues in data exp order, then the
        prepared ones in their transaction's ADD_REF order."""
        st = self.state
        prepared: dict[int, list[tuple[int, int]]] = {}
        prepared_messages = {}
        for tx in st.prepared:
            for mid, qids in tx.refs.items():
                for qid in qids:
                    prepared.setdefault(mid, []).append((qid, tx.tx_id))
            for mid in tx.messages:
                prepared_messages.setdefault(mid, tx)
        self._prepared_messages = prepared_messages
        ids = set(st.message_records) | {m for m in prepared if m in prepared_messages or m in st.message_records}
        for mid in sorted(ids):
            committed = st.live_refs(mid) if mid in st.message_records else None
            pairs = [(q, "committed", None) for q in (committed or ())]
            seen = {q for q, _, _ in pairs}
            for qid, tx_id in prepared.get(mid, ()):
                if qid not in seen:
                    seen.add(qid)
                    pairs.append((qid, "prepared", tx_id))
            if pairs:
                yield mid, pairs

    def message_refs(self) -> Iterator[tuple[int, object, list[tuple]]]:
        """``(message id, record, refs)`` of every journal message with rows, in message-id order: ``record``
        the LiveRecord its rows are decoded from (its live record, else the one of the prepared transaction
        that adds it), ``refs`` its rows' ``(queue id, state, tx id, delivery count, scheduled time)`` in row
        order, only queues the options want. What :func:`journal_message_rows` takes (both engines)."""
        st = self.state
        opts = self.options
        b = self.bindings
        for mid, pairs in self._pairs():
            wanted = [(q, s, t) for q, s, t in pairs if opts.wants(b.queue_name(q))] if opts.queues else pairs
            if not wanted:
                continue
            if wanted[0][1] == "committed" or mid in st.message_records:
                rec = st.message_records[mid]
            else:
                rec = self._prepared_messages[mid].messages[mid]
            yield mid, rec, [(q, s, t, st.delivery_counts.get((mid, q), 0), st.scheduled.get((mid, q)))
                             for q, s, t in wanted]

    def rows(self) -> Iterator[tuple]:
        """Export rows (``schema.MESSAGE_COLUMNS``): the journal's messages in id order, then the paged ones."""
        if self.messages_result is None:
            return
        yield from self._journal_rows()
        yield from self.paged_rows()

    def paging_view(self):
        """What the journals this engine loaded say about paging (read once, while they are open)."""
        from amqtool.engines.artemis.paging import PagingJournalView

        view = PagingJournalView()
        if self.bindings_result is not None:
            view.add_bindings(self.bindings_result)
        view.add_messages(self.messages_result)
        return view

    def paged_rows(self) -> Iterator[tuple]:
        """The paged messages' rows, from the journals this engine already loaded (read once)."""
        yield from count_paged(paged_export_rows(
            self._store, bindings=self.bindings, large=self.large, safe=self.options.safe, wants=self.options.wants,
            view=self.paging_view(), problem=self.summary.problem, count_row=self.summary.count_row), self.summary)

    def _journal_rows(self) -> Iterator[tuple]:
        read = self.messages_result.body
        for mid, rec, refs in self.message_refs():
            yield from journal_message_rows(mid, rec.user_record_type, read(rec), refs, bindings=self.bindings,
                                            large=self.large, safe=self.options.safe, summary=self.summary)


def journal_message_rows(mid: int, user_record_type: int, body: bytes, refs: list[tuple], *, bindings: Bindings,
                         large: LargeBodies | None, safe: bool, summary: ExportSummary) -> Iterator[tuple]:
    """The rows of one journal message (one per ``refs`` entry, see :meth:`LocalArtemisExport.message_refs`)
    from its record's body, counted in ``summary``; a body that does not decode is a problem, no rows."""
    try:
        msg = decode_message(user_record_type, body, message_id=mid, large=large, safe=safe)
    except FormatError as err:
        summary.problem(mid, err.message)
        return
    summary.messages += 1
    for qid, state, tx_id, delivery_count, scheduled_time in refs:
        name = bindings.queue_name(qid)
        summary.count_row(name, state)
        yield message_row(msg, queue=name, queue_id=qid, routing_type=bindings.routing_type(qid),
                          delivery_count=delivery_count, scheduled_time=scheduled_time, transaction_state=state,
                          transaction_id=tx_id)


def count_paged(rows: Iterator[tuple], summary: ExportSummary) -> Iterator[tuple]:
    """Pass paged rows through, counting messages in ``summary`` (a paged message's rows are consecutive;
    ``paged_export_rows`` counts the rows itself)."""
    last = None
    for row in rows:
        key = (row[0], row[3], row[18], row[19])  # message id, address, page, position
        if key != last:
            last = key
            summary.messages += 1
        yield row
