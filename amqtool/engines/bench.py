"""``amqtool bench``: how fast can this disk sync journal writes, per Artemis journal type, and what to set.

The timed loops live in C (``native/bench_io.c``, reached through :mod:`amqtool.native`); this module
prepares the file, runs each loop in a worker thread (so the main thread can show progress and react to
Ctrl-C), turns the per-write latencies into percentiles, and derives the broker.xml recommendation.

Methods (one table line each, for each pattern):

* ``nio``: ``pwrite`` + ``fdatasync`` (``fsync`` with ``datasync=False``), as ``NIOSequentialFile``.
* ``asyncio``: ``O_DIRECT`` + Linux AIO, as ``AIOSequentialFile``/``LibaioContext`` (durability from the
  completion, no fdatasync), queue depth = producers, capped by ``journal-max-io``; one ``io_submit``
  per write and completions reaped in batches, as ``LibaioContext`` does.
* ``mapped``: ``memcpy`` into a shared mapping of the whole file + ``msync(MS_SYNC)`` of the whole
  mapping, as ``MappedSequentialFile`` (``MappedByteBuffer.force()``).
* ``io_uring``: ``O_DIRECT`` writes through io_uring; no Artemis journal uses it, shown for comparison
  with ``asyncio`` in the same shape (one submission per write, completions reaped in batches).

Patterns: ``one`` producer waits for each sync (queue depth 1, one record per sync); ``many`` producers
are batched, as the broker's ``TimedBuffer`` does: NIO and MAPPED put ``producers`` records in one write
and one sync, ASYNCIO and io_uring keep ``producers`` writes in flight.

The file is a journal-sized file pre-filled with zeros, as ``JournalFilesRepository.createFile`` does
(artemis-journal-format.md §1.3); it is removed on completion, on error and on Ctrl-C/SIGTERM.
"""
from __future__ import annotations

import array
import errno
import math
import os
import signal
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Callable, Iterator

from amqtool import native
from amqtool.errors import CapabilityError, Finding, Severity, UsageError, Verdict, overall_verdict

METHODS = ("nio", "asyncio", "mapped", "io_uring")
JOURNAL_TYPE = {"nio": "NIO", "asyncio": "ASYNCIO", "mapped": "MAPPED", "io_uring": "IO_URING"}
PATTERNS = ("one", "many")

MIB = 1 << 20
DEFAULT_FILE_SIZE = 10 * MIB  # journal-file-size default (ActiveMQDefaultConfiguration)
DEFAULT_BLOCK_SIZE = 4096  # perf-journal --block-size
DEFAULT_PRODUCERS = 32
DEFAULT_MAX_IO = 4096  # DEFAULT_JOURNAL_MAX_IO_AIO
ROTATIONAL_MAX_SYNCS = 300  # a 7200 rpm platter cannot flush much more often than it turns (~120/s)

# perf-journal (SyncCalculation) parameters, artemis-journal-format.md §6.7
PERF_JOURNAL_BLOCK = 4096
PERF_JOURNAL_WRITES = 250
PERF_JOURNAL_TRIES = 5

# pg_test_fsync (src/bin/pg_test_fsync/pg_test_fsync.c): 16 MiB file, 8 kB (XLOG_BLCKSZ) writes
PG_FILE_SIZE = 16 * MIB
PG_BLOCK = 8192

HISTOGRAM_BOUNDS_US = (10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000, 1000000)


# --- statistics -----------------------------------------------------------------------------------


def latency_stats(latencies_ns) -> dict:
    """Percentiles (nearest rank), mean and a coarse histogram of latencies in ns, reported in µs."""
    values = sorted(latencies_ns)
    n = len(values)
    if n == 0:
        return {"count": 0}

    def pct(q: float) -> float:
        return values[max(0, math.ceil(q * n) - 1)] / 1000.0

    hist = []
    i = 0
    for bound in HISTOGRAM_BOUNDS_US:
        c = 0
        while i < n and values[i] <= bound * 1000:
            c += 1
            i += 1
        hist.append({"leUs": bound, "count": c})
    hist.append({"leUs": None, "count": n - i})
    return {
        "count": n,
        "minUs": values[0] / 1000.0,
        "p50Us": pct(0.50),
        "p90Us": pct(0.90),
        "p99Us": pct(0.99),
        "p999Us": pct(0.999),
        "maxUs": values[-1] / 1000.0,
        "meanUs": sum(values) / n / 1000.0,
        "histogram": hist,
    }


