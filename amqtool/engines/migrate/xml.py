"""``amqtool export KAHADB --format xml``: the ``artemis data exp`` document of what ``create --from`` writes.

The same plan (:class:`~amqtool.engines.migrate.plan.MigrationPlan`), the same records
(:func:`~amqtool.engines.migrate.write.binding_records`, :func:`~amqtool.engines.migrate.write.message_record`)
and the Artemis export's own row builder and writer (:mod:`amqtool.engines.export.parse`,
:mod:`amqtool.engines.export.xml`), so the document equals the Artemis export of the store ``create --from``
makes of the same source with the same threshold, byte for byte: bindings in ``data exp``'s HashMap order,
messages by id, a message's queues in ``data exp``'s order, large bodies in 1000-byte chunks. ``artemis data
imp`` loads it into a running broker. Prepared XA messages are left out, as ``data exp`` leaves them out.
"""
from __future__ import annotations

from typing import Iterator

from amqtool.engines.export.parse import Bindings, decode_message, message_row, xml_queue_order
from amqtool.engines.migrate.convert import MULTICAST
from amqtool.engines.migrate.plan import MigrationPlan
from amqtool.engines.migrate.write import DEFAULT_LARGE_THRESHOLD, binding_records, message_record


class _Body:
    """One large body held in memory, in the shape of :class:`~amqtool.engines.export.parse.LargeBodies`."""

    def __init__(self, message_id: int, data: bytes):
        self.message_id, self.data = message_id, data

    def read(self, message_id: int) -> bytes | None:
        return self.data if message_id == self.message_id else None


def binding_rows(plan: MigrationPlan) -> list[tuple]:
    return Bindings([(rid, utype, body) for rid, utype, body, _tx in binding_records(plan)]).rows()


def message_rows(plan: MigrationPlan, threshold: int = DEFAULT_LARGE_THRESHOLD) -> Iterator[tuple]:
    """Export rows (``schema.MESSAGE_COLUMNS``) of the plan's committed messages, one per queue reference."""
    for pm in plan.messages():
        if pm.state != "committed":
            continue
        mid = pm.core.message_id
        utype, rec, large = message_record(pm.core, threshold)
        cols = decode_message(utype, rec, message_id=mid, large=_Body(mid, large) if large is not None else None)
        for q in xml_queue_order(pm.queue_ids):
            pq = plan.queues[q]
            yield message_row(cols, queue=pq.name, queue_id=q,
                              routing_type="MULTICAST" if pq.routing_type == MULTICAST else "ANYCAST",
                              delivery_count=pm.redelivery, store_message_id=pm.openwire_id)


class KahaDBXmlExport:
    """The export engine's view of a KahaDB store as XML: :meth:`binding_rows`, then :meth:`rows` (filtered
    by the options' queues), counting into :attr:`summary` like the other engines; messages that do not
    convert are problems (the export's WARNING)."""

    def __init__(self, store, options, progress=None, threshold: int = DEFAULT_LARGE_THRESHOLD):
        from amqtool.engines.export.model import ExportSummary

        self.options = options
        self.threshold = threshold
        from amqtool.engines.migrate.leveldb import plan_for
        from amqtool.engines.verdicts import refuse_unless_salvage

        self.summary = ExportSummary("local", store.kind)
        self.plan = plan_for(store, progress=progress)
        # verify's judge on the load the plan read (amqtool.engines.verdicts), as every export
        self.summary.findings = getattr(self.plan, "findings", [])
        refuse_unless_salvage(self.summary.findings, options.salvage, command="export",
                              path=str(getattr(store, "root", "")))
        self.summary.bytes_scanned = self.plan.bytes_scanned

    def binding_rows(self) -> list[tuple]:
        rows = binding_rows(self.plan)
        self.summary.set_bindings(rows)
        return rows

    def rows(self) -> Iterator[tuple]:
        from amqtool.engines.export.schema import MESSAGE_COLUMN_NAMES

        qcol, mcol = MESSAGE_COLUMN_NAMES.index("queue"), MESSAGE_COLUMN_NAMES.index("message_id")
        s = self.summary
        last = None
        seen_problems = 0
        for row in message_rows(self.plan, self.threshold):
            for p in self.plan.problems[seen_problems:]:
                s.problem(None, f"{p['destination']} ({p['location']}): {p['reason']}")
            seen_problems = len(self.plan.problems)
            if not self.options.wants(row[qcol]):
                continue
            if row[mcol] != last:
                s.messages += 1
                last = row[mcol]
            s.count_row(row[qcol], "committed")
            yield row
        for p in self.plan.problems[seen_problems:]:
            s.problem(None, f"{p['destination']} ({p['location']}): {p['reason']}")
