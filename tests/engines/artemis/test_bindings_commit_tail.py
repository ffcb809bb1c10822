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
