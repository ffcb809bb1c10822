"""The truth of a bare journal: what ``JournalImpl.load`` gives, for a journal no broker wrote.

A journal directory written by ``JournalImpl`` alone (its own tests, the oracle fixtures of
/work/shared/fixtures/artemis/oracle: user record types 101..105, outside the broker's ``JournalRecordIds``)
holds no message, queue or binding: :class:`~tests.faults.artemis.DeliveredReader`'s truth, what the broker
delivers, is empty whatever the damage, and every fault would read "same". What such a journal's user gets is
what ``JournalImpl.load(List<RecordInfo> committed, List<PreparedTransactionInfo> prepared, ...)`` hands back:
the committed live records, each its id, user record type, ``isUpdate`` and body (``RecordInfo``), and the
prepared transactions with their records, records to delete and extra data (``PreparedTransactionInfo``).
Those are what :func:`amqtool.engines.artemis.load.load_journal` gives (proven equal to JournalImpl by the
fixtures' manifests: tests/engines/artemis/test_load.py, tests/faults/test_journalimpl_truth.py), so they
are this truth's rows: a record lost or brought back (a deleted record live again) is a row lost or back,
hence loss (or torn, when the fault is a crash's tail of the current file: ``ArtemisSites.torn``); a body or
a prepared transaction's extra data changed is content. A row is keyed by its record id, so a record whose id
changed is one lost and one brought back, not content (``moved`` is False: the user's code finds the record
by its id).

A store is judged by this truth when nothing in it is a broker's (:func:`bare_journal`), the reading verify
gives such a directory (amqtool/engines/artemis/evidence.py, ``broker``)."""
from __future__ import annotations

import contextlib
import hashlib
from collections import Counter
from pathlib import Path

from tests.faults.model import Delivered


def bare_journal(root: Path) -> bool:
    """Whether the store at ``root`` is a bare ``JournalImpl`` journal: an Artemis store with records, none of
    whose live or prepared records carries a user record type of the broker's ``JournalRecordIds`` (20..53),
    without paging or large-message directories. A broker writes only those types (its bindings journal's
    load decodes each, ``AbstractJournalStorageManager.loadMessageJournal`` switches on them)."""
    from amqtool.engines.artemis.load import load_journal
    from amqtool.errors import AmqtoolError
    from amqtool.formats.artemis.userrecords import RECORD_TYPE_NAMES
    from amqtool.store.journal_files import open_journal
    from amqtool.store.layout import detect

    try:
        store = detect(root)
    except AmqtoolError:
        return False
    if store.kind != "artemis":
        return False
    for d in (store.paging_dir, store.large_messages_dir):
        if d is not None and Path(d).is_dir():
            return False
    types = set()
    with contextlib.ExitStack() as stack:
        for jd in store.journals():
            opened = stack.enter_context(open_journal(jd))
            if not opened.files:
                continue
            result = load_journal(opened)
            types.update(r.user_record_type for r in result.live)
            types.update(r.user_record_type for tx in result.prepared for r in tx.records)
    return bool(types) and not types & set(RECORD_TYPE_NAMES)


def loaded(root: Path, loaded: tuple | None = None) -> Delivered:
    """What ``JournalImpl.load`` gives from each journal of the store at ``root`` (rows keyed ``(journal kind,
    "record", id, user type, isUpdate)``, counted (an id updated twice has two); ``(kind, "prepared", tx id)``
    and ``(kind, "prepared-record" | "prepared-delete", tx id, id, user type, isUpdate)``; each row's content
    its body's SHA-256, or the extra data's). ``loaded``: verify's ``(store, loads, ...)`` of this store, still
    open (:func:`tests.faults.runner.judged`), read instead of loading again. A journal the loader refuses
    gives nothing (JournalImpl throws: nothing is loaded)."""
    from amqtool.engines.artemis.load import load_journal
    from amqtool.errors import AmqtoolError
    from amqtool.store.layout import detect
    from tests.faults.artemis import _REFUSING, _negative_ids, broker_opened

    nothing = Delivered(frozenset(), Counter(), frozenset())
    if loaded is not None:
        store, loads = loaded[0], loaded[1]
        if store.kind == "artemis" and all(jd.kind in loads for jd in store.journals()) and not _negative_ids(
                loads.values()):
            return _of(dict(loads))
    try:
        store = detect(root)
    except AmqtoolError:
        return Delivered(frozenset(), Counter(), frozenset(), detected=False)
    if store.kind != "artemis":
        return Delivered(frozenset(), Counter(), frozenset(), detected=False)
    try:
        with contextlib.ExitStack() as stack:
            loads = {}
            for jd in store.journals():
                opened = broker_opened(stack, jd)
                if any(s.code in _REFUSING for s in opened.skipped):
                    return nothing
                if opened.files:
                    loads[jd.kind] = load_journal(opened)
            return _of(loads)
    except (AmqtoolError, OSError):
        return nothing


def _of(loads: dict) -> Delivered:
    from amqtool.errors import AmqtoolError
    from tests.faults.artemis import _REFUSING

    rows: Counter = Counter()
    content = set()

    def add(key: tuple, digest: str) -> None:
        rows[key] += 1
        content.add(key + (rows[key], digest))  # the n-th entry of its key: updates of one id keep their order

    try:
        for kind, result in sorted(loads.items()):
            if any(s.code in _REFUSING for s in result.opened.skipped):
                return Delivered(frozenset(), Counter(), frozenset())
            for r in result.live:
                add((kind, "record", r.id, r.user_record_type, bool(r.is_update)), _sha(result.body(r)))
            for tx in result.prepared:
                add((kind, "prepared", tx.tx_id), _sha(tx.extra or b""))
                for r in tx.records:
                    add((kind, "prepared-record", tx.tx_id, r.id, r.user_record_type, bool(r.is_update)),
                        _sha(result.body(r)))
                for r in tx.records_to_delete:
                    add((kind, "prepared-delete", tx.tx_id, r.id), _sha(result.body(r)))
    except (AmqtoolError, OSError):
        return Delivered(frozenset(), Counter(), frozenset())
    return Delivered(frozenset(), rows, frozenset(content))


def _sha(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


class LoadedReader:
    """:func:`loaded` of one bare journal's damaged copies, against its pristine load: a campaign's truth (the
    counterpart of :class:`~tests.faults.artemis.DeliveredReader`)."""

    moved = False  # a record is found by its id: one under another id is lost (model.classify's ``moved``)

    def __init__(self, root: Path):
        self.pristine = loaded(root)

    def damaged(self, root: Path, loads: tuple | None = None) -> Delivered:
        return loaded(root, loads)


def reader(root: Path):
    """The campaign's truth of the pristine store at ``root``: :class:`LoadedReader` for a bare journal
    (:func:`bare_journal`), else what the broker delivers (``DeliveredReader``)."""
    from tests.faults.artemis import DeliveredReader

    return LoadedReader(root) if bare_journal(root) else DeliveredReader(root)