# --- the temporary file ---------------------------------------------------------------------------


@dataclass
class Target:
    """Where the benchmark writes, and what that place can do."""

    directory: Path
    path: Path
    align: int
    fstype: str | None
    device: dict
    odirect: bool
    odirect_reason: str


def _fstype(directory: Path) -> str | None:
    """The filesystem type of the mount holding ``directory`` (longest mount point prefix)."""
    best, kind = "", None
    try:
        with open("/proc/self/mounts") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) < 3:
                    continue
                mnt = parts[1].replace("\\040", " ")
                d = str(directory.resolve())
                if (d == mnt or d.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best):
                    best, kind = mnt, parts[2]
    except OSError:
        return None
    return kind


def _device(directory: Path) -> dict:
    """The block device under ``directory`` from sysfs: name and whether it says it is rotational."""
    st = os.stat(directory)
    major, minor = os.major(st.st_dev), os.minor(st.st_dev)
    info = {"dev": f"{major}:{minor}", "name": None, "rotational": None}
    sys_dir = Path(f"/sys/dev/block/{major}:{minor}")
    if not sys_dir.exists():
        return info
    real = sys_dir.resolve()
    info["name"] = real.name
    queue = real / "queue"
    if not queue.exists() and (real.parent / "queue").exists():  # a partition: the disk holds the queue
        queue = real.parent / "queue"
    try:
        info["rotational"] = (queue / "rotational").read_text().strip() == "1"
    except OSError:
        pass
    return info


def check_room(directory: Path, need: int) -> None:
    """Refuse to start when ``directory`` lacks ``need`` bytes (filesystems that keep no count pass)."""
    try:
        vfs = os.statvfs(directory)
    except OSError as exc:
        raise CapabilityError(f"cannot read free space: {exc.strerror}", path=str(directory)) from exc
    if vfs.f_blocks == 0:  # ramfs and friends report nothing
        return
    free = vfs.f_bavail * vfs.f_frsize
    if free < need:
        raise CapabilityError(
            f"not enough free space for the benchmark file: need {need} bytes, {free} available",
            path=str(directory),
        )


def _odirect_probe(path: Path) -> tuple[bool, str]:
    try:
        fd = os.open(path, os.O_RDWR | os.O_DIRECT)
    except OSError as exc:
        if exc.errno == errno.EINVAL:
            return False, "the filesystem does not support O_DIRECT"
        return False, f"open with O_DIRECT failed: {exc.strerror}"
    os.close(fd)
    return True, ""


def _prefill(fd: int, size: int) -> None:
    """Zeros over the whole file, then fsync: NIOSequentialFile.fill / LibaioContext.fill."""
    chunk = bytes(min(size, MIB)) if size else b""
    done = 0
    while done < size:
        n = os.write(fd, chunk[: min(len(chunk), size - done)])
        done += n
    os.fsync(fd)


