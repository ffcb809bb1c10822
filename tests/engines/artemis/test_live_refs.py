"""Export's committed references in C (live_refs.journal_refs: native.tally_live + tally_pairs) equal the
reference, a BrokerState (JournalRefs.from_state), on every fixture, on demo stores and on generated
journals: the same message records in id order, the same live queues in the same (HashMap) order, the same
delivery counts, scheduled times and prepared transactions."""
from __future__ import annotations

import os
import struct
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqtool import native
from amqtool.engines.artemis.broker_state import DELIVERY_TYPES, REF_TYPES, build_broker_state
from amqtool.engines.artemis.live_refs import JournalRefs, journal_refs
from amqtool.engines.artemis.load import LiveList, load_journal
from amqtool.formats.artemis import records as R
from amqtool.store.journal_files import open_journal
from amqtool.store.layout import detect
from tests.native.test_loader import _write_journal
from tests.support import ORACLE, ORACLE_SCENARIOS, PUBLIC_JOURNALS

pytestmark = pytest.mark.skipif(native.tally_pairs is None, reason="the C extension is not built")


def _view(refs: JournalRefs) -> tuple:
    committed = [(mid, (rec.file_index, rec.body_offset, rec.body_len, rec.user_record_type), list(qs))
                 for mid, rec, qs in refs.committed()]
    prepared = [(p.tx_id, sorted(p.messages), p.refs, p.acks, p.ref_sequence) for p in refs.prepared]
    return committed, refs.delivery_counts, refs.scheduled, prepared


def _assert_twins(journal, decode=DELIVERY_TYPES) -> int:
    """Native and reference refs of one messages journal are equal; returns the number of live queue pairs."""
    with open_journal(journal) as opened:
        result = load_journal(opened)
        assert isinstance(result.live, LiveList)
        fast = _view(journal_refs(result, decode))
        ref = _view(JournalRefs.from_state(build_broker_state(None, result, decode=decode)))
    assert fast == ref
    ids = [c[0] for c in fast[0]]
    assert ids == sorted(set(ids))  # ascending, each once
    return sum(len(c[2]) for c in fast[0])


def _messages_journals(root: Path):
    store = detect(str(root))
    return [j for j in store.journals() if j.kind == "messages"]


def test_native_refs_equal_the_reference_on_every_fixture():
    journals = 0
    for path in [ORACLE / s / "journal" for s in ORACLE_SCENARIOS] + list(PUBLIC_JOURNALS):
        for journal in _messages_journals(path):
            _assert_twins(journal)
            _assert_twins(journal, REF_TYPES)
            journals += 1
    assert journals >= 5


def test_native_refs_equal_the_reference_on_the_export_store(tmp_path):
    """The export tests' store: prepared XA messages and refs, acks, delivery counts, schedules, large messages."""
    from tests.engines.export_store import build_store

    (journal,) = _messages_journals(build_store(tmp_path / "s"))
    assert _assert_twins(journal) > 0


def test_native_refs_equal_the_reference_on_a_demo_store_and_its_manifest(tmp_path):
    from amqtool.engines.artemis.demo import create_demo

    manifest = create_demo(tmp_path / "demo", 4 * 1024 * 1024, file_size=512 * 1024, seed=5)
    (journal,) = _messages_journals(tmp_path / "demo")
    assert _assert_twins(journal) > 0
    with open_journal(journal) as opened:
        result = load_journal(opened)
        live = {}
        for _mid, _rec, qs in journal_refs(result).committed():
            for q in qs:
                live[q] = live.get(q, 0) + 1
    assert sum(live.values()) == sum(manifest["expected"]["messageCounts"].values())


# --- generated journals: messages, refs, acks, delivery counts and schedules, in and out of transactions ---

MIDS = st.integers(1, 12)
QUEUES = st.sampled_from([3, 4, 5, 17, 2**33 + 3, -7])


@st.composite
def ref_op(draw):
    mid = draw(MIDS)
    q = draw(QUEUES)
    kind = draw(st.sampled_from(["msg", "ref", "ref", "ack", "count", "sched", "delete", "short", "long"]))
    tx = draw(st.one_of(st.none(), st.integers(500, 502)))
    if kind == "msg":
        utype, body, rtype = draw(st.sampled_from([45, 45, 30])), bytes([1]) + bytes(draw(st.integers(0, 9))), "add"
    elif kind in ("ref", "ack", "short", "long"):
        utype = 33 if kind == "ack" else 32
        body = struct.pack(">q", q)
        body = body[:draw(st.integers(0, 7))] if kind == "short" else body + (b"xyz" if kind == "long" else b"")
        rtype = "update"
    elif kind == "count":
        utype, body, rtype = 34, struct.pack(">qi", q, draw(st.integers(0, 9))), "update"
    elif kind == "sched":
        utype, body, rtype = 36, struct.pack(">qq", q, draw(st.integers(0, 2**40))), "update"
    else:
        utype, body, rtype = 0, b"", "delete"
    if rtype == "delete":
        return R.Record(R.DELETE_TX if tx else R.DELETE, 0, 0, record_id=mid, **({"tx_id": tx} if tx else {}))
    t = {"add": (R.ADD, R.ADD_TX), "update": (R.UPDATE, R.UPDATE_TX)}[rtype][1 if tx else 0]
    return R.Record(t, 0, 0, record_id=mid, user_record_type=utype, body=body, **({"tx_id": tx} if tx else {}))


@st.composite
def refs_journal(draw):
    files = []
    for _ in range(draw(st.integers(1, 3))):
        recs = draw(st.lists(ref_op(), max_size=40))
        seen: dict[int, int] = {}
        out = []
        for r in recs:
            out.append(r)
            if r.type in (R.ADD_TX, R.UPDATE_TX, R.DELETE_TX):
                seen[r.tx_id] = seen.get(r.tx_id, 0) + 1
        for tx, n in seen.items():  # commit, prepare or leave open each transaction of the file
            end = draw(st.sampled_from(["commit", "prepare", "open"]))
            if end == "commit":
                out.append(R.Record(R.COMMIT, 0, 0, tx_id=tx, number_of_records=n))
            elif end == "prepare":
                out.append(R.Record(R.PREPARE, 0, 0, tx_id=tx, number_of_records=n, extra=b"xid"))
        files.append(out)
    return files


@settings(max_examples=int(os.environ.get("AMQTOOL_HYPOTHESIS_EXAMPLES", "150")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(files=refs_journal())
def test_native_refs_equal_the_reference_on_generated_journals(files):
    with tempfile.TemporaryDirectory() as tmp:
        d = _write_journal(Path(tmp), files, 2, 1024, {}, [])
        _assert_twins(detect(str(d)).journals()[0])
