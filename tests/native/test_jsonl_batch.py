"""JSON Lines of record batches in C (native/jsonl_batch.c) against the row-by-row writer (the reference):
the same bytes on a demo store's and the built store's batches, on sliced batches, and on generated
strings (controls, quotes, non-BMP characters) and maps."""
from __future__ import annotations

import io

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amqtool import native
from amqtool.engines.export.local import LocalArtemisExport
from amqtool.engines.export.model import ExportOptions
from amqtool.engines.export.schema import MESSAGE_COLUMNS, arrow_schema
from amqtool.engines.export.writers import JsonlTableWriter
from amqtool.store.layout import detect
from tests.engines.export_store import demo, store  # noqa: F401 - fixtures

pytestmark = pytest.mark.skipif(native.jsonl_lines is None, reason=native.NATIVE_REASON or "not built")


class _Files:
    def __init__(self):
        self.fh = io.BytesIO()
        self.fh.close = lambda: None

    def open_file(self, relative):
        return self.fh


def _text(batches, use_native: bool) -> bytes:
    files = _Files()
    w = JsonlTableWriter(files, "messages", MESSAGE_COLUMNS)
    for b in batches:
        w.write_batch(b, use_native=use_native)
    return files.fh.getvalue()


def _batches(path, **opts):
    # the built store is CRITICAL on purpose (a queue with no binding, a legacy record): salvaged, as export does
    with LocalArtemisExport(detect(path), ExportOptions(salvage=True, **opts)) as ex:
        ex.binding_rows()
        return list(ex.batches())


@pytest.mark.parametrize("safe", [False, True])
def test_store_batches(store, demo, safe):  # noqa: F811
    for path in (store, demo):
        batches = _batches(path, safe=safe)
        text = _text(batches, True)
        assert text == _text(batches, False)
        assert text.count(b"\n") == sum(b.num_rows for b in batches) > 0
        sliced = [b.slice(1, max(0, b.num_rows - 2)) for b in batches]  # arrays with offsets
        assert _text(sliced, True) == _text(sliced, False)


_s = st.text(max_size=10).filter(lambda t: all(not 0xD800 <= ord(c) <= 0xDFFF for c in t))


@settings(max_examples=80, deadline=None)
@given(st.lists(st.fixed_dictionaries({
    "queue": _s, "address": st.one_of(st.none(), _s), "text": st.one_of(st.none(), _s),
    "body": st.one_of(st.none(), st.binary(max_size=10)), "message_id": st.integers(-2**63, 2**63 - 1),
    "priority": st.one_of(st.none(), st.integers(-2**31, 2**31 - 1)), "durable": st.one_of(st.none(), st.booleans()),
    "properties": st.one_of(st.none(), st.dictionaries(_s, st.one_of(st.none(), _s), max_size=3).map(
        lambda d: list(d.items()))),
    "typed_properties": st.one_of(st.none(), st.lists(st.fixed_dictionaries(
        {"name": _s, "type": st.one_of(st.none(), _s), "value": st.one_of(st.none(), _s)}), max_size=3)),
}), min_size=1, max_size=5))
def test_generated_rows(rows):
    schema = arrow_schema()
    full = [{f.name: r.get(f.name, False if f.name in ("large", "paged") else 0 if f.name == "delivery_count"
                          else "committed" if f.name == "transaction_state" else None) for f in schema}
            for r in rows]
    batch = pa.RecordBatch.from_pylist(full, schema=schema)
    assert _text([batch], True) == _text([batch], False)