@contextmanager
def bench_file(directory: str | os.PathLike, size: int, name: str | None = None) -> Iterator[Target]:
    """Create the pre-filled benchmark file in ``directory``; remove it however the block ends.

    SIGTERM is turned into KeyboardInterrupt for the duration (main thread only), so ``kill`` cleans up
    as Ctrl-C does.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise UsageError("not a directory" if directory.exists() else "no such directory", path=str(directory))
    if not os.access(directory, os.W_OK | os.X_OK):
        raise CapabilityError("directory is not writable", path=str(directory))
    check_room(directory, size + MIB)
    path = directory / (name or f"amqtool-bench-{os.getpid()}.tmp")
    old_term = None
    if threading.current_thread() is threading.main_thread():
        old_term = signal.getsignal(signal.SIGTERM)
        signal.signal(signal.SIGTERM, _sigterm)
    created = False
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        created = True
        try:
            _prefill(fd, size)
        finally:
            os.close(fd)
        st = os.stat(path)
        align = st.st_blksize if st.st_blksize >= 512 and not (st.st_blksize & (st.st_blksize - 1)) else 4096
        ok, reason = _odirect_probe(path)
        fstype = _fstype(directory)
        if not ok and fstype:
            reason += f" ({fstype})"
        yield Target(directory, path, align, fstype, _device(directory), ok, reason)
    finally:
        if old_term is not None:
            signal.signal(signal.SIGTERM, old_term)
        if created:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass


def _sigterm(signum, frame):  # pragma: no cover - exercised through a subprocess
    raise KeyboardInterrupt


# --- running one loop -------------------------------------------------------------------------------


def run_loop(fn: Callable, *args, on_progress: Callable[[int], None] | None = None, **kwargs):
    """Run one C loop in a worker thread; poll its progress; on KeyboardInterrupt ask it to stop, wait for
    it, and re-raise. Returns ``(writes_done, elapsed_ns, latencies_ns: array)``, plus a fourth item,
    the sync calls' own latencies (array), when the loop was asked for them (``sync_lat=True``)."""
    ctl = array.array("q", [0, 0])
    box: dict = {}

    def work():
        try:
            box["result"] = fn(*args, ctl=ctl, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            box["error"] = exc

    worker = threading.Thread(target=work, name="amqtool-bench", daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            worker.join(0.1)
            if on_progress is not None:
                on_progress(int(ctl[0]))
    except KeyboardInterrupt:
        ctl[1] = 1
        worker.join()
        raise
    if "error" in box:
        raise box["error"]
    done, elapsed, *raws = box["result"]
    lats = []
    for raw in raws:
        lat = array.array("Q")
        lat.frombytes(raw)
        lats.append(lat)
    if on_progress is not None:
        on_progress(int(done))
    return (done, elapsed, *lats)


# --- the journal benchmark ------------------------------------------------------------------------


@dataclass
class Result:
    """One line of the table."""

    method: str
    pattern: str
    depth: int  # writes in flight (AIO/io_uring) or records per sync (NIO/MAPPED batched)
    block_size: int
    sync: str
    available: bool = True
    reason: str = ""
    ops: int = 0
    elapsed_ns: int = 0
    latency: dict = field(default_factory=dict)
    # NIO and MAPPED: the sync call alone (fdatasync/fsync/msync), without the write or memcpy before it
    sync_latency: dict = field(default_factory=dict)

    @property
    def journal_type(self) -> str:
        return JOURNAL_TYPE[self.method]

    @property
    def ops_per_sec(self) -> float | None:
        return self.ops / (self.elapsed_ns / 1e9) if self.available and self.elapsed_ns else None

    @property
    def mb_per_sec(self) -> float | None:
        r = self.ops_per_sec
        return r * self.block_size / MIB if r is not None else None

    @property
    def label(self) -> str:
        if self.pattern == "one":
            return "1 producer"
        if self.method in ("asyncio", "io_uring"):
            return f"{self.depth} in flight"
        return f"{self.depth} per sync"

    def to_json(self) -> dict:
        return {
            "method": self.method,
            "journalType": self.journal_type,
            "pattern": self.pattern,
            "depth": self.depth,
            "blockSize": self.block_size,
            "sync": self.sync,
            "available": self.available,
            "reason": self.reason or None,
            "ops": self.ops,
            "elapsedNs": self.elapsed_ns,
            "opsPerSec": self.ops_per_sec,
            "mbPerSec": self.mb_per_sec,
            "latency": self.latency or None,
            "syncLatency": self.sync_latency or None,
        }


@dataclass
class BenchReport:
    directory: str
    filesystem: str | None
    device: dict
    parameters: dict
    results: list[Result]
    findings: list[Finding]
    recommendation: dict

    @property
    def verdict(self) -> Verdict:
        return overall_verdict(self.findings)

    def to_json(self) -> dict:
        return {
            "verdict": self.verdict.name,
            "directory": self.directory,
            "filesystem": self.filesystem,
            "device": self.device,
            "parameters": self.parameters,
            "results": [r.to_json() for r in self.results],
            "recommendation": self.recommendation,
            "findings": [f.to_json() for f in self.findings],
        }


def availability(method: str, target: Target) -> tuple[bool, str]:
    """Can ``method`` run on this machine and in this directory? ``(ok, reason)``."""
    if method in ("asyncio", "io_uring") and not target.odirect:
        return False, target.odirect_reason
    if method == "asyncio" and not native.HAVE_AIO:
        return False, f"Linux AIO unavailable: {native.AIO_REASON}"
    if method == "io_uring" and not native.HAVE_IO_URING:
        return False, f"io_uring unavailable: {native.IO_URING_REASON}"
    return True, ""


def run_line(method: str, pattern: str, target: Target, *, block: bytes, region: int, writes: int,
             duration_ns: int, producers: int, max_io: int, datasync: bool, on_progress=None) -> Result:
    """One line of the table: ``method`` with ``pattern`` on ``target``'s file (see :func:`run_bench`)."""
    depth = 1 if pattern == "one" else producers
    if method in ("asyncio", "io_uring") and pattern == "many":
        depth = min(producers, max_io)
    sync = {"nio": "fdatasync" if datasync else "fsync", "mapped": "msync(MS_SYNC)",
            "asyncio": "O_DIRECT completion", "io_uring": "O_DIRECT completion"}[method]
    res = Result(method, pattern, depth, len(block), sync)
    ok, reason = availability(method, target)
    if not ok:
        res.available, res.reason = False, reason
        return res
    path = str(target.path)
    try:
        if method == "nio":
            out = run_loop(native.nio_run, path, block, region, writes, batch=depth, coalesce=True,
                           sync=1 if datasync else 2, duration_ns=duration_ns, sync_lat=True,
                           on_progress=on_progress)
        elif method == "mapped":
            out = run_loop(native.mapped_run, path, block, region, writes, batch=depth,
                           duration_ns=duration_ns, sync_lat=True, on_progress=on_progress)
        elif method == "asyncio":
            out = run_loop(native.aio_run, path, block, region, writes, depth=depth, align=target.align,
                           duration_ns=duration_ns, on_progress=on_progress)
        else:
            out = run_loop(native.uring_run, path, block, region, writes, depth=depth, align=target.align,
                           duration_ns=duration_ns, on_progress=on_progress)
    except OSError as exc:
        if exc.errno in (errno.EINVAL, errno.EOPNOTSUPP, errno.ENOSYS, errno.EPERM, errno.EAGAIN):
            res.available, res.reason = False, exc.strerror or str(exc)
            return res
        raise
    res.ops, res.elapsed_ns, lat, *sync_lat = out
    res.latency = latency_stats(lat)
    if sync_lat:
        res.sync_latency = latency_stats(sync_lat[0])
        res.sync_latency.pop("histogram", None)
    return res


def buffer_timeout_ns(writes: int, total_ns: float) -> int:
    """SyncCalculation.toNanos: ``(long)(1_000_000 / (writes / time_ms))``, fed with nanoseconds."""
    if writes <= 0 or total_ns <= 0:
        return 0
    return int(1_000_000 / (writes / (total_ns / 1e6)))


def _recommend(results: list[Result], max_io: int, block_size: int) -> dict:
    by = {(r.method, r.pattern): r for r in results if r.available and r.ops}
    rec: dict = {"journalType": None, "journalBufferTimeout": None, "journalMaxIo": None,
                 "pageSyncTimeout": None, "basis": {}, "brokerXml": []}
    # journal-type: the Artemis type that carried the most records per second with many producers, the
    # broker's working pattern; ASYNCIO wins ties within 10 % (it is Artemis' choice whenever it runs).
    candidates = [by[(m, "many")] for m in ("asyncio", "nio", "mapped") if (m, "many") in by]
    if not candidates:
        candidates = [by[(m, "one")] for m in ("asyncio", "nio", "mapped") if (m, "one") in by]
    if not candidates:
        return rec
    best = max(candidates, key=lambda r: r.ops_per_sec)
    for r in candidates:  # preference order: asyncio, nio, mapped
        if r.ops_per_sec >= 0.9 * best.ops_per_sec:
            best = r
            break
    jt = best.method
    rec["journalType"] = JOURNAL_TYPE[jt]
    # journal-buffer-timeout: perf-journal's formula on the run perf-journal itself would time for this
    # type (one write after the other for NIO and MAPPED; queued up to max-io for ASYNCIO), with the sum of
    # the measured latencies (NIO, MAPPED) or the measured wall time (ASYNCIO) instead of a ms clock.
    if jt == "asyncio":
        basis = by.get(("asyncio", "many")) or by.get(("asyncio", "one"))
        timeout = buffer_timeout_ns(basis.ops, basis.elapsed_ns)
    else:
        basis = by.get((jt, "one")) or best
        lat = basis.latency
        timeout = buffer_timeout_ns(lat["count"], lat["meanUs"] * 1000 * lat["count"]) if lat else 0
    rec["journalBufferTimeout"] = timeout
    rec["basis"]["journalBufferTimeout"] = f"{basis.journal_type} {basis.label}"
    # journal-max-io: the depth measured for ASYNCIO when it paid off, else 1 (Artemis' NIO value).
    if jt == "asyncio":
        many, one = by.get(("asyncio", "many")), by.get(("asyncio", "one"))
        if many and one and many.ops_per_sec >= 1.2 * one.ops_per_sec:
            rec["journalMaxIo"] = many.depth
        else:
            rec["journalMaxIo"] = 1 if one and not many else (many.depth if many else 1)
    else:
        rec["journalMaxIo"] = 1
    # page-sync-timeout: `artemis create` times one NIO run for it (paging always writes through NIO).
    nio = by.get(("nio", "one"))
    if nio and nio.latency:
        lat = nio.latency
        rec["pageSyncTimeout"] = buffer_timeout_ns(lat["count"], lat["meanUs"] * 1000 * lat["count"])
        rec["basis"]["pageSyncTimeout"] = "NIO 1 producer"
    rec["brokerXml"] = [
        f"<journal-type>{rec['journalType']}</journal-type>",
        f"<journal-buffer-timeout>{rec['journalBufferTimeout']}</journal-buffer-timeout>",
        f"<journal-max-io>{rec['journalMaxIo']}</journal-max-io>",
    ]
    if rec["pageSyncTimeout"] is not None:
        rec["brokerXml"].append(f"<page-sync-timeout>{rec['pageSyncTimeout']}</page-sync-timeout>")
    return rec


def _judge(target: Target, results: list[Result], explicit: bool, datasync: bool) -> list[Finding]:
    findings: list[Finding] = []
    d = str(target.directory)
    for r in results:
        if not r.available:
            sev = Severity.UNKNOWN if explicit else Severity.INFO
            findings.append(Finding(sev, "method-unavailable",
                                    f"{r.journal_type} ({r.label}) cannot run here: {r.reason}", d))
    if target.fstype in ("tmpfs", "ramfs"):
        findings.append(Finding(Severity.INFO, "memory-filesystem",
                                f"{d} is on {target.fstype}: syncs reach memory, not a disk; "
                                "these figures say nothing about durable storage", d))
    nio = next((r for r in results if r.method == "nio" and r.pattern == "one" and r.available and r.ops), None)
    if nio and target.device.get("rotational") and nio.ops_per_sec > ROTATIONAL_MAX_SYNCS:
        call = "fdatasync" if datasync else "fsync"
        findings.append(Finding(
            Severity.WARNING, "fsync-implausible",
            f"{nio.ops_per_sec:.0f} {call}/s on a device that reports itself rotational "
            f"({target.device.get('name')}); a platter cannot sync more than a few hundred times a second, "
            "so a cache between the program and the platter (disk write cache, controller, hypervisor) "
            "is acknowledging writes before they are durable", d,
            details={"opsPerSec": nio.ops_per_sec, "device": target.device.get("name")}))
    if any(r.method == "asyncio" and r.available and r.ops for r in results):
        findings.append(Finding(Severity.INFO, "aio-durability",
                                "ASYNCIO figures are O_DIRECT completions without a cache flush, as Artemis "
                                "writes them: durable only when the device write cache is off or "
                                "power-protected (see amqtool check write-cache)", d))
    return findings


def _positive(**values) -> None:
    """Refuse counts and durations that are zero or negative (UsageError, exit 3): a line bounded by
    nothing never ends, and one bounded by zero measures nothing."""
    for name, value in values.items():
        if value is not None and not value > 0:
            raise UsageError(f"--{name.replace('_', '-')} must be greater than 0 (got {value})")


def run_bench(
    directory: str | os.PathLike,
    *,
    methods: list[str] | None = None,
    patterns: list[str] | None = None,
    file_size: int = DEFAULT_FILE_SIZE,
    block_size: int = DEFAULT_BLOCK_SIZE,
    writes: int | None = None,
    seconds: float | None = None,
    producers: int = DEFAULT_PRODUCERS,
    max_io: int = DEFAULT_MAX_IO,
    datasync: bool = True,
    on_start: Callable[[str, int | None], None] | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> BenchReport:
    """Run every requested method and pattern in ``directory``; see the module docstring.

    ``writes`` bounds each line by count, ``seconds`` by time (both may be given; defaults: 2 s, at
    most 1,000,000 writes). ``methods`` given means the user asked for them: one that cannot run makes
    the verdict UNKNOWN. ``on_start(label, total)`` / ``on_progress(done)`` feed a progress display.
    """
    _positive(writes=writes, seconds=seconds, producers=producers, max_io=max_io, file_size=file_size,
              block_size=block_size)
    native.require_native("amqtool bench")
    explicit = methods is not None
    methods = list(methods or METHODS)
    patterns = list(patterns or PATTERNS)
    for m in methods:
        if m not in METHODS:
            raise UsageError(f"unknown method {m!r}; expected one of {', '.join(METHODS)}")
    for p in patterns:
        if p not in PATTERNS:
            raise UsageError(f"unknown pattern {p!r}; expected one of {', '.join(PATTERNS)}")
    if block_size < 1 or file_size < block_size:
        raise UsageError("block size must be at least 1 byte and no larger than the file size")
    if producers < 1 or max_io < 1:
        raise UsageError("producers and max-io must be at least 1")
    if writes is None and seconds is None:
        seconds = 2.0
    limit = writes if writes is not None else 1_000_000
    duration_ns = int(seconds * 1e9) if seconds else 0
    # Artemis' perf-journal block: 't' bytes (SyncCalculation fills its buffer with 't').
    block = b"t" * block_size
    results: list[Result] = []
    with bench_file(directory, file_size) as target:
        for m in methods:
            for p in patterns:
                depth = 1 if p == "one" else (min(producers, max_io) if m in ("asyncio", "io_uring") else producers)
                unit = block_size
                if m in ("asyncio", "io_uring"):
                    unit = -(-block_size // target.align) * target.align
                if unit * depth > file_size:
                    raise UsageError(f"a file of {file_size} bytes cannot hold {depth} writes of {unit} bytes")
                if on_start is not None:
                    label = f"{JOURNAL_TYPE[m]} {'1 producer' if p == 'one' else f'{producers} producers'}"
                    on_start(label, writes)
                results.append(run_line(m, p, target, block=block, region=file_size, writes=limit,
                                        duration_ns=duration_ns, producers=producers, max_io=max_io,
                                        datasync=datasync, on_progress=on_progress))
        findings = _judge(target, results, explicit, datasync)
        fstype, device = target.fstype, target.device
    params = {"fileSize": file_size, "blockSize": block_size, "writes": writes, "seconds": seconds,
              "producers": producers, "maxIo": max_io, "datasync": datasync, "methods": methods,
              "patterns": patterns}
    return BenchReport(str(directory), fstype, device, params, results, findings,
                       _recommend(results, max_io, block_size))


# --- perf-journal compatibility ---------------------------------------------------------------------


def java_decimal_format(value: float) -> str:
    """``new DecimalFormat("###.##").format(value)``: at most two decimals, HALF_EVEN on the exact
    binary value, no trailing zeros, '.' separator (an English locale)."""
    if math.isinf(value):
        return "\u221e"
    q = Decimal(value).quantize(Decimal("0.01"), rounding=ROUND_HALF_EVEN)
    text = format(q, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def run_perf_journal(directory: str | os.PathLike, *, journal_type: str = "NIO", block_size: int = PERF_JOURNAL_BLOCK,
                     writes: int = PERF_JOURNAL_WRITES, tries: int = PERF_JOURNAL_TRIES, sync: bool = True,
                     sync_writes: bool = False, max_aio: int = DEFAULT_MAX_IO,
                     on_start=None, on_progress=None) -> dict:
    """Artemis ``perf-journal`` (SyncCalculation.syncTest, §6.7) with its parameters and result lines.

    Each try writes ``writes`` blocks of ``'t'`` from offset 0 of a file filled with zeros to
    ``block_size × writes`` bytes; the best (minimum) try counts. Artemis reads a millisecond clock, so its
    figure is ``writes / t`` for a whole number ``t``: ``lines`` reproduce that (elapsed ns truncated to
    whole ms, which is what a difference of two ``currentTimeMillis`` readings most often gives);
    ``exact`` gives the same formula on the nanosecond figure.
    """
    _positive(writes=writes, tries=tries, block_size=block_size, max_io=max_aio)
    native.require_native("amqtool bench --compat perf-journal")
    jt = journal_type.upper()
    if jt not in ("NIO", "ASYNCIO", "MAPPED"):
        raise UsageError(f"unknown journal type {journal_type!r}; expected NIO, ASYNCIO or MAPPED")
    if writes < 1 or tries < 1 or block_size < 1:
        raise UsageError("block size, writes and tries must be at least 1")
    block = b"t" * block_size
    elapsed: list[int] = []
    with bench_file(directory, 0, name=f"amqtool-perf-journal-{os.getpid()}.tmp") as target:
        unit = block_size
        if jt == "ASYNCIO":
            if not target.odirect:
                raise CapabilityError(f"ASYNCIO cannot run here: {target.odirect_reason}", path=str(directory))
            if not native.HAVE_AIO:
                raise CapabilityError(f"ASYNCIO cannot run here: Linux AIO unavailable: {native.AIO_REASON}")
            unit = -(-block_size // target.align) * target.align  # the AIO factory aligns the block
        region = unit * writes
        check_room(Path(directory), region + MIB)
        fd = os.open(target.path, os.O_RDWR)
        try:
            _prefill(fd, region)
        finally:
            os.close(fd)
        for i in range(tries):
            if on_start is not None:
                on_start(f"perf-journal {jt} try {i + 1} of {tries}", writes)
            if jt == "NIO":
                done, ns, _ = run_loop(native.nio_run, str(target.path), block, region, writes, batch=1,
                                       sync=1 if sync else 0, on_progress=on_progress)
            elif jt == "MAPPED":
                if sync:
                    done, ns, _ = run_loop(native.mapped_run, str(target.path), block, region, writes,
                                           on_progress=on_progress)
                else:
                    done, ns, _ = run_loop(native.nio_run, str(target.path), block, region, writes, sync=0,
                                           on_progress=on_progress)
            else:
                depth = 1 if sync_writes else max(1, min(max_aio, writes))
                done, ns, _ = run_loop(native.aio_run, str(target.path), block, region, writes, depth=depth,
                                       align=target.align, on_progress=on_progress)
            elapsed.append(ns)
    best_ns = min(elapsed)
    time_ms = best_ns // 1_000_000
    wpm = writes / time_ms if time_ms else math.inf
    timeout = int(1_000_000 / wpm) if time_ms else 0
    exact_wpm = writes / (best_ns / 1e6)
    lines = [
        "",
        "Auto tuning journal ...",
        f"Performing {tries} tests writing {writes} blocks of {block_size} on each test, "
        f"sync={'true' if sync else 'false'} with journalType = {jt}",
        f"Your system can execute {java_decimal_format(wpm)} writes per millisecond",
        f"Your journal-buffer-timeout should be:{timeout}",
        "You should use this following configuration:",
        "",
        f"<journal-buffer-timeout>{timeout}</journal-buffer-timeout>",
    ]
    return {
        "verdict": Verdict.OK.name,
        "compat": "perf-journal",
        "journalType": jt,
        "blockSize": block_size,
        "writes": writes,
        "tries": tries,
        "sync": sync,
        "syncWrites": sync_writes,
        "triesNs": elapsed,
        "bestMs": time_ms,
        "writesPerMs": None if math.isinf(wpm) else wpm,
        "journalBufferTimeout": timeout,
        "exact": {"writesPerMs": exact_wpm, "journalBufferTimeout": buffer_timeout_ns(writes, best_ns)},
        "lines": lines,
    }


# --- pg_test_fsync's comparison -------------------------------------------------------------------

# (name, open flags, sync call) as pg_test_fsync's "Compare file sync methods" section; open_datasync and
# open_sync use O_DIRECT there, and every method is also run the other way round.
_SYNC_METHODS = (
    ("open_datasync", os.O_DSYNC, 0),
    ("fdatasync", 0, 1),
    ("fsync", 0, 2),
    ("open_sync", os.O_SYNC, 0),
)


def run_sync_methods(directory: str | os.PathLike, *, seconds: float | None = 1.0, writes: int | None = None,
                     sizes: tuple[int, ...] = (1, 2), on_start=None, on_progress=None) -> dict:
    """pg_test_fsync's "Compare file sync methods" in ops/s and µs/op, with and without O_DIRECT, plus
    latency percentiles. One op = ``n`` 8 kB writes at offsets 0, 8 kB, ... then the sync (as pg does).
    ``seconds`` None bounds each test by ``writes`` alone (then required)."""
    _positive(seconds=seconds, writes=writes)
    if seconds is None and writes is None:
        raise UsageError("sync-methods needs --seconds or --writes: a test bounded by neither never ends")
    native.require_native("amqtool bench sync-methods")
    duration_ns = int(seconds * 1e9) if seconds else 0
    limit = writes if writes is not None else 10_000_000
    block = bytes(range(256)) * (PG_BLOCK // 256)
    rows = []
    with bench_file(directory, PG_FILE_SIZE) as target:
        for n in sizes:
            for name, oflags, sync in _SYNC_METHODS:
                for direct in (True, False):
                    row = {"writesPerOp": n, "method": name, "oDirect": direct, "available": True,
                           "reason": None}
                    rows.append(row)
                    if direct and not target.odirect:
                        row.update(available=False, reason=target.odirect_reason)
                        continue
                    if on_start is not None:
                        on_start(f"{n}x8kB {name}{' O_DIRECT' if direct else ''}", writes)
                    flags = oflags | (os.O_DIRECT if direct else 0)
                    try:
                        _, ns, lat = run_loop(native.nio_run, str(target.path), block, n * PG_BLOCK, limit * n,
                                              batch=n, coalesce=False, sync=sync, oflags=flags, align=target.align,
                                              duration_ns=duration_ns, on_progress=on_progress)
                    except OSError as exc:
                        if exc.errno in (errno.EINVAL, errno.EOPNOTSUPP):
                            row.update(available=False, reason=exc.strerror)
                            continue
                        raise
                    ops = len(lat)
                    row.update({"ops": ops, "elapsedNs": ns, "opsPerSec": ops / (ns / 1e9) if ns else None,
                                "usecsPerOp": (ns / 1000 / ops) if ops else None, "latency": latency_stats(lat)})
        fstype = target.fstype
    findings = []
    if any(r["oDirect"] and not r["available"] for r in rows):
        findings.append(Finding(Severity.INFO, "odirect-unsupported",
                                f"O_DIRECT is not supported here: {target.odirect_reason}", str(directory)))
    return {"verdict": overall_verdict(findings).name, "directory": str(directory), "filesystem": fstype,
            "seconds": seconds, "blockSize": PG_BLOCK, "results": rows,
            "findings": [f.to_json() for f in findings]}


def pg_line(label: str, ops_per_sec: float | None, usecs: float | None, available: bool = True) -> str:
    """pg_test_fsync's result line: ``        %-30s%13.3f ops/sec  %6.0f usecs/op`` (or ``n/a*``)."""
    if not available:
        return f"        {label:<30}{'n/a*':>13}"
    return f"        {label:<30}{ops_per_sec:13.3f} ops/sec  {usecs:6.0f} usecs/op"


# --- the quick probe other commands use -------------------------------------------------------------


def fsync_probe(directory: str, seconds: float = 2.0, block_size: int = DEFAULT_BLOCK_SIZE) -> dict:
    """A few seconds of 4 KiB ``pwrite`` + ``fdatasync`` in ``directory`` (the NIO one-producer line).

    Returns ``{"opsPerSec", "p50Us", "p90Us", "p99Us", "p999Us", "maxUs", "meanUs", "count",
    "seconds", "blockSize", "native"}``. Without the C extension a Python loop measures instead
    (``native: False``); fine for syncs of tens of µs and more, which is what it is for.
    """
    size = 1 * MIB
    block = b"t" * block_size
    with bench_file(directory, size, name=f"amqtool-fsync-probe-{os.getpid()}.tmp") as target:
        if native.HAVE_NATIVE:
            ops, ns, lat = run_loop(native.nio_run, str(target.path), block, size, 10_000_000, batch=1, sync=1,
                                    duration_ns=int(seconds * 1e9))
        else:
            lat = array.array("Q")
            fd = os.open(target.path, os.O_RDWR)
            try:
                nslots, i = size // block_size, 0
                t0 = last = time.monotonic_ns()
                while last - t0 < seconds * 1e9:
                    ts = time.monotonic_ns()
                    os.pwrite(fd, block, (i % nslots) * block_size)
                    os.fdatasync(fd)
                    last = time.monotonic_ns()
                    lat.append(last - ts)
                    i += 1
            finally:
                os.close(fd)
            ops, ns = len(lat), last - t0
    stats = latency_stats(lat)
    stats.pop("histogram", None)
    stats.update({"opsPerSec": ops / (ns / 1e9) if ns else 0.0, "seconds": ns / 1e9, "blockSize": block_size,
                  "native": native.HAVE_NATIVE})
    return stats
