"""Stores written (and compacted) by a real Artemis broker: print, `--style artemis`, verify, export and compact.

Each directory of ``../shared/fixtures/artemis/messages/`` is a broker data directory with the broker's own
``artemis data print`` output (``print.txt``, and ``print-safe.txt`` for ``--safe``). What is checked:

* ``print --style artemis`` equals ``print.txt`` line for line (identity hash codes aside, as for the oracle;
  the CLI banner and the data directory's path aside, see :func:`_broker_print`);
* ``verify`` of a store the broker loaded cleanly is OK (exit 0), and reads nothing it should not write;
* ``export`` gives, per queue, exactly the messages amqtool's broker state holds for that queue, and those are
  the broker's own load (the manifest's ``expectedLoad``: ids, delivery counts, scheduled times, bodies);
* ``compact`` (six times, as cron does) keeps the load order record by record, keeps the store's size, and
  ``verify`` stays OK after it.

A checkout without these fixtures skips the module with the reason.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.support import BROKER_STORES, MESSAGES, copy_tree, tree_hashes

pytestmark = pytest.mark.skipif(not BROKER_STORES, reason=f"no broker stores in {MESSAGES} in this checkout")


def _normalise(text: str) -> list[str]:
    # System.identityHashCode differs on every JVM run; the rest is compared byte for byte.
    text = re.sub(r"XidImpl \(-?\d+", "XidImpl (#", text)
    return re.sub(r"@-?[0-9a-f]+\b", "@#", text).splitlines()


# Artemis.printBanner copies artemis-cli's banner.txt ahead of every `data print`: the ASCII logo, then
# " Apache ActiveMQ Artemis ${project.version}" and two empty lines. It is the CLI's, not DescribeJournal's,
# and it names the version of the broker installation that ran the tool, which a store does not record, so
# amqtool prints no banner (man amqtool-print) and the comparison drops it, checked line by line.
_CLI_LOGO = r"""     _        _               _
    / \  ____| |_  ___ __  __(_) _____
   / _ \|  _ \ __|/ _ \  \/  | |/  __/
  / ___ \ | \/ |_/  __/ |\/| | |\___ \
 /_/   \_\|   \__\____|_|  |_|_|/___ /
""".splitlines()
_CLI_BANNER = [re.escape(line) for line in _CLI_LOGO] + [r" Apache ActiveMQ Artemis \S+", "", ""]
# The fixture generator wrote the broker's data directory (an absolute path of the machine that ran it) as
# <DATA_DIR> in the "Journal path:" lines (DescribeJournal prints the directory it was given).
DATA_DIR = "<DATA_DIR>"


def _broker_print(text: str, store: Path) -> str:
    """The broker's ``data print`` text without the CLI banner, with ``<DATA_DIR>`` standing for ``store``."""
    lines = text.split("\n")
    if len(lines) > len(_CLI_BANNER) and all(re.fullmatch(pat, line) for pat, line in zip(_CLI_BANNER, lines)):
        lines = lines[len(_CLI_BANNER):]
    return "\n".join(lines).replace(DATA_DIR, str(store))


def _ids(p: Path) -> str:
    return p.name


def _journal_sizes(root: Path) -> tuple[int, int]:
    files = [p for p in root.rglob("*") if p.is_file() and p.suffix in (".amq", ".bindings")]
    return len(files), sum(p.stat().st_size for p in files)


@pytest.mark.parametrize("store", BROKER_STORES, ids=_ids)
@pytest.mark.parametrize("safe", [False, True], ids=["print", "print-safe"])
def test_style_artemis_equals_broker_data_print(run_cli, store, safe):
    expected = store / ("print-safe.txt" if safe else "print.txt")
    if not expected.is_file():
        pytest.skip(f"{expected.name} not in {store.name}")
    code, out, _ = run_cli("print", store, "--style", "artemis", *(["--safe"] if safe else []))
    assert code == 0
    assert _normalise(out) == _normalise(_broker_print(expected.read_text(), store))


@pytest.mark.parametrize("store", BROKER_STORES, ids=_ids)
def test_verify_is_ok_and_reads_only(run_json, store):
    before = tree_hashes(store)
    code, doc, _ = run_json("verify", store)
    assert (code, doc["verdict"]) == (0, "OK"), [f for f in doc["findings"] if f["severity"] != "info"]
    assert tree_hashes(store) == before


@pytest.mark.parametrize("store", BROKER_STORES, ids=_ids)
def test_export_rows_per_queue_equal_the_broker_state(run_cli, store, tmp_path):
    from amqtool.engines.artemis.broker_state import build_broker_state
    from amqtool.engines.artemis.load import load_journal
    from amqtool.store.journal_files import open_journal
    from amqtool.store.layout import detect

    out = tmp_path / "out"
    code, _, err = run_cli("export", store, "-o", out, "--format", "jsonl", "--engine", "local", "--quiet")
    assert code == 0, err
    rows = [json.loads(line) for f in sorted((out / "messages").rglob("*.jsonl")) for line in f.read_text().splitlines()]
    got: dict[str, int] = {}
    for r in rows:
        # Paged messages live in page files, prepared ones in transactions: the live journal refs are the rest.
        if not r["paged"] and r["transaction_state"] == "committed":
            got[r["queue"]] = got.get(r["queue"], 0) + 1

    st = detect(store)
    with open_journal(st.bindings) as b, open_journal(st.messages) as m:
        state = build_broker_state(load_journal(b), load_journal(m))
        want = {q: len(ids) for q, ids in state.live_by_queue().items() if ids}
    assert got == want


