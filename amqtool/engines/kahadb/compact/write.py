"""Writing KahaDB journal files as the broker's DataFileAppender does (kahadb-format.md §2.3).

Records go into batches (a 28-byte WRITE BATCH control record with the batch size and, when checksums are
on, the Adler-32 of the batch's records), each file ends with the 5-byte end-of-data record after its last
batch, and a new file starts when the next record would take the current one to ``max_file_length``
(Journal's rotation rule, ``currentLength + recordSize >= maxFileLength``). Files are named ``db-N.log`` from
``first_id`` up and preallocated as the broker's default ``preallocationStrategy=sparse_file`` leaves a file
(§2.6): ``max_file_length`` bytes long, the end-of-data record after the data and again at the file's last
5 bytes, a hole between. The broker appends to the last one where its data ends; a later compaction reads
the same file length back from them.

With ``directory=None`` nothing is written: the same layout is only counted (``--dry-run``).
"""
from __future__ import annotations

import os
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from amqtool.formats.kahadb.journal import (
    BATCH_CONTROL_RECORD_HEADER,
    BATCH_CONTROL_RECORD_SIZE,
    EOF_RECORD,
    RECORD_HEAD_SPACE,
    USER_RECORD_TYPE,
)
from amqtool.store import atomic

MAX_WRITE_BATCH_SIZE = 4 * 1024 * 1024  # Journal.DEFAULT_MAX_WRITE_BATCH_SIZE
DEFAULT_MAX_FILE_LENGTH = 32 * 1024 * 1024  # Journal.DEFAULT_MAX_FILE_LENGTH
_BATCH = struct.Struct(">iq")


@dataclass
class WrittenFile:
    id: int
    path: Path | None
    size: int = 0  # the file's length (preallocated)
    records: int = 0
    data_bytes: int = 0  # batches and the end-of-data record


@dataclass
class JournalWriter:
    directory: Path | None
    max_file_length: int = DEFAULT_MAX_FILE_LENGTH
    checksums: bool = True
    first_id: int = 1
    files: list = field(default_factory=list)
    _fh: object = None
    _batch: list = field(default_factory=list)
    _batch_bytes: int = 0

    def append(self, payload: bytes) -> None:
        """Add one journal command payload as a user record."""
        rec_len = len(payload) + RECORD_HEAD_SPACE
        cur = self.files[-1] if self.files else None
        # the file's length with the open batch (or a new one) holding this record, and the end record;
        # a record larger than a whole file still goes into an empty file, as the broker's does
        if cur is None or (cur.records and cur.size + BATCH_CONTROL_RECORD_SIZE + self._batch_bytes + rec_len
                           + len(EOF_RECORD) > self.max_file_length):
            self._next_file()
        elif self._batch and BATCH_CONTROL_RECORD_SIZE + self._batch_bytes + rec_len >= MAX_WRITE_BATCH_SIZE:
            self._flush_batch()
        self._batch.append(struct.pack(">iB", rec_len, USER_RECORD_TYPE) + payload)
        self._batch_bytes += rec_len
        self.files[-1].records += 1

    def close(self) -> list[WrittenFile]:
        """Write what is pending, end the last file and fsync; returns the files. Call once."""
        self._end_file()
        return self.files

    def abort(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    # -- internals ------------------------------------------------------------------------------------
    def _next_file(self) -> None:
        self._end_file()
        fid = self.files[-1].id + 1 if self.files else self.first_id
        path = None
        if self.directory is not None:
            path = self.directory / f"db-{fid}.log"
            self._fh = open(path, "xb")
        self.files.append(WrittenFile(fid, path))

    def _flush_batch(self) -> None:
        if not self._batch:
            return
        body = b"".join(self._batch)
        ck = zlib.adler32(body) if self.checksums else 0
        data = BATCH_CONTROL_RECORD_HEADER + _BATCH.pack(len(body), ck) + body
        if self._fh is not None:
            self._fh.write(data)
        self.files[-1].size += len(data)
        self._batch = []
        self._batch_bytes = 0

    def _end_file(self) -> None:
        if not self.files:
            return
        self._flush_batch()
        cur = self.files[-1]
        cur.size += len(EOF_RECORD)
        cur.data_bytes = cur.size
        tail = self.max_file_length - len(EOF_RECORD)
        if self._fh is not None:
            self._fh.write(EOF_RECORD)
            if cur.size <= tail:  # sparse_file preallocation: a hole, then the marker in the last 5 bytes
                self._fh.seek(tail)
                self._fh.write(EOF_RECORD)
            atomic.fsync(self._fh, cur.path)
            self._fh.close()
            self._fh = None
        if cur.size <= tail:
            cur.size = self.max_file_length
