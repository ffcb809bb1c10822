"""`print --format json` carries the per-queue summary text print shows (issue 14): each queue's live
messages equal the demo manifest's, and the figures equal the text lines."""
from __future__ import annotations

import pytest

from amqtool.engines.artemis.demo import create_demo


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    root = tmp_path_factory.mktemp("qs") / "demo"
    manifest = create_demo(root, 6 * 1024 * 1024, file_size=1024 * 1024, seed=13)
    return root, manifest


def test_json_queue_summary_matches_manifest(demo, run_json):
    root, manifest = demo
    code, doc, _ = run_json("print", root, "--safe")
    assert code == 0
    summary = doc["queueSummary"]
    got = {q["name"]: q["messages"] for q in summary["queues"]}
    assert got == manifest["expected"]["messageCounts"]
    assert sum(got.values()) > 0
    by_name = {q["name"]: q for q in manifest["queues"]}
    for q in summary["queues"]:
        assert q["address"] == by_name[q["name"]]["address"]
        assert q["routingType"] == by_name[q["name"]]["routingType"]
    assert summary["messages"] == manifest["expected"]["journals"]["messages"]["liveRecordsByUserRecordType"]["45"]


def test_json_queue_summary_equals_text(demo, run_cli, run_json):
    root, _ = demo
    _, doc, _ = run_json("print", root, "--safe")
    _, text, _ = run_cli("print", root, "--safe", "--wide")  # whole lines
    lines = text.split("== messages per queue\n", 1)[1].splitlines()
    s = doc["queueSummary"]
    for q, line in zip(s["queues"], lines[1:]):
        assert line.split() == [q["name"], q["address"], q["routingType"], str(q["messages"])]
    assert lines[1 + len(s["queues"])] == (
        f"   messages: {s['messages']}, large messages: {s['largeMessages']}, prepared messages: "
        f"{s['preparedMessages']}, prepared large messages: {s['preparedLargeMessages']}")


def test_no_summary_without_the_messages_journal(demo, run_json):
    root, _ = demo
    code, doc, _ = run_json("print", root, "--safe", "--journal", "bindings")
    assert code == 0 and "queueSummary" not in doc


def _summaries(path):
    """(native, reference) queue summaries of the store at ``path``: the C tally print JSON keeps while it
    writes the live array, and BrokerState's."""
    from amqtool import native
    from amqtool.engines.artemis.journal_print import PrintOptions, _fast_live_chunks, load_store, queue_summary
    from amqtool.store.layout import detect

    store = detect(str(path))
    results, tally = {}, bytearray()
    for journal, result in load_store(store, PrintOptions(safe=True)):
        results[journal.kind] = result
        if journal.kind == "messages":
            for _ in _fast_live_chunks(result, PrintOptions(safe=True), tally):
                pass
            ref = queue_summary(results.get("bindings"), result)
            fast = queue_summary(results.get("bindings"), result, tally)
            assert native.tally_live is not None
            return fast, ref
    return None, None


def test_native_tally_equals_reference_on_demo(demo):
    root, manifest = demo
    fast, ref = _summaries(root)
    assert fast == ref
    assert {q["name"]: q["messages"] for q in fast["queues"]} == manifest["expected"]["messageCounts"]


def test_native_tally_equals_reference_on_fixtures():
    from tests.support import ORACLE, ORACLE_SCENARIOS, PUBLIC_JOURNALS

    seen = 0
    for path in [ORACLE / s / "journal" for s in ORACLE_SCENARIOS] + list(PUBLIC_JOURNALS):
        fast, ref = _summaries(path)
        if fast is not None:
            assert fast == ref, path
            seen += 1
    assert seen >= 5


def test_native_tally_from_small_windows_equals_reference(demo, monkeypatch):
    """Runs read their own windows on the formatting threads: with 4 KiB windows (hundreds of runs) the
    tally gathered from them, in live order, still gives the reference summary."""
    import amqtool.engines.artemis.journal_print as jp

    monkeypatch.setattr(jp, "WINDOW", 4096)
    root, manifest = demo
    fast, ref = _summaries(root)
    assert fast == ref
    assert {q["name"]: q["messages"] for q in fast["queues"]} == manifest["expected"]["messageCounts"]
