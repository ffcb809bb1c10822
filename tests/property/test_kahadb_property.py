"""Any bytes -> findings or FormatError, never another exception (KahaDB codecs and verify)."""
import os
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqtool.errors import FormatError
from amqtool.formats.kahadb import journal as jr
from amqtool.formats.kahadb.commands import decode_command
from amqtool.formats.kahadb.javaser import decode_ack_file_map
from amqtool.formats.kahadb.openwire import decode_message, decode_subscription_info
from amqtool.formats.kahadb.pagefile import decode_index

FIXTURES = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "kahadb"
SEED = (FIXTURES / "tx" / "kahadb" / "db-1.log").read_bytes()[:6000] if FIXTURES.is_dir() else jr.encode_batch([b"\x00\x03\x0a\x01x"])


def _codec(fn, data):
    try:
        fn(data)
    except FormatError:
        pass


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=2000))
def test_codecs_on_arbitrary_bytes(data):
    for fn in (decode_command, decode_message, decode_subscription_info, decode_ack_file_map, decode_index):
        _codec(fn, data)
    list(jr.scan_file(data))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(SEED) - 1), st.integers(0, 255)), min_size=1, max_size=8))
def test_mutated_journal_scans_and_decodes(muts):
    buf = bytearray(SEED)
    for pos, val in muts:
        buf[pos] = val
    data = bytes(buf)
    for ev in jr.scan_file(data):
        if isinstance(ev, jr.Batch):
            try:
                for rec in jr.iter_batch_records(data, ev):
                    try:
                        cmd = decode_command(rec.payload)
                        msg = getattr(cmd, "message", None)
                        if msg is not None and not isinstance(msg, str):
                            m = decode_message(msg)
                            m.properties()
                            m.body_bytes()
                    except FormatError:
                        pass
            except FormatError:
                pass


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(min_size=1, max_size=4000), st.booleans())
def test_verify_store_on_random_files(tmp_path_factory, data, with_index):
    from amqtool.engines.kahadb import verify_store, print_document
    from amqtool.store.layout import KahaDBStore

    d = tmp_path_factory.mktemp("rnd")
    (d / "db-1.log").write_bytes(SEED[:len(data)] if data[0] & 1 else data)
    if with_index:
        (d / "db.data").write_bytes(data * 3)
    store = KahaDBStore(root=d, directories=[d])
    findings, summary = verify_store(store)
    assert summary["files"] == 1
    print_document(store, safe=True, pins=True)
