"""body_reads: which bodies the broker's message-journal load reads past (its decode then throws)."""
from __future__ import annotations

import pytest

from amqtool.formats.artemis.body_reads import reads_past_body


@pytest.mark.parametrize("utype,body_len,past", [
    (39, 12, True), (39, 20, False),  # CursorAckRecordEncoding: long, long, int
    (42, 19, True), (42, 20, False),
    (35, 11, True), (35, 12, False),  # PageTransactionInfoImpl / PageUpdateTXEncoding: long, int
    (40, 16, False), (40, 20, True), (40, 24, False),  # PageCountRecord: long, long, then a long if any is left
    (41, 12, False), (41, 16, True), (41, 20, False), (41, 24, False),  # PageCountRecordInc: long, int, [long]
    (43, 15, True), (43, 16, False),
    (32, 7, True), (32, 8, False), (34, 11, True), (36, 16, False),
    (45, 3, False), (37, 0, False),  # variable-length types are judged elsewhere
])
def test_reads_past_body(utype, body_len, past):
    assert reads_past_body(utype, body_len) is past
