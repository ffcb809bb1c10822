"""``print`` and ``verify`` on stores with paging and large messages: JSON documents, exit codes, and
input bytes left as they were."""
from __future__ import annotations

import os

import pytest

from amqtool.formats.artemis.paging import page_file_name
from tests.paging_stores import sample_store
from tests.support import tree_hashes


@pytest.fixture
def sample(tmp_path):
    return sample_store(tmp_path / "data")


def test_print_json_has_the_paging_section(sample, run_json):
    before = tree_hashes(sample.root)
    code, doc, _ = run_json("print", sample.root)
    assert code == 0 and doc["verdict"] == "OK"
    paging = doc["paging"]
    assert paging["directory"] == str(sample.root / "paging")
    assert [s["address"] for s in paging["stores"]] == ["events", "orders"]
    orders = paging["stores"][1]
    assert [(m["page"], m["messageNumber"], m["messageId"], m["pageTransaction"], m["pendingQueues"])
            for m in orders["messages"]] == [
        (1, 0, 101, None, []), (1, 1, 102, None, [7]), (1, 2, 103, "committed", [10, 7]),
        (2, 0, 104, None, [10, 7]), (2, 1, 105, "prepared", [10, 7]), (3, 0, 106, "not-found", [10, 7])]
    assert paging["largeMessages"][0]["messageId"] == 104
    assert tree_hashes(sample.root) == before


def test_print_json_max_pages(sample, run_json):
    code, doc, _ = run_json("print", sample.root, "--max-pages", "1", "--safe")
    assert code == 0
    assert [len(s["pages"]) for s in doc["paging"]["stores"]] == [1, 1]
    assert all("userId" not in m for s in doc["paging"]["stores"] for m in s["messages"])


def test_print_artemis_style_paging(sample, run_cli):
    code, out, _ = run_cli("print", sample.root, "--style", "artemis", "--max-pages", "1")
    assert code == 0
    text = out.split("P A G I N G\n********************************************\n", 1)[1]
    assert text.count("*******   Page ") == 3
    assert "******* Giving up at Page 3, System has a total of 3 pages\n" in text
    assert "Queues = 10 (ACK),7 (OK) \n^^^ Previous record has 1 acked queues and 2 queues routed\n\n" in text


def test_verify_clean_store(sample, run_json):
    code, doc, _ = run_json("verify", sample.root)
    assert code == 0 and doc["verdict"] == "OK"
    assert doc["summary"]["paging"]["messages"] == 7


@pytest.mark.parametrize("damage, code, finding, severity", [
    ("cut", 1, "page-torn-tail", "warning"),
    ("end-marker", 2, "page-damaged", "critical"),
    ("remove-middle", 2, "page-missing", "critical"),  # the sample's page counters prove the loss
    ("remove-msg", 2, "large-message-missing", "critical"),
    ("stray-msg", 1, "large-message-orphan", "warning"),
    ("short-msg", 2, "large-message-size", "critical"),
])
def test_verify_damaged_copies(sample, run_json, damage, code, finding, severity):
    orders = sample.folders["orders"]
    lm = sample.root / "large-messages"
    if damage == "cut":
        p = orders / page_file_name(3)
        p.write_bytes(p.read_bytes()[:-9])
    elif damage == "end-marker":
        p = orders / page_file_name(1)
        data = bytearray(p.read_bytes())
        data[-1] = 0
        p.write_bytes(bytes(data))
    elif damage == "remove-middle":
        os.remove(orders / page_file_name(2))
        os.remove(lm / "104.msg")  # its page is gone, and so is its body
    elif damage == "remove-msg":
        os.remove(lm / "104.msg")
    elif damage == "stray-msg":
        (lm / "31337.msg").write_bytes(b"left behind")
    elif damage == "short-msg":
        (lm / "104.msg").write_bytes(b"x" * 10)
    before = tree_hashes(sample.root)
    rc, doc, _ = run_json("verify", sample.root)
    assert tree_hashes(sample.root) == before
    assert rc == code and doc["verdict"] == ["OK", "WARNING", "CRITICAL"][code]
    hits = [f for f in doc["findings"] if f["code"] == finding]
    assert hits and all(f["severity"] == severity for f in hits)
    worst = [f for f in doc["findings"] if f["severity"] in ("warning", "critical")]
    assert {f["code"] for f in worst} == {finding}
