"""Paged messages in the export (local engine; the Spark engine's equality on the same kind of store is in
test_export_spark.py): a `create --demo` store with paged addresses exports the live messages of each queue
plus the paged messages each queue still has to consume, exactly as its manifest's ``expected.paging`` says,
flagged ``paged`` with their page and position, and the XML carries the committed ones in ``<messages>``
after the journal's (artemis-journal-format.md §6.2)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from lxml import etree

from amqtool.engines.export import ExportRequest, run_export
from amqtool.engines.export.local import LocalArtemisExport
from amqtool.engines.export.model import ExportOptions
from amqtool.engines.export.schema import MESSAGE_COLUMN_NAMES
from amqtool.store.layout import detect
from tests.support import tree_hashes

N = {n: i for i, n in enumerate(MESSAGE_COLUMN_NAMES)}


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    from amqtool.engines.artemis.demo import create_demo

    path = tmp_path_factory.mktemp("demo") / "store"
    create_demo(path, 6 * 1024 * 1024, file_size=1024 * 1024, seed=7)
    return path


def _manifest(demo: Path) -> dict:
    return json.loads((demo / "manifest.json").read_text())


def _rows(demo: Path, **opts):
    with LocalArtemisExport(detect(demo), ExportOptions(**opts)) as ex:
        ex.binding_rows()
        return list(ex.rows()), ex.summary


def _queue_names(manifest) -> dict[int, str]:
    return {q["id"]: q["name"] for q in manifest["queues"]}


def test_rows_per_queue_are_live_plus_paged(demo):
    m = _manifest(demo)
    paging = m["expected"]["paging"]
    assert paging["pendingByQueue"], "the demo store must have paged messages"
    rows, summary = _rows(demo)
    committed: dict[str, int] = {}
    for r in rows:
        if r[N["transaction_state"]] == "committed":
            committed[r[N["queue"]]] = committed.get(r[N["queue"]], 0) + 1
    want = dict(m["expected"]["messageCounts"])
    for q, ids in paging["pendingByQueue"].items():
        want[q] = want.get(q, 0) + len(ids)
    assert committed == {q: n for q, n in want.items() if n}
    # the paged rows themselves: ids per queue in page order, page and position, body size and digest
    paged = [r for r in rows if r[N["paged"]]]
    assert rows[-len(paged):] == paged  # after the journal's rows
    got = {}
    for r in paged:
        if r[N["transaction_state"]] == "committed":
            got.setdefault(r[N["queue"]], []).append(r[N["message_id"]])
    assert got == {q: ids for q, ids in paging["pendingByQueue"].items() if ids}
    names = _queue_names(m)
    want_rows = {}
    for e in paging["messages"]:
        if e["pageTransaction"] == "not-found":
            continue
        state = "prepared" if e["pageTransaction"] == "prepared" else "committed"
        for q in e["pendingQueues"]:
            want_rows[(e["messageId"], names[q])] = (e["page"], e["messageNumber"], state, e["large"],
                                                     e["bodySize"], e["bodySha256"])
    assert {(r[N["message_id"]], r[N["queue"]]): (r[N["page"]], r[N["page_position"]], r[N["transaction_state"]],
                                                  r[N["large"]], r[N["body_size"]], r[N["body_sha256"]])
            for r in paged} == want_rows
    assert any(s == "prepared" for _, _, s, *_ in want_rows.values())  # the demo has a prepared page tx
    assert all(r[N["page"]] is None and r[N["page_position"]] is None for r in rows if not r[N["paged"]])
    assert summary.rows == len(rows) and summary.problem_count == 0
    journal_messages = len({r[N["message_id"]] for r in rows if not r[N["paged"]]})
    assert summary.messages == journal_messages + len({k[0] for k in want_rows})


def test_paged_rows_follow_queue_filter_and_safe(demo):
    rows, _ = _rows(demo, safe=True, queues=("telemetry.ops",))
    ids = _manifest(demo)["expected"]["paging"]["pendingByQueue"]["telemetry.ops"]
    assert [r[N["message_id"]] for r in rows if r[N["paged"]]] == ids
    assert {r[N["queue"]] for r in rows} == {"telemetry.ops"}
    assert all(r[N["body"]] is None and len(r[N["body_sha256"]]) == 64 for r in rows)


def test_xml_carries_paged_messages(demo, tmp_path):
    before = tree_hashes(demo)
    doc, _ = run_export(ExportRequest(str(demo), str(tmp_path / "out.xml"), "xml", engine="local"))
    assert tree_hashes(demo) == before
    m = _manifest(demo)
    queues: dict[str, set[int]] = {}
    for e in etree.parse(str(tmp_path / "out.xml")).getroot().find("messages"):
        for q in e.find("queues"):
            queues.setdefault(q.get("name"), set()).add(int(e.get("id")))
    for q, ids in m["expected"]["paging"]["pendingByQueue"].items():
        assert set(ids) <= queues[q]
        assert len(queues[q]) == m["expected"]["messageCounts"][q] + len(ids)
    assert doc["xml"]["skippedPrepared"] == doc["preparedRows"]


@pytest.mark.parametrize("fmt", ["parquet", "jsonl", "xml"])
def test_a_garbage_page_and_a_missing_body_are_problems_not_silent_losses(demo, tmp_path, fmt):
    """A page file of random bytes dropped its rows and a large message's body file replaced by a directory
    lost its body, both with verdict OK (found by the fleet work). Both are problems now: the page named with
    where its records end, the large message by id; the other rows are still written."""
    import os
    import random
    import shutil

    from amqtool.errors import Verdict

    store = tmp_path / "store"
    shutil.copytree(demo, store)
    pages = sorted(p for p in (store / "data" / "paging").glob("*/*.page") if p.stat().st_size > 100)
    garbage = pages[0]
    garbage.write_bytes(random.Random(5).randbytes(garbage.stat().st_size))
    bodies = sorted((store / "data" / "large-messages").glob("*.msg"))
    gone = bodies[0]
    os.unlink(gone)
    os.mkdir(gone)
    out = tmp_path / ("out.xml" if fmt == "xml" else "out")
    # verify calls the garbage page CRITICAL (its messages are lost): refused, nothing written (issue 25) ...
    from amqtool.engines.verdicts import SourceCriticalError

    with pytest.raises(SourceCriticalError, match="page-damaged"):
        run_export(ExportRequest(str(store), str(out), fmt, engine="local"))
    assert not out.exists()
    # ... and --salvage writes the rest, listing what it leaves out
    doc, verdict = run_export(ExportRequest(str(store), str(out), fmt, engine="local", salvage=True))
    assert verdict is Verdict.CRITICAL
    assert any(f["code"] == "page-damaged" and garbage.name in f["path"] for f in doc["findings"])
    texts = [p["message"] for p in doc["problems"]]
    assert any(garbage.name in t and "end in damage" in t for t in texts), texts
    assert any(f"{gone.stem}.msg is missing" in t for t in texts), texts
    full, _ = run_export(ExportRequest(str(demo), str(tmp_path / ("full.xml" if fmt == "xml" else "full")), fmt,
                                       engine="local"))
    assert 0 < doc["rows"] < full["rows"]
