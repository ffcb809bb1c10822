"""Export output: built under a private temporary name, renamed into place when complete.

Exports hold message bodies, so (issue 4, DESIGN.md "Safety rules"):

* everything is created readable by its owner only: files 0600, directories 0700, unless ``mode`` says
  otherwise (directories then get an execute bit wherever they get a read bit);
* it is written inside a sibling work directory ``.<name>.amqtool-tmp-<pid>`` (0700, so nothing inside is
  reachable by others while it is written, whatever umask the JVM uses), fsynced, then renamed to the
  output name; a crash leaves no partial output under that name;
* an existing output is never replaced unless ``force``; with ``force`` it is replaced only after the new
  one is complete.

The work directory also holds what the engines need on the side (Spark's log and local directory, the
Spark tasks' attempt directories); it is removed after the rename. :class:`OutputTarget` is the one place
these rules live; the Parquet and JSON Lines table writers, which both engines write through (the Spark
engine in its tasks, a set of ``part-NNNNN`` files per part), are here too.
"""
from __future__ import annotations

import errno
import io
import json
import os
import shutil
import stat
from contextlib import contextmanager
from pathlib import Path

from amqtool.errors import AmqtoolError, UsageError
from amqtool.store import atomic, output

DEFAULT_FILE_MODE = 0o600


def parse_mode(text: str | None) -> int:
    """``--mode`` (octal, e.g. ``640``) -> file mode. UsageError when invalid."""
    if text is None:
        return DEFAULT_FILE_MODE
    try:
        mode = int(str(text), 8)
    except ValueError:
        raise UsageError(f"invalid --mode {text!r} (expected octal, e.g. 600 or 640)") from None
    if not 0 <= mode <= 0o777:
        raise UsageError(f"invalid --mode {text!r} (expected 000..777)")
    if mode & 0o600 != 0o600:
        raise UsageError(f"--mode {text} leaves the owner unable to read or replace the export "
                         f"(give at least 600)")
    return mode


def dir_mode_for(file_mode: int) -> int:
    """Directories: the file mode plus search (x) wherever read (r) is granted, and always owner rwx."""
    return file_mode | ((file_mode & 0o444) >> 2) | 0o700


# errors of the output itself (a store's export fails for them as a whole, never as one store's problem)
OUTPUT_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS)