@pytest.mark.parametrize("store", BROKER_STORES, ids=_ids)
def test_export_rows_equal_the_manifest_load(run_cli, store, tmp_path):
    """Each journal message row is one of the broker's loaded references (manifest ``expectedLoad``): per queue
    the message ids, delivery counts, scheduled times and body hashes; prepared sends with their transaction."""
    manifest = json.loads((store / "manifest.json").read_text())
    load = manifest.get("expectedLoad")
    if load is None:
        pytest.skip(f"no expectedLoad in {store.name}/manifest.json")
    body = {m["messageID"]: m["bodySha256"] for m in manifest["messages"]}
    out = tmp_path / "out"
    code, _, err = run_cli("export", store, "-o", out, "--format", "jsonl", "--engine", "local", "--quiet")
    assert code == 0, err
    rows = [json.loads(line) for f in sorted((out / "messages").rglob("*.jsonl")) for line in f.read_text().splitlines()]

    live = {(r["queue_id"], r["message_id"]): (r["delivery_count"], r["scheduled_time"], r["body_sha256"])
            for r in rows if not r["paged"] and r["transaction_state"] == "committed"}
    want = {(int(q), i): (d["deliveryCounts"].get(str(i), 0), d["scheduledDeliveryTimes"].get(str(i)), body[i])
            for q, d in load["liveByQueue"].items() for i in d["messageIDs"]}
    assert len(live) == sum(1 for r in rows if not r["paged"] and r["transaction_state"] == "committed")
    assert live == want
    prepared = sorted((r["queue_id"], r["message_id"], r["transaction_id"]) for r in rows
                      if r["transaction_state"] == "prepared")
    assert prepared == sorted((int(q), s["messageID"], s["txID"])
                              for q, sends in load.get("preparedSendsByQueue", {}).items() for s in sends)


@pytest.mark.parametrize("store", BROKER_STORES, ids=_ids)
def test_compact_twice_keeps_load_order_size_and_verdict(run_json, store, tmp_path):
    from tests.engines.artemis.compact_helpers import state

    work = copy_tree(store, tmp_path / "store")
    from amqtool.store.layout import detect

    journals = [j.directory for j in detect(work).journals()]
    before = [state(j, bump=True) for j in journals]
    before_nocc = [state(j, with_cc=False) for j in journals]
    code, doc, _ = run_json("compact", work)
    assert code in (0, 1), doc
    assert [state(j) for j in journals] == before
    size = _journal_sizes(work)
    after = {j["journal"]: j["after"]["dataFiles"] for j in doc["journals"]}
    for _ in range(5):  # six in all: the store's size levels off, and freed files never count as data again
        code, doc, _ = run_json("compact", work)
        assert code in (0, 1), doc
        assert _journal_sizes(work) == size
        assert {j["journal"]: j["before"]["dataFiles"] for j in doc["journals"]} == after
        after = {j["journal"]: j["after"]["dataFiles"] for j in doc["journals"]}
    assert [state(j, with_cc=False) for j in journals] == before_nocc
    code, doc, _ = run_json("verify", work)
    assert (code, doc["verdict"]) == (0, "OK"), doc["findings"]


def test_print_and_compact_count_data_files_as_artemis(run_json, run_cli, tmp_path):
    """A free file of the broker's store holding only a rejected candidate (stale bytes that carry its tag):
    real Artemis (oracle harness, load with changeData) frees it with the Reclaimer at the end of its load,
    and makes the last marked file the current one. ``print`` marks it free, not a data file, and compact's
    'before' counts the data files Artemis keeps (data-6, data-7 and the current data-8), not 4."""
    from tests.engines.artemis.test_compact import BROKER_02, _marked_02

    if not BROKER_02.is_dir():
        pytest.skip("fixture 02 missing")
    journal = _marked_02(tmp_path)
    store = journal.parent
    code, doc, _ = run_json("print", store)
    files = {f["name"]: (f["records"], f["dataFile"], f["currentFile"])
             for j in doc["journals"] if j["kind"] == "messages" for f in j["files"]}
    assert files == {"activemq-data-6.amq": (536, True, False), "activemq-data-7.amq": (1098, True, False),
                     "activemq-data-5.amq": (0, False, False), "activemq-data-8.amq": (0, False, True)}
    code, out, _ = run_cli("print", store)
    line = next(x for x in out.splitlines() if "activemq-data-5.amq" in x)
    assert line.rstrip().endswith("(free)"), line
    code, doc, _ = run_json("compact", store, "--journal", "messages", "--dry-run")
    msg = doc["journals"][0]
    assert (msg["before"]["files"], msg["before"]["dataFiles"]) == (4, 3)
    code, out, _ = run_cli("compact", store, "--journal", "messages")
    assert code == 0 and "before: 4 files, 4.0 MiB, 3 data files" in out, out
