"""The judgement of pages missing between an address's first and current page: ``page-missing`` or ``page-gap``.

``PageCursorProviderImpl`` deletes a page only once every queue has consumed it, from the oldest on, so a page
gone from the middle held nothing unconsumed unless the store says otherwise: cursor acknowledgements pointing
into it (it was partly consumed), or page counters (``PageSubscriptionCounterImpl``: incremented per paged
message, decremented per acknowledgement) counting more unconsumed messages than the pages left hold. One
judgement for the file store's folders (paging/verify.py) and the JDBC store's page tables (jdbc/page_gaps.py).
"""
from __future__ import annotations

from amqtool.errors import Finding, Severity


def gap_finding(ps, missing: list[int], present: int, acked_missing: list[int], lost: dict[int, int]) -> Finding:
    """The finding of page store ``ps`` (a folder or a table) missing pages ``missing`` (``present``: how many are
    left): CRITICAL ``page-missing`` when cursor acknowledgements point into missing pages (``acked_missing``) or
    the queues' counters say messages are missing (``lost``: queue -> messages); else WARNING ``page-gap``."""
    folder = str(ps.folder)
    shown = ", ".join(map(str, missing[:10])) + (" ..." if len(missing) > 10 else "")
    if acked_missing and not lost:
        return Finding(
            Severity.CRITICAL, "page-missing",
            f"address {ps.address!r}: page(s) {', '.join(map(str, acked_missing[:10]))} are gone although "
            f"cursor acknowledgements point into them (partly consumed): their unconsumed messages are lost",
            folder, None, {"missingPages": missing, "ackedMissingPages": acked_missing, "messagesLost": None})
    if lost:
        n = sum(lost.values())
        return Finding(
            Severity.CRITICAL, "page-missing",
            f"address {ps.address!r}: page(s) {shown} are gone and the page counters of its queues say "
            f"{n} unconsumed message reference(s) ("
            + ", ".join(f"queue {q}: {v}" for q, v in lost.items())
            + ") are not in the pages that remain: they were in the missing page(s) and are lost",
            folder, None,
            {"missingPages": missing, "ackedMissingPages": acked_missing, "messagesLost": n,
             "lostByQueue": {str(q): v for q, v in lost.items()}})
    return Finding(
        Severity.WARNING, "page-gap",
        f"address {ps.address!r}: page(s) {shown} missing between page {ps.first_page} and the "
        f"current page {ps.current_page}; the broker removes a page from the middle only once every "
        f"queue has consumed it, and nothing here shows unconsumed messages were in it", folder,
        None, {"missingPages": missing, "presentPages": present})
