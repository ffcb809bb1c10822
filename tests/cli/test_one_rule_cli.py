"""One rule for every command that judges (issue 25): verify, print, stat and ``compact --dry-run`` reach the
same verdict on the same store, because they all take it from verify's engine (amqtool.engines.verdicts).
The campaign over damaged copies is tests/faults/test_one_rule.py; here, the cases found by hand."""
from __future__ import annotations

import os
import shutil

import pytest

from tests.support import run_without_dac

JUDGES = (("verify",), ("print", "--safe"), ("stat",), ("compact", "--dry-run"))


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    from amqtool.engines.artemis.demo import create_demo

    root = tmp_path_factory.mktemp("one-rule") / "demo"
    create_demo(root, 6 * 1024 * 1024, file_size=1024 * 1024, seed=25)
    return root


@pytest.mark.parametrize("given", ["instance", "data"])
def test_an_unreadable_message_journal_directory_is_unknown_for_every_judge(demo, tmp_path, given):
    # case 5: the messages journal directory of mode 000, read by a user mode bits bind. On c381a60 verify
    # was OK (files=2, the journal skipped); then the store was judged without it (CRITICAL
    # messages-journal-missing), or the commands failed on a probe for a KahaDB store inside it, naming
    # "journal/kahadb". Every judge is UNKNOWN (3), naming the directory and the permission.
    store = tmp_path / "store"
    shutil.copytree(demo, store)
    journal = store / "data" / "journal"
    os.chmod(journal, 0)
    try:
        path = store if given == "instance" else store / "data"
        for argv in JUDGES:
            code, doc, err = run_without_dac([*argv, str(path), "--format", "json", "-q"])
            assert code == 3 and doc["verdict"] == "UNKNOWN", (argv, code, doc, err)
            assert f'"{journal}"' in err or str(journal) in doc.get("error", ""), (argv, err)
            assert "permission denied" in doc["error"], (argv, doc)
            assert "kahadb" not in doc["error"], (argv, doc)
    finally:
        os.chmod(journal, 0o755)


def _random_bytes(dest):
    import random

    dest.mkdir()
    (dest / "activemq-data-1.amq").write_bytes(random.Random(25).randbytes(1 << 20))
    return dest


def _lone_truncated(demo, dest):
    files = sorted((demo / "data" / "journal").glob("*.amq"), key=lambda p: int(p.stem.split("-")[-1]))
    dest.mkdir()
    data = files[0].read_bytes()
    (dest / files[0].name).write_bytes(data[:len(data.rstrip(b"\0")) * 2 // 3])
    return dest


@pytest.mark.parametrize("variant", [("--style", "artemis"), ("--pins",), ("--format", "jsonl")],
                         ids=["style-artemis", "pins", "jsonl"])
@pytest.mark.parametrize("make", ["random-bytes", "lone-truncated"])
def test_every_print_variant_exits_as_verify(demo, tmp_path, run_cli, variant, make):
    # print --style artemis and print --pins took their verdict from the files Artemis refuses: random bytes
    # named like a journal file were CRITICAL (verify: UNKNOWN, not a store), a lone journal file cut short
    # OK (verify: WARNING, a torn tail)
    store = _random_bytes(tmp_path / "s") if make == "random-bytes" else _lone_truncated(demo, tmp_path / "s")
    want, _, _ = run_cli("verify", store, "-q")
    got, _, err = run_cli("print", store, "-q", *variant)
    assert want in (1, 3) and got == want, (variant, want, got, err)
