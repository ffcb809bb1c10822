"""KahaDB engines: replay the journal to live state, verify it, and explain which files are pinned.

The CLI calls exactly these:

* :func:`print_document` (store, safe, records, pins, drain, progress) -> dict
* :func:`render_text` (doc) -> lines
* :func:`iter_record_rows` (store, safe) -> one dict per journal record (``--format jsonl``)
* :func:`verify_store` (store, progress) -> (findings, summary)
"""
from amqtool.engines.kahadb.document import iter_record_rows, print_document, render_text
from amqtool.engines.kahadb.verify import verify_store

__all__ = ["print_document", "render_text", "iter_record_rows", "verify_store", "pins_document"]


def pins_document(store, *, drain: str | None = None, progress=None) -> dict:
    """Only the pins (and the drain effect) per sub-store: ``print_document(pins=True)`` without bodies."""
    return print_document(store, safe=True, pins=True, drain=drain, progress=progress)
