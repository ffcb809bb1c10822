"""The Parquet table writer: record batches and rows land in the same partitions, in the same order.

write_batch cuts a batch by partition with one stable sort (writers.ParquetTableWriter); the row path
(write) is the reference. Null keys go to Spark's __HIVE_DEFAULT_PARTITION__; the body columns are written
without dictionary or statistics."""
from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from amqtool.engines.export.schema import arrow_schema
from amqtool.engines.export.writers import FileMaker, ParquetTableWriter, write_batches

COLUMNS = (("queue", "string", True), ("n", "long", False), ("body", "binary", True))


def _read(root) -> dict:
    """partition directory -> the rows of its files, in file order."""
    out = {}
    for f in sorted(root.rglob("*.parquet")):
        rows = pq.read_table(f).to_pylist()
        if rows:
            out[f.parent.name] = rows
    return out


def _write(root, rows, batch_size, as_batches, **kw):
    w = ParquetTableWriter(FileMaker(root), "t", COLUMNS, partition_by="queue", **kw)
    if as_batches:
        schema = arrow_schema(COLUMNS)
        for i in range(0, len(rows), batch_size):
            part = rows[i:i + batch_size]
            w.write_batch(pa.RecordBatch.from_pylist([dict(zip(("queue", "n", "body"), r)) for r in part],
                                                     schema=schema))
    else:
        for r in rows:
            w.write(r)
    w.close()
    return _read(root / "t")


@settings(max_examples=40, deadline=None)
@given(keys=st.lists(st.sampled_from(["a", "b", "c/d", None, ""]), min_size=1, max_size=60),
       batch_size=st.integers(1, 25), buffer_bytes=st.sampled_from([64, 1 << 20]))
def test_batches_and_rows_give_the_same_partitions_in_the_same_order(tmp_path_factory, keys, batch_size,
                                                                     buffer_bytes):
    rows = [(k, i, bytes([i % 256]) * (i % 7)) for i, k in enumerate(keys)]
    a = _write(tmp_path_factory.mktemp("b"), rows, batch_size, True, buffer_bytes=buffer_bytes)
    b = _write(tmp_path_factory.mktemp("r"), rows, batch_size, False, buffer_bytes=buffer_bytes)
    assert a == b
    # every row once, in its partition, in input order; None and "" are Spark's default partition
    got = sorted((r["n"], part) for part, rs in a.items() for r in rs)
    assert [n for n, _ in got] == list(range(len(rows)))
    for part, rs in a.items():
        assert [r["n"] for r in rs] == sorted(r["n"] for r in rs)
        want = {"queue=__HIVE_DEFAULT_PARTITION__"} if rs[0]["n"] in [i for i, k in enumerate(keys) if not k] \
            else {f"queue={keys[rs[0]['n']]}".replace("/", "%2F")}
        assert part in want


def test_body_columns_have_no_dictionary_and_no_statistics(tmp_path):
    schema = arrow_schema(COLUMNS)
    batch = pa.RecordBatch.from_pylist([{"queue": "q", "n": i, "body": b"x" * i} for i in range(50)], schema=schema)
    write_batches(FileMaker(tmp_path), "parquet", "t", COLUMNS, [batch], partition_by="queue")
    (f,) = list((tmp_path / "t").rglob("*.parquet"))
    meta = pq.ParquetFile(f).metadata.row_group(0)
    cols = {meta.column(i).path_in_schema: meta.column(i) for i in range(meta.num_columns)}
    assert cols["body"].statistics is None or not cols["body"].statistics.has_min_max
    assert "PLAIN_DICTIONARY" not in cols["body"].encodings and "RLE_DICTIONARY" not in cols["body"].encodings
    assert cols["n"].statistics.has_min_max and cols["n"].statistics.max == 49
    assert pq.read_table(f).column("n").to_pylist() == list(range(50))


COLUMNS2 = (("store", "string", True), ("queue", "string", True), ("n", "long", False))


@settings(max_examples=40, deadline=None)
@given(keys=st.lists(st.tuples(st.sampled_from(["s1", "s2", None]), st.sampled_from(["a", "b", "", None])),
                     min_size=1, max_size=60),
       batch_size=st.integers(1, 25))
