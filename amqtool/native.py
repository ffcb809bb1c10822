"""The one doorway to the C extension ``amqtool._native``, with pure-Python fallbacks and capability flags.

Nothing else imports ``amqtool._native``. What lives here:

* ``scan_records(buf, file_tag, version, check_tag=True, start=16)``: the journal record scanner
  (``JournalImpl.readJournalFile``). C when the extension is built, else the reference implementation
  ``amqtool.formats.artemis.records.scan_records_py``; both return identical results.
* ``Loader``: ``JournalImpl.load`` over files fed one at a time (``amqtool.engines.artemis.load`` uses it when
  ``HAVE_NATIVE_LOADER``; its own Python loop is the reference and the fallback).
* the timed write loops of ``amqtool bench`` (``nio_run``, ``aio_run``, ``mapped_run``, ``uring_run``).
  They have no fallback on purpose: a Python loop would put the interpreter inside every measured
  interval, so without the extension they raise :class:`CapabilityError` (exit 3).

Capability flags:

* ``HAVE_NATIVE`` / ``NATIVE_REASON``: is the extension importable (and why not)? Set at import.
* ``HAVE_AIO`` / ``AIO_REASON``: can this process create a Linux AIO context (``io_setup``)?
* ``HAVE_IO_URING`` / ``IO_URING_REASON``: can it create an io_uring (``io_uring_setup``)?

The last two are probed on first access (``aio_capability()``/``io_uring_capability()``, cached), not at
import: every print and verify imports this module and has no use for them.

Environment switches, for tests and for ruling the extension out when hunting a bug:
``AMQTOOL_NO_NATIVE=1`` (act as if the extension were not built), ``AMQTOOL_NO_AIO=1``,
``AMQTOOL_NO_IO_URING=1``.
"""
from __future__ import annotations

import functools
import os

from amqtool.errors import CapabilityError

_native = None
if os.environ.get("AMQTOOL_NO_NATIVE") == "1":
    NATIVE_REASON = "disabled by AMQTOOL_NO_NATIVE=1"
else:
    try:
        from amqtool import _native  # type: ignore[attr-defined,no-redef]

        NATIVE_REASON = ""
    except ImportError as exc:  # built without a compiler: the pure-Python paths still work
        NATIVE_REASON = f"the C extension amqtool._native is not built ({exc})"

HAVE_NATIVE = _native is not None

# The journal load state machine (native/journal_load.c); without it load.py runs its Python loop.
Loader = getattr(_native, "Loader", None)
LIVE_FORMAT = getattr(_native, "LIVE_FORMAT", "=qB?biqi")  # one packed live entry (see journal_load.c)
SOURCE_FORMAT = getattr(_native, "SOURCE_FORMAT", "=qB")  # where a live entry came from (Loader(sources=True))
HAVE_NATIVE_LOADER = Loader is not None
# print's JSON for runs of live entries (native/live_json.c); needs libcrypto's SHA256 (found at run time).
live_json = getattr(_native, "live_json", None)
live_run = getattr(_native, "live_run", None)  # where live_json would stop, so runs can be cut up front
HAVE_LIVE_JSON = live_json is not None and HAVE_NATIVE_LOADER and bool(_native.sha256_available())
# compaction's layout and output filling (native/compact_write.c); without them engines/artemis/compact runs its Python
# reference (_items/_Layout).
compact_layout = getattr(_native, "compact_layout", None)
compact_fill = getattr(_native, "compact_fill", None)
compact_sources = getattr(_native, "compact_sources", None)
PLAN_FORMAT = getattr(_native, "PLAN_FORMAT", "=BBbbBBiqiqiqqii")  # one compaction plan item
HAVE_COMPACT = compact_layout is not None and HAVE_NATIVE_LOADER


def _probe(env: str, name: str, probe) -> tuple[bool, str]:
    if os.environ.get(env) == "1":
        return False, f"disabled by {env}=1"
    if _native is None:
        return False, NATIVE_REASON
    ok, reason = probe()
    if ok:
        return True, ""
    return False, f"{name} failed: {reason}"


def _uring_reason_hint() -> str:
    try:
        with open("/proc/sys/kernel/io_uring_disabled") as fh:
            value = fh.read().strip()
    except OSError:
        return ""
    return " (kernel.io_uring_disabled=%s)" % value if value not in ("", "0") else ""


@functools.cache
def aio_capability() -> tuple[bool, str]:
    """``(ok, reason)``: can this process create a Linux AIO context (``io_setup``)? Probed once, on first use."""
    return _probe("AMQTOOL_NO_AIO", "io_setup", lambda: _native.aio_probe())


@functools.cache
def io_uring_capability() -> tuple[bool, str]:
    """``(ok, reason)``: can this process create an io_uring (``io_uring_setup``)? Probed once, on first use."""
    ok, reason = _probe("AMQTOOL_NO_IO_URING", "io_uring_setup", lambda: _native.uring_probe())
    if not ok and reason.startswith("io_uring_setup"):
        reason += _uring_reason_hint()
    return ok, reason