class OutputTarget:
    """Where one export goes. ``is_dir``: a directory of tables (jsonl, parquet) or one file (xml)."""

    def __init__(self, out: str | os.PathLike, *, is_dir: bool, force: bool = False, mode: int = DEFAULT_FILE_MODE,
                 inputs=()):
        self.given = os.fspath(out)
        self.out = output.real_path(out)
        self.is_dir = is_dir
        self.kind = output.EXPORT_DIR if is_dir else output.EXPORT_FILE
        self.force = force
        self.inputs = list(inputs)
        self.file_mode = mode
        self.dir_mode = dir_mode_for(mode)
        self.work: Path | None = None
        self.claimed: output.Output | None = None

    def check(self) -> None:
        """The output rule (:mod:`amqtool.store.output`), before any work starts: never an input, never a
        device or fifo, an existing output replaced only with force and only when it is an earlier export."""
        self.out = output.check(self.given, self.kind, inputs=self.inputs, force=self.force)

    def claim(self) -> None:
        """:meth:`check`, then lock the output against a second writer and remove dead writers' leftovers."""
        if self.claimed is None:
            self.claimed = output.claim(self.given, self.kind, inputs=self.inputs, force=self.force)
            self.out = self.claimed.path

    def release(self) -> None:
        if self.claimed is not None:
            self.claimed.release()
            self.claimed = None

    @contextmanager
    def writing(self):
        """Build the output in the work directory (:meth:`begin`), then :meth:`commit` it; on any error
        :meth:`abort`, so nothing is left, and an error writing the output (full disk, quota, read-only,
        I/O) becomes one line naming the output."""
        try:
            self.begin()
        except BaseException:  # a signal or an error while the work directory is made: nothing is left
            self.abort()
            raise
        try:
            yield self
            self.commit()
        except OSError as err:
            self.abort()
            if err.errno in OUTPUT_ERRNOS + (errno.EIO,):
                # a write error names no file: say which output it was, and that nothing was left behind
                raise AmqtoolError(f"writing the export failed: {err.strerror}; nothing was written to the "
                                   f"output (its temporary files are removed)", path=str(self.out)) from None
            raise
        except BaseException:
            self.abort()
            raise

    def begin(self) -> Path:
        """Create the private work directory; returns :attr:`path`, where the output is to be built."""
        self.claim()
        work = self.out.parent / f".{self.out.name}.amqtool-tmp-{os.getpid()}"
        if work.exists():
            shutil.rmtree(work)
        self.work = work  # before it exists: from the mkdir on, an interrupt's abort() removes it
        os.mkdir(work, 0o700)
        os.chmod(work, 0o700)  # whatever the umask
        if self.is_dir:
            os.mkdir(self.path, self.dir_mode)
            os.chmod(self.path, self.dir_mode)
        return self.path

    @property
    def path(self) -> Path:
        assert self.work is not None, "begin() first"
        return self.work / "out"

    def side(self, name: str) -> Path:
        """A path in the work directory for side files (logs, spill space); removed with it."""
        assert self.work is not None, "begin() first"
        return self.work / name

    def open_file(self, relative: str | None = None):
        """Open a new output file (binary, exclusive, the export's mode) under :attr:`path`."""
        if relative is None:
            return FileMaker(self.path.parent, self.file_mode).open_file(self.path.name)
        return FileMaker(self.path, self.file_mode).open_file(relative)

    def _finish_tree(self) -> None:
        """Modes, Spark's bookkeeping files removed, every directory fsynced (each file was when its writer
        closed it: :class:`DurableFile`)."""
        root = self.path
        if not root.is_dir():
            os.chmod(root, self.file_mode)
            with open(root, "rb") as fh:
                atomic.fsync(fh.fileno(), root)
            return
        for dirpath, dirs, names in os.walk(root, topdown=False):
            for n in names:
                p = os.path.join(dirpath, n)
                if n == "_SUCCESS" or (n.startswith(".") and n.endswith(".crc")):
                    os.unlink(p)
                    continue
                os.chmod(p, self.file_mode)
            os.chmod(dirpath, self.dir_mode)
            atomic.fsync_dir(dirpath)

    def commit(self) -> None:
        """Rename the finished output into place (replacing an old one only now, with force)."""
        assert self.work is not None
        self._finish_tree()
        if not self.is_dir:
            output.mark_file(self.path)  # so a later --force knows it for an export of amqtool
        if os.path.lexists(self.out):
            if not self.force:  # appeared while we worked
                raise UsageError("output appeared while exporting; use --force to replace it", path=str(self.out))
            output.check(self.given, self.kind, inputs=self.inputs, force=True)  # still an earlier export
            old = self.work / "old"
            os.rename(self.out, old)
        atomic.rename(self.path, self.out)
        shutil.rmtree(self.work, ignore_errors=True)
        self.work = None
        self.release()

    def abort(self) -> None:
        if self.work is not None:
            shutil.rmtree(self.work, ignore_errors=True)
            self.work = None
        self.release()


class FileMaker:
    """Creates new files under ``root``: exclusive (never over an existing file), with ``file_mode`` whatever
    the umask. Parent directories are created as needed; :meth:`OutputTarget.commit` gives them their mode.
    What the table writers write through, in the driver (:meth:`OutputTarget.open_file`) and in Spark tasks
    (their attempt directories), and picklable for the tasks."""

    def __init__(self, root: str | os.PathLike, file_mode: int = DEFAULT_FILE_MODE):
        self.root = Path(root)
        self.file_mode = file_mode

    def open_file(self, relative: str):
        """A new file, buffered, made durable when it is closed (:class:`DurableFile`)."""
        p = self.root / relative
        p.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, self.file_mode)
        try:
            os.fchmod(fd, self.file_mode)
            return DurableFile(io.FileIO(fd, "wb", closefd=True), str(p))
        except BaseException:
            os.close(fd)
            raise


