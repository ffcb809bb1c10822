"""A zeroed run of the bindings journal whose non-zero bytes are a COMMIT's end took a binding transaction
(amqtool/engines/artemis/bindings_run.py): the zeros running back to the last record read are part of the run."""
from __future__ import annotations

import shutil

import pytest

from tests.faults import artemis
from tests.faults.runner import verify_verdict
from tests.faults.stores import campaign_demo


@pytest.fixture(scope="module")
def demo_s3(tmp_path_factory):
    return campaign_demo(tmp_path_factory.mktemp("demo") / "demo-s3", 3)


def test_a_zeroed_binding_transaction_whose_commit_ends_in_sight_is_critical(demo_s3, tmp_path):
    # heads sweep seed 9431 (demo-s3, bindings zeroed @734+64): the address binding 13's ADD_TX (734, 58 bytes)
    # and all but the last 16 bytes of its COMMIT zeroed; the scan reads the zeros as filler and the COMMIT's
    # last 9 non-zero bytes (its count and size words) as the damaged run, "fewer than the 52 of the smallest
    # binding transaction": WARNING, while the broker loses the address binding
    store = shutil.copytree(demo_s3, tmp_path / "s")
    path = store / "data" / "bindings" / "activemq-bindings-1.bindings"
    data = bytearray(path.read_bytes())
    assert (data[734], data[792]) == (13, 18)  # the ADD_TX, its COMMIT
    pristine = artemis.delivered(store)
    data[734:798] = bytes(64)
    path.write_bytes(bytes(data))
    assert pristine.diff(artemis.delivered(store))["bindings"] == 1
    assert verify_verdict(store) == ("CRITICAL", ("damaged-record",))


def test_zeros_that_took_an_open_binding_transactions_commit_are_critical(tmp_path):
    # heads sweep seed 9431 (einerfreiheit's bindings zeroed @785+128): the COMMIT of queue binding 4294967312's
    # transaction, two binding deletes with their COMMITs and most of an id-counter DELETE. The run's 14 non-zero
    # bytes read back as that DELETE ("changes nothing": WARNING); the zeros before them took whole records, the
    # binding's transaction is left open, and the broker got back the binding one of the deletes removed.
    from tests.support import ARTEMIS

    source = ARTEMIS / "public" / "einerfreiheit__java-helloworld" / "data"
    if not source.is_dir():
        pytest.skip("public fixture absent")
    store = shutil.copytree(source, tmp_path / "s")
    for p in store.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    path = store / "bindings" / "activemq-bindings-1.bindings"
    data = bytearray(path.read_bytes())
    assert (data[785], data[807], data[911]) == (18, 15, 16)  # the COMMIT, a DELETE_TX, the id counter's DELETE
    pristine = artemis.delivered(store)
    data[785:913] = bytes(128)
    path.write_bytes(bytes(data))
    assert pristine.diff(artemis.delivered(store))["bindings"] == 1
    assert verify_verdict(store) == ("CRITICAL", ("damaged-record", "messages-journal-missing"))


def test_a_commit_read_back_after_zeros_that_took_its_records_is_critical(tmp_path_factory, tmp_path):
    # heads sweep seed 9431 (demo-s5, bindings zeroed @2113+64): address binding 33's ADD_TX (60 bytes) and the
    # first 4 bytes of its COMMIT. The COMMIT read back from its last 18 bytes named transaction 34, of which no
    # record is left, and was judged "changes nothing" (WARNING); the zeros took the ADD_TX it committed, and the
    # broker lost the address binding
    store = campaign_demo(tmp_path_factory.mktemp("demo") / "demo-s5", 5)
    store = shutil.copytree(store, tmp_path / "s")
    path = store / "data" / "bindings" / "activemq-bindings-1.bindings"
    data = bytearray(path.read_bytes())
    assert (data[2113], data[2173]) == (13, 18)
    pristine = artemis.delivered(store)
    data[2113:2177] = bytes(64)
    path.write_bytes(bytes(data))
    assert pristine.diff(artemis.delivered(store))["bindings"] == 1
    assert verify_verdict(store) == ("CRITICAL", ("damaged-record",))


@pytest.mark.parametrize("start,what", [
    # heads sweep seed 9451 (a01, the same bindings file): zeros from byte 9 of transaction 17's COMMIT (953) to
    # past the data: its transaction id's low bytes zeroed, it read as "a commit of transaction 0", and the window
    # said "a commit lost there rolls them back, a rollback lost there changes nothing" (WARNING)
    (962, "COMMIT of transaction 17"),
    # seed 9441068323120014 (e-n7151): zeros from byte 8 of address binding 20's ADD_TX (975): its type and tag
    # survive, not its ids and user record type, which lost_binding reads
    (983, "ADD_TX"),
    # heads sweep seed 9451 (a04): zeros from byte 2 of address binding 25's ADD_TX (1216): its type alone survives
    # (the tag's first byte is a zero), right where the last valid record ends
    (1218, "ADD_TX"),
])
def test_a_bindings_end_zeroed_from_inside_a_header_is_critical(tmp_path, start, what):
    from tests.support import MESSAGES

    source = MESSAGES / "02_broker_mixed_compacted"
    if not source.is_dir():
        pytest.skip("broker-written fixture absent")
    # its bindings alone, as the public stores hold them (its message journal refers to those queues: a lost
    # binding shows there as ref-unknown-queue whatever the end says)
    store = tmp_path / "s"
    shutil.copytree(source / "bindings", store / "bindings")
    for p in store.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    path = store / "bindings" / "activemq-bindings-3.bindings"
    data = bytearray(path.read_bytes())
    assert (data[953], data[975], data[1490]) == (18, 13, 11)
    pristine = artemis.delivered(store)
    data[start:start + 4096] = bytes(4096)
    path.write_bytes(bytes(data))
    assert pristine.diff(artemis.delivered(store))["bindings"] >= 2
    code, findings = verify_verdict(store)
    assert (code, findings) == ("CRITICAL", ("damaged-tail", "messages-journal-missing"))
    from amqtool.engines.artemis.verify import verify_store
    from amqtool.store.layout import detect

    (tail,) = [f for f in verify_store(detect(store)).findings if f.code == "damaged-tail"]
    assert what in tail.message
