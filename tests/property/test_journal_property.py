"""Any bytes, fed to the scanner, the record decoder, the load and verify, give records, findings or
FormatError: never another exception, never a hang."""
from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqtool.engines.artemis.verify import verify_store
from amqtool.errors import FormatError
from amqtool.formats.artemis.records import decode_header, decode_record, scan_records_py
from amqtool.store.layout import detect
from tests.support import ORACLE

SEED_FILES = [
    (ORACLE / "03_transactions" / "journal" / "activemq-data-1.amq").read_bytes()[:8192],
    (ORACLE / "04b_after_compact" / "journal" / "activemq-data-6.amq").read_bytes()[:8192],
]

PROFILE = settings(max_examples=int(os.environ.get("AMQTOOL_HYPOTHESIS_EXAMPLES", "150")), deadline=None,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@st.composite
def mutated_journal(draw):
    data = bytearray(draw(st.sampled_from(SEED_FILES)))
    for _ in range(draw(st.integers(0, 12))):
        pos = draw(st.integers(0, len(data) - 1))
        data[pos] = draw(st.integers(0, 255))
    if draw(st.booleans()):
        data = data[: draw(st.integers(0, len(data)))]
    return bytes(data)


any_journal = st.one_of(mutated_journal(), st.binary(max_size=4096))


@PROFILE
@given(data=any_journal, version=st.sampled_from([1, 2]), tag=st.integers(0, 2**31 - 1))
def test_scanner_accepts_only_consistent_records(data, version, tag):
    records, _ = scan_records_py(data, tag, version, check_tag=False)
    last_end = 0
    for rec in records:
        t, off, size = rec[0], rec[1], rec[2]
        assert 10 <= t <= 19 and off >= last_end and off + size <= len(data)
        assert int.from_bytes(data[off + size - 4: off + size], "big", signed=True) == size
        assert decode_record(data, off, version).encode(version) == data[off:off + size]
        last_end = off + size


@PROFILE
@given(data=any_journal, offset=st.integers(0, 5000))
def test_decode_record_raises_only_format_error(data, offset):
    try:
        decode_record(data, offset, 2)
    except FormatError:
        pass


@PROFILE
@given(data=any_journal)
def test_header_decode_raises_only_format_error(data):
    try:
        decode_header(data)
    except FormatError:
        pass


@settings(max_examples=int(os.environ.get("AMQTOOL_HYPOTHESIS_EXAMPLES", "60")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(files=st.lists(any_journal, min_size=1, max_size=3))
def test_verify_gives_findings_only(tmp_path_factory, files):
    d = tmp_path_factory.mktemp("j")
    for i, data in enumerate(files, 1):
        (d / f"activemq-data-{i}.amq").write_bytes(data)
    report = verify_store(detect(d))
    for f in report.findings:
        assert f.code and f.message and f.severity
