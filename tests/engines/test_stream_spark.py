"""``spark.readStream.format("amqtool")`` under a real Spark streaming query (local[2], one JVM): the query
restarted from its checkpoint (``trigger(availableNow=True)``) after amqtool's journal writer appended to the
store and ``amqtool compact`` compacted it; every batch's rows exact, nothing twice, nothing missed; the
checkpointed offsets are (fileId, position); the store is not written by the stream."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from amqtool.engines.export.stream import Offset
from tests.engines.artemis.compact_helpers import compact
from tests.engines.export_store import EV_A, EV_B, ORDERS, build_store
from tests.engines.test_stream import FIRST, _send, _writer
from tests.support import tree_hashes

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    from amqtool.engines.export.spark import get_session
    from amqtool.spark import register

    session = get_session("local[2]", log_path=str(tmp_path_factory.mktemp("spark") / "spark.log"))
    register(session)
    yield session
    session.stop()


def run(spark, data: Path, checkpoint: Path, **options) -> dict[int, list[tuple[int, str]]]:
    """One run of the query until everything available is read: {batch id: [(message id, queue)]}."""
    got: dict[int, list] = {}

    def each(df, batch_id):
        got[batch_id] = [(r.message_id, r.queue) for r in df.select("message_id", "queue").collect()]

    reader = spark.readStream.format("amqtool")
    for k, v in options.items():
        reader = reader.option(k, v)
    q = (reader.load(str(data)).writeStream.foreachBatch(each)
         .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    q.awaitTermination(300)
    assert q.exception() is None
    return got


def test_stream_across_appends_and_a_compaction(spark, tmp_path):
    data = build_store(tmp_path / "store")
    ckpt = tmp_path / "ckpt"
    before = tree_hashes(data)
    first = run(spark, data, ckpt)
    assert tree_hashes(data) == before  # read-only
    assert list(first) == [0] and sorted(first[0]) == sorted(FIRST)
    offset = json.loads((ckpt / "offsets" / "0").read_text().splitlines()[-1])
    assert (offset["fileId"], offset["highMessageId"]) == (2, 239)
    assert Offset.from_json(offset).pending == [(106, EV_A), (107, ORDERS)]

    assert run(spark, data, ckpt) == {}  # nothing new: no batch

    with _writer(data) as w:
        _send(w, 300, ORDERS)
        _send(w, 301, EV_A, EV_B, tx=900)
        w.append_commit(900)
        w.append_commit(502)
    second = run(spark, data, ckpt)
    assert second == {1: [(300, "orders"), (301, "events.a"), (301, "events.b"), (106, "events.a")]}

    with _writer(data) as w:
        _send(w, 302, EV_B)
    compact(data / "journal")
    with _writer(data) as w:
        _send(w, 303, ORDERS)
    third = run(spark, data, ckpt)
    assert list(third) == [2] and sorted(third[2]) == [(302, "events.b"), (303, "orders")]

    every = first[0] + second[1] + third[2]
    assert len(every) == len(set(every))


def test_stream_of_one_queue_in_safe_mode(spark, tmp_path):
    data = build_store(tmp_path / "store")
    got = run(spark, data, tmp_path / "ckpt", queue="orders", safe="true")
    assert sorted(got[0]) == sorted(r for r in FIRST if r[1] == "orders")