def test_two_partition_columns_batches_equal_rows(tmp_path_factory, keys, batch_size):
    """A fleet's layout (store=, then queue=): batches and rows give the same files with the same rows."""
    rows = [(s, q, i) for i, (s, q) in enumerate(keys)]
    out = []
    for as_batches in (True, False):
        root = tmp_path_factory.mktemp("t")
        w = ParquetTableWriter(FileMaker(root), "t", COLUMNS2, partition_by=("store", "queue"), buffer_bytes=64)
        if as_batches:
            schema = arrow_schema(COLUMNS2)
            for i in range(0, len(rows), batch_size):
                w.write_batch(pa.RecordBatch.from_pylist(
                    [dict(zip(("store", "queue", "n"), r)) for r in rows[i:i + batch_size]], schema=schema))
        else:
            for r in rows:
                w.write(r)
        w.close()
        out.append({str(f.relative_to(root)): pq.read_table(f).column("n").to_pylist()
                    for f in sorted(root.rglob("*.parquet"))})
    assert out[0] == out[1]
    assert sorted(n for ns in out[0].values() for n in ns) == list(range(len(rows)))


def test_every_output_file_is_fsynced_when_closed_and_before_the_commit(tmp_path):
    """Each file is made durable by whoever closes it (a Spark task, the writer thread), before the commit
    renames the tree into place; the commit then syncs the directories only."""
    from amqtool.engines.export.writers import OutputTarget
    from amqtool.store import atomic

    out = tmp_path / "out"
    target = OutputTarget(str(out), is_dir=True)
    target.begin()
    schema = arrow_schema(COLUMNS)
    batch = pa.RecordBatch.from_pylist([{"queue": q, "n": i, "body": b"x"} for i, q in enumerate("abcab")],
                                       schema=schema)
    with atomic.record_checkpoints() as written:
        write_batches(target, "parquet", "t", COLUMNS, [batch], partition_by="queue")
    with atomic.record_checkpoints() as committed:
        target.commit()
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*.parquet"))
    assert files == ["t/queue=a/part-00000.parquet", "t/queue=b/part-00000.parquet",
                     "t/queue=c/part-00000.parquet"]
    synced = [w for p, w in written if p == "fsync"]  # as the writer closed them
    assert sorted(os.path.basename(os.path.dirname(w)) for w in synced) == ["queue=a", "queue=b", "queue=c"]
    assert not [w for p, w in committed if p == "fsync"]  # the commit syncs no file again
    assert sum(1 for p, _ in committed if p == "fsync-dir") >= 5  # the tree's directories, then the rename
    assert "rename" in [p for p, _ in committed]


def test_a_signal_while_the_work_directory_is_made_leaves_nothing(tmp_path, monkeypatch):
    """SIGTERM (raised in the main thread) just after the work directory appears, before the writer knew it:
    it and the output's lock were left behind (a CI run of test_a_signal_mid_export_leaves_nothing_behind
    under load: ``.out.amqtool-lock`` and ``.out.amqtool-tmp-PID``)."""
    import pytest

    from amqtool.commands.output import Terminated
    from amqtool.engines.export import writers

    def interrupted(path, mode):
        raise Terminated(15)

    monkeypatch.setattr(writers.os, "chmod", interrupted)
    target = writers.OutputTarget(str(tmp_path / "out"), is_dir=True)
    with pytest.raises(Terminated):
        with target.writing():
            pass
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_an_interrupted_table_leaves_no_open_file_and_no_finaliser_error(tmp_path, monkeypatch):
    """Ctrl-C or SIGTERM while a table is written (the batches' producer raises): the writer thread's
    Parquet writers are closed, their files too, and nothing complains later from a finaliser (before, each
    pyarrow writer's __del__ closed onto its already closed file: 'Exception ignored ... write to closed file'
    on the operator's terminal)."""
    import gc
    import sys

    schema = arrow_schema(COLUMNS)
    unraisable = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: unraisable.append(u))
    opened = []
    maker = FileMaker(tmp_path)
    real_open = maker.open_file

    def open_file(rel):
        fh = real_open(rel)
        opened.append(fh)
        return fh

    maker.open_file = open_file

    def batches():
        for i in range(3):
            # 12 MiB a batch: past the writer's 16 MiB buffer, so partitions' files are open when it stops
            yield pa.RecordBatch.from_pylist([{"queue": q, "n": i, "body": bytes(6 << 20)} for q in "ab"],
                                             schema=schema)
        raise KeyboardInterrupt

    import pytest

    with pytest.raises(KeyboardInterrupt):
        write_batches(maker, "parquet", "t", COLUMNS, batches(), partition_by="queue")
    gc.collect()
    assert opened and all(fh.closed for fh in opened)
    assert unraisable == []
