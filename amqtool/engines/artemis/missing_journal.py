"""A bindings journal with files but no message journal beside it (its directory gone, or no file in it):
what the rest of the store proves the missing journal held.

Artemis creates both journals at its first start (``JournalStorageManager.start``, ``checkAndCreateDir``) and
never removes one, so a data directory with one and not the other lost it -- or was copied without it: the
public stores people commit hold their bindings journal alone, and the bindings' own records (queues, address
settings, the ID generator's counter, queue status) say nothing about which messages were still to deliver
(``BatchingIDGenerator`` issues ids to messages and transactions alike, and a queue that consumed everything
leaves the same counter). What proves the journal held live messages is what the broker writes only for them,
outside the journal:

* **page files holding messages**: their page transactions and the page cursors' acknowledgements and
  counters are message-journal records; without them the broker skips every paged message of a transaction
  it no longer knows and delivers again what the cursors had acknowledged;
* **large-message body files** (``large-messages/<id>.msg``): the broker writes one for a large message and
  deletes it once the message's DELETE is synced (``JournalStorageManager.deleteLargeMessageBody``), or at
  start for a pending one (``ADD_LARGE_MESSAGE_PENDING``, itself a message-journal record). Its
  ``ADD_LARGE_MESSAGE`` record and references were in the missing journal, so the broker never loads the
  message: it is lost.

Either makes the loss CRITICAL (``messages-journal-missing``). With neither, nothing shows the journal held
a live message, but a broker never leaves a data directory so: a WARNING of the same code says the journal is
missing and that what it held cannot be told (a copied bindings journal alone reads the same way).
"""
from __future__ import annotations

import os
from pathlib import Path

from amqtool.errors import Finding, Severity

MAX_LISTED = 20


def large_message_files(directory) -> list[int]:
    """The message ids of the ``<id>.msg`` body files in the large-messages ``directory`` (sorted; [] when
    there is none or it cannot be listed: an unlistable directory is reported where large messages are)."""
    if directory is None:
        return []
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    out = []
    for n in names:
        stem, _, ext = n.partition(".")
        if ext == "msg" and stem.isdigit():
            out.append(int(stem))
    return sorted(out)


def messages_journal_missing(store, journals: list, paging: dict | None) -> Finding | None:
    """The finding for a store whose bindings journal has files while its message journal is missing or
    empty, or None. ``journals``: verify's journal summaries (``kind``, ``files``); ``paging``: verify's paging
    summary (``messages``, ``pendingMessages``), or None. A bindings directory given alone (the store's root is
    that directory) is not judged: the user asked about that journal only."""
    by_kind = {j.kind: j for j in journals}
    bindings = by_kind.get("bindings")
    messages = by_kind.get("messages")
    if bindings is None or not bindings.files or (messages is not None and messages.files):
        return None
    if store.bindings is not None and Path(store.bindings.directory) == Path(store.root):
        return None
    where = str(store.messages.directory) if store.messages is not None else str(store.root)
    what = "has no journal file" if store.messages is not None else "is missing"
    paged = (paging or {}).get("messages", 0)
    pending = (paging or {}).get("pendingMessages", 0)
    large = large_message_files(store.large_messages_dir)
    if not paged and not large:
        return Finding(
            Severity.WARNING, "messages-journal-missing",
            f"the message journal {what} beside a bindings journal (the broker creates both at its first start "
            f"and removes neither): if it held messages they are lost; no page file or large-message body left "
            f"tells whether it did", where, None, {"pagedMessages": 0, "pendingMessages": 0, "largeMessageFiles": 0,
                                                   "largeMessageIds": []})
    held = []
    if paged:
        held.append(f"the page files hold {paged} message(s) ({pending} still to consume by the page cursors): "
                    f"their page transactions and the cursors' acknowledgements were in that journal; the broker "
                    f"skips the transactional ones and delivers acknowledged ones again")
    if large:
        shown = ", ".join(map(str, large[:MAX_LISTED])) + (" ..." if len(large) > MAX_LISTED else "")
        held.append(f"{len(large)} large-message body file(s) remain (message(s) {shown}): the broker deletes a "
                    f"body once its message is deleted, and their message records were in that journal; the "
                    f"broker never loads those messages")
    return Finding(
        Severity.CRITICAL, "messages-journal-missing",
        f"the message journal {what}, while " + "; and ".join(held), where, None,
        {"pagedMessages": paged, "pendingMessages": pending, "largeMessageFiles": len(large),
         "largeMessageIds": large[:100]})