class DurableFile(io.BufferedWriter):
    """A buffered output file whose close flushes it and fsyncs it: each file of an export is durable once its
    writer is done with it, in whichever process or thread wrote it (Spark tasks in parallel, the local
    engine's writer thread meanwhile), so the commit only has the directories left to sync."""

    def __init__(self, raw, path: str):
        super().__init__(raw)
        self.path = path

    def close(self) -> None:
        if not self.closed:
            try:
                atomic.fsync(self, self.path)
            finally:
                super().close()


# --- the table writers (both engines) --------------------------------------------------------------------


def table_writer(files, fmt: str, table: str, columns, partition_by: str | tuple[str, ...] | None = None, part: int = 0,
                 write_empty: bool = True):
    """The writer of one part of a table (``part-NNNNN`` files) in ``fmt`` (``jsonl`` or ``parquet``);
    ``files``: anything with ``open_file(relative)`` (an :class:`OutputTarget`, a :class:`FileMaker`).
    ``partition_by`` applies to Parquet (JSON Lines tables are not partitioned). ``write_empty``: a part
    that receives no rows still leaves a file (with the Parquet schema), so that a table always exists."""
    if fmt == "jsonl":
        return JsonlTableWriter(files, table, columns, part=part, write_empty=write_empty)
    return ParquetTableWriter(files, table, columns, partition_by=partition_by, part=part, write_empty=write_empty)


def write_table(files, fmt: str, table: str, columns, rows, partition_by: str | tuple[str, ...] | None = None) -> None:
    """A whole table (one part) of ``rows`` through :func:`table_writer`."""
    w = table_writer(files, fmt, table, columns, partition_by=partition_by)
    for r in rows:
        w.write(r)
    w.close()


def write_subscription_table(files, fmt: str, rows, summary) -> None:
    """A single store's ``subscriptions`` table (``schema.SUBSCRIPTION_COLUMNS``), its rows counted in
    ``summary`` (the export document's ``subscriptions``)."""
    from amqtool.engines.export.schema import SUBSCRIPTION_COLUMNS

    rows = list(rows)
    write_table(files, fmt, "subscriptions", SUBSCRIPTION_COLUMNS, rows)
    summary.subscriptions = len(rows)


def write_batches(files, fmt: str, table: str, columns, batches,
                  partition_by: str | tuple[str, ...] | None = None) -> None:
    """A whole table (one part) of Arrow record ``batches`` (``columns`` order) through :func:`table_writer`.

    The writer runs on a thread of its own, one batch behind the producer: Parquet encoding, compression and
    the C decoder of the next batch (``native.message_columns``) all run without the GIL, so on two cores
    the two overlap. One batch in flight keeps memory bounded; a writer's error is raised here."""
    from concurrent.futures import ThreadPoolExecutor

    w = table_writer(files, fmt, table, columns, partition_by=partition_by)
    try:
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="amqtool-writer") as pool:
            pending = None
            for b in batches:
                if pending is not None:
                    pending.result()
                pending = atomic.signal_safe_submit(pool, w.write_batch, b)
            if pending is not None:
                pending.result()
    except BaseException:
        w.abort()  # the error's traceback may keep the writer alive: its files must not stay open
        raise
    w.close()


