"""Sizes exactly as Artemis reads them (ByteUtil.convertTextBytes), issue 26: `10M` and `10MB` in broker.xml
were read as 10,000,000 bytes; Artemis reads both as 10,485,760."""
from __future__ import annotations

import math

import pytest

from amqtool.errors import UsageError
from amqtool.store.brokerxml import parse_byte_size, read_broker_xml
from amqtool.units import check_number


def _bytetil_cases():
    """ByteUtilTest.testTextBytesToLongBytes (apache/activemq-artemis 6700541d), case for case."""
    factor = (1, 5, 10)
    types = ("", "b", "k", "m", "g")
    size = (1, 1, 1024, 1024 * 1024, 1024 * 1024 * 1024)
    for f in factor:
        for j, t in enumerate(types):
            texts = [f"{f}{t}", f"{f} {t}", f"{f}{t.upper()}", f"{f} {t.upper()}"]
            if j >= 2:
                texts += [f"{f}{t}b", f"{f} {t}b", f"{f}{t.upper()}B", f"{f} {t.upper()}B"]
            for text in texts:
                yield text, f * size[j]


@pytest.mark.parametrize("text, expected", list(_bytetil_cases()))
def test_byteutil_test_table(text, expected):
    assert parse_byte_size(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("10M", 10_485_760), ("10MB", 10_485_760), ("10MiB", 10_485_760), ("10mib", 10_485_760),
    ("512K", 524_288), ("1GiB", 1024**3), ("1048576", 1_048_576), (" 7 kb ", 7168),
    ("-1", -1), ("+5", 5),  # the Long.parseLong fallback
])
def test_artemis_reads(text, expected):
    assert parse_byte_size(text) == expected


@pytest.mark.parametrize("text", ["x", "1TB", "1.5M", "10 M B", "", "M", "10MiBB", "1e6", "99999999999999999999"])
def test_what_artemis_refuses(text):
    # ByteUtilTest.testTextBytesToLongBytesNegative ("x"), and what its patterns cannot match
    with pytest.raises(UsageError):
        parse_byte_size(text)


def test_broker_xml_journal_file_size_10m_is_a_mebibyte_multiple(tmp_path):
    xml = tmp_path / "broker.xml"
    xml.write_text("<configuration><core><journal-file-size>10M</journal-file-size></core></configuration>")
    assert read_broker_xml(xml).journal_file_size == 10_485_760


@pytest.mark.parametrize("value, kw", [(math.inf, dict(above=0)), (math.nan, dict(above=0)), (-1.0, dict(above=0)),
                                       (0, dict(minimum=1)), (-2, dict(minimum=1)), (101, dict(maximum=100)),
                                       (-2, dict(minimum=1, also=(-1,)))])
def test_check_number_refuses(value, kw):
    with pytest.raises(UsageError) as err:
        check_number(value, "--opt", **kw)
    assert str(err.value).startswith("--opt must be")


def test_check_number_passes():
    assert check_number(None, "--x", minimum=1) is None
    assert check_number(-1, "--pool-files", minimum=1, also=(-1,)) == -1
    assert check_number(0.5, "--s", above=0) == 0.5
