"""activemq.xml: one reader for the store directory, the adapter settings and the usage limits."""
from __future__ import annotations

import pytest

from amqtool.errors import UnknownStoreError, UsageError
from amqtool.store.activemqxml import read_activemq_xml
from amqtool.store.kahadb_layout import from_activemq_xml

BEANS = """<beans xmlns="http://www.springframework.org/schema/beans">
  <broker xmlns="http://activemq.apache.org/schema/core" %s>
    %s
  </broker>
</beans>"""


@pytest.fixture(autouse=True)
def _no_activemq_env(monkeypatch):
    for name in ("ACTIVEMQ_BASE", "ACTIVEMQ_HOME", "ACTIVEMQ_CONF", "ACTIVEMQ_DATA"):
        monkeypatch.delenv(name, raising=False)


def _xml(tmp_path, broker_attrs: str = "", body: str = ""):
    conf = tmp_path / "conf"
    conf.mkdir(exist_ok=True)
    xml = conf / "activemq.xml"
    xml.write_text(BEANS % (broker_attrs, body))
    return xml


def test_adapter_attributes_and_limits_from_one_read(tmp_path):
    xml = _xml(tmp_path, 'brokerName="b1" dataDirectory="${activemq.data}" adjustUsageLimits="false"',
               '<persistenceAdapter><mKahaDB directory="${activemq.data}/m" journalMaxFileLength="32mb"/>'
               '</persistenceAdapter>'
               '<systemUsage><systemUsage><tempUsage><tempUsage limit="2 gb" percentLimit="10"/></tempUsage>'
               '</systemUsage></systemUsage>')
    s = read_activemq_xml(xml)
    base = tmp_path.resolve()
    assert (s.adapter, s.store_directory) == ("mKahaDB", base / "data/m")
    assert s.adapter_attributes == {"directory": str(base / "data/m"), "journalMaxFileLength": "32mb"}
    assert s.tmp_directory == base / "data/b1/tmp_storage" and not s.adjust_usage_limits
    store, temp = s.limits
    assert (store.limit, store.explicit, store.directory) == (100 * 1024**3, False, base / "data/m")
    assert (temp.limit, temp.percent_limit, temp.directory) == (2 * 1024**3, 10, base / "data/b1/tmp_storage")
    assert s.directories() == {"kahadb": base / "data/m", "tmp_storage": base / "data/b1/tmp_storage"}


def test_broker_defaults(tmp_path):
    # No dataDirectory: BrokerService's "activemq-data"; no adapter: <data>/<brokerName>/KahaDB.
    s = read_activemq_xml(_xml(tmp_path))
    data = tmp_path.resolve() / "activemq-data"
    assert (s.data_directory, s.broker_name, s.adapter) == (data, "localhost", None)
    assert s.store_directory == data / "localhost/KahaDB"


def test_placeholders(tmp_path, monkeypatch):
    monkeypatch.setenv("ACTIVEMQ_DATA", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("kaha.dir", "/srv/kaha")
    s = read_activemq_xml(_xml(tmp_path, 'dataDirectory="${activemq.data}" tmpDataDirectory="${t:/var/tmp/amq}"',
                               '<persistenceAdapter><kahaDB directory="${kaha.dir}"/></persistenceAdapter>'))
    assert s.data_directory == tmp_path / "elsewhere"
    assert (str(s.store_directory), str(s.tmp_directory)) == ("/srv/kaha", "/var/tmp/amq")
    with pytest.raises(UsageError, match=r"\$\{nowhere\}"):
        read_activemq_xml(_xml(tmp_path, 'dataDirectory="${nowhere}"'))


def test_stores_not_on_disk(tmp_path):
    s = read_activemq_xml(_xml(tmp_path, "", "<persistenceAdapter><jdbcPersistenceAdapter/></persistenceAdapter>"))
    assert (s.adapter, s.store_directory) == ("jdbcPersistenceAdapter", None)
    assert s.limits[0].directory == s.data_directory
    with pytest.raises(UnknownStoreError, match="is not KahaDB"):
        from_activemq_xml(tmp_path / "conf/activemq.xml")
    assert read_activemq_xml(_xml(tmp_path, 'persistent="false"')).store_directory is None
    with pytest.raises(UnknownStoreError, match="not persistent"):
        from_activemq_xml(tmp_path / "conf/activemq.xml")


def test_refused_and_broken_files(tmp_path):
    bomb = tmp_path / "bomb.xml"
    bomb.write_text('<!DOCTYPE b [<!ENTITY a "aaaaaaaa"><!ENTITY b "&a;&a;&a;&a;">]><beans><broker/>&b;</beans>')
    with pytest.raises(UsageError, match="refusing activemq.xml"):
        read_activemq_xml(bomb)
    broken = tmp_path / "broken.xml"
    broken.write_text("<beans><broker>")
    with pytest.raises(UsageError, match="cannot read activemq.xml"):
        read_activemq_xml(broken)
    with pytest.raises(UsageError, match="activemq.xml not found"):
        read_activemq_xml(tmp_path / "missing.xml")


def test_an_external_entity_is_refused_in_words(tmp_path):
    # Issue 13 item 18: the XXE refusal printed defusedxml's Python repr.
    from amqtool.errors import UsageError
    from amqtool.store.brokerxml import read_broker_xml

    xml = tmp_path / "broker.xml"
    xml.write_text('<?xml version="1.0"?><!DOCTYPE c [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
                   "<configuration><core><journal-directory>&x;</journal-directory></core></configuration>")
    with pytest.raises(UsageError) as err:
        read_broker_xml(xml)
    assert str(err.value) == (f'file "{xml}": refusing broker.xml: it declares an external entity '
                              "(file:///etc/passwd) 'x', which is never expanded (XML external entities are refused)")
