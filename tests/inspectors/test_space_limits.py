"""Artemis max-disk-usage/min-disk-free and Classic storeUsage/tempUsage semantics, without mounting."""
from __future__ import annotations

import pytest

from amqtool.engines.check import Target, check_disk_space
from amqtool.errors import UsageError, Verdict
from amqtool.inspectors.space import ArtemisLimit, Usage, assess_classic
from amqtool.store.activemqxml import parse_classic_size, read_activemq_xml
from amqtool.store.brokerxml import parse_byte_size

GiB = 1024**3


def test_artemis_units():
    assert parse_byte_size("100GB") == 100 * 1024**3  # ByteUtil: every unit a power of 1024
    assert parse_byte_size("10MiB") == 10 * 1024**2
    assert parse_byte_size("512K") == 524_288


def test_max_disk_usage_is_strictly_below_the_percentage():
    u = Usage("/x", 1, total=1000, usable=100)  # 90.0 % used
    assert not ArtemisLimit(90).within(u)  # FileStoreMonitor: ok = usage < maxUsage
    assert ArtemisLimit(91).within(u)
    assert ArtemisLimit(90).headroom(u) == 0
    assert ArtemisLimit(-1).mode == "off" and ArtemisLimit(-1).within(u)


def test_min_disk_free_wins_over_max_disk_usage():
    u = Usage("/x", 1, total=1000, usable=500)  # 50 % used: fine for max-disk-usage 90
    lim = ArtemisLimit(90, min_disk_free=600)
    assert lim.mode == "min-disk-free" and not lim.within(u)
    assert lim.headroom(u) == -100
    assert ArtemisLimit(90, min_disk_free=-1).mode == "max-disk-usage"
    assert not ArtemisLimit(90, min_disk_free=500).within(u)  # usable must be strictly greater


def test_classic_units_are_binary():
    assert parse_classic_size("100 gb") == 100 * GiB
    assert parse_classic_size("20 Mb") == 20 * 1024**2
    assert parse_classic_size("1g") == GiB
    assert parse_classic_size("1024") == 1024
    with pytest.raises(UsageError):
        parse_classic_size("1 tb")  # XBeanByteConverterUtil knows b, k, m, g only


ACTIVEMQ_XML = """<beans xmlns="http://www.springframework.org/schema/beans">
  <broker xmlns="http://activemq.apache.org/schema/core" brokerName="localhost" dataDirectory="${activemq.data}">
    <persistenceAdapter><kahaDB directory="${activemq.data}/kahadb"/></persistenceAdapter>
    <systemUsage><systemUsage>
      <memoryUsage><memoryUsage percentOfJvmHeap="70"/></memoryUsage>
      <storeUsage><storeUsage limit="%s"/></storeUsage>
    </systemUsage></systemUsage>
  </broker>
</beans>"""


def _instance(tmp_path, limit="100 gb"):
    (tmp_path / "conf").mkdir()
    xml = tmp_path / "conf/activemq.xml"
    xml.write_text(ACTIVEMQ_XML % limit)
    return xml


def test_read_activemq_xml(tmp_path, monkeypatch):
    monkeypatch.delenv("ACTIVEMQ_DATA", raising=False)
    monkeypatch.delenv("ACTIVEMQ_BASE", raising=False)
    s = read_activemq_xml(_instance(tmp_path, "2 gb"))
    assert s.store_directory == tmp_path.resolve() / "data/kahadb"
    assert s.tmp_directory == tmp_path.resolve() / "data/localhost/tmp_storage"
    store, temp = s.limits
    assert (store.name, store.limit, store.explicit) == ("storeUsage", 2 * GiB, True)
    assert (temp.name, temp.limit, temp.explicit) == ("tempUsage", 50 * GiB, False)


def test_read_activemq_xml_errors(tmp_path):
    with pytest.raises(UsageError):
        read_activemq_xml(tmp_path / "missing.xml")
    bad = tmp_path / "a.xml"
    bad.write_text("<beans/>")
    with pytest.raises(UsageError):
        read_activemq_xml(bad)


def test_classic_limit_larger_than_the_disk_is_cut_or_refused():
    u = Usage("/x", 1, total=20 * GiB, usable=10 * GiB)
    a = assess_classic(100 * GiB, u, current=1 * GiB, adjust=True)
    assert a.cut_at_start and a.effective_limit == 11 * GiB and a.headroom == 10 * GiB
    assert assess_classic(100 * GiB, u, current=1 * GiB, adjust=False).refuses_start
    assert assess_classic(100 * GiB, u, current=0, adjust=True, percent_limit=25).effective_limit == 5 * GiB
    # "total" stands in for the partition: 25 % of 8 GiB, and the cut is to total + current
    assert assess_classic(100 * GiB, u, current=0, adjust=True, percent_limit=25, total=8 * GiB).effective_limit \
        == 2 * GiB
    assert assess_classic(100 * GiB, u, current=GiB, adjust=True, total=8 * GiB).effective_limit == 9 * GiB


def test_classic_store_usage_flips_when_the_store_reaches_its_limit(tmp_path):
    xml = _instance(tmp_path, "1 mb")
    s = read_activemq_xml(xml)
    s.store_directory.mkdir(parents=True)
    s.limits[0].directory = s.store_directory
    (s.store_directory / "db-1.log").write_bytes(b"\0" * 1000)
    ok = check_disk_space([], ArtemisLimit(), s)
    [store] = [c for c in ok.checks["classic"] if c["name"] == "storeUsage"]
    assert store["currentUsage"] == 1000 and store["effectiveLimit"] == 1024 * 1024
    assert "classic-limit-below-journal-file" in [f.code for f in ok.findings]
    (s.store_directory / "db-2.log").write_bytes(b"\0" * (1024 * 1024))
    full = check_disk_space([], ArtemisLimit(), s)
    assert full.verdict == Verdict.CRITICAL
    assert "classic-limit-breached" in [f.code for f in full.findings]


def test_missing_broker_directory_is_judged_on_its_parent(tmp_path):
    report = check_disk_space([Target("journal", str(tmp_path / "data/journal"), explicit=False)], ArtemisLimit(100))
    assert [f.code for f in report.findings][0] == "directory-not-created"
    assert report.findings[0].details["inspected"] == str(tmp_path)
    missing = check_disk_space([Target("path", str(tmp_path / "nope"))], ArtemisLimit())
    assert missing.verdict == Verdict.UNKNOWN and missing.findings[0].code == "path-not-found"