# The flags as module attributes, computed on first access: print and verify import this module and never
# need AIO, so they should not pay for the probes' system calls.
_LAZY_FLAGS = {
    "HAVE_AIO": (aio_capability, 0),
    "AIO_REASON": (aio_capability, 1),
    "HAVE_IO_URING": (io_uring_capability, 0),
    "IO_URING_REASON": (io_uring_capability, 1),
}


def __getattr__(name: str):
    try:
        probe, index = _LAZY_FLAGS[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    return probe()[index]


def require_native(what: str):
    """The extension module, or CapabilityError naming ``what`` needed it and how to get it."""
    if _native is None:
        raise CapabilityError(
            f"{what} needs the C extension amqtool._native, which is not available: {NATIVE_REASON}; "
            "reinstall amqtool with a C compiler present (AMQTOOL_REQUIRE_NATIVE=1 pip install ...)"
        )
    return _native


# --- the record scanner ----------------------------------------------------------------------------


def scan_records(buf, file_tag: int, version: int, check_tag: bool = True, start: int = 16):
    """Scan one journal file's bytes (any buffer: bytes, mmap, memoryview) as ``readJournalFile`` does.

    Returns ``(records, marked_data_file)``; see ``scan_records_py`` for the tuple layout.
    """
    if _native is not None:
        return _native.scan_records(buf, file_tag, version, check_tag, start)
    from amqtool.formats.artemis.records import scan_records_py

    return scan_records_py(buf, file_tag, version, check_tag, start)


def checksize_ends(buf, smallest: int) -> list[int]:
    """Where a record starting at offset 0 of ``buf`` could end: every ``end`` from ``smallest`` to ``len(buf)``
    whose four bytes before it, read big-endian (the checkSize), equal ``end``. C when the extension is built
    (a verify of a damaged tail tries every end of up to 1 MiB), else the reference
    ``amqtool.formats.artemis.records.checksize_ends_py``; both return the same list."""
    if _native is not None:
        return _native.checksize_ends(buf, smallest)
    from amqtool.formats.artemis.records import checksize_ends_py

    return checksize_ends_py(buf, smallest)


# scan_window(fd, pos, file_tag, version, check_tag, marked, window) -> (base, data, records, next_pos, marked,
# done): the scanner over one bounded window of an open file (native/journal_window.h); callers go through
# OpenedJournal.scan_windows, which falls back to reading the file whole for scan_records_py.
scan_window = getattr(_native, "scan_window", None)


# --- the benchmark's timed write loops (no fallback) -----------------------------------------------


def nio_run(*args, **kwargs):
    """pwrite + fdatasync/fsync loop: ``(writes_done, elapsed_ns, latencies_bytes)``; see native/bench_io.c."""
    return require_native("the NIO benchmark").nio_run(*args, **kwargs)


def aio_run(*args, **kwargs):
    """O_DIRECT Linux AIO loop (io_setup/io_submit/io_getevents)."""
    return require_native("the ASYNCIO benchmark").aio_run(*args, **kwargs)


def mapped_run(*args, **kwargs):
    """mmap + msync(MS_SYNC) loop."""
    return require_native("the MAPPED benchmark").mapped_run(*args, **kwargs)


def uring_run(*args, **kwargs):
    """O_DIRECT io_uring loop (io_uring_setup/io_uring_enter)."""
    return require_native("the io_uring benchmark").uring_run(*args, **kwargs)


# --- KahaDB (native/kahadb_scan.c) -----------------------------------------------------------------
# The batch scan + replay fast path over one db-N.log, or None: amqtool.engines.kahadb.load then runs its
# Python loop (the reference; tests/native/test_kahadb_native.py holds the two identical).
kahadb_scan_file = getattr(_native, "kahadb_scan_file", None)
# The checksum pass alone, GIL released: load.py runs it in a thread one file ahead of the scan.
kahadb_check_batches = getattr(_native, "kahadb_check_batches", None)


# --- page files (native/page_scan.c) ---------------------------------------------------------------
# page_walk(buf, pos, number, mode, ...): the page framing, the paged messages' fields and state (mode 1,
# verify) and print's JSON (mode 2), handing back the records it does not cover; or None, and
# amqtool.engines.artemis.paging runs its Python loops (the reference; tests/native/test_page_scan.py holds the
# two identical).
page_walk = getattr(_native, "page_walk", None)
HAVE_PAGE_JSON = page_walk is not None and bool(_native.page_json_available())


def adler32(data, value: int = 1) -> int:
    """``zlib.adler32`` (= java.util.zip.Adler32), vectorised in C when the extension is built."""
    if _native is not None:
        return _native.adler32(data, value)
    import zlib

    return zlib.adler32(data, value)


# --- `print --style artemis` (native/describe.c) ------------------------------------------------------
# describe_body(user_record_type, body, record_id, is_update, safe) -> str | None and
# describe_lines(data, version, records, safe) -> [str | int]: the DescribeJournal text of record bodies and
# of one file's scanned records, or None (for a body) / an index (for a record) where the C code leaves the
# record to the Python decoders (amqtool.formats.artemis.userrecords, the reference; tests/native/
# test_describe_native.py holds the two identical). Without the extension both are None and
# amqtool.engines.artemis.describe writes every line in Python.
describe_body = getattr(_native, "describe_body", None)
describe_lines = getattr(_native, "describe_lines", None)
# describe_live(live, start, stop, data, file_index, safe, ref_counts): the surviving-records lines of a run of
# packed live entries (LiveList) in one file, with their tallies.
describe_live = getattr(_native, "describe_live", None)
# describe_paged(buf, start, end, safe): data print's text of one paged core message, or None (decode in Python).
describe_paged = getattr(_native, "describe_paged", None)

# --- print JSON's per-queue summary, export's references (native/queue_tally.c) -------------------------
# tally_live(live, start, stop, data, file_index, acc) over runs of packed live entries, then
# tally_counts(acc) -> ({queue id: live messages}, messages, large_messages); or None, and
# amqtool.engines.artemis.journal_print.queue_summary builds a BrokerState (the reference).
tally_live = getattr(_native, "tally_live", None)
tally_counts = getattr(_native, "tally_counts", None)
# tally_pairs(acc) -> (message ids, entries, starts, queue ids, others): each message record's live queues in
# first-ADD_REF order (export's committed references, amqtool.engines.artemis.live_refs); None: BrokerState.
tally_pairs = getattr(_native, "tally_pairs", None)

# --- the export's message columns (native/export_columns.c) ---------------------------------------------
# message_columns(items, safe) -> (status, strings, fixed, list offsets) or None: Arrow buffers of the
# message columns of core messages; items it leaves (status 1) are decoded by the Python reference
# (amqtool.engines.export.parse.decode_message), as are all of them when this is None (no extension, or no
# libcrypto SHA-256). amqtool.engines.export.columns assembles both; tests/native/test_export_columns.py
# holds them identical.
message_columns = getattr(_native, "message_columns", None)
HAVE_MESSAGE_COLUMNS = message_columns is not None and bool(_native.sha256_available())
# jsonl_lines(columns, rows) -> bytes: the JSON Lines text of an Arrow record batch (native/jsonl_batch.c), what
# amqtool.engines.export.writers.JsonlTableWriter.write gives row by row (the reference; tests/native/
# test_jsonl_batch.py holds the two identical). None without the extension.
jsonl_lines = getattr(_native, "jsonl_lines", None)

# --- stat's per-queue figures (native/queue_stat.c) ------------------------------------------------------
# stat_live(live, start, stop, data, file_index, acc, wbase, fsize) over runs of packed live entries, then
# stat_queues(acc, now, overrides) -> {queue id: (messages, bytes, oldest, newest, expired, scheduled,
# redelivered, large)}; or None, and amqtool.engines.stat.artemis builds a BrokerState (the reference).
stat_live = getattr(_native, "stat_live", None)
stat_queues = getattr(_native, "stat_queues", None)

# --- LevelDB (native/leveldb_scan.c) ----------------------------------------------------------------
# One pass over a LevelDB store's log file, or None: amqtool.engines.leveldb.logfiles.scan then runs the
# Python reference (amqtool.formats.leveldb.recordlog.scan_file; tests/native/test_leveldb_native.py holds
# the two identical).
leveldb_scan = getattr(_native, "leveldb_scan", None)
leveldb_count_uow_ends = getattr(_native, "leveldb_count_uow_ends", None)
crc32_native = getattr(_native, "crc32", None)
leveldb_entry_rows = getattr(_native, "leveldb_entry_rows", None)  # reference: formats.leveldb.records.entry_rows
leveldb_apply_batch = getattr(_native, "leveldb_apply_batch", None)  # reference: engines.leveldb.index.apply_batch
leveldb_match_data = getattr(_native, "leveldb_match_data", None)  # reference: engines.leveldb.logfiles.match_data
leveldb_index_groups = getattr(_native, "leveldb_index_groups", None)  # reference: engines.leveldb.load.index_groups
leveldb_live = getattr(_native, "leveldb_live", None)  # reference: engines.leveldb.index.live
leveldb_read_log = getattr(_native, "leveldb_read_log", None)  # reference: formats.leveldb.dblog.read_log
leveldb_apply_log = getattr(_native, "leveldb_apply_log", None)  # reference: engines.leveldb.index.apply_log

# --- create --from (native/migrate_records.c) --------------------------------------------------------
# migrate_records(items, first_id, address_utf16, routing_type, threshold, max_record) -> [(record, body length,
# redelivery) | None]: stored OpenWire messages to ADD_MESSAGE_PROTOCOL record bodies, None where the Python
# reference (engines.migrate.convert.convert + engines.migrate.write.message_record) must take the message;
# or None without the extension (amqtool.engines.migrate.records; tests/native/test_migrate_native.py).
migrate_records = getattr(_native, "migrate_records", None)
