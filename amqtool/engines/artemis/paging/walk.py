"""The journals' facts as native/page_scan.c's page walk takes them, and a page's framing."""
from __future__ import annotations

from array import array

from amqtool import native
from amqtool.formats.artemis.paging import (
    END_BAD_END,
    END_BAD_LENGTH,
    END_BAD_START,
    END_CLEAN,
    END_SHORT_TAIL,
    PageScanEnd,
    PageScanner,
)
from amqtool.engines.artemis.paging.view import PagingJournalView


# --- the journals' facts as the C page walk takes them (native/page_scan.c) --------------------------------

_WALK_FRAME, _WALK_VERIFY, _WALK_JSON, _WALK_EXPORT = 0, 1, 2, 3
_WALK_HANDBACK, _WALK_PAUSE = 5, 6
_WALK_ENDS = (END_CLEAN, END_SHORT_TAIL, END_BAD_START, END_BAD_LENGTH, END_BAD_END)
_Q_KNOWN, _Q_COMPLETE = 1, 2


class WalkTables:
    """:class:`PagingJournalView` packed for ``native.page_walk``: sorted committed and prepared page
    transaction ids, and per page a table of the queues (exists, page complete, the message numbers acked
    on that page). Built once per command; a page's table is a few bytes per queue."""

    def __init__(self, view: PagingJournalView):
        self.view = view
        self.committed = array("q", sorted(view.page_tx))
        self.prepared = array("q", sorted(view.page_tx_prepared))
        acks: dict[int, dict[int, list[int]]] = {}  # page -> queue -> acked message numbers
        for q, positions in view.acks.items():
            for page, number in positions:
                acks.setdefault(page, {}).setdefault(q, []).append(number)
        complete: dict[int, set[int]] = {}  # page -> queues
        for q, pages in view.complete.items():
            for page in pages:
                complete.setdefault(page, set()).add(q)
        self._acks, self._complete = acks, complete
        self._base = None

    def page(self, page_id: int) -> tuple[array, array, array, array]:
        """``(committed, prepared, qtab, acks)`` for one page (see native/page_scan.c)."""
        acks = self._acks.get(page_id)
        complete = self._complete.get(page_id)
        if acks is None and complete is None:
            if self._base is None:
                self._base = self._table(None, None)
            return self._base
        return self._table(acks, complete)

    def _table(self, acks, complete):
        queues = set(self.view.queues) | set(acks or ()) | set(complete or ())
        qtab, numbers = array("q"), array("i")
        for q in sorted(queues):
            acked = sorted(set(acks.get(q, ()))) if acks else []
            flags = (_Q_KNOWN if q in self.view.queues else 0) | (_Q_COMPLETE if complete and q in complete else 0)
            qtab.extend((q, flags, len(numbers), len(acked)))
            numbers.extend(acked)
        return self.committed, self.prepared, qtab, numbers

    def queue_ids(self, tables) -> array:
        return array("q", tables[2][0::4])


def _end_of_walk(status: int, pos: int, number: int, length: int, size: int) -> PageScanEnd:
    reason = _WALK_ENDS[status]
    return PageScanEnd(reason, pos, number, size, length if reason in (END_BAD_LENGTH, END_BAD_END) else None)


def page_framing(buf, size: int) -> PageScanEnd:
    """How reading the page's records ends (:class:`PageScanner`), in C when the extension is built."""
    if native.page_walk is not None:
        status, pos, number, length, _ = native.page_walk(buf, 0, 0, _WALK_FRAME)
        return _end_of_walk(status, pos, number, length, size)
    s = PageScanner(buf, size)
    for _ in s:
        pass
    return s.end