class JsonlTableWriter:
    """One JSON object per line, keys in schema order, nulls written; binary as URL-safe base64 text, a map
    column (``strmap``) as a JSON object."""

    def __init__(self, files, table: str, columns, part: int = 0, write_empty: bool = True):
        from amqtool.formats.artemis.primitives import b64url

        self._b64 = b64url
        self.names = tuple(c[0] for c in columns)
        self._maps = frozenset(c[0] for c in columns if c[1] == "strmap")
        self.files = files
        self.name = f"{table}/part-{part:05d}.jsonl"
        self.fh = files.open_file(self.name) if write_empty else None

    def write(self, row) -> None:
        if self.fh is None:
            self.fh = self.files.open_file(self.name)
        d = {}
        for k, v in zip(self.names, row):
            if isinstance(v, (bytes, bytearray, memoryview)):
                v = self._b64(bytes(v))
            elif v is not None and k in self._maps:
                v = dict(v)
            d[k] = v
        text = json.dumps(d, ensure_ascii=False, separators=(",", ":"))
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: U+FFFD, as in the Parquet tables
            from amqtool.engines.export.parse import text_safe

            data = json.dumps(text_safe(d), ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        self.fh.write(data)
        self.fh.write(b"\n")

    def write_batch(self, batch, use_native: bool | None = None) -> None:
        """The rows of an Arrow record batch in this table's columns: the text :meth:`write` gives each row,
        written in C (``native.jsonl_lines``) when it is built, else row by row."""
        from amqtool import native

        if batch.num_rows == 0:
            return
        if self.fh is None:
            self.fh = self.files.open_file(self.name)
        if (native.jsonl_lines is not None) if use_native is None else use_native:
            self.fh.write(native.jsonl_lines(_jsonl_columns(batch, self.names), batch.num_rows))
            return
        for values in zip(*(batch.column(n).to_pylist() for n in self.names)):
            self.write(values)

    def close(self) -> None:
        if self.fh is not None:
            self.fh.close()

    def abort(self) -> None:
        """Close the file after a failure, without raising (what it holds is thrown away)."""
        _close_quietly(self.fh)
        self.fh = None


def _jsonl_columns(batch, names) -> tuple:
    """The batch's columns as native.jsonl_lines takes them (see native/jsonl_batch.c)."""
    import pyarrow as pa

    def strings(a) -> tuple:
        b = a.buffers()
        return (a.offset, b[0], b[1], b[2])

    out = []
    for name in names:
        a = batch.column(name)
        t = a.type
        key = json.dumps(name, ensure_ascii=False).encode("utf-8") + b":"
        b = a.buffers()
        if pa.types.is_int64(t):
            out.append((key, 0, a.offset, b[0], b[1]))
        elif pa.types.is_int32(t):
            out.append((key, 1, a.offset, b[0], b[1]))
        elif pa.types.is_boolean(t):
            out.append((key, 2, a.offset, b[0], b[1]))
        elif pa.types.is_string(t):
            out.append((key, 3, a.offset, b[0], b[1], b[2]))
        elif pa.types.is_binary(t):
            out.append((key, 4, a.offset, b[0], b[1], b[2]))
        elif pa.types.is_map(t):
            keys, items = a.values.flatten()  # the key/item structs every map's offsets index into
            out.append((key, 6, a.offset, b[0], b[1], strings(keys), strings(items)))
        elif pa.types.is_list(t):
            fields = a.values.flatten()  # name, type, value
            out.append((key, 5, a.offset, b[0], b[1], *(strings(f) for f in fields)))
        else:
            raise TypeError(f"no JSON Lines writer for column {name} of type {t}")
    return tuple(out)


# columns whose values are all but unique: written without dictionary encoding or statistics
DISTINCT_COLUMNS = frozenset({"body", "body_sha256"})


class ParquetTableWriter:
    """Parquet files, partitioned like Spark's ``partitionBy`` (``<col>=<value>/part-*.parquet``) when
    ``partition_by`` is given. Rows are turned into Arrow a small batch at a time per partition (``batch_rows``:
    converted while their bodies are still in the CPU's cache, and no Python objects held longer), and a
    partition's batches are written as one row group when it has ``row_group_rows`` rows or when all
    partitions' batches together pass ``buffer_bytes`` (the largest is written), so memory stays bounded
    whatever the store size."""

    def __init__(self, files, table: str, columns, partition_by: str | tuple[str, ...] | None = None, part: int = 0,
                 write_empty: bool = True, buffer_bytes: int = 16 << 20, row_group_rows: int = 50_000,
                 batch_rows: int = 256):
        import pyarrow as pa

        from amqtool.engines.export.schema import arrow_schema

        self.pa = pa
        self.files = files
        self.table = table
        self.file_name = f"part-{part:05d}.parquet"
        self.write_empty = write_empty
        self.schema = arrow_schema(columns)
        self.names = [f.name for f in self.schema]
        # partition_by: one column (keys are its values), or a tuple of columns, outermost first (keys are
        # tuples of values; a fleet's ``store`` then ``queue``)
        self.part_cols = (partition_by,) if isinstance(partition_by, str) else tuple(partition_by or ())
        self.part_indices = [self.names.index(c) for c in self.part_cols]
        self.part_index = self.part_indices[0] if len(self.part_indices) == 1 else None
        self.file_schema = self.schema
        for i in sorted(self.part_indices, reverse=True):
            self.file_schema = self.file_schema.remove(i)
        self._types = [(i, f.type) for i, f in enumerate(self.schema) if i not in self.part_indices]
        self.buffer_bytes = buffer_bytes
        self.row_group_rows = row_group_rows
        self.batch_rows = batch_rows
        self._rows: dict[object, list] = {}  # partition -> rows not yet in a batch
        self._batches: dict[object, list] = {}  # partition -> Arrow batches not yet written
        self._batched_rows: dict[object, int] = {}
        self._bytes: dict[object, int] = {}
        self._total = 0
        self._writers: dict[object, object] = {}

    def _key(self, row):
        # "" and null share Spark's default partition directory, so they are one partition (one file)
        if self.part_index is not None:
            return row[self.part_index] or None
        return tuple(row[i] or None for i in self.part_indices) if self.part_indices else None

    def write(self, row) -> None:
        key = self._key(row)
        rows = self._rows.get(key)
        if rows is None:
            rows = self._rows[key] = []
        rows.append(row)
        if len(rows) >= self.batch_rows:
            self._batch(key)
            if self._batched_rows[key] >= self.row_group_rows:
                self._write_group(key)
            elif self._total > self.buffer_bytes:
                self._write_group(max(self._bytes, key=self._bytes.get))

    def write_batch(self, batch) -> None:
        """An Arrow record batch in this table's schema: its rows go to their partitions in order, after
        any rows :meth:`write` left waiting there. The batch is cut with one stable sort by partition and a
        take per partition: one pass over its bytes whatever the number of partitions."""
        if batch.num_rows == 0:
            return
        if not self.part_indices:
            self._add_batch(None, batch)
            return
        import pyarrow.compute as pc

        rest = self.pa.RecordBatch.from_arrays([batch.column(i) for i, _ in self._types], schema=self.file_schema)
        codes, keys = self._partition_codes(batch)
        if len(keys) == 1:
            self._add_batch(keys[0], rest)
            return
        order = pc.array_sort_indices(codes)  # stable: each partition's rows keep their order
        counts = pc.value_counts(codes)
        sizes = dict(zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist()))
        start = 0
        for code, key in enumerate(keys):
            n = sizes[code]
            self._add_batch(key, rest.take(order.slice(start, n)))
            start += n

    def _partition_codes(self, batch):
        """``(codes, keys)``: each row's partition as an int32 code, codes numbered in order of first
        appearance, and each code's key (:meth:`_key`'s: a value, or a tuple of values outermost first;
        "" and null are one partition)."""
        import pyarrow.compute as pc

        pa = self.pa
        code = None
        columns = []  # (dictionary values, then None for null)
        for i in self.part_indices:
            col = batch.column(i)
            if pa.types.is_string(col.type):
                col = pc.if_else(pc.equal(col, ""), pa.scalar(None, col.type), col)
            enc = pc.dictionary_encode(col)
            values = enc.dictionary.to_pylist() + [None]
            if len(self.part_indices) == 1:  # the codes are the dictionary's (null: the last one)
                if col.null_count == 0:
                    return enc.indices, values[:-1]
                return pc.fill_null(enc.indices, len(values) - 1), values
            idx = pc.fill_null(enc.indices, len(values) - 1).cast(pa.int64())
            code = idx if code is None else pc.add(pc.multiply(code, len(values)), idx)
            columns.append(values)
        enc = pc.dictionary_encode(code)  # first appearance order
        keys = []
        for combined in enc.dictionary.to_pylist():
            key = []
            for values in reversed(columns):
                combined, k = divmod(combined, len(values))
                key.append(values[k])
            keys.append(tuple(reversed(key)))
        return enc.indices, keys

    def _add_batch(self, key, batch) -> None:
        self._batch(key)  # rows written one at a time before this batch come first
        batch = batch.cast(self.file_schema) if batch.schema != self.file_schema else batch
        self._batches.setdefault(key, []).append(batch)
        self._batched_rows[key] = self._batched_rows.get(key, 0) + batch.num_rows
        self._bytes[key] = self._bytes.get(key, 0) + batch.nbytes
        self._total += batch.nbytes
        if self._batched_rows[key] >= self.row_group_rows:
            self._write_group(key)
        elif self._total > self.buffer_bytes:
            self._write_group(max(self._bytes, key=self._bytes.get))

    def _batch(self, key) -> None:
        rows = self._rows.pop(key, None)
        if not rows:
            return
        batch = rows_batch(rows, self.file_schema, [i for i, _ in self._types])
        self._batches.setdefault(key, []).append(batch)
        self._batched_rows[key] = self._batched_rows.get(key, 0) + batch.num_rows
        self._bytes[key] = self._bytes.get(key, 0) + batch.nbytes
        self._total += batch.nbytes

    def _write_group(self, key) -> None:
        import pyarrow.parquet as pq

        batches = self._batches.pop(key, None)
        if not batches:
            return
        self._batched_rows.pop(key)
        self._total -= self._bytes.pop(key)
        w = self._writers.get(key)
        if w is None:
            rel = self.table
            if self.part_index is not None:
                rel += "/" + partition_dir(self.names[self.part_index], key)
            elif self.part_indices:
                rel += "".join("/" + partition_dir(c, v) for c, v in zip(self.part_cols, key))
            fh = self.files.open_file(f"{rel}/{self.file_name}")
            # no dictionary and no min/max statistics for the body columns: values are (nearly) all distinct
            # and long, so the writer would only try a dictionary and give it up, and compare bytes for
            # statistics no query can prune with
            plain = [n for n in self.file_schema.names if n not in DISTINCT_COLUMNS]
            w = self._writers[key] = (pq.ParquetWriter(fh, self.file_schema, compression="snappy",
                                                       use_dictionary=plain, write_statistics=plain), fh)
        # one row group per write (the batches' rows are far below the writer's default group size)
        w[0].write_table(self.pa.Table.from_batches(batches, schema=self.file_schema))

    def close(self) -> None:
        for key in list(self._rows):
            self._batch(key)
        for key in list(self._batches):
            self._write_group(key)
        for w, fh in self._writers.values():
            w.close()
            fh.close()
        if not self._writers and self.write_empty:
            # an empty table is still a table: one file with the schema and no rows
            import pyarrow.parquet as pq

            with self.files.open_file(f"{self.table}/{self.file_name}") as fh:
                pq.write_table(self.schema.empty_table(), fh)

    def abort(self) -> None:
        """Close every file after a failure, without raising and without finishing them."""
        writers, self._writers = self._writers, {}
        for w, fh in writers.values():
            try:
                w.close()  # else pyarrow's finaliser closes it later, onto the closed file, and complains
            except Exception:  # noqa: BLE001 - a full disk fails the footer too: it is being thrown away
                pass
            _close_quietly(fh)
        self._batches.clear()
        self._rows.clear()


