#!/usr/bin/env python3
"""The streaming source's reader (``spark.readStream.format("amqtool")``, :mod:`amqtool.engines.export.stream`)
on one ``create --demo`` store, in process (no JVM: the figures are the reader's own work, which Spark's
driver and one task run), in one run:

* the first batch from ``earliest`` (find the end offset; read every reference on disk), as a ratio of the
  local engine's ``export --format parquet`` of the same store;
* an idle trigger (nothing appended) and a batch of N messages appended by amqtool's JournalWriter, each as a
  ratio of the first batch: a batch costs what was appended, not the journal's size.

Usage: .venv/bin/python bench/bench_stream.py [--size 128MiB] [--append 100] [--work DIR] [--keep]

The store is created under --work (deterministic, seed 1) and appended to (it is a scratch copy). The
1-minute load average is printed first: other work on this machine skews the figures.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from amqtool.engines.artemis.create import parse_size  # noqa: E402
from amqtool.engines.export import ExportRequest, run_export  # noqa: E402


def _batch(reader, start, end) -> int:
    return sum(b.num_rows for p in reader.partitions(start, end) for b in reader.read(p))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="128MiB")
    ap.add_argument("--append", type=int, default=100)
    ap.add_argument("--work")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()

    from amqtool.engines.artemis.demo import create_demo
    from amqtool.engines.export.stream import AmqtoolStreamReader, bindings_of, stream_settings
    from amqtool.formats.artemis.message import CoreMessage
    from amqtool.formats.artemis.userrecords import AddRefRecord
    from amqtool.store.journal_files import open_journal
    from amqtool.store.journal_writer import JournalWriter
    from amqtool.store.layout import MESSAGES, detect

    work = Path(a.work or tempfile.mkdtemp(prefix="bench-stream-"))
    store = work / "store"
    try:
        print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}", file=sys.stderr)
        create_demo(store, parse_size(a.size), seed=1)
        t = time.perf_counter()
        run_export(ExportRequest(path=str(store), out=str(work / "export"), fmt="parquet", engine="local"))
        export_s = time.perf_counter() - t

        reader = AmqtoolStreamReader(stream_settings({"path": str(store)}))
        start = reader.initialOffset()
        t = time.perf_counter()
        end = reader.latestOffset(start, None)
        first_find = time.perf_counter() - t
        t = time.perf_counter()
        first_rows = _batch(reader, start, end)
        first_read = time.perf_counter() - t

        t = time.perf_counter()
        idle = reader.latestOffset(end, None)
        idle_s = time.perf_counter() - t
        assert idle == end

        st = detect(store)
        with open_journal(st.messages) as o:
            size = max(f.size for f in o.files)
        queue = next(iter(bindings_of(st).queues))
        with JournalWriter.open(st.messages.directory, MESSAGES, file_size=size, sync="none") as w:
            for i in range(a.append):
                mid = 10**12 + i
                w.append_add(mid, 45, CoreMessage.build(message_id=mid, address="bench", body=b"x" * 1024).encode())
                w.append_update(mid, 32, AddRefRecord(queue_id=queue).encode())
        t = time.perf_counter()
        nxt = reader.latestOffset(end, None)
        next_find = time.perf_counter() - t
        t = time.perf_counter()
        next_rows = _batch(reader, end, nxt)
        next_read = time.perf_counter() - t
        assert next_rows == a.append, next_rows

        first = first_find + first_read
        print(json.dumps({
            "journal_bytes": sum(p.stat().st_size for p in st.messages.directory.glob("*.amq")),
            "local_export_s": round(export_s, 3),
            "first_batch": {"rows": first_rows, "find_s": round(first_find, 3), "read_s": round(first_read, 3),
                            "ratio_to_export": round(first / export_s, 2)},
            "idle_trigger": {"s": round(idle_s, 4), "ratio_to_first_batch": round(idle_s / first, 4)},
            "appended_batch": {"rows": next_rows, "find_s": round(next_find, 3), "read_s": round(next_read, 3),
                               "ratio_to_first_batch": round((next_find + next_read) / first, 4)},
        }, indent=2))
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