def _close_quietly(fh) -> None:
    if fh is None:
        return
    try:
        fh.close()
    except OSError:  # buffered bytes that cannot be written (a full disk): they are being thrown away
        pass


# Spark's ExternalCatalogUtils.escapePathName: these characters (and controls) become %XX in partition names.
_SPARK_ESCAPE = set('"#%\'*/:=?\\\x7f{[]^')


def rows_batch(rows, schema, indices=None):
    """An Arrow record batch in ``schema`` of row tuples (``indices``: the tuple positions of ``schema``'s
    fields, default all in order); a lone surrogate in a string becomes U+FFFD, as the batch path writes it."""
    import pyarrow as pa

    indices = range(len(schema)) if indices is None else indices
    columns = list(zip(*rows)) or [()] * (max(indices, default=-1) + 1)
    types = [f.type for f in schema]
    try:
        arrays = [pa.array(columns[i], type=t) for i, t in zip(indices, types)]
    except UnicodeEncodeError:
        from amqtool.engines.export.parse import text_safe

        arrays = [pa.array(text_safe(columns[i]), type=t) for i, t in zip(indices, types)]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def partition_dir(column: str, value) -> str:
    """``column=value`` as Spark names a partition directory (``__HIVE_DEFAULT_PARTITION__`` for null)."""
    if value is None or value == "":
        return f"{column}=__HIVE_DEFAULT_PARTITION__"
    text = "".join(f"%{ord(ch):02X}" if ch in _SPARK_ESCAPE or ord(ch) < 0x20 else ch for ch in str(value))
    return f"{column}={text}"
